//! `hookhost plugin new`: scaffold a plugin.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use hookhost::scaffold::{Lang, NewPlugin, new_plugin, next_steps};

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
        /// Rust only: the `guest-sdk` directory to depend on (default: the SDK of the
        /// hookhost source tree this binary was built from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
}

/// Runs a `plugin` subcommand.
pub fn run(command: PluginCommand) -> Result<ExitCode, String> {
    match command {
        PluginCommand::New {
            lang,
            name,
            dir,
            sdk,
        } => {
            let lang = Lang::parse(&lang).ok_or_else(|| {
                format!("unknown language `{lang}`; expected `rust`, `python` or `js`")
            })?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let files = new_plugin(&NewPlugin {
                lang,
                name: name.clone(),
                dir: dir.clone(),
                sdk,
            })?;
            println!(
                "created {} plugin `{name}` in {}:",
                lang.as_str(),
                dir.display()
            );
            for file in files {
                println!("  {}", file.display());
            }
            println!("next, in {}:\n{}", dir.display(), next_steps(lang, &name));
            Ok(ExitCode::SUCCESS)
        }
    }
}
