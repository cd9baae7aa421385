//! Masking secrets in what the log writes: [`Redacted`] (a JSON value whose
//! credential-named fields and secret-looking strings are masked, within a byte budget)
//! and [`redact_text`] (one string through the [`SECRET_RULES`], cut at [`VALUE_CAP`]
//! characters).

use std::borrow::Cow;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::policy::env::{credential_name_triggers, is_credential_name};

/// Characters of one string value kept in the log; the rest is cut with a note.
pub(super) const VALUE_CAP: usize = 2000;
/// Bytes of strings and keys one logged JSON value (`toolName`, `toolInput`,
/// `updatedInput`) may take; past it, the remaining entries of each open object or array
/// are left out with a note of how many. An input of 100,000 entries gives a line of
/// about this size, not of the input's.
const VALUE_BUDGET: usize = 64 << 10;
/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// A JSON value that serializes with secrets masked: the value of every object key that
/// looks like a credential name ([`is_credential_name`]) as [`REDACTED`], and every
/// string and every key through [`redact_text`] (a key can hold a secret as well as a
/// value can: `{"API_TOKEN=…": 1}`). At most `VALUE_BUDGET` bytes of strings and keys
/// are written; the entries past it are counted, not written. Nothing is copied unless a
/// string changes.
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(pub &'a Value);

impl Serialize for Redacted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let budget = std::cell::Cell::new(VALUE_BUDGET);
        Budgeted {
            value: self.0,
            budget: &budget,
        }
        .serialize(serializer)
    }
}

/// [`Redacted`] over a budget shared by the whole value.
struct Budgeted<'a> {
    value: &'a Value,
    budget: &'a std::cell::Cell<usize>,
}

impl Budgeted<'_> {
    /// Takes `bytes` from the budget; false when it was spent before.
    fn spend(&self, bytes: usize) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(bytes));
        left > 0
    }
}

/// The note that stands for the entries of a container left out.
fn left_out(count: usize) -> String {
    format!("[{count} more entries not logged: over {VALUE_BUDGET} bytes]")
}

impl Serialize for Budgeted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let budget = self.budget;
        match self.value {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(None)?;
                for (n, (key, value)) in map.iter().enumerate() {
                    if !self.spend(key.len().min(VALUE_CAP) + 4) {
                        out.serialize_entry("…", &left_out(map.len() - n))?;
                        break;
                    }
                    let shown_key = redact_text(key);
                    if is_credential_name(key) && !value.is_null() {
                        out.serialize_entry(&*shown_key, REDACTED)?;
                    } else {
                        out.serialize_entry(&*shown_key, &Budgeted { value, budget })?;
                    }
                }
                out.end()
            }
            Value::Array(items) => {
                use serde::ser::SerializeSeq;
                let mut out = serializer.serialize_seq(None)?;
                for (n, value) in items.iter().enumerate() {
                    if !self.spend(2) {
                        out.serialize_element(&left_out(items.len() - n))?;
                        break;
                    }
                    out.serialize_element(&Budgeted { value, budget })?;
                }
                out.end()
            }
            Value::String(text) => {
                let shown = redact_text(text);
                self.spend(shown.len());
                serializer.serialize_str(&shown)
            }
            other => {
                self.spend(8);
                other.serialize(serializer)
            }
        }
    }
}

/// A string that serializes through [`redact_text`].
#[derive(Debug, Clone, Copy)]
pub(super) struct RedactedText<'a>(pub(super) &'a str);

impl Serialize for RedactedText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&redact_text(self.0))
    }
}

/// One masking rule: a regex, what replaces its matches, and literals of which every
/// match of the regex contains at least one (compared ASCII case-insensitively).
///
/// The triggers exist for start-up time: compiling the regexes costs milliseconds, more
/// than the rest of a one-shot `hookhost dispatch`, while most strings (a `cargo test`
/// command, a file path) contain no trigger at all. A rule's regex is compiled the first
/// time one of its triggers is seen, and is the only judge of what is masked.
struct SecretRule {
    triggers: Triggers,
    pattern: &'static str,
    replacement: Replacement,
}

/// The literals that can start a rule's work.
enum Triggers {
    /// These (lowercase).
    Literals(&'static [&'static str]),
    /// The literals of the credential-name rule
    /// ([`credential_name_triggers`]): every credential name contains one.
    CredentialNames,
}

/// What a match becomes.
enum Replacement {
    /// A regex replacement template.
    Template(&'static str),
    /// `NAME`, the separator, then [`REDACTED`] — when capture 1 (`NAME`) is a
    /// credential name by the one rule ([`is_credential_name`]); else the match is kept.
    CredentialAssignment,
}

const SECRET_RULES: &[SecretRule] = &[
    SecretRule {
        triggers: Triggers::Literals(&["-----begin "]),
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
        replacement: Replacement::Template("[REDACTED PRIVATE KEY]"),
    },
    SecretRule {
        triggers: Triggers::Literals(&["bearer", "basic", "token"]),
        pattern: r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}",
        replacement: Replacement::Template("${1} [REDACTED]"),
    },
    // `NAME=value`, `NAME: value`, `"NAME": "value"`, and URL query parameters
    // (`?api_key=v&page=2`), where NAME is a credential name by the one rule that also
    // scrubs command hooks' environment.
    SecretRule {
        triggers: Triggers::CredentialNames,
        pattern: r#"\b([A-Za-z0-9_.-]+)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"',;&|]+)"#,
        replacement: Replacement::CredentialAssignment,
    },
    SecretRule {
        triggers: Triggers::Literals(&[
            "--password",
            "--passwd",
            "--token",
            "--secret",
            "--api-key",
            "--access-key",
        ]),
        pattern: r"(?i)(--(?:password|passwd|token|secret|api-key|access-key)[= ]\s*)\S+",
        replacement: Replacement::Template("${1}[REDACTED]"),
    },
    SecretRule {
        triggers: Triggers::Literals(&["://"]),
        pattern: r"(://[^/\s:@]+:)[^@\s/]+@",
        replacement: Replacement::Template("${1}[REDACTED]@"),
    },
    SecretRule {
        triggers: Triggers::Literals(&[
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "xox",
            "sk-",
            "sk_live_",
            "sk_test_",
            "akia",
            "aiza",
            "eyj",
        ]),
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        replacement: Replacement::Template("[REDACTED]"),
    },
];

/// Each rule's regex, compiled the first time one of its triggers occurs.
fn rule_regex(index: usize) -> &'static Regex {
    static REGEXES: [OnceLock<Regex>; SECRET_RULES.len()] =
        [const { OnceLock::new() }; SECRET_RULES.len()];
    REGEXES[index]
        .get_or_init(|| Regex::new(SECRET_RULES[index].pattern).expect("secret patterns are valid"))
}

/// Applies one rule to a text; borrows it when nothing matched.
fn apply_rule<'t>(index: usize, regex: &Regex, text: &'t str) -> Cow<'t, str> {
    match SECRET_RULES[index].replacement {
        Replacement::Template(template) => regex.replace_all(text, template),
        Replacement::CredentialAssignment => mask_credential_assignments(regex, text),
    }
}

/// Masks the value of every assignment whose name is a credential name. The search
/// resumes inside the value of an assignment that is not masked, since that value may
/// hold one (`https://host/x?key=v`: `https` is no credential, `key` is).
fn mask_credential_assignments<'t>(regex: &Regex, text: &'t str) -> Cow<'t, str> {
    let mut out = String::new();
    let (mut copied, mut from) = (0, 0);
    while let Some(caps) = regex.captures_at(text, from) {
        let (name, value) = (
            &caps[1],
            caps.get(3).expect("the value group always takes part"),
        );
        if is_credential_name(name) {
            out.push_str(&text[copied..value.start()]);
            out.push_str(REDACTED);
            copied = value.end();
            from = value.end();
        } else {
            from = value.start();
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Every rule's triggers in one automaton (ASCII case-insensitive), each pattern
/// mapped back to its rule: one pass over a string tells which rules could match.
fn triggers() -> &'static (AhoCorasick, Vec<usize>) {
    static TRIGGERS: OnceLock<(AhoCorasick, Vec<usize>)> = OnceLock::new();
    TRIGGERS.get_or_init(|| {
        let (patterns, rules): (Vec<&str>, Vec<usize>) = SECRET_RULES
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| {
                let literals: Vec<&'static str> = match rule.triggers {
                    Triggers::Literals(literals) => literals.to_vec(),
                    Triggers::CredentialNames => credential_name_triggers().collect(),
                };
                literals.into_iter().map(move |t| (t, index))
            })
            .unzip();
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(patterns)
            .expect("secret triggers are valid literals");
        (automaton, rules)
    })
}

/// Masks secret-looking parts of a string and cuts it at `VALUE_CAP` characters;
/// borrows `text` when nothing in it is masked or cut (most strings).
pub fn redact_text(text: &str) -> Cow<'_, str> {
    // Triggers are looked for in the original text only: replacements add no trigger a
    // later rule could need ("[REDACTED PRIVATE KEY]" follows a "PRIVATE KEY" that was
    // already there).
    let (automaton, rule_of) = triggers();
    let mut triggered = [false; SECRET_RULES.len()];
    for found in automaton.find_overlapping_iter(text) {
        triggered[rule_of[found.pattern().as_usize()]] = true;
    }
    let mut out = Cow::Borrowed(text);
    for (index, _) in triggered.iter().enumerate().filter(|(_, on)| **on) {
        if let Cow::Owned(replaced) = apply_rule(index, rule_regex(index), &out) {
            out = Cow::Owned(replaced);
        }
    }
    // Cheap test first: a string of at most VALUE_CAP bytes has at most as many chars.
    if out.len() > VALUE_CAP && out.chars().count() > VALUE_CAP {
        let kept: String = out.chars().take(VALUE_CAP).collect();
        let more = out.len() - kept.len();
        out = Cow::Owned(format!("{kept}…[{more} more bytes]"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted() {
        let input = json!({
            "command": "curl -H 'Authorization: Bearer abcdefghijklmnop' https://bob:hunter2@example.com/x && API_TOKEN=s3cr3t-value make deploy --password=pw123",
            "file_path": "/src/main.rs",
            "apiKey": "plain",
            "nested": [{"client_secret": {"x": 1}, "note": "AKIAABCDEFGHIJKLMNOP and ghp_abcdefghijklmnopqrstuvwxyz0123"}],
            "content": "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nrest",
            "count": 3
        });
        let out = serde_json::to_value(Redacted(&input)).unwrap();
        let text = out.to_string();
        for secret in [
            "abcdefghijklmnop",
            "hunter2",
            "s3cr3t-value",
            "pw123",
            "plain",
            "AKIAABCDEFGHIJKLMNOP",
            "ghp_abcdef",
            "AAAA",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(out["file_path"], "/src/main.rs");
        assert_eq!(out["apiKey"], REDACTED);
        assert_eq!(out["nested"][0]["client_secret"], REDACTED);
        assert_eq!(out["count"], 3);
        assert!(
            out["command"]
                .as_str()
                .unwrap()
                .contains("API_TOKEN=[REDACTED] make deploy"),
            "{text}"
        );
        assert!(
            text.contains("https://bob:[REDACTED]@example.com"),
            "{text}"
        );
        assert!(out["content"].as_str().unwrap().ends_with("\nrest"));
        let long = redact_text(&"x".repeat(5000)).into_owned();
        assert!(long.starts_with(&"x".repeat(VALUE_CAP)) && long.ends_with("[3000 more bytes]"));
    }

    /// The triggers only skip work: on every sample, masking with them equals applying
    /// every rule's regex unconditionally. The samples hit each rule in odd casings and
    /// each alternative of the token rule.
    #[test]
    fn triggers_never_hide_a_secret() {
        let samples = [
            "authorization: BeArEr abcdefgh12345678",
            "Basic dXNlcjpwYXNzd29yZA==",
            "db_PassWd = 'x y'",
            "MY_ACCESSKEY: zzz",
            "private_key=\"k\"",
            "Credentials=abc; next",
            "OAUTH_thing=1",
            "x-api_key: v",
            "run --Secret value --API-KEY=v2 --access-key k3",
            "HTTPS://u:p@host/x",
            "gho_abcdefghijklmnopqrstuvwxyz glpat-abcdefghijklmnop1 xoxb-1234567890-abc",
            "sk-abcdefghijklmnop12 sk_live_abcdefghijklmnop AIza0123456789012345678901234567890",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXBhcnQ",
            "-----BEGIN RSA PRIVATE KEY-----\nabc",
            "cargo test --workspace",
            "plain text with no secret at all",
            "ENCRYPTION_KEY=e1 SIGNING_KEY=s1 SSH_KEY=k1 MASTER_KEY=m1 GCP_SA=g1 make",
            "curl 'https://api.example.com/v1?key=q1&page=2&access_token=q2'",
            "GITHUB_PAT=p1 BASIC_AUTH=b1 PATH=/usr/bin AUTHOR=bob FOO=1",
            r#"{"password": "j1", "path": "/x"}"#,
        ];
        for sample in samples {
            let mut unconditional = sample.to_string();
            for (index, rule) in SECRET_RULES.iter().enumerate() {
                let regex = Regex::new(rule.pattern).unwrap();
                unconditional = apply_rule(index, &regex, &unconditional).into_owned();
            }
            assert_eq!(redact_text(sample), unconditional, "sample: {sample}");
        }
        assert_ne!(redact_text(samples[0]), samples[0], "the samples do mask");
        // The one credential-name rule decides assignments and query parameters.
        for (sample, secrets, kept) in [
            (16, &["e1", "s1", "k1", "m1", "g1"][..], &["make"][..]),
            (17, &["q1", "q2"], &["page=2"]),
            (18, &["p1", "b1"], &["PATH=/usr/bin", "AUTHOR=bob", "FOO=1"]),
            (19, &["j1"], &[r#""path": "/x""#]),
        ] {
            let masked = redact_text(samples[sample]);
            for secret in secrets {
                assert!(!masked.contains(secret), "{secret} in {masked}");
            }
            for kept in kept {
                assert!(masked.contains(kept), "{kept} lost: {masked}");
            }
        }
        assert!(matches!(
            redact_text("FOO=1 make https://x"),
            Cow::Borrowed(_)
        ));
    }
}
