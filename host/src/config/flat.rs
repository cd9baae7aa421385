//! The founding article's flat config format (`docs/book/src/configuration.md`, "The flat format"): one list of rules,
//! each naming its event, with millisecond timeouts.
//!
//! ```json
//! {"hooks": [{"event": "PreToolUse", "matcher": "edit_file|write_file",
//!             "handler": {"type": "command", "command": "./guard.sh", "timeout": 10000},
//!             "async": false}]}
//! ```
//!
//! A document whose `hooks` is a list is read in this shape, whatever its file name (the
//! sources look for `hooks.flat.json` beside each `hooks.json`, and `--settings` takes
//! either shape). Each rule becomes one matcher group with one handler; the rest of the
//! document (top-level keys) is hookhost's. The rule's keys are `event`, `matcher`,
//! `handler` and `async`, strictly; `handler` takes every field of a hookhost hook entry,
//! with `timeout` in **milliseconds** (default 10,000 for `command`, 5,000 for `http`, as
//! in the article; other types: the event's default). [`to_nested`] converts a flat
//! document to hookhost's shape (`hookhost import`).

use serde_json::{Map, Value};

use super::schema::{RawEventGroup, RawMatcherGroup};
use super::{ConfigError, ConfigWarning};
use crate::event::EventCatalogue;

/// The keys of one rule.
const RULE_KEYS: [&str; 4] = ["event", "matcher", "handler", "async"];

/// The article's default timeout of a handler type, in milliseconds.
fn default_timeout_ms(kind: Option<&str>) -> Option<u64> {
    match kind {
        Some("command") => Some(10_000),
        Some("http") => Some(5_000),
        _ => None,
    }
}

/// One rule as a nested-shape matcher group (a JSON object) and its event, or why not.
fn rule_to_group(rule: &Value, path: &str) -> Result<(String, Value), (String, String)> {
    let Value::Object(rule) = rule else {
        return Err((
            path.to_string(),
            format!("expected a rule object, found {}", super::kind_of(rule)),
        ));
    };
    if let Some(key) = rule.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
        return Err((
            format!("{path}.{key}"),
            format!(
                "unknown field `{key}` of a flat-format rule, expected one of `event`, \
                 `matcher`, `handler`, `async`"
            ),
        ));
    }
    let event = match rule.get("event") {
        Some(Value::String(event)) => event.clone(),
        Some(other) => {
            return Err((
                format!("{path}.event"),
                format!("expected a string, found {}", super::kind_of(other)),
            ));
        }
        None => return Err((path.to_string(), "missing field `event`".into())),
    };
    let mut handler = match rule.get("handler") {
        Some(Value::Object(handler)) => handler.clone(),
        Some(other) => {
            return Err((
                format!("{path}.handler"),
                format!("expected a handler object, found {}", super::kind_of(other)),
            ));
        }
        None => return Err((path.to_string(), "missing field `handler`".into())),
    };
    let ms = match handler.get("timeout") {
        None => default_timeout_ms(handler.get("type").and_then(Value::as_str)),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(ms) => Some(ms),
            None => {
                return Err((
                    format!("{path}.handler.timeout"),
                    format!("expected whole milliseconds, found {n}"),
                ));
            }
        },
        Some(other) => {
            return Err((
                format!("{path}.handler.timeout"),
                format!("expected milliseconds, found {}", super::kind_of(other)),
            ));
        }
    };
    if let Some(ms) = ms {
        // Whole milliseconds as seconds: `ms / 1000` is exact enough in f64 for any
        // timeout up to the 86,400 s the policy allows.
        handler.insert("timeout".into(), Value::from(ms as f64 / 1000.0));
    }
    match (rule.get("async"), handler.get("async")) {
        (Some(rule_async), Some(handler_async)) if rule_async != handler_async => {
            return Err((
                format!("{path}.async"),
                "the rule's `async` and its handler's disagree; set one".into(),
            ));
        }
        (Some(rule_async), _) => {
            handler.insert("async".into(), rule_async.clone());
        }
        _ => {}
    }
    let mut group = Map::new();
    if let Some(matcher) = rule.get("matcher") {
        group.insert("matcher".into(), matcher.clone());
    }
    group.insert("hooks".into(), Value::Array(vec![Value::Object(handler)]));
    Ok((event, Value::Object(group)))
}

/// Parses the flat `hooks` list (`value`) into groups. A rule of an unknown event is a
/// warning and is skipped, as in the nested shape.
///
/// # Errors
///
/// A rule that does not fit, naming `location`, its JSON path (`$.hooks[N].…`) and what
/// was expected.
pub(super) fn parse(
    value: &Value,
    location: &str,
    catalogue: &EventCatalogue,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Vec<RawEventGroup>, ConfigError> {
    let err = |path: String, message: String| ConfigError {
        location: location.to_string(),
        path,
        message,
    };
    let Value::Array(rules) = value else {
        return Err(err("$.hooks".into(), "expected a list of rules".into()));
    };
    let mut groups = Vec::new();
    let mut per_event: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (n, rule) in rules.iter().enumerate() {
        let path = format!("$.hooks[{n}]");
        let (event, group) = rule_to_group(rule, &path).map_err(|(p, m)| err(p, m))?;
        if catalogue.get(&event).is_none() {
            warnings.push(ConfigWarning {
                location: location.to_string(),
                path: format!("{path}.event"),
                message: format!("unknown event `{event}`; this rule is skipped"),
            });
            continue;
        }
        // The converted group parses as any group; its paths are told as the rule's.
        let group: RawMatcherGroup = serde_path_to_error::deserialize(&group).map_err(|e| {
            let inner = e.path().to_string();
            let at = match inner.strip_prefix("hooks[0]") {
                Some("") => format!("{path}.handler"),
                Some(rest) => format!("{path}.handler{rest}"),
                None if inner == "." => path.clone(),
                None => format!("{path}.{inner}"),
            };
            err(at, e.into_inner().to_string())
        })?;
        // The group's index among its event's groups, counted as they come (a count
        // over the groups so far made a 100,000-rule file quadratic).
        let next = per_event.entry(event.clone()).or_insert(0usize);
        let index = *next;
        *next += 1;
        groups.push(RawEventGroup {
            event,
            index,
            group,
            flat: Some(n),
            left_out: None,
            unread_required: Vec::new(),
        });
    }
    Ok(groups)
}

/// Whether a settings document is in the flat format (its `hooks` is a list).
pub fn is_flat(document: &Value) -> bool {
    document.get("hooks").is_some_and(Value::is_array)
}

/// Converts a flat document to hookhost's nested shape (`hookhost import`): every rule
/// becomes a matcher group under its event, in order, with its timeout in seconds; every
/// other top-level key is kept as it is. The result reads as the same hooks.
///
/// # Errors
///
/// The document is not flat, or a rule does not fit (its JSON path and why).
pub fn to_nested(document: &Value) -> Result<Value, (String, String)> {
    let Some(Value::Array(rules)) = document.get("hooks") else {
        return Err((
            "$.hooks".into(),
            "not the flat format: `hooks` is not a list of rules".into(),
        ));
    };
    let mut events: Map<String, Value> = Map::new();
    for (n, rule) in rules.iter().enumerate() {
        let (event, group) = rule_to_group(rule, &format!("$.hooks[{n}]"))?;
        match events
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(list) => list.push(group),
            _ => unreachable!("every event holds a list"),
        }
    }
    let mut out = document.as_object().cloned().unwrap_or_default();
    out.insert("hooks".into(), Value::Object(events));
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_doc(doc: Value) -> Result<(Vec<RawEventGroup>, Vec<ConfigWarning>), ConfigError> {
        let mut warnings = Vec::new();
        parse(
            &doc["hooks"],
            "hooks.flat.json",
            &EventCatalogue::default(),
            &mut warnings,
        )
        .map(|g| (g, warnings))
    }

    #[test]
    fn rules_become_groups_with_seconds() {
        let (groups, warnings) = parse_doc(json!({"hooks": [
            {"event": "PreToolUse", "matcher": "edit_file|write_file",
             "handler": {"type": "command", "command": "./guard.sh", "timeout": 2500}},
            {"event": "Stop", "handler": {"type": "http", "url": "https://h.example/x"}, "async": true},
            {"event": "PreToolUse", "handler": {"type": "command", "command": "true"}},
            {"event": "Nope", "handler": {"type": "command", "command": "true"}},
        ]}))
        .unwrap();
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].path, "$.hooks[3].event");
        assert_eq!(groups.len(), 3);
        let g = &groups[0];
        assert_eq!(
            (g.event.as_str(), g.index, g.flat),
            ("PreToolUse", 0, Some(0))
        );
        assert_eq!(g.group.matcher.as_deref(), Some("edit_file|write_file"));
        assert_eq!(g.group.hooks[0].timeout, Some(2.5));
        assert_eq!(groups[1].group.hooks[0].timeout, Some(5.0), "http: 5 s");
        assert_eq!(groups[1].group.hooks[0].run_async, Some(true));
        assert_eq!(
            groups[2].group.hooks[0].timeout,
            Some(10.0),
            "command: 10 s"
        );
        assert_eq!((groups[2].index, groups[2].flat), (1, Some(2)));
    }

    /// `to_nested` keeps what the flat file means: the same groups, handlers and
    /// timeouts, and the other top-level keys.
    #[test]
    fn to_nested_parses_as_the_same_groups() {
        let flat = json!({"stopBlockCap": 3, "hooks": [
            {"event": "PreToolUse", "matcher": "Bash", "handler": {"type": "command", "command": "a", "timeout": 1500}},
            {"event": "Stop", "handler": {"type": "http", "url": "https://h.example/"}, "async": true},
            {"event": "PreToolUse", "handler": {"type": "command", "command": "b", "statusMessage": "checking"}},
        ]});
        let catalogue = EventCatalogue::default();
        let parse = |v: &Value| {
            crate::config::parse_settings(&v.to_string(), "f", false, &catalogue)
                .unwrap()
                .0
        };
        let from_flat = parse(&flat);
        let nested = to_nested(&flat).unwrap();
        assert!(!is_flat(&nested) && is_flat(&flat));
        let from_nested = parse(&nested);
        let shape = |s: &crate::config::schema::RawSettings| {
            let mut groups: Vec<_> = s
                .groups
                .iter()
                .map(|g| (g.event.clone(), g.index, g.group.clone()))
                .collect();
            groups.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
            groups
        };
        assert_eq!(shape(&from_flat), shape(&from_nested));
        assert_eq!(from_nested.stop_block_cap, Some(3));
        assert_eq!(from_nested.groups[0].group.hooks[0].timeout, Some(1.5));
    }

    #[test]
    fn errors_name_the_rule_and_field() {
        let cases = [
            (
                json!({"hooks": [{"event": "Stop"}]}),
                "$.hooks[0]",
                "missing field `handler`",
            ),
            (
                json!({"hooks": [{"event": "Stop", "handler": {"type": "command"}, "when": 1}]}),
                "$.hooks[0].when",
                "unknown field `when`",
            ),
            (
                json!({"hooks": [{"event": "Stop", "handler": {"type": "command", "timeout": "5s"}}]}),
                "$.hooks[0].handler.timeout",
                "milliseconds",
            ),
            (
                json!({"hooks": [{"event": "Stop", "handler": {"type": "command", "comand": "x"}}]}),
                "$.hooks[0].handler.comand",
                "unknown field `comand`",
            ),
            (
                json!({"hooks": [{"event": "Stop", "async": true, "handler": {"type": "command", "async": false}}]}),
                "$.hooks[0].async",
                "disagree",
            ),
        ];
        for (doc, path, message) in cases {
            let e = parse_doc(doc.clone()).expect_err(&doc.to_string());
            assert_eq!(e.path, path, "{doc}");
            assert!(e.message.contains(message), "{doc}: {}", e.message);
        }
    }
}
