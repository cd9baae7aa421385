//! Command-line arguments and the commands behind them.

// First: the printing macros every command below uses.
#[macro_use]
pub mod output;

mod audit;
mod completions;
mod demo;
mod dispatch;
pub mod dispatch_daemon;
mod hooks;
mod import;
mod install;
mod oci;
mod plugin;
pub mod project;
mod scaffold;
mod serve;
mod signing;
mod trust;
mod version;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use hookhost::handlers::WasmRunner;
use hookhost::handlers::wasm::WasmRuntime;
use hookhost::{AsyncLauncher, Host, HostBuilder, WorkspaceTrust};

/// Runs the hooks of coding agents: sandboxed WebAssembly components beside command and
/// HTTP hooks, speaking Claude Code's hook protocol.
#[derive(Debug, Parser)]
#[command(name = "hookhost", version, long_version = version::long(), about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dispatch one event: read its input JSON on stdin, print the outcome.
    ///
    /// A warm background process of the same command line (the dispatch daemon) answers
    /// from the second call on; `HOOKHOST_DISPATCH_DAEMON=off` dispatches in-process.
    Dispatch(dispatch::DispatchArgs),
    /// List every configured hook with its source and whether it would run.
    Hooks(hooks::HooksArgs),
    /// Check every config source; exit 1 listing all errors.
    Validate(hooks::ValidateArgs),
    /// List the events hookhost knows and their attributes.
    Events(hooks::EventsArgs),
    /// Serve events to many clients over a unix socket or stdio (JSON lines).
    Serve(serve::ServeArgs),
    /// Run a scripted agent session through example hooks.
    Demo(demo::DemoArgs),
    /// Trust the workspace's project and local hooks (`--status`: show its trust).
    Trust(trust::TrustArgs),
    /// Forget the trust of a workspace: its project and local hooks stop running.
    Untrust(trust::UntrustArgs),
    /// Read the audit log.
    Audit(audit::AuditArgs),
    /// Create an ed25519 key pair for signing plugins.
    Keygen(signing::KeygenArgs),
    /// Scaffold, inspect, test, sign or verify a wasm plugin.
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
    },
    /// Make hookhost the hook of Claude Code or Codex: write the drop-in into its
    /// settings (merged with what is there; `--dry-run` shows the change).
    Install(install::InstallArgs),
    /// Remove what `hookhost install` added to Claude Code's or Codex's settings.
    Uninstall(install::InstallArgs),
    /// Print the JSON Schema of settings files (committed as `docs/hookhost.schema.json`).
    Schema,
    /// Convert a config in the founding article's flat format (`{"hooks": [{"event": …,
    /// "handler": {…}}]}`, millisecond timeouts) to hookhost's shape, on stdout.
    Import(import::ImportArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(completions::CompletionsArgs),
    /// Print the manual page in roff on stdout (`hookhost man | man -l -`).
    Man,
    /// Internal: run one async hook in the background (started by `dispatch`).
    #[command(hide = true)]
    RunAsync(dispatch::RunAsyncArgs),
}

/// Where the config comes from.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// The project directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Extra settings: a file path or inline JSON (repeatable; highest precedence after
    /// managed policy).
    #[arg(long = "settings", value_name = "FILE|JSON")]
    settings: Vec<String>,
    /// Trust the workspace for this run only (its project and local hooks run, pinned to
    /// their current content); the same as `HOOKHOST_TRUST_WORKSPACE=1`.
    #[arg(long)]
    trust_workspace: bool,
}

impl SourceArgs {
    /// `--project` or the current directory, as given (what `serve` serves by default).
    fn project_dir(&self) -> Result<PathBuf, String> {
        let dir = match &self.project {
            Some(dir) => dir.clone(),
            None => std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}"))?,
        };
        std::path::absolute(&dir).map_err(|e| {
            format!(
                "bad project directory `{}`: {e}",
                hookhost::text::escape(&dir.display().to_string())
            )
        })
    }

    /// The project, found the way agents mean it (see [`project`]): `--project`, else the
    /// environment, else the input's `cwd`, else the working directory, walking up to
    /// the nearest `.hookhost/`.
    pub fn find_project(&self, input_cwd: Option<&str>) -> Result<PathBuf, String> {
        project::find(self.project.as_deref(), input_cwd)
    }

    /// A builder over the standard sources and the `--settings` of a project.
    fn builder(&self, project_dir: &std::path::Path) -> HostBuilder {
        let mut builder = HostBuilder::new(project_dir).standard_sources();
        for settings in &self.settings {
            builder = builder.settings(settings.clone());
        }
        if self.trust_workspace {
            builder = builder.workspace_trust(WorkspaceTrust::Explicit);
        }
        builder
    }

    /// A host over the standard sources of the project found from the working
    /// directory (no input to look at), with session state on disk.
    fn host(&self) -> Result<Host, String> {
        self.host_for(&self.find_project(None)?)
    }

    /// A host over the standard sources of `project`, with session state on disk so
    /// that consecutive one-shot processes of a session share it.
    fn host_for(&self, project: &std::path::Path) -> Result<Host, String> {
        self.host_with(project, std::sync::Arc::new(one_shot_wasm()))
    }

    /// The host of one dispatch about `project` ([`SourceArgs::host_for`]) that keeps the
    /// last good version of each config file, stored on disk, in force while the file is
    /// broken ([`HostBuilder::last_good_on_disk`]), as the daemons do.
    fn host_guarded(&self, project: &std::path::Path) -> Result<Host, String> {
        let wasm = std::sync::Arc::new(one_shot_wasm());
        self.host_built(project, wasm.clone(), |builder| {
            builder.last_good_on_disk(wasm)
        })
    }

    /// [`SourceArgs::host`] with the project's `hookhost.lock` binding nothing
    /// ([`HostBuilder::unbound_lock`]): the references as written, for `plugin lock`.
    fn host_unbound_lock(&self) -> Result<Host, String> {
        let project = self.find_project(None)?;
        let wasm = std::sync::Arc::new(one_shot_wasm());
        self.host_built(&project, wasm, HostBuilder::unbound_lock)
    }

    /// [`SourceArgs::host_for`] running wasm hooks in `wasm` (the dispatch daemon's warm
    /// one).
    fn host_with(
        &self,
        project: &std::path::Path,
        wasm: std::sync::Arc<dyn WasmRunner>,
    ) -> Result<Host, String> {
        self.host_built(project, wasm, |builder| builder)
    }

    /// [`SourceArgs::host_with`], with `adjust` applied to the builder (the dispatch
    /// daemon passes it through the reload gate, `hookhost::gate`).
    fn host_built(
        &self,
        project: &std::path::Path,
        wasm: std::sync::Arc<dyn WasmRunner>,
        adjust: impl FnOnce(HostBuilder) -> HostBuilder,
    ) -> Result<Host, String> {
        let builder = adjust(self.builder(project));
        let sessions = sessions_dir();
        // The background runner of async hooks gets the project this dispatch found,
        // which it could not find again: it sees neither the input's `cwd` nor, once
        // detached, necessarily the same environment. As bytes: a path need not be
        // UTF-8, and a lossy copy would name another directory.
        let mut launcher_args: Vec<std::ffi::OsString> = vec![
            "run-async".into(),
            "--project".into(),
            project.as_os_str().to_os_string(),
        ];
        for settings in &self.settings {
            launcher_args.extend(["--settings".into(), settings.into()]);
        }
        if self.trust_workspace {
            launcher_args.push("--trust-workspace".into());
        }
        let launcher = match std::env::current_exe() {
            Ok(program) => AsyncLauncher::Detached {
                program,
                args: launcher_args,
            },
            Err(_) => AsyncLauncher::InProcess,
        };
        // Session state: the data directory's shared store (`standard_sources`).
        Ok(builder
            .wasm_runner(wasm)
            .session_files(sessions)
            .async_launcher(launcher)
            .build())
    }
}

/// Where the CLI keeps per-session state: `sessions/` in the [`data_dir`].
pub fn sessions_dir() -> PathBuf {
    data_dir().join("sessions")
}

/// The user's data directory: `HOOKHOST_DATA_DIR`, else `~/.local/share/hookhost`.
pub fn data_dir() -> PathBuf {
    hookhost::data_dir()
}

/// A tokio runtime for a long-running command (the daemon, the demo).
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// A tokio runtime for one event: no worker threads to start and join, since the process
/// lives for a single dispatch. Hooks still run concurrently: command and HTTP hooks are
/// I/O the one thread multiplexes, and wasm hooks run on fibers that yield to the others
/// at every epoch tick.
///
/// [`one_shot`] is the only way in: it runs the future, then lets go of the runtime
/// without waiting for its blocking threads (`shutdown_background`). A blocking call that
/// never returns (an open of a FIFO swapped into a granted path, a read of a device) can
/// outlive its hook's deadline inside a `spawn_blocking` thread; dropping the runtime
/// would join that thread and hang the process for ever after the hook timed out.
fn one_shot<F: std::future::Future>(future: F) -> Result<F::Output, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let output = runtime.block_on(future);
    runtime.shutdown_background();
    Ok(output)
}

/// The wasm sandbox of a command that runs each plugin once or twice (`dispatch`,
/// `run-async`, `plugin`): without the instance pool, which pays off only over many
/// events and costs ~0.3 ms to set up.
fn one_shot_wasm() -> WasmRuntime {
    WasmRuntime::default().with_instance_pool(false)
}

/// The exit status of a host error: 1, not 2 (under `--format claude` exit 2 means
/// "block"). A dispatch that cannot run at all (no runtime, a panic) on an event that
/// honours `onFailure` blocks instead (`dispatch::unanswered`): no answer must not read as
/// "go ahead" where the drop-in has no `onFailure: "block"`.
pub const ERROR_EXIT: u8 = 1;

/// How a host error is reported on stderr: one line, with every control character
/// escaped (messages quote config values, paths and plugin output).
pub fn error_text(message: &str) -> String {
    let message = message.strip_prefix("hookhost: ").unwrap_or(message);
    let message = message.strip_prefix("error: ").unwrap_or(message);
    format!("hookhost: error: {}\n", hookhost::text::escape(message))
}

/// Makes every panic print one line on stderr (`hookhost: error: internal error …`)
/// instead of Rust's multi-line report; `main` turns it into exit status 1. With
/// `RUST_BACKTRACE` set, Rust's report follows, for bug reports.
pub fn install_panic_hook() {
    let rust_report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let what = info.payload_as_str().unwrap_or("a panic without a message");
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        output::write_stderr(&error_text(&format!(
            "internal error (a bug in hookhost; please report it): {what}{place}"
        )));
        if hookhost::config::env::var("RUST_BACKTRACE").is_some() {
            rust_report(info);
        }
    }));
}

/// stderr for the library's log lines (`tracing`), with control characters escaped:
/// they quote paths, plugin names and hook output.
pub struct EscapingStderr;

impl std::io::Write for EscapingStderr {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(bytes);
        output::write_stderr(&hookhost::text::escape_multiline(&text));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Dispatch(args) => dispatch::run(args),
        Command::Hooks(args) => hooks::run(args),
        Command::Validate(args) => hooks::validate(args),
        Command::Events(args) => hooks::events(args),
        Command::Demo(args) => demo::run(args),
        Command::Plugin { command } => plugin::run(command),
        Command::Schema => {
            out!("{}", hookhost::config::schema::json_schema_text());
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(args) => import::run(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man => completions::man(),
        Command::Install(args) => install::install(args),
        Command::Uninstall(args) => install::uninstall(args),
        Command::Serve(args) => serve::run(args),
        Command::Trust(args) => trust::trust(args),
        Command::Untrust(args) => trust::untrust(args),
        Command::Audit(args) => audit::run(args),
        Command::Keygen(args) => signing::keygen(args),
        Command::RunAsync(args) => dispatch::run_async(args),
    }
}

#[cfg(test)]
mod tests {
    /// The one-shot runtime does not wait for a blocking thread that never returns (an
    /// open of a FIFO with no writer): the hook's deadline ends the future, and the
    /// process is not held by the stuck thread. Without `shutdown_background` this test
    /// never ends.
    #[test]
    fn the_one_shot_runtime_does_not_wait_for_a_stuck_blocking_thread() {
        let (keep, stuck) = std::sync::mpsc::channel::<()>();
        let out = super::one_shot(async move {
            let blocked = tokio::task::spawn_blocking(move || stuck.recv());
            tokio::time::timeout(std::time::Duration::from_millis(10), blocked)
                .await
                .is_err()
        })
        .unwrap();
        assert!(
            out,
            "the blocking thread was expected to outlive the deadline"
        );
        drop(keep);
    }
}
