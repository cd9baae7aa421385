//! Tests of the managed ceilings: grants, limits, handler types, models and MCP servers.

use super::*;
use crate::config::schema::{RawCapabilities, RawDirCeiling, RawDirGrant};
use crate::config::{ConfigLayer, Origin};
use crate::event::EventCatalogue;

fn wasm_hook(json: &str) -> (RawHandler, Hook) {
    let raw: RawHandler = serde_json::from_str(json).unwrap();
    let catalogue = EventCatalogue::default();
    let spec = catalogue.get("PreToolUse").unwrap();
    let layer = ConfigLayer {
        origin: Origin {
            kind: SourceKind::Project,
            location: "hooks.json".into(),
        },
        base_dir: "/w".into(),
        settings: Default::default(),
        file: None,
        sha256: None,
    };
    let settings = super::super::tests_support::settings();
    let (hook, _) = super::super::hook::build(
        &raw,
        spec,
        &layer,
        "$.hooks.PreToolUse[0].hooks[0]",
        &settings,
        0,
        None,
    )
    .unwrap();
    (raw, hook)
}

fn ceilings(raw: RawCeilings) -> Ceilings {
    let (c, errors) = Ceilings::new(&raw);
    assert!(errors.is_empty(), "{errors:?}");
    c
}

fn apply(c: &Ceilings, json: &str) -> Result<Hook, String> {
    let (raw, mut hook) = wasm_hook(json);
    c.apply(
        &raw,
        &mut hook,
        Path::new("/w"),
        Some(Path::new("/h")),
        RealPath::default(),
    )
    .map(|()| hook)
}

/// A grant within its ceiling as written, whose real location (as the caller's
/// resolver gives it) is outside the ceiling, is refused: a symlink does not reach out.
#[test]
fn a_grant_whose_real_path_leaves_the_ceiling_is_refused() {
    let c = ceilings(RawCeilings {
        dirs: Some(vec![RawDirCeiling {
            path: "${workspace}/src".into(),
            mode: DirMode::ReadOnly,
        }]),
        ..Default::default()
    });
    // `/w/src/link` is a symlink to `/etc`; every other path is its own real path.
    let real = RealPath(|p| {
        Some(if p == Path::new("/w/src/link") {
            PathBuf::from("/etc")
        } else {
            p.to_path_buf()
        })
    });
    let check = |dir: &str, real: RealPath| {
        let json = format!(
            r#"{{"type":"wasm","plugin":"p.wasm",
                "capabilities":{{"dirs":[{{"path":"${{workspace}}/src/{dir}"}}]}}}}"#
        );
        let (raw, mut hook) = wasm_hook(&json);
        c.apply(&raw, &mut hook, Path::new("/w"), None, real)
    };
    let e = check("link", real).unwrap_err();
    assert!(
        e.contains("`capabilities.dirs[0]` `${workspace}/src/link` (ro) is above"),
        "{e}"
    );
    // A real directory below the ceiling is granted; resolving nothing (the
    // default), only the written paths are compared.
    assert!(check("lib", real).is_ok());
    assert!(check("link", RealPath::default()).is_ok());
}

#[test]
fn one_unit_above_each_ceiling_is_refused_naming_both() {
    let c = ceilings(RawCeilings {
        fuel: Some(100_000_000),
        memory_bytes: Some((64 << 20) - 1),
        timeout: Some(5.0),
        ..Default::default()
    });
    // (hook, Ok or the refusal's words)
    let rows: &[(&str, Result<(), &[&str]>)] = &[
        (
            r#"{"type":"wasm","plugin":"p.wasm","limits":{"fuel":100000000}}"#,
            Ok(()),
        ),
        (
            r#"{"type":"wasm","plugin":"p.wasm","limits":{"fuel":100000001}}"#,
            Err(&["`limits.fuel` 100000001", "ceiling 100000000"]),
        ),
        (
            r#"{"type":"wasm","plugin":"p.wasm","limits":{"memoryMb":63}}"#,
            Ok(()),
        ),
        (
            r#"{"type":"wasm","plugin":"p.wasm","limits":{"memoryMb":64}}"#,
            Err(&["`limits.memoryMb` 64 (67108864 bytes)", "67108863 bytes"]),
        ),
        (r#"{"type":"wasm","plugin":"p.wasm","timeout":5}"#, Ok(())),
        (
            r#"{"type":"wasm","plugin":"p.wasm","timeout":5.001}"#,
            Err(&["`timeout` 5.001 s", "ceiling of 5 s"]),
        ),
        (
            r#"{"type":"wasm","plugin":"p.wasm","limits":{"timeout":6}}"#,
            Err(&["`timeout` 6 s"]),
        ),
    ];
    for (json, want) in rows {
        match (apply(&c, json), want) {
            (Ok(_), Ok(())) => {}
            (Err(message), Err(words)) => {
                for w in *words {
                    assert!(message.contains(w), "{json}: {message}");
                }
            }
            (got, want) => panic!("{json}: want {want:?}, got {:?}", got.map(|h| h.id)),
        }
    }
}

#[test]
fn an_invalid_timeout_ceiling_is_the_strictest_not_absent() {
    for invalid in [0.0, -1.0] {
        let (c, errors) = Ceilings::new(&RawCeilings {
            timeout: Some(invalid),
            ..Default::default()
        });
        assert_eq!(errors.len(), 1);
        assert!(errors[0].1.contains("the strictest"), "{errors:?}");
        for hook in [
            r#"{"type":"wasm","plugin":"p.wasm"}"#,
            r#"{"type":"wasm","plugin":"p.wasm","timeout":0.001}"#,
        ] {
            let e = apply(&c, hook).map(|h| h.id).unwrap_err();
            assert!(e.contains("`ceilings.timeout` is invalid"), "{e}");
        }
    }
}

/// A minimal hook of each handler type. The match has no wildcard: a new handler
/// type does not compile until it has a row here, and so is checked against the
/// time ceiling below.
fn minimal(kind: HandlerType) -> &'static str {
    match kind {
        HandlerType::Command => r#""type":"command","command":"true""#,
        HandlerType::Http => r#""type":"http","url":"https://example.com/h""#,
        HandlerType::Wasm => r#""type":"wasm","plugin":"p.wasm""#,
        HandlerType::McpTool => r#""type":"mcp_tool","server":"s","tool":"t""#,
        HandlerType::Prompt => r#""type":"prompt","prompt":"p""#,
        HandlerType::Agent => r#""type":"agent","prompt":"p""#,
    }
}

/// `ceilings.timeout` holds for every handler type as it does for wasm: a timeout
/// above it refuses the hook naming both, one at it loads, a default above it is
/// lowered to it (so command and HTTP hooks are killed at the ceiling).
#[test]
fn the_time_ceiling_caps_every_handler_type() {
    let c = ceilings(RawCeilings {
        timeout: Some(5.0),
        ..Default::default()
    });
    let (invalid, _) = Ceilings::new(&RawCeilings {
        timeout: Some(0.0),
        ..Default::default()
    });
    use HandlerType::*;
    for kind in [Command, Http, Wasm, McpTool, Prompt, Agent] {
        let fields = minimal(kind);
        let e = apply(&c, &format!("{{{fields},\"timeout\":5.001}}"))
            .map(|h| h.id)
            .unwrap_err();
        assert!(
            e.contains(
                "`timeout` 5.001 s is above the managed ceiling of 5 s (`ceilings.timeout`)"
            ),
            "{kind:?}: {e}"
        );
        let at = apply(&c, &format!("{{{fields},\"timeout\":5}}")).unwrap();
        assert_eq!(at.timeout, Duration::from_secs(5), "{kind:?}");
        let lowered = apply(&c, &format!("{{{fields}}}")).unwrap();
        assert_eq!(
            lowered.timeout,
            Duration::from_secs(5),
            "{kind:?} default (600 s)"
        );
        let e = apply(&invalid, &format!("{{{fields}}}"))
            .map(|h| h.id)
            .unwrap_err();
        assert!(e.contains("`ceilings.timeout` is invalid"), "{kind:?}: {e}");
    }
}

#[test]
fn defaults_are_lowered_to_the_ceiling() {
    let c = ceilings(RawCeilings {
        fuel: Some(1000),
        memory_mb: Some(2),
        timeout: Some(1.5),
        ..Default::default()
    });
    let hook = apply(&c, r#"{"type":"wasm","plugin":"p.wasm"}"#).unwrap();
    let HandlerSpec::Wasm(spec) = &hook.handler else {
        panic!()
    };
    assert_eq!(spec.fuel, Some(1000));
    assert_eq!(spec.memory_bytes, Some(2 << 20));
    assert_eq!(hook.timeout, Duration::from_millis(1500));
}

#[test]
fn grants_must_fall_within_dir_env_and_http_ceilings() {
    let c = ceilings(RawCeilings {
        dirs: Some(vec![
            RawDirCeiling {
                path: "${workspace}/src".into(),
                mode: DirMode::ReadOnly,
            },
            RawDirCeiling {
                path: "/tmp/scratch".into(),
                mode: DirMode::ReadWrite,
            },
        ]),
        env: Some(vec!["HOOK_*".into()]),
        http: Some(vec!["*.example.com".into()]),
        ..Default::default()
    });
    let grant = |caps: RawCapabilities| {
        let mut json: serde_json::Value =
            serde_json::from_str(r#"{"type":"wasm","plugin":"p.wasm"}"#).unwrap();
        json["capabilities"] = serde_json::to_value(caps).unwrap();
        apply(&c, &json.to_string())
    };
    let dir = |path: &str, mode| RawCapabilities {
        dirs: vec![RawDirGrant {
            path: path.into(),
            guest: None,
            mode,
        }],
        ..Default::default()
    };
    assert!(grant(dir("${workspace}/src", DirMode::ReadOnly)).is_ok());
    assert!(grant(dir("${workspace}/src/deep", DirMode::ReadOnly)).is_ok());
    assert!(grant(dir("/tmp/scratch/x", DirMode::ReadWrite)).is_ok());
    let e = grant(dir("${workspace}", DirMode::ReadOnly)).unwrap_err();
    assert!(
        e.contains("`capabilities.dirs[0]` `${workspace}` (ro) is above the managed ceiling")
            && e.contains("`${workspace}/src` (ro)"),
        "{e}"
    );
    let e = grant(dir("${workspace}/src", DirMode::ReadWrite)).unwrap_err();
    assert!(e.contains("(rw) is above"), "{e}");
    assert!(grant(dir("${workspace}/srcx", DirMode::ReadOnly)).is_err());

    let env = |name: &str| RawCapabilities {
        env: vec![name.into()],
        ..Default::default()
    };
    assert!(grant(env("HOOK_LEVEL")).is_ok());
    let e = grant(env("HOME")).unwrap_err();
    assert!(
        e.contains("`capabilities.env[0]` `HOME`") && e.contains("HOOK_*"),
        "{e}"
    );

    let http = |host: &str| RawCapabilities {
        http: vec![host.into()],
        ..Default::default()
    };
    assert!(grant(http("api.example.com")).is_ok());
    assert!(grant(http("*.api.example.com")).is_ok());
    for above in [
        "example.com",
        "*.com",
        "http://api.example.com",
        "api.example.com:8443",
        "evil.net",
    ] {
        let e = grant(http(above)).unwrap_err();
        assert!(e.contains(&format!("`{above}` is above")), "{e}");
    }
}

/// A plugin's model grant is capped like a prompt hook's budget: above
/// `ceilings.models.tokensPerEvent` the hook is refused naming both, and a provider
/// outside `ceilings.models.providers` is refused at load.
#[test]
fn a_model_grant_must_fall_within_the_model_ceiling() {
    let c = ceilings(RawCeilings {
        models: Some(crate::config::schema::RawModelCeiling {
            providers: Some(vec![crate::config::schema::ModelProviderKind::Anthropic]),
            hosts: None,
            tokens_per_event: Some(500),
        }),
        ..Default::default()
    });
    let with = |tokens: u64, extra: &str| {
        let json = if extra.is_empty() {
            String::new()
        } else {
            format!(",{extra}")
        };
        apply(
            &c,
            &format!(
                r#"{{"type":"wasm","plugin":"p.wasm"{json},"capabilities":{{"model":{{"tokensPerEvent":{tokens}}}}}}}"#
            ),
        )
    };
    assert!(with(500, "").is_ok());
    let e = with(501, "").map(|h| h.id).unwrap_err();
    assert!(
        e.contains("501") && e.contains("500") && e.contains("ceilings.models.tokensPerEvent"),
        "{e}"
    );
    let e = with(10, r#""provider":"openai""#)
        .map(|h| h.id)
        .unwrap_err();
    assert!(e.contains("ceilings.models.providers"), "{e}");
    assert!(with(10, r#""provider":"anthropic","model":"haiku""#).is_ok());
}

#[test]
fn resolved_dirs_fit_below_their_ceiling_and_its_mode() {
    let top = Path::new("/w/src");
    assert!(resolved_dir_within(
        Path::new("/w/src"),
        false,
        top,
        DirMode::ReadOnly
    ));
    assert!(resolved_dir_within(
        Path::new("/w/src/a"),
        true,
        top,
        DirMode::ReadWrite
    ));
    assert!(!resolved_dir_within(
        Path::new("/w/src/a"),
        true,
        top,
        DirMode::ReadOnly
    ));
    assert!(!resolved_dir_within(
        Path::new("/w/srcx"),
        false,
        top,
        DirMode::ReadOnly
    ));
    assert!(!resolved_dir_within(
        Path::new("/etc"),
        false,
        top,
        DirMode::ReadWrite
    ));
}

#[test]
fn handler_types_are_restricted_per_source() {
    let c = ceilings(RawCeilings {
        handler_types: Some(RawHandlerTypes {
            project: Some(vec![HandlerType::Wasm]),
            local: Some(vec![]),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert_eq!(c.refuses_type(SourceKind::Project, "wasm"), None);
    let why = c.refuses_type(SourceKind::Project, "command").unwrap();
    assert!(
        why.contains("`command` hooks from project sources")
            && why.contains("ceilings.handlerTypes.project"),
        "{why}"
    );
    assert!(c.refuses_type(SourceKind::Local, "wasm").is_some());
    assert_eq!(c.refuses_type(SourceKind::User, "command"), None);
    assert_eq!(c.refuses_type(SourceKind::Managed, "command"), None);
}

#[test]
fn mcp_servers_ceiling_admits_by_name_command_or_url_only() {
    use super::super::mcp::McpServer;
    let stdio = McpServer::Stdio {
        command: "/opt/mcp/time".into(),
        args: vec![],
        env: vec![],
    };
    let http = McpServer::Http {
        url: "http://127.0.0.1:3001/mcp".into(),
    };
    let (open, _) = Ceilings::new(&RawCeilings::default());
    assert!(open.admits_mcp_server("any", &stdio).is_ok());
    let (c, errors) = Ceilings::new(&RawCeilings {
        mcp_servers: Some(vec![
            "fs".into(),
            "/opt/mcp/time".into(),
            "http://127.0.0.1:3001/mcp".into(),
        ]),
        ..RawCeilings::default()
    });
    assert!(errors.is_empty());
    assert!(c.admits_mcp_server("fs", &http).is_ok());
    assert!(c.admits_mcp_server("time", &stdio).is_ok());
    assert!(c.admits_mcp_server("web", &http).is_ok());
    let other = McpServer::Stdio {
        command: "/opt/mcp/time2".into(),
        args: vec![],
        env: vec![],
    };
    let err = c.admits_mcp_server("t2", &other).unwrap_err();
    assert!(err.contains("ceilings.mcpServers"), "{err}");
}
