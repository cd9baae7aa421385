//! `hookhost plugin pull|push|lock`, and `validate`'s check of `hookhost.lock`: plugins
//! in OCI registries (the pull, the cache and the protocol are the sandbox's,
//! `hookhost::handlers::wasm::oci`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use hookhost::config::SourceKind;
use hookhost::config::file::{PLUGIN_CAP, read_regular};
use hookhost::config::lock::LOCK_FILE;
use hookhost::handlers::wasm::oci::{OciStore, sha256_hex};
use hookhost::policy::oci::{OciRef, Pins};
use hookhost::policy::{HandlerSpec, Policy};
use hookhost::text::escape;

use super::SourceArgs;

#[derive(Debug, Args)]
pub struct PullArgs {
    /// `oci://registry/repository:tag[@sha256:…]`.
    reference: String,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component (`.wasm`).
    file: PathBuf,
    /// `oci://registry/repository:tag`.
    reference: String,
    /// Sign it with this private key (`hookhost keygen`) and push the signature beside it
    /// as a referrer. Without it, a `FILE.sig` beside the file is pushed so.
    #[arg(long, value_name = "KEY")]
    sign: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LockArgs {
    #[command(flatten)]
    sources: SourceArgs,
}

fn store() -> Result<OciStore, String> {
    super::one_shot_wasm()
        .oci_store()
        .ok_or_else(|| "this host has no OCI cache".to_string())
}

fn reference(text: &str) -> Result<OciRef, String> {
    OciRef::parse(text).map_err(|e| format!("`{}`: {e}", escape(text)))
}

/// `plugin pull REF`: into the cache (a pinned reference already cached is not asked of
/// the registry again); prints the reference pinned to its manifest's digest.
pub fn pull(args: PullArgs) -> Result<ExitCode, String> {
    let reference = reference(&args.reference)?;
    let store = store()?;
    let cached = match store
        .cached(&reference)?
        .filter(|_| reference.digest.is_some())
    {
        Some(cached) => cached,
        None => super::one_shot(store.pull(&reference))??,
    };
    let signed = hookhost::policy::allowlist::signature_path(&cached.path).exists();
    outln!(
        "{}",
        escape(&reference.pinned(&cached.manifest).to_string())
    );
    errln!(
        "cached {} (component sha256 {}{})",
        escape(&cached.path.display().to_string()),
        cached.layer,
        if signed { ", with a signature" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `plugin push FILE REF`: the wasm artifact, and its signature as a referrer.
pub fn push(args: PushArgs) -> Result<ExitCode, String> {
    let reference = reference(&args.reference)?;
    let (wasm, _) = read_regular(&args.file, PLUGIN_CAP).map_err(|e| {
        format!(
            "cannot read `{}`: {e}",
            escape(&args.file.display().to_string())
        )
    })?;
    let digest = sha256_hex(&wasm);
    let signature = match &args.sign {
        Some(key) => {
            let (text, _) = read_regular(key, 4096)
                .map_err(|e| format!("cannot read the key `{}`: {e}", key.display()))?;
            let key = hookhost::policy::allowlist::parse_signing_key(&text)
                .map_err(|e| format!("`{}` is not a private key: {e}", key.display()))?;
            let signature = hookhost::policy::allowlist::sign_digest(&key, &digest)?;
            Some(format!("{signature}\n").into_bytes())
        }
        None => read_regular(
            &hookhost::policy::allowlist::signature_path(&args.file),
            4096,
        )
        .ok()
        .map(|(bytes, _)| bytes),
    };
    let manifest = super::one_shot(store()?.push(&reference, &wasm, signature.as_deref()))??;
    outln!("{}", escape(&reference.pinned(&manifest).to_string()));
    errln!(
        "pushed {} (component sha256 {digest}){}",
        escape(&args.file.display().to_string()),
        if signature.is_some() {
            " and its signature as a referrer"
        } else {
            ""
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// Every `oci://` plugin the workspace's own hooks (project and local) name, each once,
/// with the first hook that names it: what the project's lock pins (the user's and
/// managed policy's references are theirs, and are not written into a file the
/// repository commits).
fn references(policy: &Policy) -> BTreeMap<String, (OciRef, &hookhost::policy::Hook)> {
    let mut found = BTreeMap::new();
    for hook in &policy.hooks {
        if !matches!(hook.origin.kind, SourceKind::Project | SourceKind::Local) {
            continue;
        }
        if let HandlerSpec::Wasm(spec) = &hook.handler
            && let Some(reference) = &spec.oci
        {
            // As written: a tag whose digest the lock chose is a tag to resolve again.
            let mut written = OciRef::clone(reference);
            if spec.locked_by.is_some() {
                written.digest = None;
            }
            found
                .entry(reference.name())
                .or_insert_with(|| (written, hook.as_ref()));
        }
    }
    found
}

/// `plugin lock`: `hookhost.lock` at the top of the project, pinning every `oci://`
/// plugin of its config to the manifest digest its reference pins, or its tag names now.
pub fn lock(args: LockArgs) -> Result<ExitCode, String> {
    let project = args.sources.find_project(None)?;
    // The references as written: the old lock (broken or not) binds nothing here.
    let host = args.sources.host_unbound_lock()?;
    // An untrusted workspace's hooks are not read: the lock would be written with none of
    // them, wiping the pins the repository ships (red team, stop 37), and the registries
    // they name are not to be contacted on a repository's word.
    if host
        .policy()
        .workspace_trust
        .as_ref()
        .is_some_and(|t| !t.is_trusted())
    {
        return Err(format!(
            "`{}` is not trusted, so its hooks are not read and `{LOCK_FILE}` is left as              it is; review and run `hookhost trust` first",
            escape(&project.display().to_string())
        ));
    }
    let store = store()?;
    let mut plugins = Vec::new();
    for (name, (reference, _)) in references(host.policy()) {
        let digest = match &reference.digest {
            Some(digest) => digest.clone(),
            None => super::one_shot(store.resolve(&reference))??
                .ok_or_else(|| format!("the registry has no tag `{}`", escape(&name)))?,
        };
        plugins.push(
            json!({"reference": format!("oci://{name}"), "digest": format!("sha256:{digest}")}),
        );
    }
    let text = serde_json::to_string_pretty(&json!({"version": 1, "plugins": plugins}))
        .map_err(|e| e.to_string())?;
    let path = project.join(LOCK_FILE);
    // Through a new file and a rename: a `hookhost.lock` the repository ships as a
    // symlink is replaced, never written through.
    let written = tempfile::NamedTempFile::new_in(&project).and_then(|mut tmp| {
        use std::io::Write;
        tmp.write_all(format!("{text}\n").as_bytes())?;
        tmp.persist(&path).map(drop).map_err(|e| e.error)
    });
    written.map_err(|e| {
        format!(
            "cannot write `{}`: {e}",
            escape(&path.display().to_string())
        )
    })?;
    outln!(
        "wrote {} ({} plugins)",
        escape(&path.display().to_string()),
        plugins.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The pins of `hookhost.lock` in `project`, read as dispatch reads them
/// (`config::lock`, `policy::oci::Pins`); `None` when there is none.
fn read_lock(project: &Path) -> Option<Pins> {
    hookhost::config::lock::read(project).map(|(raw, _)| Pins::from_raw(&raw))
}

/// `validate`'s check of `hookhost.lock` (when the project has one): every `oci://`
/// plugin is in it, a pinned digest agrees with it, and a tag still names the digest it
/// was locked to in its registry (a registry that cannot be asked is a warning). Errors
/// and warnings name the file, hook and field.
pub fn check_lock(project: &Path, policy: &Policy) -> (Vec<String>, Vec<String>) {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let Some(pins) = read_lock(project) else {
        return (errors, warnings);
    };
    if let Err(e) = pins.check() {
        return (vec![e], warnings);
    }
    // An untrusted repository does not get to make hookhost contact the registries it
    // names: its tags are checked once the workspace is trusted.
    let trusted = policy
        .workspace_trust
        .as_ref()
        .is_none_or(|t| t.is_trusted());
    let store = match store() {
        Ok(store) => store,
        Err(e) => return (vec![e], warnings),
    };
    for (name, (reference, hook)) in references(policy) {
        let at = format!(
            "{}: {}.plugin: hook `{}`",
            hook.origin.location, hook.config_path, hook.id
        );
        let Ok(Some(locked)) = pins.get(&name) else {
            errors.push(format!(
                "{at}: `{reference}` is not in {LOCK_FILE} (run `hookhost plugin lock`)"
            ));
            continue;
        };
        if let Some(pinned) = &reference.digest
            && pinned.as_str() != locked
        {
            errors.push(format!(
                "{at}: `{reference}` pins sha256:{pinned}, but {LOCK_FILE} pins sha256:{locked}"
            ));
        }
        if reference.tag.is_none() {
            continue;
        }
        if !trusted {
            warnings.push(format!(
                "{at}: the tag of `oci://{name}` was not checked against its registry: the \
                 workspace is not trusted"
            ));
            continue;
        }
        match super::one_shot(store.resolve(&reference.clone())) {
            Ok(Ok(Some(now))) if now != locked => errors.push(format!(
                "{at}: the tag of `oci://{name}` moved after locking: {LOCK_FILE} pins \
                 sha256:{locked}, the registry now names sha256:{now}"
            )),
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => errors.push(format!(
                "{at}: the registry has no tag `oci://{name}` any more ({LOCK_FILE} pins sha256:{locked})"
            )),
            Ok(Err(e)) | Err(e) => warnings.push(format!(
                "{at}: cannot check the tag of `oci://{name}` against {LOCK_FILE}: {e}"
            )),
        }
    }
    (errors, warnings)
}
