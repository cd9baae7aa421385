//! `hookhost demo`: the scripted agent session of [`hookhost::demo`], printed. It runs
//! the example wasm plugins, building them from the workspace's `plugins/` on first use,
//! and falls back to command hooks where they cannot be built.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use hookhost::demo::{DemoHooks, DemoStep, PLUGINS, build_plugins, run_session};
use hookhost::outcome::{Decision, HookStatus};

use super::runtime;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Print each outcome as JSON too.
    #[arg(long)]
    json: bool,
}

/// The directory of the built example plugins: `HOOKHOST_DEMO_PLUGINS`, or the
/// workspace's `plugins/` built for wasm32-wasip2 (built now if needed).
fn example_plugins() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("HOOKHOST_DEMO_PLUGINS") {
        return Ok(PathBuf::from(dir));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("plugins");
    eprintln!(
        "hookhost demo: building the example plugins for wasm32-wasip2 (fast after the first time)…"
    );
    build_plugins(&workspace, PLUGINS)
}

pub fn run(args: DemoArgs) -> Result<ExitCode, String> {
    let project =
        tempfile::tempdir().map_err(|e| format!("cannot create a demo directory: {e}"))?;
    let plugins = example_plugins();
    let hooks = match &plugins {
        Ok(dir) => DemoHooks::Plugins(dir),
        Err(why) => {
            eprintln!("hookhost demo: running with command hooks only: {why}");
            DemoHooks::Commands
        }
    };
    println!(
        "hookhost demo: a scripted agent session in {}\n",
        project.path().display()
    );
    let print = |step: &DemoStep| {
        print_step(step);
        if args.json {
            println!(
                "{}\n",
                serde_json::to_string_pretty(&step.outcome).unwrap_or_default()
            );
        }
    };
    runtime()?.block_on(run_session(project.path(), hooks, print))?;
    Ok(ExitCode::SUCCESS)
}

fn print_step(step: &DemoStep) {
    let (caption, outcome) = (step.caption, &step.outcome);
    let decision = match outcome.decision {
        Decision::None => "no decision (proceeds)".to_string(),
        d => serde_json::to_value(d)
            .ok()
            .and_then(|v| v.as_str().map(str::to_uppercase))
            .unwrap_or_default(),
    };
    println!("▶ {:<18} {caption}", outcome.event);
    println!("    decision: {decision}");
    if let Some(reason) = &outcome.reason {
        println!("    reason:   {reason}");
    }
    for context in &outcome.additional_context {
        println!("    context:  {context}");
    }
    if let Some(input) = &outcome.updated_input {
        println!(
            "    rewrite:  {input} (by {})",
            outcome.updated_input_by.as_deref().unwrap_or("?")
        );
    }
    if let Some(output) = &outcome.updated_tool_output {
        println!("    output:   {output}");
    }
    for notice in &outcome.notices {
        println!("    notice:   {}: {}", notice.hook, notice.message);
    }
    for hook in &outcome.hooks {
        let status = match hook.status {
            HookStatus::Ok => "ok",
            HookStatus::Blocked => "blocked",
            HookStatus::Failed => "failed",
            HookStatus::Timeout => "timeout",
            HookStatus::Skipped => "skipped",
            HookStatus::Async => "async",
        };
        let time = hook
            .duration_ms
            .map(|ms| format!("{ms:.1} ms"))
            .unwrap_or_default();
        let mut usage = String::new();
        if let Some(fuel) = hook.fuel {
            usage.push_str(&format!(", fuel {fuel}"));
        }
        if let Some(memory) = hook.memory_bytes {
            usage.push_str(&format!(", memory {} KiB", memory / 1024));
        }
        println!(
            "    hook:     {:<22} {:<8} {:<8} {time}{usage}",
            hook.id, hook.kind, status
        );
    }
    println!();
}
