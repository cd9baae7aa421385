//! `hookhost plugin inspect|test`: look at a wasm plugin and run it on one event, outside
//! any config.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::Value;

use hookhost::config::schema::RawCapabilities;
use hookhost::handlers::wasm::{
    CacheStatus, DEFAULT_FUEL, DEFAULT_MEMORY_BYTES, PluginCall, PluginInfo, parse_grant,
    test_plugin,
};
use hookhost::scaffold::{Lang, NewPlugin, new_plugin, next_steps};
use hookhost::text::escape;

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
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .map_err(|e| format!("cannot read the input on stdin: {e}"))?;
            let input: Value = if input.trim().is_empty() {
                Value::Object(Default::default())
            } else {
                serde_json::from_str(&input)
                    .map_err(|e| format!("the input on stdin is not JSON: {e}"))?
            };
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
