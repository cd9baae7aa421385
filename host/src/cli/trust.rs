//! `hookhost trust [DIR]`, `hookhost trust --status [DIR]` and `hookhost untrust [DIR]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use std::sync::Arc;

use hookhost::EventCatalogue;
use hookhost::config::{SourceKind, SourceOptions};
use hookhost::policy::ResolveOptions;
use hookhost::policy::trust::{TrustDecision, TrustedBy};
use hookhost::trust::{TrustStore, canonical_workspace};
use hookhost::{HostBuilder, WorkspaceTrust};

use super::data_dir;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: the current directory).
    dir: Option<PathBuf>,
    /// Show whether the workspace is trusted, and what changed since, instead of trusting.
    #[arg(long)]
    status: bool,
    /// With `--status`: print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct UntrustArgs {
    /// The workspace (default: the current directory).
    dir: Option<PathBuf>,
}

fn workspace(dir: &Option<PathBuf>) -> Result<PathBuf, String> {
    let dir = match dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    if !dir.is_dir() {
        return Err(format!("`{}` is not a directory", dir.display()));
    }
    Ok(canonical_workspace(&dir))
}

fn store() -> TrustStore {
    TrustStore::in_data_dir(&data_dir())
}

pub fn trust(args: TrustArgs) -> Result<ExitCode, String> {
    let workspace = workspace(&args.dir)?;
    if args.status {
        return status(&workspace, args.json);
    }
    // Read the sources once: what is listed for review is what is fingerprinted.
    let sources = SourceOptions::from_env(workspace.clone(), Vec::new());
    let catalogue = Arc::new(EventCatalogue::default());
    let loaded = hookhost::config::load(&sources, &catalogue);
    let request = hookhost::trust::request(&loaded, &sources, &WorkspaceTrust::Explicit);
    let fingerprint = request.fingerprint.clone();
    let options = ResolveOptions {
        project_dir: workspace.clone(),
        trust: Some(request),
        ..ResolveOptions::default()
    };
    let policy = hookhost::policy::resolve(loaded, catalogue, &options);
    let shown = workspace.display();
    match &policy.workspace_trust {
        Some(TrustDecision::Trusted {
            by: TrustedBy::Managed,
            ..
        }) => {
            println!("{shown} is trusted by managed policy (`trustedWorkspaces`); nothing to do");
            return Ok(ExitCode::SUCCESS);
        }
        Some(TrustDecision::Untrusted { reason, .. }) => return Err(reason.clone()),
        _ => {}
    }
    let hooks: Vec<_> = policy
        .hooks
        .iter()
        .filter(|h| matches!(h.origin.kind, SourceKind::Project | SourceKind::Local))
        .collect();
    println!("trusting {shown}: these hooks will run");
    if hooks.is_empty() {
        println!("  (no project or local hooks)");
    }
    for hook in &hooks {
        println!(
            "  {:<7} {:<18} {:<8} {}",
            hook.origin.kind,
            hook.event,
            hook.handler.type_name(),
            hook.handler.summary()
        );
    }
    for (file, state) in &fingerprint {
        match &state.sha256 {
            Some(sha) => println!("  file {file}  sha256 {}", &sha[..16]),
            None => println!("  file {file}  (absent)"),
        }
    }
    for error in &policy.errors {
        eprintln!("warning: {error}");
    }
    store().trust(&workspace, fingerprint)?;
    println!(
        "trusted {shown}; any change to these files untrusts it again (`hookhost untrust {shown}` to undo)"
    );
    Ok(ExitCode::SUCCESS)
}

fn status(workspace: &std::path::Path, as_json: bool) -> Result<ExitCode, String> {
    let host = HostBuilder::new(workspace).standard_sources().build();
    let decision = host
        .policy()
        .workspace_trust
        .clone()
        .unwrap_or(TrustDecision::Untrusted {
            reason: "no trust decision".into(),
            changes: Vec::new(),
        });
    let record = store().get(workspace).ok().flatten();
    let (state, by, message, changes) = match &decision {
        TrustDecision::Trusted { by, .. } => ("trusted", Some(*by), None, Vec::new()),
        TrustDecision::Untrusted { reason, changes } if !changes.is_empty() => {
            ("changed", None, Some(reason.clone()), changes.clone())
        }
        TrustDecision::Untrusted { reason, .. } => {
            ("untrusted", None, Some(reason.clone()), Vec::new())
        }
    };
    if as_json {
        let value = json!({
            "workspace": workspace.display().to_string(),
            "state": state,
            "trustedBy": by,
            "trustedAt": record.as_ref().map(|r| r.trusted_at),
            "changes": changes,
            "message": message,
            "store": store().path().display().to_string(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let shown = workspace.display();
    match (state, by) {
        ("trusted", Some(TrustedBy::Managed)) => {
            println!("{shown}: trusted by managed policy (`trustedWorkspaces`)")
        }
        ("trusted", Some(TrustedBy::Explicit)) => {
            println!(
                "{shown}: trusted for this run only (`--trust-workspace` / HOOKHOST_TRUST_WORKSPACE)"
            )
        }
        ("trusted", _) => println!(
            "{shown}: trusted (since {} s after the Unix epoch); unchanged since",
            record.map(|r| r.trusted_at).unwrap_or(0)
        ),
        ("changed", _) => {
            println!(
                "{shown}: changed since it was trusted; its project and local hooks are skipped"
            );
            for change in &changes {
                println!("  {change}");
            }
            println!("review, then run `hookhost trust {shown}`");
        }
        _ => println!("{shown}: not trusted\n  {}", message.unwrap_or_default()),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn untrust(args: UntrustArgs) -> Result<ExitCode, String> {
    let workspace = workspace(&args.dir)?;
    let shown = workspace.display();
    if store().untrust(&workspace)? {
        println!("untrusted {shown}: its project and local hooks no longer run");
    } else {
        println!("{shown} was not trusted");
    }
    Ok(ExitCode::SUCCESS)
}
