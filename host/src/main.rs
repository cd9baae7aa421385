//! The `hookhost` command line: a thin shell over the library. Parsing lives in
//! [`cli`]; every command returns an exit code or an error message, and this file maps
//! them to the process exit status in one place.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(message) => {
            // Exit 1, never 2: under `--format claude`, exit 2 means "block", and a host
            // error must not block the agent.
            eprintln!("hookhost: error: {message}");
            ExitCode::from(1)
        }
    }
}
