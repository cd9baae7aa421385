//! `hookhost audit verify [FILE…]`: checks the audit log's chain and signatures offline
//! ([`hookhost::audit::verify`]); exit 0 when intact, 1 on any break.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use hookhost::audit::verify::{Finding, Place, Report, TrustedKey, rotated_set, verify};
use hookhost::text::escape;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The files to check, oldest first (default: the configured log and its rotated
    /// files: `NAME.N` highest first, `NAME-SUFFIX`, then the log).
    files: Vec<PathBuf>,
    /// The public key (hex or base64, or a file holding it) the signatures must be made
    /// with. Default: the host's key (`audit.key` in the data directory), else the key
    /// of the log's first signed line (trust on first use).
    #[arg(long, value_name = "PUBLIC_KEY")]
    key: Option<String>,
    /// One JSON object (docs/json-output.md) instead of text.
    #[arg(long)]
    json: bool,
}

/// The most bytes read from a `--key` file.
const KEY_CAP: u64 = 4096;

pub fn run(args: VerifyArgs) -> Result<ExitCode, String> {
    let (files, key) = if args.files.is_empty() || args.key.is_none() {
        let log = super::configured_log()?;
        let key = match args.key {
            Some(_) => None,
            None => hookhost::audit::key::public_key(&log.key_file())?.map(|key| TrustedKey {
                key,
                source: "host",
            }),
        };
        let files = if args.files.is_empty() {
            let (files, compressed) = rotated_set(log.path());
            for file in compressed {
                errln!(
                    "note: {} is compressed and not read; decompress it and name it to check it",
                    shown(&file)
                );
            }
            files
        } else {
            args.files.clone()
        };
        (files, key)
    } else {
        (args.files.clone(), None)
    };
    let key = match &args.key {
        Some(text) => Some(TrustedKey {
            key: parse_key(text)?,
            source: "option",
        }),
        None => key,
    };
    let report = verify(&files, key)?;
    if args.json {
        let text = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        outln!("{}", hookhost::text::escape_json(&text));
    } else {
        print(&report);
    }
    Ok(if report.intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--key`: a public key, or a file holding one.
fn parse_key(text: &str) -> Result<ed25519_dalek::VerifyingKey, String> {
    let path = std::path::Path::new(text);
    let key = match hookhost::config::file::read_regular(path, KEY_CAP) {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => text.to_string(),
    };
    hookhost::policy::allowlist::parse_public_key(&key).map_err(|e| format!("--key: {e}"))
}

fn shown(path: &std::path::Path) -> String {
    escape(&path.display().to_string()).into_owned()
}

fn place(at: &Place) -> String {
    let seq = at.seq.map(|s| format!(" (seq {s})")).unwrap_or_default();
    format!("{}:{}{seq}", escape(&at.file), at.line)
}

fn finding(f: &Finding) -> String {
    format!("{}: {}: {}", place(&f.at), f.kind, escape(&f.message))
}

fn print(report: &Report) {
    for warning in &report.warnings {
        errln!("warning: {}", finding(warning));
    }
    if let Some(at) = &report.in_progress {
        outln!("in progress: {} (a line still being written)", place(at));
    }
    let seqs = match (report.first_seq, report.last_seq) {
        (Some(first), Some(last)) => format!(", seq {first} to {last}"),
        _ => String::new(),
    };
    let key = match (&report.key, report.key_source) {
        (Some(key), Some("log")) => {
            format!("key {key}, taken from the log itself (pass --key to check it against yours)")
        }
        (Some(key), Some("host")) => format!("key {key} (this host's)"),
        (Some(key), _) => format!("key {key}"),
        _ => "no key".into(),
    };
    let signed = match &report.last_signed {
        Some(at) => format!(
            "{} signed lines, the last at {}; {} lines after it are not signed",
            report.signed,
            place(at),
            report.unsigned_tail
        ),
        None => "no signed line".into(),
    };
    match &report.problem {
        None => outln!(
            "intact: {} lines in {} files{seqs}; {signed}; {key}",
            report.lines,
            report.files.len()
        ),
        Some(problem) => {
            outln!("BROKEN at {}", finding(problem));
            outln!(
                "read up to the break: {} lines{seqs}; {signed}; {key}",
                report.lines
            );
        }
    }
}
