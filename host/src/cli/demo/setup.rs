//! Setting up a demo directory: the configs and scripts written into it, the built
//! plugins copied in, the managed allowlist, and the plugins compiled before the session.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use hookhost::config::SourceOptions;
use hookhost::handlers::wasm::{CacheStatus, WasmRuntime};
use hookhost::session::DiskStore;
use hookhost::trust::{TrustStore, WorkspaceTrust, canonical_workspace};
use hookhost::{EventCatalogue, Host, HostBuilder};

use super::plugins::{PLUGINS, shown_error};

/// A plugin file, through the one reader ([`hookhost::config::file::read_regular`]).
fn read_plugin(path: &Path) -> Result<Vec<u8>, String> {
    use hookhost::config::file::{PLUGIN_CAP, read_regular};
    read_regular(path, PLUGIN_CAP)
        .map(|(bytes, _)| bytes)
        .map_err(|e| {
            let shown = hookhost::text::escape(&path.display().to_string()).into_owned();
            format!("cannot read `{shown}`: {e}")
        })
}

/// The repository's hooks with the example wasm plugins (`${PLUGINS}`: their directory,
/// `${SECRET}`: a file outside the workspace).
const PLUGIN_CONFIG: &str = include_str!("project-hooks.json");
/// The repository's hooks with command hooks only, for machines that cannot build the
/// plugins.
const COMMAND_CONFIG: &str = include_str!("hooks.json");
/// The user's own hooks (they run whether the workspace is trusted or not).
const USER_CONFIG: &str = include_str!("user-hooks.json");
/// The command hooks' scripts, written into the project's `.demo/`.
const SCRIPTS: &[(&str, &str)] = &[
    ("session-start.sh", include_str!("session-start.sh")),
    ("guard-bash.sh", include_str!("guard-bash.sh")),
    ("npm-to-pnpm.sh", include_str!("npm-to-pnpm.sh")),
    ("redact.sh", include_str!("redact.sh")),
    ("test-gate.sh", include_str!("test-gate.sh")),
];

/// The `$schema` line of the embedded configs: relative to the source tree, so it goes
/// when they are written into a demo directory.
const SCHEMA_LINE: &str = "  \"$schema\": \"../../../../docs/hookhost.schema.json\",\n";

/// An embedded config as written into a demo directory.
fn config(text: &str) -> String {
    text.replace(SCHEMA_LINE, "")
}

/// The session id of the demo's events (its state is cleared before each run).
pub const SESSION: &str = "demo-session";

/// The directories of a demo, all under one root.
#[derive(Debug, Clone)]
pub struct DemoDirs {
    /// The root (kept after the demo, for the user to edit and re-run).
    pub root: PathBuf,
    /// The repository: `.hookhost/hooks.json` and the command hooks' scripts.
    pub project: PathBuf,
    /// The user config directory (`HOOKHOST_HOME`): `hooks.json`.
    pub home: PathBuf,
    /// The managed policy directory (`HOOKHOST_MANAGED_DIR`): `managed.json`.
    pub managed: PathBuf,
    /// The data directory (`HOOKHOST_DATA_DIR`): trust store, audit log, sessions.
    pub data: PathBuf,
    /// The compile cache.
    pub cache: PathBuf,
    /// The plugins the hooks reference, when the session runs wasm plugins.
    pub plugins: Option<PathBuf>,
    /// A file outside the workspace that a plugin tries to read.
    pub secret: PathBuf,
    /// Settings of this run only, as `--settings` JSON (the stand-in judge's port, the
    /// time server's program: [`super::peers::run_settings`]).
    pub settings: Vec<String>,
}

impl DemoDirs {
    /// The directories under `root`.
    pub fn new(root: &Path) -> DemoDirs {
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        DemoDirs {
            project: root.join("project"),
            home: root.join("home"),
            managed: root.join("managed"),
            data: root.join("data"),
            cache: root.join("cache"),
            plugins: None,
            secret: root.join("home").join(".ssh").join("id_ed25519"),
            settings: Vec::new(),
            root,
        }
    }

    /// The trust store.
    pub fn trust_store(&self) -> PathBuf {
        TrustStore::in_data_dir(&self.data).path().to_path_buf()
    }

    /// The audit log.
    pub fn audit_log(&self) -> PathBuf {
        self.data.join("audit.jsonl")
    }

    /// The repository's hook file.
    pub fn project_hooks(&self) -> PathBuf {
        self.project.join(".hookhost").join("hooks.json")
    }

    /// The managed policy file.
    pub fn managed_policy(&self) -> PathBuf {
        self.managed.join("managed.json")
    }

    /// The sources of the demo's host: its own managed, user and project files.
    fn sources(&self) -> SourceOptions {
        SourceOptions {
            managed_dir: Some(self.managed.clone()),
            settings: Vec::new(),
            project_dir: self.project.clone(),
            user_dir: Some(self.home.clone()),
            env_notices: Vec::new(),
            home_dir: hookhost::config::env::home_dir(),
        }
    }

    /// A host over the demo's files, judging trust by the demo's trust store.
    pub fn host(&self, runtime: Arc<WasmRuntime>) -> Host {
        let sessions = self.data.join("sessions");
        let mut builder = HostBuilder::new(&self.project);
        for settings in &self.settings {
            builder = builder.settings(settings.clone());
        }
        builder
            .managed_dir(&self.managed)
            .user_dir(&self.home)
            .workspace_trust(WorkspaceTrust::Store(self.trust_store()))
            .audit_log(self.audit_log())
            .audit_key_file(self.data.join("audit.key"))
            .session_store(Arc::new(DiskStore::new(&sessions)))
            .session_files(sessions)
            .wasm_runner(runtime)
            .build()
    }

    /// Trusts the project as `hookhost trust` does, in the demo's trust store; returns
    /// the files trusted (those that exist).
    ///
    /// # Errors
    ///
    /// The store cannot be written.
    pub fn trust(&self) -> Result<Vec<String>, String> {
        let sources = self.sources();
        let catalogue = EventCatalogue::default();
        let loaded = hookhost::config::load(&sources, &catalogue);
        let request = hookhost::trust::request(&loaded, &sources, &WorkspaceTrust::Explicit);
        let files: Vec<String> = request
            .fingerprint
            .iter()
            .filter(|(_, state)| state.sha256.is_some())
            .map(|(file, _)| file.clone())
            .collect();
        TrustStore::new(self.trust_store())
            .trust(&canonical_workspace(&self.project), request.fingerprint)?;
        Ok(files)
    }
}

/// Sets up the demo under `dirs.root`: the files that are missing are written (a file
/// that is there, edited by the user since an earlier run, is kept), with the plugins
/// of `built` (a directory of `.wasm` files) copied into `root/plugins/` — then the
/// session runs wasm plugins — or command hooks only when `built` is `None`.
///
/// # Errors
///
/// A directory or file cannot be written, or a plugin is missing from `built`.
pub fn prepare(dirs: &mut DemoDirs, built: Option<&Path>) -> Result<(), String> {
    let write_new = |path: &Path, text: &str| -> Result<(), String> {
        if path.exists() {
            return Ok(());
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| shown_error(parent, e))?;
        }
        std::fs::write(path, text).map_err(|e| shown_error(path, e))
    };
    for dir in [&dirs.project, &dirs.home, &dirs.managed, &dirs.data] {
        std::fs::create_dir_all(dir).map_err(|e| shown_error(dir, e))?;
    }
    for (name, body) in SCRIPTS {
        write_new(&dirs.project.join(".demo").join(name), body)?;
    }
    write_new(&dirs.home.join("hooks.json"), &config(USER_CONFIG))?;
    write_new(
        &dirs.secret,
        "-----BEGIN OPENSSH PRIVATE KEY-----\n(a stand-in for your real key)\n",
    )?;
    // A fresh session: the Stop gate's "tests passed" markers of an earlier run go.
    for marker in [
        dirs.project.join(".hookhost").join("tests-passed"),
        dirs.project.join(".tests-passed"),
    ] {
        let _ = std::fs::remove_file(marker);
    }
    let _ = std::fs::remove_dir_all(dirs.data.join("sessions").join(SESSION));
    let Some(built) = built else {
        dirs.plugins = None;
        return write_new(&dirs.project_hooks(), &config(COMMAND_CONFIG));
    };
    let plugins = dirs.root.join("plugins");
    std::fs::create_dir_all(&plugins).map_err(|e| shown_error(&plugins, e))?;
    let mut allowlist = Vec::new();
    for package in PLUGINS {
        let file = format!("{}.wasm", package.replace('-', "_"));
        let to = plugins.join(&file);
        if !to.exists() {
            std::fs::copy(built.join(&file), &to).map_err(|e| {
                format!(
                    "cannot copy the plugin `{file}` from {}: {e}",
                    hookhost::text::escape(&built.display().to_string())
                )
            })?;
        }
        let bytes = read_plugin(&to)?;
        allowlist.push(json!({
            "sha256": hookhost::handlers::wasm::sha256_hex(&bytes),
            "name": format!("{package} (an example plugin the security team reviewed)"),
        }));
    }
    // The same code as `hostile.wasm` in another build: a custom section at the end
    // changes its digest, not what it does. Managed policy has not reviewed it.
    let unvetted = plugins.join("unvetted.wasm");
    if !unvetted.exists() {
        let mut bytes = read_plugin(&plugins.join("hostile.wasm"))?;
        bytes.extend(custom_section("downloaded-from", b"a gist somebody linked"));
        std::fs::write(&unvetted, bytes).map_err(|e| shown_error(&unvetted, e))?;
    }
    let managed = json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": allowlist,
    });
    write_new(
        &dirs.managed_policy(),
        &(serde_json::to_string_pretty(&managed).map_err(|e| e.to_string())? + "\n"),
    )?;
    let project_hooks = config(PLUGIN_CONFIG)
        .replace("${PLUGINS}", &json_inner(&plugins.display().to_string()))
        .replace("${SECRET}", &json_inner(&dirs.secret.display().to_string()));
    write_new(&dirs.project_hooks(), &project_hooks)?;
    dirs.plugins = Some(plugins);
    Ok(())
}

/// `text` escaped for the inside of a JSON string.
fn json_inner(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// A wasm custom section (id 0) named `name` holding `payload`.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut content = Vec::new();
    leb128(name.len(), &mut content);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    let mut section = vec![0];
    leb128(content.len(), &mut section);
    section.extend(content);
    section
}

/// Compiles (or loads from the demo's compile cache) every plugin of the session
/// before it starts, so that the times it shows are per-event times; calls `progress`
/// with each plugin file, the time it took and whether it came from the cache.
///
/// # Errors
///
/// A plugin that does not load, with the sandbox's message.
pub fn precompile(
    dirs: &DemoDirs,
    runtime: &WasmRuntime,
    mut progress: impl FnMut(&str, Duration, bool),
) -> Result<(), String> {
    let Some(plugins) = &dirs.plugins else {
        return Ok(());
    };
    for package in PLUGINS {
        let file = format!("{}.wasm", package.replace('-', "_"));
        let started = Instant::now();
        let (_, status) = runtime.inspect(&plugins.join(&file))?;
        progress(&file, started.elapsed(), matches!(status, CacheStatus::Hit));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_configs_lose_the_source_trees_schema_path() {
        for text in [PLUGIN_CONFIG, COMMAND_CONFIG, USER_CONFIG] {
            assert!(text.contains(SCHEMA_LINE), "{text}");
            assert!(!config(text).contains("$schema"), "{text}");
        }
    }

    #[test]
    fn custom_sections_are_well_formed() {
        assert_eq!(
            custom_section("ab", b"xyz"),
            [0, 6, 2, b'a', b'b', b'x', b'y', b'z']
        );
        let long = custom_section("n", &[7; 200]);
        assert_eq!(&long[..3], &[0, 0xca, 0x01]); // 202 as LEB128
    }
}
