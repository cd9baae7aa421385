//! Any bytes as a settings file: parsing never panics and every error names the file and
//! a JSON path; resolving what parsed (as managed policy and as a project file) never
//! panics; and a managed file that does not parse, or whose hooks do not all build,
//! fails closed: the user's hook beside it is skipped.
#![no_main]

use std::sync::Arc;

use hookhost::config::{
    ConfigLayer, FailedSource, LoadedConfig, Origin, SourceKind, parse_settings,
};
use hookhost::event::EventCatalogue;
use hookhost::policy::{ResolveOptions, resolve};
use libfuzzer_sys::fuzz_target;

const USER_HOOK: &str =
    r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "id": "user", "command": "true"}]}]}}"#;

fn layer(kind: SourceKind, text: &str, catalogue: &EventCatalogue) -> Option<ConfigLayer> {
    let location = format!("{kind}.json");
    let (settings, _) = parse_settings(text, &location, false, catalogue).ok()?;
    Some(ConfigLayer {
        origin: Origin { kind, location },
        base_dir: "/fuzz".into(),
        settings,
        file: None,
        sha256: None,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let catalogue = Arc::new(EventCatalogue::default());
    let claude_format = flags & 1 == 1;
    let parsed = parse_settings(&text, "fuzz.json", claude_format, &catalogue);
    if let Err(e) = &parsed {
        assert_eq!(e.location, "fuzz.json");
        assert!(e.path.starts_with('$'), "{e}");
    }
    let user = layer(SourceKind::User, USER_HOOK, &catalogue).unwrap();
    for kind in [SourceKind::Managed, SourceKind::Project] {
        let mut loaded = LoadedConfig::default();
        match layer(kind, &text, &catalogue) {
            Some(layer) => loaded.layers.push(layer),
            None => {
                let error = parse_settings(&text, &format!("{kind}.json"), false, &catalogue)
                    .unwrap_err();
                loaded.errors.push(error.clone());
                loaded.failed.push(FailedSource {
                    kind,
                    file: None,
                    error,
                });
            }
        }
        loaded.layers.push(user.clone());
        let policy = resolve(
            loaded,
            catalogue.clone(),
            &ResolveOptions {
                project_dir: "/fuzz".into(),
                ..ResolveOptions::default()
            },
        );
        let managed_error = policy
            .errors
            .iter()
            .any(|e| e.location == "managed.json" && (e.path == "$" || e.path.contains(".hooks")));
        if kind == SourceKind::Managed && managed_error {
            let user = policy.hooks.iter().find(|h| h.id == "user").unwrap();
            assert!(
                user.skip
                    .as_deref()
                    .is_some_and(|s| s.starts_with("managed policy is broken")),
                "{:?} {:?}",
                policy.errors,
                user.skip
            );
        }
        assert!(policy.notices.len() >= policy.errors.len());
    }
});
