//! `hookhost plugin inspect|test`: look at a wasm plugin and run it on one event, outside
//! any config.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde::Serialize;
use serde_json::Value;

use hookhost::config::schema::RawCapabilities;
use hookhost::event::Invocation;
use hookhost::handlers::wasm::{
    CacheStatus, DEFAULT_FUEL, DEFAULT_MEMORY_BYTES, PluginCall, PluginInfo, PluginRun, WasmRuntime,
};
use hookhost::handlers::{FailureKind, Verdict};
use hookhost::policy::capability;
use hookhost::text::escape;

use super::scaffold::{Lang, NewPlugin, new_plugin, next_steps};

/// What `plugin test` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum, Default)]
pub enum TestFormat {
    /// The report: the response, its status and resource use, as JSON.
    #[default]
    Report,
    /// The plugin's response as plain Claude Code hook output JSON on stdout (what a
    /// command hook would print; nothing when it has nothing to say), the report on
    /// stderr.
    Claude,
}

/// The `plugin` subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Scaffold a plugin that builds and passes its own test out of the box.
    New {
        /// `rust`, `python` or `js`.
        #[arg(long, value_name = "LANG")]
        lang: String,
        /// The plugin name (lowercase letters, digits, `-`).
        name: String,
        /// Where to create it (default: `./NAME`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Rust only: a `guest-sdk` directory to depend on by path (default: a copy of
        /// the SDK this binary carries, written into the plugin's `hookhost-guest/`).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
    /// Show a plugin's WIT version, exports, declared events and capabilities, and sha256.
    Inspect {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one plugin on one event: input JSON on stdin; prints its response and
    /// resource use. Exits 1 when the plugin fails.
    Test {
        /// The component (`.wasm`).
        file: PathBuf,
        /// The event name (`PreToolUse`, `Stop`, ...).
        #[arg(long)]
        event: String,
        /// A capability grant: `dir=PATH[:ro|:rw]`, `dir=PATH@GUEST[:ro|:rw]`, `env=NAME`,
        /// `http=HOST` (repeatable). Nothing is granted by default.
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        /// The hook's `config` object, as JSON.
        #[arg(long, value_name = "JSON")]
        config: Option<String>,
        /// Fuel for the call (default 100000000).
        #[arg(long)]
        fuel: Option<u64>,
        /// Memory cap in MiB (default 64).
        #[arg(long = "memory-mb")]
        memory_mb: Option<u64>,
        /// Wall-clock limit in seconds (default 60).
        #[arg(long)]
        timeout: Option<f64>,
        /// The project directory `${workspace}` expands to (default: the current directory).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// `report` (default) or `claude`: the response as Claude Code hook output JSON on
        /// stdout, beside the report on stderr.
        #[arg(long, value_enum, default_value_t)]
        format: TestFormat,
    },
    /// Sign a plugin: write `PLUGIN.wasm.sig` (ed25519 over the file's sha256).
    Sign(super::signing::SignArgs),
    /// Check a plugin's signature against a public key.
    Verify(super::signing::VerifyArgs),
    /// Fetch a plugin from an OCI registry into the cache (verified against its digests);
    /// prints the reference pinned to its manifest's digest.
    Pull(super::oci::PullArgs),
    /// Publish a component to an OCI registry as a wasm artifact (`--sign KEY`: with its
    /// signature as a referrer).
    Push(super::oci::PushArgs),
    /// Write `hookhost.lock`: every `oci://` plugin of the config pinned by digest
    /// (checked by `hookhost validate`).
    Lock(super::oci::LockArgs),
}

/// Runs a `plugin` subcommand.
///
/// # Errors
///
/// A message for the user: unreadable file, bad input JSON, bad grant.
pub fn run(cmd: PluginCommand) -> Result<ExitCode, String> {
    let runtime = super::one_shot_wasm();
    match cmd {
        PluginCommand::New {
            lang,
            name,
            dir,
            sdk,
        } => new(&lang, name, dir, sdk),
        PluginCommand::Sign(args) => super::signing::sign(args),
        PluginCommand::Verify(args) => super::signing::verify(args),
        PluginCommand::Pull(args) => super::oci::pull(args),
        PluginCommand::Push(args) => super::oci::push(args),
        PluginCommand::Lock(args) => super::oci::lock(args),
        PluginCommand::Inspect { file, json } => {
            let (info, cache) = runtime.inspect(&file)?;
            if json {
                let mut value = serde_json::to_value(&info).map_err(|e| e.to_string())?;
                value["cache"] = Value::String(cache_label(&cache));
                let json = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
                outln!("{}", hookhost::text::escape_json(&json));
            } else {
                out!("{}", describe(&info, &cache));
            }
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Test {
            file,
            event,
            grants,
            config,
            fuel,
            memory_mb,
            timeout,
            project,
            format,
        } => {
            let mut capabilities = RawCapabilities::default();
            for grant in &grants {
                parse_grant(grant, &mut capabilities)?;
            }
            let config = config
                .map(|c| {
                    serde_json::from_str::<Value>(&c)
                        .map_err(|e| format!("`--config` is not JSON: {e}"))
                })
                .transpose()?;
            let timeout = match timeout {
                None => Duration::from_secs(60),
                Some(t) if t.is_finite() && t > 0.0 => Duration::from_secs_f64(t),
                Some(t) => {
                    return Err(format!(
                        "`--timeout` must be a positive number of seconds, found {t}"
                    ));
                }
            };
            // Read as `dispatch` reads it, so the plugin is tested on what it would get.
            let mut input = Vec::new();
            std::io::stdin()
                .take(hookhost::dispatch::input::MAX_INPUT_BYTES as u64 + 1)
                .read_to_end(&mut input)
                .map_err(|e| format!("cannot read the input on stdin: {e}"))?;
            let hookhost::dispatch::input::Input { value: input, .. } =
                hookhost::dispatch::input::parse(&input)
                    .map_err(|e| format!("the input on stdin {e}"))?;
            let project = match project {
                Some(p) => p,
                None => std::env::current_dir()
                    .map_err(|e| format!("cannot read the current directory: {e}"))?,
            };
            let project =
                std::path::absolute(&project).map_err(|e| format!("bad project directory: {e}"))?;
            let call = PluginCall {
                label: file.display().to_string(),
                capabilities,
                fuel: fuel.unwrap_or(DEFAULT_FUEL),
                memory_bytes: memory_mb
                    .map_or(DEFAULT_MEMORY_BYTES, |mb| mb.saturating_mul(1 << 20)),
                timeout,
                config,
                ..PluginCall::new(
                    std::path::absolute(&file).map_err(|e| format!("bad plugin path: {e}"))?,
                )
            };
            let report = test_plugin(&runtime, &call, &event, input, &project)?;
            let report_json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            let report_json = hookhost::text::escape_json(&report_json);
            match format {
                TestFormat::Report => outln!("{report_json}"),
                TestFormat::Claude => {
                    // The JSON a command hook prints; the report beside it, where a
                    // person reads it.
                    errln!("{report_json}");
                    if let Some(response) = report
                        .response
                        .as_ref()
                        .filter(|r| r.as_object().is_none_or(|o| !o.is_empty()))
                    {
                        outln!("{}", hookhost::text::escape_json(&response.to_string()));
                    }
                }
            }
            Ok(if report.status == "ok" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn cache_label(status: &CacheStatus) -> String {
    match status {
        CacheStatus::Hit => "hit".into(),
        CacheStatus::Compiled => "compiled and cached".into(),
        CacheStatus::Rebuilt(reason) => format!("rebuilt ({reason})"),
        CacheStatus::Uncached => "compiled (no cache)".into(),
    }
}

/// `hookhost plugin inspect` for people. The name, version, events, capabilities and
/// imports are the plugin's own words, read before anyone trusts it: each is escaped, so
/// a plugin cannot forge lines of this report.
fn describe(info: &PluginInfo, cache: &CacheStatus) -> String {
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_string()
        } else {
            escape(&items.join(", ")).into_owned()
        }
    };
    let dirs: Vec<String> = info
        .capabilities
        .dirs
        .iter()
        .map(|d| format!("{} ({})", d.path, if d.write { "rw" } else { "ro" }))
        .collect();
    let mut out = String::new();
    out.push_str(&format!(
        "plugin:       {} {}\n",
        escape(&info.name),
        escape(&info.version)
    ));
    out.push_str(&format!(
        "file:         {} ({} bytes)\n",
        escape(&info.path.display().to_string()),
        info.size
    ));
    out.push_str(&format!("sha256:       {}\n", info.sha256));
    out.push_str(&format!(
        "wit:          hookhost:hook@{}\n",
        escape(&info.wit_version.to_string())
    ));
    out.push_str(&format!(
        "events:       {}\n",
        if info.events.is_empty() {
            "all".to_string()
        } else {
            list(&info.events)
        }
    ));
    out.push_str("capabilities: (requested; live only when granted)\n");
    out.push_str(&format!("  dirs:       {}\n", list(&dirs)));
    out.push_str(&format!("  env:        {}\n", list(&info.capabilities.env)));
    out.push_str(&format!(
        "  http:       {}\n",
        list(&info.capabilities.http)
    ));
    out.push_str(&format!(
        "  model:      {}\n",
        if info.capabilities.model {
            "yes (imports hookhost:hook/model; needs `capabilities.model`)"
        } else {
            "no"
        }
    ));
    out.push_str(&format!("exports:      {}\n", list(&info.exports)));
    out.push_str(&format!("imports:      {}\n", list(&info.imports)));
    out.push_str(&format!("compile:      {}\n", escape(&cache_label(cache))));
    out
}

/// `hookhost plugin new`.
fn new(
    lang: &str,
    name: String,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> Result<ExitCode, String> {
    let lang = Lang::parse(lang)
        .ok_or_else(|| format!("unknown language `{lang}`; expected `rust`, `python` or `js`"))?;
    let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
    let files = new_plugin(&NewPlugin {
        lang,
        name: name.clone(),
        dir: dir.clone(),
        sdk,
    })?;
    let shown = escape(&dir.display().to_string()).into_owned();
    outln!("created {} plugin `{name}` in {shown}:", lang.as_str());
    for file in files {
        outln!("  {}", file.display());
    }
    outln!("next, in {shown}:\n{}", next_steps(lang, &name));
    Ok(ExitCode::SUCCESS)
}

/// Adds one `--grant` of `hookhost plugin test` to `capabilities`:
/// `dir=PATH[:ro|:rw]` (PATH may start with `${workspace}` or `${home}`; add
/// `@GUEST` after it to mount it elsewhere), `env=NAME`, `http=PATTERN`.
///
/// # Errors
///
/// A message naming the grant and what is wrong with it.
pub fn parse_grant(grant: &str, capabilities: &mut RawCapabilities) -> Result<(), String> {
    use hookhost::config::schema::{DirMode, RawDirGrant};
    let (kind, value) = grant.split_once('=').ok_or_else(|| {
        format!("grant `{grant}` must look like dir=PATH[:ro|:rw], env=NAME or http=HOST")
    })?;
    if value.is_empty() {
        return Err(format!("grant `{grant}` has no value"));
    }
    match kind {
        "dir" => {
            let (rest, mode) = match value.rsplit_once(':') {
                Some((rest, "ro")) => (rest, DirMode::ReadOnly),
                Some((rest, "rw")) => (rest, DirMode::ReadWrite),
                _ => (value, DirMode::ReadOnly),
            };
            let (path, guest) = match rest.split_once('@') {
                Some((path, guest)) => (path, Some(guest.to_string())),
                None => (rest, None),
            };
            capabilities.dirs.push(RawDirGrant {
                path: path.to_string(),
                guest,
                mode,
            });
        }
        "env" => capabilities.env.push(value.to_string()),
        "http" => capabilities.http.push(value.to_string()),
        other => {
            return Err(format!(
                "grant `{grant}`: unknown kind `{other}` (expected dir, env or http)"
            ));
        }
    }
    capability::validate(capabilities)
        .map_err(|(field, message)| format!("grant `{grant}`: {field}: {message}"))
}

/// What `hookhost plugin test` prints: the response and the resource use of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginTestReport {
    /// `ok`, `failed` or `timeout`.
    pub status: &'static str,
    /// The failure kind, when it failed.
    pub failure: Option<FailureKind>,
    /// The failure message, when it failed.
    pub message: Option<String>,
    /// The response as Claude Code hook output JSON, when it answered.
    pub response: Option<Value>,
    /// A blocking error (a block on an event without a decision field), if any.
    pub blocking_error: Option<String>,
    /// Fuel used.
    pub fuel: Option<u64>,
    /// Fuel budget.
    pub fuel_limit: u64,
    /// Peak linear memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Memory cap in bytes.
    pub memory_limit: u64,
    /// Wall-clock time of the run, including loading the plugin.
    pub duration_ms: f64,
    /// Captured stdout / stderr / log records.
    pub diagnostics: Option<String>,
    /// Grants the plugin did not declare.
    pub warnings: Vec<String>,
}

/// Runs one plugin on one event outside any config, as `hookhost plugin test` does.
/// Blocks until done.
///
/// # Errors
///
/// An unknown event or an input that is not a JSON object.
pub fn test_plugin(
    runtime: &WasmRuntime,
    call: &PluginCall,
    event: &str,
    input: Value,
    project_dir: &Path,
) -> Result<PluginTestReport, String> {
    let catalogue = hookhost::event::EventCatalogue::default();
    let spec = catalogue
        .get(event)
        .ok_or_else(|| format!("unknown event `{event}`; `hookhost events` lists them"))?;
    let invocation = Invocation::new(spec.clone(), input, project_dir)
        .ok_or("the input must be a JSON object")?;
    // No grant reaches a place hookhost owns here either (`host_owned_places`).
    let sources = hookhost::config::SourceOptions::from_env(project_dir.into(), Vec::new());
    let places = std::sync::Arc::new(hookhost::host_owned_places(&sources, &Default::default()));
    let governed = runtime.call_governed(call, &invocation, None, None, &places);
    let PluginRun {
        run,
        output_json,
        warnings,
    } = super::one_shot(governed)?;
    let (status, failure, message, blocking_error) = match &run.verdict {
        Verdict::Answer(answer) => ("ok", None, None, answer.blocking_error.clone()),
        Verdict::Failed(f) => (
            if f.kind == FailureKind::Timeout {
                "timeout"
            } else {
                "failed"
            },
            Some(f.kind),
            Some(f.message.clone()),
            None,
        ),
    };
    Ok(PluginTestReport {
        status,
        failure,
        message,
        response: output_json,
        blocking_error,
        fuel: run.usage.fuel,
        fuel_limit: call.fuel,
        memory_bytes: run.usage.memory_bytes,
        memory_limit: call.memory_bytes,
        duration_ms: (run.duration.as_secs_f64() * 1e6).round() / 1e3,
        diagnostics: run.diagnostics,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookhost::config::schema::DirMode;
    use serde_json::json;

    #[test]
    fn grants_parse_from_the_command_line() {
        let mut caps = RawCapabilities::default();
        for g in [
            "dir=${workspace}",
            "dir=/data:rw",
            "dir=${home}/x@/home:ro",
            "env=TOKEN",
            "http=api.example.com",
        ] {
            parse_grant(g, &mut caps).unwrap();
        }
        assert_eq!(caps.dirs[0].path, "${workspace}");
        assert_eq!(caps.dirs[0].mode, DirMode::ReadOnly);
        assert_eq!(
            (caps.dirs[1].path.as_str(), caps.dirs[1].mode),
            ("/data", DirMode::ReadWrite)
        );
        assert_eq!(caps.dirs[2].guest.as_deref(), Some("/home"));
        assert_eq!(caps.env, ["TOKEN"]);
        assert_eq!(caps.http, ["api.example.com"]);
        for bad in ["nothing", "dir=", "dir=relative", "net=x", "http=ftp://x"] {
            assert!(
                parse_grant(bad, &mut RawCapabilities::default()).is_err(),
                "{bad}"
            );
        }
    }

    /// A runtime whose compile cache is a temp dir, not the user's.
    fn runtime() -> WasmRuntime {
        let cache = tempfile::tempdir().unwrap().keep();
        WasmRuntime::new(Some(cache))
    }

    #[test]
    fn plugin_test_reports_the_response_and_resource_use() {
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(project.path().join(".hookhost")).unwrap();
        std::fs::write(project.path().join(".hookhost/tests-passed"), "fail\n").unwrap();
        let mut c = PluginCall::new(hookhost_test_plugins::plugins::TEST_GATE);
        parse_grant("dir=${workspace}:ro", &mut c.capabilities).unwrap();
        let report = test_plugin(
            &runtime(),
            &c,
            "Stop",
            json!({"session_id": "t"}),
            project.path(),
        )
        .unwrap();
        assert_eq!(report.status, "ok");
        assert_eq!(report.response.as_ref().unwrap()["decision"], "block");
        assert!(report.fuel.is_some_and(|f| f > 0) && report.memory_bytes.is_some_and(|m| m > 0));
        assert_eq!(report.fuel_limit, hookhost::handlers::wasm::DEFAULT_FUEL);

        c.fuel = 1_000;
        let report = test_plugin(&runtime(), &c, "Stop", json!({}), project.path()).unwrap();
        assert_eq!(
            (report.status, report.failure),
            ("failed", Some(FailureKind::Limit))
        );
        assert!(
            report
                .message
                .unwrap()
                .contains("fuel exhausted after 1000 units")
        );

        let err =
            test_plugin(&runtime(), &c, "NoSuchEvent", json!({}), project.path()).unwrap_err();
        assert!(err.contains("NoSuchEvent"));
    }
}
