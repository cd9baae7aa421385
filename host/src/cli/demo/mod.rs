//! `hookhost demo [--keep DIR]`: the scripted agent session of [`session`],
//! printed. It builds the example wasm plugins from the sources the binary carries
//! (once; later runs reuse the build), compiles them before the session so that the
//! times it shows are per-event times, runs the session in a directory of its own, and
//! keeps that directory for the user to edit and run again.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::outcome::Decision;
use hookhost::text::{escape, escape_multiline};

use super::runtime;

mod judge;
mod peers;
mod plugins;
mod session;
mod setup;

use plugins::{build_embedded_plugins, wasm_toolchain};
use session::{DemoStep, Missing, run_session};
use setup::{DemoDirs, precompile, prepare};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run in DIR and keep it: its config is created on the first run and reused (with
    /// your edits) on the next (default: a new directory in the temp dir, kept too).
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Print each outcome as JSON too.
    #[arg(long)]
    json: bool,
}

/// Where the demo's plugins are built: `HOOKHOST_CACHE_DIR/demo-build`, else the user's
/// cache directory (`~/.cache/hookhost/demo-build`), kept between runs.
fn build_dir() -> Option<PathBuf> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    match hookhost::config::env::path_var("HOOKHOST_CACHE_DIR", &workspaces) {
        Ok(Some(dir)) => Some(dir.join("demo-build")),
        _ => hookhost::config::env::cache_base(&workspaces)
            .0
            .map(|d| d.join("hookhost").join("demo-build")),
    }
}

/// The built example plugins: `HOOKHOST_DEMO_PLUGINS` (a directory of built `.wasm`
/// files), else built now from the embedded sources, with progress on stderr.
fn example_plugins() -> Result<PathBuf, String> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    if let Some(dir) = hookhost::config::env::path_var("HOOKHOST_DEMO_PLUGINS", &workspaces)? {
        return Ok(dir);
    }
    wasm_toolchain()?;
    let dir = build_dir().ok_or("no cache directory to build in (set HOOKHOST_CACHE_DIR)")?;
    errln!(
        "hookhost demo: building the example plugins for wasm32-wasip2 in {} (the first \
         build compiles their dependencies and takes minutes; later runs take seconds)",
        escape(&dir.display().to_string())
    );
    let started = Instant::now();
    let built = build_embedded_plugins(&dir, |plugin, done| match done {
        None => err_progress(&format!("  building {plugin} …")),
        Some(took) => errln!(" {:.1} s", took.as_secs_f64()),
    });
    if built.is_err() {
        errln!();
    }
    let built = built?;
    errln!(
        "hookhost demo: plugins built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(built)
}

/// Progress without a newline (the time follows on the same line).
fn err_progress(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    // First, while this process has one thread: the stand-in judge's key, for the prompt
    // hooks (from the environment only, as any provider key).
    let key = peers::fresh_key();
    let mut missing = Missing {
        judge: peers::hand_key_to_hooks(&key).err(),
        time_server: None,
    };
    let root = match &args.keep {
        Some(dir) => dir.clone(),
        None => tempfile::Builder::new()
            .prefix("hookhost-demo-")
            .tempdir()
            .map_err(|e| format!("cannot create a demo directory: {e}"))?
            .keep(),
    };
    let mut dirs = DemoDirs::new(&root);
    let built = match example_plugins() {
        Ok(dir) => Some(dir),
        Err(why) => {
            errln!(
                "hookhost demo: running with command hooks only, without the sandbox steps: {}",
                escape(&why)
            );
            None
        }
    };
    prepare(&mut dirs, built.as_deref())?;
    // The demo's own compile cache and sandbox, warmed before the session.
    let wasm = Arc::new(WasmRuntime::new(Some(dirs.cache.clone())));
    if dirs.plugins.is_some() {
        errln!("hookhost demo: compiling the plugins for this machine (wasmtime, cached)");
        precompile(&dirs, &wasm, |file, took, cached| {
            errln!(
                "  {file}: {:.0} ms{}",
                took.as_secs_f64() * 1e3,
                if cached { " (from the cache)" } else { "" }
            )
        })?;
    }
    let shown = |p: &std::path::Path| escape(&p.display().to_string()).into_owned();
    let runtime = runtime()?;
    let stand_in = runtime
        .block_on(judge::StandIn::start(key))
        .map_err(|e| format!("cannot start the stand-in judge on a loopback port: {e}"))?;
    let time = peers::time_server();
    dirs.settings =
        vec![peers::run_settings(&stand_in, time.as_ref().ok().map(|p| p.as_path())).to_string()];
    outln!(
        "hookhost demo: prompt hooks ask a stand-in judge at {}: a loopback server speaking \
         the Anthropic Messages API that answers by a fixed rule (it refuses requests to \
         weaken the tests). It is a stand-in, not a model; no API key and no network are used.",
        stand_in.url
    );
    match &time {
        Ok(program) => outln!(
            "hookhost demo: mcp_tool hooks call {} (over stdio)",
            shown(program)
        ),
        Err(why) => {
            outln!("hookhost demo: the MCP steps are skipped: {}", escape(why));
            missing.time_server = Some(why.clone());
        }
    }
    if let Some(why) = &missing.judge {
        outln!(
            "hookhost demo: the prompt step is skipped and prompt hooks fail (open): {}",
            escape(why)
        );
    }
    outln!(
        "hookhost demo: a scripted agent session in {}\n",
        shown(&dirs.project)
    );
    let print = |step: &DemoStep| {
        print_step(step);
        if args.json
            && let Some(outcome) = &step.outcome
        {
            let json = serde_json::to_string_pretty(outcome).unwrap_or_default();
            outln!("{}\n", hookhost::text::escape_json(&json));
        }
    };
    runtime.block_on(run_session(&dirs, wasm, &missing, print))?;
    outln!(
        "The stand-in judge answered {} model requests.",
        stand_in.answered()
    );
    outln!("The demo's files are kept in {}:", shown(&dirs.root));
    outln!("  {}  the repository's hooks", shown(&dirs.project_hooks()));
    outln!("  {}  your own hooks", shown(&dirs.home.join("hooks.json")));
    if dirs.plugins.is_some() {
        outln!(
            "  {}  the managed policy (its plugin allowlist)",
            shown(&dirs.managed_policy())
        );
    }
    outln!(
        "  {}  the audit log of this session",
        shown(&dirs.audit_log())
    );
    outln!(
        "Edit them and run it again: hookhost demo --keep {}",
        shown(&dirs.root)
    );
    outln!(
        "Or dispatch an event yourself:\n  echo '{{\"tool_name\":\"Bash\",\"tool_input\":{{\"command\":\"rm -rf /\"}}}}' | \
         HOOKHOST_HOME={} HOOKHOST_MANAGED_DIR={} HOOKHOST_DATA_DIR={} HOOKHOST_CACHE_DIR={} \
         hookhost dispatch PreToolUse --project {} --pretty",
        shown(&dirs.home),
        shown(&dirs.managed),
        shown(&dirs.data),
        shown(&dirs.cache),
        shown(&dirs.project)
    );
    Ok(ExitCode::SUCCESS)
}

/// One step for people. Everything in it came from hooks, plugins or the demo's files
/// (which the user may edit), so all of it is escaped.
fn print_step(step: &DemoStep) {
    let Some(outcome) = &step.outcome else {
        outln!("▶ {}", step.caption);
        for line in &step.agent_sees {
            outln!("    {line}");
        }
        outln!();
        return;
    };
    let decision = match outcome.decision {
        Decision::None => "no decision (proceeds)".to_string(),
        d => serde_json::to_value(d)
            .ok()
            .and_then(|v| v.as_str().map(str::to_uppercase))
            .unwrap_or_default(),
    };
    outln!("▶ {:<18} {}", escape(&outcome.event), escape(&step.caption));
    outln!("    decision: {decision}");
    if let Some(reason) = &outcome.reason {
        outln!("    reason:   {}", escape(reason));
    }
    for context in &outcome.additional_context {
        outln!("    context:  {}", escape(context));
    }
    if let Some(input) = &outcome.updated_input {
        outln!(
            "    rewrite:  {} (by {})",
            hookhost::text::escape_json(&input.to_string()),
            escape(outcome.updated_input_by.as_deref().unwrap_or("?"))
        );
    }
    if let Some(output) = &outcome.updated_tool_output {
        outln!(
            "    output:   {}",
            hookhost::text::escape_json(&output.to_string())
        );
    }
    for hook in &outcome.hooks {
        let status = hook.status.as_str();
        let time = hook
            .duration_ms
            .map(|ms| format!("{ms:.2} ms"))
            .unwrap_or_default();
        let mut usage = String::new();
        if let Some(fuel) = hook.fuel {
            usage.push_str(&format!(", fuel {fuel}"));
        }
        if let Some(memory) = hook.memory_bytes {
            usage.push_str(&format!(", memory {} KiB", memory / 1024));
        }
        outln!(
            "    hook:     {:<22} {:<8} {:<8} {time}{usage}",
            escape(&hook.id),
            hook.kind,
            status
        );
    }
    for line in &step.agent_sees {
        outln!("    agent ⟵  {}", escape_multiline(line));
    }
    outln!();
}
