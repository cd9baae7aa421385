//! Where `required` counts, and duplicates (docs/book/src/required-hooks.md); the untrusted
//! workspace is the CLI tests' (`tests/cli/required.rs`).

use super::*;
use crate::config::{Origin, parse_settings};
use std::path::Path;

fn policy(layers: &[(SourceKind, &str)]) -> Policy {
    let catalogue = Arc::new(EventCatalogue::default());
    let mut loaded = LoadedConfig::default();
    for (kind, text) in layers {
        let location = format!("{kind}.json");
        let (settings, _) = parse_settings(text, &location, false, &catalogue).unwrap();
        loaded.layers.push(ConfigLayer {
            origin: Origin {
                kind: *kind,
                location,
            },
            base_dir: Path::new("/cfg").join(kind.as_str()),
            settings,
            file: None,
            sha256: None,
        });
    }
    resolve(
        loaded,
        catalogue,
        &ResolveOptions {
            project_dir: "/p".into(),
            ..ResolveOptions::default()
        },
    )
}

fn required(p: &Policy) -> Vec<(String, bool)> {
    p.hooks.iter().map(|h| (h.id.clone(), h.required)).collect()
}

const GROUP: &str = r#"{"hooks": {"Stop": [{"required": true, "hooks": [
    {"type": "command", "id": "a", "command": "true"},
    {"type": "command", "id": "b", "command": "true", "enabled": false},
    {"type": "command", "id": "c", "command": "true", "required": false}]}]}}"#;

#[test]
fn required_counts_by_source_and_not_on_a_hook_that_never_runs() {
    for kind in [SourceKind::Managed, SourceKind::User, SourceKind::Cli] {
        let p = policy(&[(kind, GROUP)]);
        assert_eq!(
            required(&p),
            [("a".into(), true), ("b".into(), false), ("c".into(), false)],
            "{kind}"
        );
        assert!(
            p.warnings
                .iter()
                .any(|w| w.message.contains("`required` has no effect")),
            "{:?}",
            p.warnings
        );
    }
}

#[test]
fn a_required_hook_is_never_folded_into_a_twin_that_is_not() {
    let twins = r#"{"hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "true"}]},
        {"required": true, "hooks": [{"type": "command", "command": "true"}]},
        {"required": true, "hooks": [{"type": "command", "command": "true"}]}]}}"#;
    let p = policy(&[(SourceKind::User, twins)]);
    let seen: Vec<(bool, bool)> = p
        .hooks
        .iter()
        .map(|h| (h.required, h.skip.is_some()))
        .collect();
    // The plain one runs; the first required one runs and carries the rule; its required
    // twin is skipped and not required (the first covers it).
    assert_eq!(seen, [(false, false), (true, false), (false, true)]);
}
