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
use hookhost::text::escape;
use hookhost::trust::{TrustStore, canonical_workspace};
use hookhost::{HostBuilder, WorkspaceTrust};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: the project of the current directory: the nearest
    /// directory above it with a `.hookhost/`, as `dispatch` finds it).
    dir: Option<PathBuf>,
    /// Show whether the workspace is trusted, and what changed since, instead of trusting;
    /// exit 0 when its project and local hooks run, 3 when they do not (untrusted or
    /// changed), 1 on an error.
    #[arg(long)]
    status: bool,
    /// With `--status`: print one JSON object (`workspace`, `state`, `trustedBy`,
    /// `trustedAt`, `changes`, …; docs/book/src/json-output.md).
    #[arg(long, requires = "status")]
    json: bool,
}

#[derive(Debug, Args)]
pub struct UntrustArgs {
    /// The workspace (default: the project of the current directory, as for `trust`).
    dir: Option<PathBuf>,
}

/// The workspace: `dir` exactly, else the project `dispatch` would find from here (so
/// that `hookhost trust` in a subdirectory trusts the project its hooks come from).
fn workspace(dir: &Option<PathBuf>) -> Result<PathBuf, String> {
    let dir = match dir {
        Some(dir) => dir.clone(),
        None => super::project::find(None, None)?,
    };
    if !dir.is_dir() {
        return Err(format!("`{}` is not a directory", shown(&dir)));
    }
    Ok(canonical_workspace(&dir))
}

/// The exit status of `hookhost trust --status` for a workspace whose project and local
/// hooks do not run (untrusted, or changed since it was trusted): not 1, which is an
/// error, so that a script can tell "not trusted" from "could not tell".
pub const NOT_TRUSTED_EXIT: u8 = 3;

/// A path for people: escaped (a directory name can hold a newline or ESC).
fn shown(path: &std::path::Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

/// Seconds since the Unix epoch as a UTC date and time (`2026-08-01 12:00:00 UTC`).
fn date(secs: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let rfc3339 = hookhost::audit::rfc3339(time);
    // `2026-08-01T12:00:00.000Z` → `2026-08-01 12:00:00 UTC`
    let (day, clock) = rfc3339.split_once('T').unwrap_or((&rfc3339, ""));
    let clock = clock.split(['.', 'Z']).next().unwrap_or(clock);
    format!("{day} {clock} UTC")
}

/// The trust store of `workspace`: the very one its dispatches read
/// ([`hookhost::trust_store_for`]). A variable refused on the way (a `HOOKHOST_DATA_DIR`
/// inside the workspace) is said on stderr, so that a store other than the one asked for
/// is never used in silence.
fn store(workspace: &std::path::Path) -> TrustStore {
    let (store, notices) = hookhost::trust_store_for(workspace);
    for notice in notices {
        errln!("warning: {}", escape(&notice));
    }
    store
}

/// The store's path for people.
fn store_shown(store: &TrustStore) -> String {
    shown(store.path())
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
        trust: Some(request),
        ..hookhost::resolve_options(&sources)
    };
    let policy = hookhost::policy::resolve(loaded, catalogue, &options);
    let shown = shown(&workspace);
    match &policy.workspace_trust {
        Some(TrustDecision::Trusted {
            by: TrustedBy::Managed,
            ..
        }) => {
            outln!("{shown} is trusted by managed policy (`trustedWorkspaces`); nothing to do");
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
    // What is listed here is what the user trusts: every field comes from the
    // repository, so each is escaped (a `\r` in a command must not show
    // `./scripts/lint.sh` over `curl … | sh`).
    outln!("trusting {shown}: these hooks will run");
    if hooks.is_empty() {
        outln!("  (no project or local hooks)");
    }
    for hook in &hooks {
        outln!(
            "  {:<7} {:<18} {:<8} {}",
            hook.origin.kind,
            escape(&hook.event),
            hook.handler.type_name(),
            escape(&hook.handler.summary())
        );
    }
    for (file, state) in &fingerprint {
        match &state.sha256 {
            Some(sha) => outln!(
                "  file {}  sha256 {}",
                escape(file),
                sha.get(..16).unwrap_or(sha)
            ),
            None => outln!("  file {}  (absent)", escape(file)),
        }
        if let Some(target) = &state.target {
            outln!("       -> {}", escape(target));
        }
    }
    for error in &policy.errors {
        errln!("warning: {}", escape(&error.to_string()));
    }
    let store = store(&workspace);
    store.trust(&workspace, fingerprint)?;
    outln!(
        "trusted {shown}; any change to these files untrusts it again (`hookhost untrust {shown}` to undo)"
    );
    outln!(
        "recorded in {} (the trust store `hookhost dispatch` reads for this project)",
        store_shown(&store)
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
    let store = store(workspace);
    let record = store.get(workspace).ok().flatten();
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
            "trustedAtUtc": record.as_ref().map(|r| hookhost::audit::rfc3339(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.trusted_at)
            )),
            "changes": changes,
            "message": message,
            "store": store.path().display().to_string(),
        });
        let json = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
        outln!("{}", hookhost::text::escape_json(&json));
        return Ok(status_exit(state));
    }
    let shown = shown(workspace);
    match (state, by) {
        ("trusted", Some(TrustedBy::Managed)) => {
            outln!("{shown}: trusted by managed policy (`trustedWorkspaces`)")
        }
        ("trusted", Some(TrustedBy::Explicit)) => {
            outln!(
                "{shown}: trusted for this run only (`--trust-workspace` / HOOKHOST_TRUST_WORKSPACE)"
            )
        }
        ("trusted", _) => match record {
            Some(record) => outln!(
                "{shown}: trusted since {}; unchanged since",
                date(record.trusted_at)
            ),
            None => outln!("{shown}: trusted; unchanged since"),
        },
        ("changed", _) => {
            let since = record
                .map(|r| format!(" (on {})", date(r.trusted_at)))
                .unwrap_or_default();
            outln!(
                "{shown}: changed since it was trusted{since}; its project and local hooks are skipped"
            );
            for change in &changes {
                outln!("  {}", escape(change));
            }
            outln!("review, then run `hookhost trust {shown}`");
        }
        _ => outln!(
            "{shown}: not trusted\n  {}",
            escape(&message.unwrap_or_default())
        ),
    }
    outln!("trust store: {}", store_shown(&store));
    Ok(status_exit(state))
}

/// 0 when trusted, [`NOT_TRUSTED_EXIT`] otherwise.
fn status_exit(state: &str) -> ExitCode {
    if state == "trusted" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(NOT_TRUSTED_EXIT)
    }
}

pub fn untrust(args: UntrustArgs) -> Result<ExitCode, String> {
    let workspace = workspace(&args.dir)?;
    let shown = shown(&workspace);
    let store = store(&workspace);
    if store.untrust(&workspace)? {
        outln!("untrusted {shown}: its project and local hooks no longer run");
    } else {
        outln!("{shown} was not trusted");
    }
    outln!("trust store: {}", store_shown(&store));
    Ok(ExitCode::SUCCESS)
}
