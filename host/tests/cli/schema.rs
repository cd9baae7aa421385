//! The settings JSON Schema (`hookhost schema`, `docs/hookhost.schema.json`): current,
//! in step with the parser, referenced by the example configs; `validate` names file and
//! JSON path of violations; `hookhost plugin new` from the command line.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use hookhost::EventCatalogue;
use hookhost::config::parse_settings;

use crate::support::TestEnv;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn committed_schema() -> Value {
    let path = repo().join("docs/hookhost.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn committed_schema_is_current() {
    let env = TestEnv::new();
    let run = env.run(&["schema"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let path = repo().join("docs/hookhost.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != run.stdout && std::env::var_os("HOOKHOST_BLESS").is_some() {
        std::fs::write(&path, &run.stdout).unwrap();
        return;
    }
    assert!(
        committed == run.stdout,
        "{} is stale: regenerate it with `cargo run -p hookhost -- schema > docs/hookhost.schema.json` \
         (or run this test with HOOKHOST_BLESS=1)",
        path.display()
    );
}

/// Every example config names the committed schema (relative to itself) and loads.
#[test]
fn example_configs_reference_the_schema_and_load() {
    for file in [
        "host/src/cli/demo/hooks.json",
        "host/src/cli/demo/project-hooks.json",
        "host/src/cli/demo/user-hooks.json",
        "host/tests/fixtures/claude/hooks.json",
    ] {
        let path = repo().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        let reference = doc["$schema"]
            .as_str()
            .unwrap_or_else(|| panic!("{file} has no `$schema`"));
        let target = path.parent().unwrap().join(reference);
        assert_eq!(
            target.canonicalize().unwrap(),
            repo()
                .join("docs/hookhost.schema.json")
                .canonicalize()
                .unwrap(),
            "{file}: `$schema` {reference}"
        );
        let (_, warnings) = parse_settings(&text, file, false, &EventCatalogue::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(warnings.is_empty(), "{file}: {warnings:?}");
    }
}

/// A settings document with `value` at `key` in the object the schema `def` describes.
fn doc_with(def: &str, key: &str, value: Value) -> Value {
    let mut object = serde_json::Map::new();
    object.insert(key.to_string(), value);
    let object = Value::Object(object);
    let handler = |extra: Value| {
        let mut h = json!({"type": "wasm", "plugin": "p.wasm"});
        h.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        h
    };
    match def {
        "" => object,
        "RawMatcherGroup" => {
            let mut group = json!({"hooks": []});
            group
                .as_object_mut()
                .unwrap()
                .extend(object.as_object().unwrap().clone());
            json!({"hooks": {"Stop": [group]}})
        }
        "RawHandler" => json!({"hooks": {"Stop": [{"hooks": [handler(object)]}]}}),
        "RawLimits" => {
            json!({"hooks": {"Stop": [{"hooks": [handler(json!({"limits": object}))]}]}})
        }
        "RawCapabilities" => {
            json!({"hooks": {"Stop": [{"hooks": [handler(json!({"capabilities": object}))]}]}})
        }
        "RawDirGrant" => {
            let mut grant = json!({"path": "/tmp"});
            grant
                .as_object_mut()
                .unwrap()
                .extend(object.as_object().unwrap().clone());
            json!({"hooks": {"Stop": [{"hooks": [handler(json!({"capabilities": {"dirs": [grant]}}))]}]}})
        }
        other => panic!("no document shape for {other}"),
    }
}

/// What the parser refuses in `doc`, as (path, message): the file's error, else the first
/// hook entry it left out (a user or project file keeps its other entries: `parse.rs`
/// `entry_by_entry`).
fn refusal(doc: &Value, catalogue: &EventCatalogue) -> Option<(String, String)> {
    match parse_settings(&doc.to_string(), "f.json", false, catalogue) {
        Err(e) => Some((e.path, e.message)),
        Ok((raw, _)) => raw
            .groups
            .iter()
            .filter_map(|group| group.left_out.as_ref())
            .flat_map(|(unread, _)| unread.iter().cloned())
            .next(),
    }
}

/// The schema and the parser accept the same keys: every property the schema lists is
/// known to the parser, and a key the schema does not list is an error naming its path.
#[test]
fn schema_and_parser_accept_the_same_keys() {
    let schema = committed_schema();
    let catalogue = EventCatalogue::default();
    for def in [
        "",
        "RawMatcherGroup",
        "RawHandler",
        "RawLimits",
        "RawCapabilities",
        "RawDirGrant",
    ] {
        let object = if def.is_empty() {
            &schema
        } else {
            &schema["$defs"][def]
        };
        assert_eq!(object["additionalProperties"], json!(false), "{def}");
        let properties = object["properties"].as_object().unwrap();
        assert!(!properties.is_empty(), "{def}");
        for key in properties.keys() {
            // A value of the wrong type for every field: the error must be about the
            // type, never an unknown field.
            let doc = doc_with(def, key, json!([[1]]));
            if let Some((_, message)) = refusal(&doc, &catalogue) {
                assert!(
                    !message.contains(&format!("unknown field `{key}`")),
                    "{def}.{key} is in the schema but the parser rejects it: {message}"
                );
            }
        }
        let doc = doc_with(def, "notAField", json!(1));
        let (path, message) =
            refusal(&doc, &catalogue).expect("an unknown key is an error or a left-out entry");
        assert!(
            message.contains("unknown field `notAField`"),
            "{def}: {message}"
        );
        assert!(path.ends_with("notAField"), "{def}: {path}");
    }
    // Enums: the values the schema lists are the ones the parser takes.
    let handler_types: Vec<&str> = schema["$defs"]["HandlerType"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["const"].as_str())
        .collect();
    assert_eq!(
        handler_types,
        ["command", "http", "wasm", "mcp_tool", "prompt", "agent"]
    );
    // Every built-in event is offered for completion under `hooks`.
    let events = schema["properties"]["hooks"]["properties"]
        .as_object()
        .unwrap();
    assert!(events.contains_key("PreToolUse") && events.contains_key("Stop"));
    assert_eq!(events.len(), hookhost::event::built_in_names().count());
}

#[test]
fn validate_names_file_and_path_of_schema_violations() {
    let env = TestEnv::new();
    env.project_hooks(json!({
        "$schema": "https://example.invalid/hookhost.schema.json",
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "wasm", "plugin": "p.wasm", "limits": {"memoryMb": "lots"}}
        ]}]}
    }));
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    let file = env.project.join(".hookhost/hooks.json");
    let expected = format!(
        "{}: $.hooks.PreToolUse[0].hooks[0].limits.memoryMb: invalid type: string \"lots\", expected u64",
        file.display()
    );
    assert!(run.stderr.contains(&expected), "{}", run.stderr);
}

#[test]
fn plugin_new_scaffolds_from_the_command_line() {
    let env = TestEnv::new();
    let dir = env.project.join("my-hook");
    let run = env.run(
        &[
            "plugin",
            "new",
            "--lang",
            "python",
            "my-hook",
            "--dir",
            dir.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("created python plugin `my-hook`"),
        "{}",
        run.stdout
    );
    for file in [
        "app.py",
        "rules.py",
        "test_rules.py",
        "build.sh",
        "wit/hook.wit",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let run = env.run(&["plugin", "new", "--lang", "cobol", "x"], "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("unknown language `cobol`"),
        "{}",
        run.stderr
    );
    let run = env.run(&["plugin", "new", "--lang", "js", "Bad_Name"], "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("bad plugin name `Bad_Name`"),
        "{}",
        run.stderr
    );
}
