//! The `hookhost` command line: a thin shell over the library. Parsing lives in
//! [`cli`]; every command returns an exit code or an error message, and this file maps
//! them to the process exit status in one place.

mod allocator;
mod cli;

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() -> ExitCode {
    // SAFETY: first thing in `main`: no other thread exists yet.
    unsafe { hookhost::config::env::forget_process_tunables() };
    survive_file_size_limit();
    // Orphans of hooks whose keeper was killed come here, and end with the dispatch.
    hookhost::handlers::descendants::adopt_orphans();
    // A panic anywhere is a host error: one line on stderr and exit 1, never Rust's 101
    // (not a hook-protocol answer) and never 2 (which blocks the agent under
    // `--format claude`).
    cli::install_panic_hook();
    std::panic::catch_unwind(run).unwrap_or_else(|_| ExitCode::from(cli::ERROR_EXIT))
}

/// A write past `RLIMIT_FSIZE` (an audit log at the limit) raises `SIGXFSZ`, whose
/// default action kills the process before it answers: a deny lost as a crash. With a
/// handler that does nothing, the write fails with `EFBIG` instead, and the audit log
/// turns that into a notice of the outcome (`audit::AuditLog::append`). A handler, not
/// `SIG_IGN`: `exec` resets it, so hooks start with the default action.
fn survive_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe (it does
    // nothing) and lives as long as the process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

fn run() -> ExitCode {
    // First of all: a dispatch answered by its daemon should cost little more than the
    // process start.
    if let Some(code) = cli::dispatch_daemon::forward() {
        return code;
    }
    // Warnings of the library (a compile-cache entry rebuilt, an audit line that could
    // not be written by a background run) on stderr, escaped (they quote paths and
    // plugin names); `HOOKHOST_LOG=debug` for more.
    let filter = hookhost::config::env::var("HOOKHOST_LOG")
        .and_then(|v| v.into_string().ok())
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| cli::EscapingStderr)
        .without_time()
        .init();
    if let Some(code) = cli::dispatch_daemon::serve_if_started() {
        return code;
    }
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(message) => {
            cli::output::write_stderr(&cli::error_text(&message));
            ExitCode::from(cli::ERROR_EXIT)
        }
    }
}
