//! `hookhost keygen`, `hookhost plugin sign` and `hookhost plugin verify`: ed25519 keys
//! and detached plugin signatures for managed `pluginAllowlist`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use sha2::{Digest, Sha256};

use hookhost::config::file::{FileError, PLUGIN_CAP, read_regular};
use hookhost::config::schema::RawAllowEntry;
use hookhost::policy::allowlist::{
    PluginAllowlist, parse_signing_key, sign_digest, signature_path,
};

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the private key (mode 0600); the public key goes to `KEY.pub`.
    #[arg(long, value_name = "KEY")]
    out: PathBuf,
    /// Replace existing key files.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub struct SignArgs {
    /// The private key written by `hookhost keygen`.
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    /// The plugin to sign; the signature goes to `PLUGIN.sig`.
    plugin: PathBuf,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The public key (hex or base64), or a file holding it (`KEY.pub`).
    #[arg(long, value_name = "PUBLIC_KEY")]
    key: String,
    /// The plugin; its signature is read from `PLUGIN.sig`.
    plugin: PathBuf,
}

fn write_new(path: &Path, text: &str, mode: u32, force: bool) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(mode);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!("`{}` exists; pass --force to replace it", path.display())
        } else {
            format!("cannot write `{}`: {e}", path.display())
        }
    })?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

pub fn keygen(args: KeygenArgs) -> Result<ExitCode, String> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| format!("no randomness for the key: {e}"))?;
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let public = hex::encode(key.verifying_key().as_bytes());
    write_new(
        &args.out,
        &format!("{}\n", hex::encode(seed)),
        0o600,
        args.force,
    )?;
    let mut pub_path = args.out.as_os_str().to_owned();
    pub_path.push(".pub");
    write_new(
        Path::new(&pub_path),
        &format!("{public}\n"),
        0o644,
        args.force,
    )?;
    errln!(
        "wrote the private key to {} (keep it secret) and the public key to {}",
        shown(&args.out),
        shown(Path::new(&pub_path))
    );
    outln!("{public}");
    Ok(ExitCode::SUCCESS)
}

/// A path for people, escaped.
fn shown(path: &Path) -> String {
    hookhost::text::escape(&path.display().to_string()).into_owned()
}

/// The most bytes read from a key or a signature file (64 bytes in hex or base64).
const KEY_CAP: u64 = 4096;

/// Reads `path` through the one reader ([`hookhost::config::file::read_regular`]): a
/// regular file of at most `cap` bytes, never a FIFO waited on.
fn read(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>, String> {
    hookhost::config::file::read_regular(path, cap)
        .map(|(bytes, _)| bytes)
        .map_err(|e| format!("cannot read {what} `{}`: {e}", path.display()))
}

pub fn sign(args: SignArgs) -> Result<ExitCode, String> {
    let key_text = read(&args.key, "the key", KEY_CAP)?;
    let key = parse_signing_key(&key_text)
        .map_err(|e| format!("`{}` is not a private key: {e}", args.key.display()))?;
    // Sign the digest of the bytes read here, once.
    let bytes = read(&args.plugin, "the plugin", PLUGIN_CAP)?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let signature = sign_digest(&key, &digest)?;
    let sig_path = signature_path(&args.plugin);
    write_new(&sig_path, &format!("{signature}\n"), 0o644, true)?;
    outln!(
        "signed {} (sha256 {digest}) with key {}: {}",
        shown(&args.plugin),
        hex::encode(key.verifying_key().as_bytes()),
        shown(&sig_path)
    );
    Ok(ExitCode::SUCCESS)
}

pub fn verify(args: VerifyArgs) -> Result<ExitCode, String> {
    let key = match read_regular(Path::new(&args.key), KEY_CAP) {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => args.key.clone(),
    };
    let entry = RawAllowEntry {
        public_key: Some(key),
        ..RawAllowEntry::default()
    };
    let (list, errors) = PluginAllowlist::new(&[("--key".into(), 0, entry)], true);
    if let Some((_, _, message)) = errors.into_iter().next() {
        return Err(format!("--key: {message}"));
    }
    let bytes = read(&args.plugin, "the plugin", PLUGIN_CAP)?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let sig = match read_regular(&signature_path(&args.plugin), KEY_CAP) {
        Ok((b, _)) => Some(Ok(b)),
        Err(FileError::NotFound) => None,
        Err(e) => Some(Err(e.to_string())),
    };
    match list.admit(&args.plugin, &digest, sig) {
        Ok(_) => {
            outln!(
                "ok: {} (sha256 {digest}) is signed by this key",
                shown(&args.plugin)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => {
            outln!("{}", hookhost::text::escape(&message));
            Ok(ExitCode::from(1))
        }
    }
}
