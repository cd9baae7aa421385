//! Resolution as a whole: precedence, unions, governance and broken managed policy.

use super::*;
use crate::config::{Origin, parse_settings};
use std::path::Path;

/// Layers from `(kind, json)`, highest precedence first as `config::load` returns them.
fn policy(layers: &[(SourceKind, &str)]) -> Policy {
    let catalogue = Arc::new(EventCatalogue::default());
    let mut loaded = LoadedConfig::default();
    for (kind, text) in layers {
        let location = format!("{kind}.json");
        let (settings, warnings) = parse_settings(text, &location, false, &catalogue).unwrap();
        loaded.warnings.extend(warnings);
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

fn hook_json(command: &str) -> String {
    format!(
        r#"{{"hooks": {{"Stop": [{{"hooks": [{{"type": "command", "command": "{command}"}}]}}]}}}}"#
    )
}

fn runs(p: &Policy) -> Vec<(String, Option<String>)> {
    p.hooks
        .iter()
        .map(|h| (h.handler.summary(), h.skip.clone()))
        .collect()
}

#[test]
fn precedence_table() {
    use SourceKind::*;
    // (layers, disable_all_hooks, managed_disable, stop cap)
    type Layers<'a> = &'a [(SourceKind, &'a str)];
    let rows: &[(Layers, bool, bool, u32)] = &[
        (&[(User, r#"{"disableAllHooks": true}"#)], true, false, 8),
        (
            &[
                (Project, r#"{"disableAllHooks": false}"#),
                (User, r#"{"disableAllHooks": true}"#),
            ],
            false,
            false,
            8,
        ),
        (
            &[
                (Cli, r#"{"disableAllHooks": true}"#),
                (Project, r#"{"disableAllHooks": false}"#),
            ],
            true,
            false,
            8,
        ),
        (
            &[
                (Managed, r#"{"disableAllHooks": true}"#),
                (Cli, r#"{"disableAllHooks": false}"#),
            ],
            true,
            true,
            8,
        ),
        (
            &[
                (Managed, r#"{"stopBlockCap": 2}"#),
                (User, r#"{"stopBlockCap": 5}"#),
            ],
            false,
            false,
            2,
        ),
        (
            &[(Local, r#"{}"#), (User, r#"{"stopBlockCap": 0}"#)],
            false,
            false,
            0,
        ),
    ];
    for (layers, disable, managed_disable, cap) in rows.iter().copied() {
        let p = policy(layers);
        assert_eq!(p.settings.disable_all_hooks, disable, "{layers:?}");
        assert_eq!(
            p.settings.managed_disable_all_hooks, managed_disable,
            "{layers:?}"
        );
        assert_eq!(p.settings.stop_block_cap, cap, "{layers:?}");
    }
}

#[test]
fn lists_append_in_precedence_order_and_duplicates_run_once() {
    use SourceKind::*;
    let p = policy(&[
        (Managed, &hook_json("m")),
        (Cli, &hook_json("shared")),
        (Project, &hook_json("p")),
        (User, &hook_json("shared")),
    ]);
    let got = runs(&p);
    assert_eq!(got[0], ("m".into(), None));
    assert_eq!(got[1], ("shared".into(), None));
    assert_eq!(got[2], ("p".into(), None));
    assert_eq!(got[3].0, "shared");
    assert!(
        got[3]
            .1
            .as_deref()
            .unwrap()
            .contains("identical to hook `cli:Stop[0][0]`")
    );
    assert_eq!(p.groups("Stop").len(), 4);
    assert_eq!(
        p.hooks.iter().map(|h| h.order).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
}

#[test]
fn lists_of_settings_are_unions() {
    use SourceKind::*;
    let p = policy(&[
        (
            Managed,
            r#"{"allowedHttpHookUrls": ["https://a.example/*"], "envAllowlist": ["A_TOKEN"]}"#,
        ),
        (
            User,
            r#"{"allowedHttpHookUrls": ["https://b.example/*"], "httpHookAllowedEnvVars": ["X"], "envAllowlist": ["A_TOKEN", "B_KEY"]}"#,
        ),
    ]);
    let urls = p.settings.allowed_http_hook_urls.as_ref().unwrap();
    assert!(urls.allows("https://a.example/x") && urls.allows("https://b.example/y"));
    assert!(!urls.allows("https://c.example/"));
    assert_eq!(p.settings.env_allowlist, ["A_TOKEN", "B_KEY"]);
    assert_eq!(
        p.settings.http_hook_allowed_env_vars.as_deref(),
        Some(&["X".to_string()][..])
    );
    assert!(
        policy(&[(User, "{}")])
            .settings
            .allowed_http_hook_urls
            .is_none()
    );
}

#[test]
fn governance_marks_hooks_with_the_reason() {
    use SourceKind::*;
    let managed_only = format!(
        r#"{{"allowManagedHooksOnly": true, {}"#,
        &hook_json("m")[1..]
    );
    let p = policy(&[(Managed, &managed_only), (Project, &hook_json("p"))]);
    assert_eq!(runs(&p)[0].1, None);
    assert!(
        runs(&p)[1]
            .1
            .as_deref()
            .unwrap()
            .contains("allowManagedHooksOnly")
    );

    let p = policy(&[
        (Project, &hook_json("p")),
        (User, r#"{"allowManagedHooksOnly": true}"#),
    ]);
    assert_eq!(
        runs(&p)[0].1,
        None,
        "only managed policy can restrict to managed hooks"
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.message.contains("only managed policy"))
    );
}

/// Layers as `policy` builds them, plus sources that failed to load.
fn policy_with_failed(layers: &[(SourceKind, &str)], failed: &[(SourceKind, &str)]) -> Policy {
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
            base_dir: "/cfg".into(),
            settings,
            file: None,
            sha256: None,
        });
    }
    for (kind, text) in failed {
        let location = format!("broken-{kind}.json");
        let error = parse_settings(text, &location, false, &catalogue).unwrap_err();
        loaded.errors.push(error.clone());
        loaded.failed.push(crate::config::FailedSource {
            kind: *kind,
            file: None,
            error,
        });
    }
    let functions = vec![FunctionHook::new("Stop", "embedded", |_| async {
        Ok(serde_json::Value::Null)
    })];
    resolve(
        loaded,
        catalogue,
        &ResolveOptions {
            project_dir: "/p".into(),
            functions,
            ..ResolveOptions::default()
        },
    )
}

#[test]
fn broken_managed_policy_fails_closed_for_every_hook_outside_it() {
    use SourceKind::*;
    // (what breaks managed policy, the words of the error)
    let breakages: &[(&str, &str)] = &[
        ("{", "invalid JSON"),
        (
            r#"{"requireAllowlistedPlugins": "yes"}"#,
            "expected a boolean",
        ),
        (
            r#"{"allowManagedHooksOnli": true}"#,
            "unknown field `allowManagedHooksOnli`",
        ),
        (r#"{"ceilings": {"timeout": "5"}}"#, "$.ceilings.timeout"),
    ];
    for (broken, words) in breakages {
        let p = policy_with_failed(
            &[
                (Managed, &hook_json("managed-guard")),
                (Cli, &hook_json("cli")),
                (Project, &hook_json("project")),
                (User, &hook_json("user")),
            ],
            &[(Managed, broken)],
        );
        let got = runs(&p);
        assert_eq!(got[0], ("managed-guard".into(), None), "{broken}");
        for (summary, skip) in &got[1..4] {
            let skip = skip.as_deref().unwrap_or_else(|| panic!("{summary} runs"));
            assert!(
                skip.starts_with("managed policy is broken (broken-managed.json: ")
                    && skip.contains("no hook outside managed policy runs"),
                "{broken}: {skip}"
            );
        }
        assert_eq!(got[4], ("(in-process function)".into(), None), "{broken}");
        assert!(
            p.notices
                .iter()
                .any(|n| n.starts_with("managed policy is broken")
                    && n.contains("broken-managed.json")
                    && (n.contains(words))),
            "{broken}: {:?}",
            p.notices
        );
    }
    // A broken non-managed source skips only its own hooks.
    let p = policy_with_failed(&[(User, &hook_json("user"))], &[(Project, "{")]);
    assert_eq!(runs(&p)[0], ("user".into(), None));
    assert!(p.notices[0].starts_with("config error, hooks skipped: broken-project.json"));
}

#[test]
fn a_managed_hook_that_cannot_be_built_fails_closed_too() {
    use SourceKind::*;
    let bad_guard = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": [
        {"type": "command", "command": "guard"}]}]}}"#;
    let p = policy(&[(Managed, bad_guard), (User, &hook_json("user"))]);
    let user = &runs(&p)[0];
    assert_eq!(user.0, "user");
    assert!(
        user.1
            .as_deref()
            .unwrap()
            .starts_with("managed policy is broken"),
        "{user:?}"
    );
    // A mistake in a user hook does not.
    let p = policy(&[
        (Managed, &hook_json("m")),
        (User, bad_guard),
        (Cli, &hook_json("c")),
    ]);
    assert!(
        runs(&p).iter().all(|(_, skip)| skip.is_none()),
        "{:?}",
        runs(&p)
    );
}

#[test]
fn managed_stop_cap_and_audit_log_win_over_the_environment() {
    use SourceKind::*;
    let catalogue = Arc::new(EventCatalogue::default());
    let build = |layers: &[(SourceKind, &str)], env_cap: Option<u32>| {
        let mut loaded = LoadedConfig::default();
        for (kind, text) in layers {
            let (settings, _) = parse_settings(text, "f.json", false, &catalogue).unwrap();
            loaded.layers.push(ConfigLayer {
                origin: Origin {
                    kind: *kind,
                    location: format!("{kind}.json"),
                },
                base_dir: "/".into(),
                settings,
                file: None,
                sha256: None,
            });
        }
        resolve(
            loaded,
            catalogue.clone(),
            &ResolveOptions {
                stop_block_cap: env_cap,
                uid: 4242,
                ..ResolveOptions::default()
            },
        )
    };
    let managed = r#"{"stopBlockCap": 8, "auditLog": "/var/log/hookhost/${uid}.jsonl"}"#;
    let p = build(
        &[(Managed, managed), (User, r#"{"stopBlockCap": 3}"#)],
        Some(1),
    );
    assert_eq!(p.settings.stop_block_cap, 8);
    assert_eq!(
        p.settings.audit_log.as_deref(),
        Some(Path::new("/var/log/hookhost/4242.jsonl")),
        "`${{uid}}` is the caller's uid"
    );
    let p = build(
        &[(User, r#"{"stopBlockCap": 3, "auditLog": "/x"}"#)],
        Some(1),
    );
    assert_eq!(
        p.settings.stop_block_cap, 1,
        "the environment beats other files"
    );
    assert_eq!(
        p.settings.audit_log, None,
        "only managed policy moves the log"
    );
    let relative = parse_settings(
        r#"{"auditLog": "audit.jsonl"}"#,
        "m.json",
        false,
        &catalogue,
    );
    assert!(relative.unwrap_err().message.contains("absolute path"));
}

#[test]
fn hook_validation_errors_name_the_path() {
    use SourceKind::*;
    let p = policy(&[(
        Project,
        r#"{"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "ok"},
            {"type": "wasm", "plugin": "p.wasm", "sha256": "xyz"},
            {"type": "command", "command": "x", "if": "Bash("}
        ]}]}}"#,
    )]);
    assert_eq!(p.hooks.len(), 1);
    let errors: Vec<String> = p.errors.iter().map(ToString::to_string).collect();
    assert!(
        errors[0].starts_with("project.json: $.hooks.PreToolUse[0].hooks[1]: `sha256` `xyz`"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("$.hooks.PreToolUse[0].hooks[2]: invalid `if` rule `Bash(`"),
        "{errors:?}"
    );
}

#[test]
fn wasm_plugins_resolve_against_their_config_file() {
    use SourceKind::*;
    let p = policy(&[(
        Project,
        r#"{"hooks": {"Stop": [{"hooks": [
        {"type": "wasm", "plugin": "plugins/gate.wasm", "limits": {"memoryMb": 2}}
    ]}]}}"#,
    )]);
    let HandlerSpec::Wasm(w) = &p.hooks[0].handler else {
        panic!("not wasm")
    };
    assert_eq!(w.plugin, Path::new("/cfg/project/plugins/gate.wasm"));
    assert_eq!(w.memory_bytes, Some(2 << 20));
}

/// Prompt hooks: 30 s by default (never above the event's own default), a floor of 1 s,
/// `modelProvider` from the first layer that sets one, and an invalid one named by field.
#[test]
fn prompt_hooks_get_their_timeouts_and_the_first_model_provider() {
    let prompt = |event: &str, timeout: &str| {
        format!(
            r#"{{"hooks": {{"{event}": [{{"hooks": [{{"type": "prompt", "prompt": "p"{timeout}}}]}}]}},
                "modelProvider": {{"kind": "openai", "defaultModel": "{event}"}}}}"#
        )
    };
    let timeout_of = |event: &str, timeout: &str| {
        let p = policy(&[(SourceKind::User, &prompt(event, timeout))]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        p.hooks[0].timeout
    };
    use std::time::Duration;
    assert_eq!(timeout_of("Stop", ""), Duration::from_secs(30));
    assert_eq!(timeout_of("SessionEnd", ""), Duration::from_millis(1500));
    assert_eq!(
        timeout_of("Stop", r#", "timeout": 0.2"#),
        Duration::from_secs(1)
    );
    assert_eq!(
        timeout_of("Stop", r#", "timeout": 90"#),
        Duration::from_secs(90)
    );

    let p = policy(&[
        (SourceKind::Project, &prompt("Stop", "")),
        (SourceKind::User, &prompt("SessionEnd", "")),
    ]);
    let provider = p.settings.model_provider.as_ref().unwrap();
    assert_eq!(provider.default_model.as_deref(), Some("Stop"));
    assert!(
        provider.origin.starts_with("project.json"),
        "{}",
        provider.origin
    );

    let p = policy(&[(
        SourceKind::User,
        r#"{"modelProvider": {"kind": "anthropic", "baseUrl": "file:///etc/passwd"}}"#,
    )]);
    assert!(p.settings.model_provider.is_none());
    assert_eq!(
        p.errors[0].path, "$.modelProvider.baseUrl",
        "{:?}",
        p.errors
    );
}
