//! `hookhost serve`: the daemon (see `hookhost::serve` for the protocol).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use hookhost::serve::{HostFactory, Server};
use hookhost::{AsyncLauncher, HostBuilder};

use super::{SourceArgs, data_dir, runtime};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["socket", "stdio"])))]
pub struct ServeArgs {
    /// Listen on this unix socket (created with mode 0600).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Serve one client on stdin/stdout.
    #[arg(long)]
    stdio: bool,
    #[command(flatten)]
    sources: SourceArgs,
}

pub fn run(args: ServeArgs) -> Result<ExitCode, String> {
    crate::allocator::use_mimalloc();
    let default_project = args.sources.project_dir()?;
    let sources = args.sources.clone();
    let session_files = data_dir().join("sessions");
    let factory: HostFactory = Arc::new(move |dir, sessions, previous| {
        let builder: HostBuilder = sources.builder(dir);
        builder
            .reload_of(previous)
            .session_store(sessions)
            .session_files(session_files.clone())
            .async_launcher(AsyncLauncher::InProcess)
            .build()
    });
    let server = Server::new(default_project, factory);
    let rt = runtime()?;
    rt.block_on(async move {
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
        match &args.socket {
            Some(path) => {
                eprintln!("hookhost: serving on {}", path.display());
                server
                    .serve_unix(path)
                    .await
                    .map_err(|e| format!("cannot serve on {}: {e}", path.display()))
            }
            None => {
                server.serve_stdio().await;
                Ok(())
            }
        }
    })?;
    Ok(ExitCode::SUCCESS)
}
