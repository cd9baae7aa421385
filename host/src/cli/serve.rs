//! `hookhost serve`: the daemon (see `hookhost::serve` for the protocol).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use hookhost::serve::{BoundSocket, HostFactory, Limits, Server};
use hookhost::{AsyncLauncher, HostBuilder, WorkspaceTrust};

use super::{SourceArgs, data_dir};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Listen on this unix socket (created with mode 0600; the default, also without
    /// this flag, is `$XDG_RUNTIME_DIR/hookhost.sock`, else `hookhost.sock` in the data
    /// directory). Started by systemd's socket activation (`LISTEN_PID` naming this
    /// process, `LISTEN_FDS=1`), it listens on the inherited descriptor 3 instead.
    #[arg(long, value_name = "PATH", num_args = 0..=1, conflicts_with = "stdio")]
    socket: Option<Option<PathBuf>>,
    /// Serve one client on stdin/stdout.
    #[arg(long)]
    stdio: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

/// The stack of each of a daemon's threads: what a main thread gets on Linux, four
/// times tokio's default. Requests run on these threads; a stack overflow aborts the
/// whole process (it is not a panic), so the parsers of hostile input are depth-limited
/// well below what this holds, and the size is set here rather than left to a default.
pub const DAEMON_STACK: usize = 8 << 20;

/// The tokio runtime of a daemon: two workers with [`DAEMON_STACK`] each.
pub fn daemon_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(DAEMON_STACK)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// `$XDG_RUNTIME_DIR/hookhost.sock` when that is an absolute path to a directory (the
/// XDG spec ignores a relative one), else `hookhost.sock` in the data directory, which
/// is created (mode 0700) when missing.
fn default_socket() -> Result<PathBuf, String> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    let runtime_dir = hookhost::config::env::path_var("XDG_RUNTIME_DIR", &workspaces)
        .map_err(|notice| tracing::warn!("{notice}"))
        .ok()
        .flatten()
        .filter(|dir| dir.is_dir());
    if let Some(dir) = runtime_dir {
        return Ok(dir.join("hookhost.sock"));
    }
    let data = data_dir();
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&data)
            .map_err(|e| {
                format!(
                    "cannot create the data directory {} for the socket: {e} (name one with --socket)",
                    data.display()
                )
            })?;
    }
    Ok(data.join("hookhost.sock"))
}

/// The listening socket a supervisor passed (systemd's socket activation: `LISTEN_PID`
/// names this process and `LISTEN_FDS` is 1, descriptor 3), if any. Variables that are
/// not numbers are ignored with a warning, as every number hookhost reads.
fn activated_socket() -> Result<Option<BoundSocket>, String> {
    /// The first descriptor passed (`SD_LISTEN_FDS_START`).
    const FIRST: std::os::fd::RawFd = 3;
    let count = match hookhost::config::env::listen_fds() {
        Ok(count) => count,
        Err(notice) => {
            say(&format!("warning: {notice}"));
            0
        }
    };
    match count {
        0 => Ok(None),
        1 => {
            // A supervisor that named this process but passed no descriptor 3: owning a
            // closed descriptor would abort the process at its drop (IO safety).
            // SAFETY: F_GETFD reads a descriptor's flags; any number may be asked about.
            if unsafe { libc::fcntl(FIRST, libc::F_GETFD) } == -1 {
                return Err(
                    "socket activation (LISTEN_PID, LISTEN_FDS=1) passed no descriptor 3"
                        .to_string(),
                );
            }
            // SAFETY: with LISTEN_PID naming this process, descriptor 3 was opened for
            // it by its supervisor, and nothing in this process has taken it: it is
            // read once, here, before anything else opens a file.
            let fd =
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(FIRST) };
            BoundSocket::inherited(fd)
                .map(Some)
                .map_err(|e| format!("cannot serve: {e}"))
        }
        n => Err(format!(
            "socket activation passed {n} descriptors (LISTEN_FDS); hookhost serve listens \
             on one: give its socket unit a single ListenStream="
        )),
    }
}

/// One line for the person who started the daemon; a closed stderr is not an error.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "hookhost: {line}");
}

pub fn run(args: ServeArgs) -> Result<ExitCode, String> {
    hookhost::telemetry::warn_on_failures();
    crate::allocator::use_mimalloc();
    let default_project = args.sources.project_dir()?;
    let sources = args.sources.clone();
    let session_files = data_dir().join("sessions");
    let trusted_project = default_project.clone();
    let factory: HostFactory = Arc::new(move |dir, sessions, gate| {
        let mut builder: HostBuilder = sources.builder(dir);
        // `--trust-workspace` (and `HOOKHOST_TRUST_WORKSPACE=1`) trust the daemon's
        // project; any other project a client names is judged by the trust store.
        if dir != trusted_project {
            // The store `hookhost trust` writes for that project (`trust_store_for`).
            let store = hookhost::trust_store_for(dir).0.path().to_path_buf();
            builder = builder.workspace_trust(WorkspaceTrust::Store(store));
        }
        gate.apply(builder)
            .session_store(sessions)
            .session_files(session_files.clone())
            .async_launcher(AsyncLauncher::InProcess)
            .build()
    });
    let (idle, notice) = hookhost::serve::slots::idle_timeout();
    if let Some(notice) = notice {
        say(&notice);
    }
    let limits = Limits {
        idle,
        ..Limits::default()
    };
    let server = Server::with_limits(default_project, factory, limits);
    let activated = if args.stdio {
        None
    } else {
        activated_socket()?
    };
    if activated.is_some() && matches!(args.socket, Some(Some(_))) {
        return Err(
            "both --socket PATH and an inherited socket (LISTEN_FDS): drop one (under \
             socket activation, the socket unit's ListenStream= names the path)"
                .into(),
        );
    }
    let socket = match (&args.socket, args.stdio) {
        (_, true) => None,
        _ if activated.is_some() => None,
        (Some(Some(path)), false) => Some(path.clone()),
        (Some(None) | None, false) => Some(default_socket()?),
    };
    let rt = daemon_runtime()?;
    let served = rt.block_on(async move {
        let stopper = server.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            stopper.shutdown();
        });
        if let Some(bound) = activated {
            let path = bound.path().to_path_buf();
            say(&format!(
                "serving on {} (socket activation)",
                hookhost::text::escape(&path.display().to_string())
            ));
            return server
                .serve_bound(bound)
                .await
                .map_err(|e| cannot_serve(&path, &e));
        }
        match socket {
            Some(path) => {
                // Bound before anything is printed: "serving on" is true when it shows.
                let bound = BoundSocket::bind(&path)
                    .await
                    .map_err(|e| format!("cannot serve: {e}"))?;
                say(&format!(
                    "serving on {}",
                    hookhost::text::escape(&path.display().to_string())
                ));
                server
                    .serve_bound(bound)
                    .await
                    .map_err(|e| cannot_serve(&path, &e))
            }
            None => {
                server.serve_stdio().await;
                Ok(())
            }
        }
    });
    // Stopped (a signal, or stdin's end): the lines this daemon wrote end signed
    // (docs/book/src/audit-chain.md), whether or not it stopped on an error.
    for problem in hookhost::audit::checkpoint_written() {
        say(&format!("audit: {}", hookhost::text::escape(&problem)));
    }
    served?;
    Ok(ExitCode::SUCCESS)
}

fn cannot_serve(path: &Path, e: &std::io::Error) -> String {
    format!("cannot serve on {}: {e}", path.display())
}
