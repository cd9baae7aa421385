//! `hookhost import FILE`: a config in the founding article's flat format
//! (`docs/book/src/configuration.md`), printed in hookhost's nested shape on stdout.
//!
//! The file is read like any config source (a regular file within the config size cap),
//! converted by [`hookhost::config::flat::to_nested`], and the result is checked by
//! parsing it back: what is printed loads as the same hooks (the round trip is tested).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use hookhost::config::file::{CONFIG_CAP, read_regular};
use hookhost::text::escape;

/// Arguments of `hookhost import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A flat-format file (`{"hooks": [{"event": …, "handler": {…}}]}`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// Converts the file and prints it.
pub fn run(args: ImportArgs) -> Result<ExitCode, String> {
    let shown = escape(&args.file.display().to_string()).into_owned();
    let (bytes, _) =
        read_regular(&args.file, CONFIG_CAP).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8"))?;
    let document: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{shown}: $: invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        )
    })?;
    let nested = hookhost::config::flat::to_nested(&document)
        .map_err(|(path, message)| format!("{shown}: {path}: {}", escape(&message)))?;
    let mut out = serde_json::to_string_pretty(&nested).expect("JSON serializes");
    out.push('\n');
    // What is printed must load: the same parse every source goes through.
    hookhost::config::parse_settings(&out, &shown, false, &hookhost::EventCatalogue::default())
        .map_err(|e| format!("{shown}: {}: {}", e.path, escape(&e.message)))?;
    out!("{out}");
    Ok(ExitCode::SUCCESS)
}
