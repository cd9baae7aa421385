//! The example plugins the demo runs: their sources, carried in the binary so that a
//! `cargo install`ed `hookhost` runs the demo without a source tree, and building them
//! for wasm32-wasip2.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::super::scaffold;

/// A write failure as shown: the path (escaped) and the error.
pub(super) fn shown_error(path: &Path, e: std::io::Error) -> String {
    format!(
        "cannot write `{}`: {e}",
        hookhost::text::escape(&path.display().to_string())
    )
}

/// The example plugins the demo runs (package names in `plugins/`).
pub const PLUGINS: &[&str] = &[
    "deny-dangerous-bash",
    "protect-paths",
    "redact-secrets",
    "test-gate",
    "hostile",
];

/// The plugin sources the binary carries, as (path in the plugins workspace, text).
const PLUGIN_SOURCES: &[(&str, &str)] = &[
    (
        "deny-dangerous-bash/Cargo.toml",
        include_str!("../../../vendor/plugins/deny-dangerous-bash/Cargo.toml.in"),
    ),
    (
        "deny-dangerous-bash/src/lib.rs",
        include_str!("../../../vendor/plugins/deny-dangerous-bash/src/lib.rs"),
    ),
    (
        "deny-dangerous-bash/src/danger.rs",
        include_str!("../../../vendor/plugins/deny-dangerous-bash/src/danger.rs"),
    ),
    (
        "deny-dangerous-bash/cases.json",
        include_str!("../../../vendor/plugins/deny-dangerous-bash/cases.json"),
    ),
    (
        "protect-paths/Cargo.toml",
        include_str!("../../../vendor/plugins/protect-paths/Cargo.toml.in"),
    ),
    (
        "protect-paths/src/lib.rs",
        include_str!("../../../vendor/plugins/protect-paths/src/lib.rs"),
    ),
    (
        "redact-secrets/Cargo.toml",
        include_str!("../../../vendor/plugins/redact-secrets/Cargo.toml.in"),
    ),
    (
        "redact-secrets/src/lib.rs",
        include_str!("../../../vendor/plugins/redact-secrets/src/lib.rs"),
    ),
    (
        "test-gate/Cargo.toml",
        include_str!("../../../vendor/plugins/test-gate/Cargo.toml.in"),
    ),
    (
        "test-gate/src/lib.rs",
        include_str!("../../../vendor/plugins/test-gate/src/lib.rs"),
    ),
    (
        "hostile/Cargo.toml",
        include_str!("../../../vendor/plugins/hostile/Cargo.toml.in"),
    ),
    (
        "hostile/src/lib.rs",
        include_str!("../../../vendor/plugins/hostile/src/lib.rs"),
    ),
    (
        "Cargo.lock",
        include_str!("../../../vendor/plugins/Cargo.lock"),
    ),
];

/// The plugins workspace's manifest; its member list and SDK path are rewritten for the
/// embedded copy.
const PLUGINS_MANIFEST: &str = include_str!("../../../vendor/plugins/Cargo.toml.in");

/// The manifest of the embedded plugins workspace: the real one with only the demo's
/// plugins as members and the vendored guest SDK.
fn embedded_manifest() -> Result<String, String> {
    let start = PLUGINS_MANIFEST
        .find("members = [")
        .ok_or("the plugins manifest has no members list")?;
    let end = start
        + PLUGINS_MANIFEST[start..]
            .find(']')
            .ok_or("the plugins manifest's members list is not closed")?;
    let members: Vec<String> = PLUGINS.iter().map(|p| format!("{p:?}")).collect();
    let manifest = format!(
        "{}members = [{}{}",
        &PLUGINS_MANIFEST[..start],
        members.join(", "),
        &PLUGINS_MANIFEST[end..]
    );
    const SDK_PATH: &str = r#"hookhost-guest = { path = "../guest-sdk" }"#;
    if !manifest.contains(SDK_PATH) {
        return Err("the plugins manifest does not name ../guest-sdk".into());
    }
    Ok(manifest.replace(
        SDK_PATH,
        &format!(
            "hookhost-guest = {{ path = {:?} }}",
            scaffold::VENDORED_SDK_DIR
        ),
    ))
}

/// Writes the sources of the demo's plugins into `dir`: a cargo workspace with the
/// plugins and a copy of the guest SDK. Files whose content is already there are left
/// alone, so that cargo's next build is incremental. Returns the workspace manifest.
///
/// # Errors
///
/// A write failure, naming the path.
pub fn write_plugin_sources(dir: &Path) -> Result<PathBuf, String> {
    let sdk = scaffold::guest_sdk_files()
        .map(|(relative, text)| (format!("{}/{relative}", scaffold::VENDORED_SDK_DIR), text));
    let files = PLUGIN_SOURCES
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .chain(sdk)
        .chain([("Cargo.toml".to_string(), embedded_manifest()?)]);
    for (relative, text) in files {
        let path = dir.join(&relative);
        let old = hookhost::config::file::read_regular(&path, hookhost::config::file::CONFIG_CAP);
        if old.is_ok_and(|(old, _)| old == text.as_bytes()) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| shown_error(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| shown_error(&path, e))?;
    }
    Ok(dir.join("Cargo.toml"))
}

/// Whether cargo and the wasm32-wasip2 target are there to build plugins.
///
/// # Errors
///
/// What is missing and how to install it.
pub fn wasm_toolchain() -> Result<(), String> {
    let rustc = tool("RUSTC", "rustc");
    let libdir = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", "wasm32-wasip2"])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run rustc ({e}); install Rust from https://rustup.rs"))?;
    let dir = String::from_utf8_lossy(&libdir.stdout).trim().to_string();
    if !libdir.status.success() || dir.is_empty() || !Path::new(&dir).is_dir() {
        return Err(
            "the wasm32-wasip2 target is not installed (`rustup target add wasm32-wasip2`)".into(),
        );
    }
    let cargo = tool("CARGO", "cargo");
    Command::new(cargo)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run cargo ({e})"))
        .and_then(|s| {
            s.success()
                .then_some(())
                .ok_or_else(|| "`cargo --version` failed".to_string())
        })
}

/// Builds `packages` of the plugins workspace `manifest` into `target` (release,
/// wasm32-wasip2); returns the directory of the `.wasm` files.
///
/// # Errors
///
/// The manifest is not there, or cargo fails; the message ends with cargo's last lines.
pub fn build_plugins_into(
    manifest: &Path,
    target: &Path,
    packages: &[&str],
) -> Result<PathBuf, String> {
    if !manifest.is_file() {
        return Err(format!(
            "the example plugins' sources are not at {}",
            hookhost::text::escape(&manifest.display().to_string())
        ));
    }
    let cargo = tool("CARGO", "cargo");
    let mut build = Command::new(cargo);
    build
        .args([
            "build",
            "--quiet",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(manifest);
    for package in packages {
        build.args(["-p", package]);
    }
    let output = build
        .env("CARGO_TARGET_DIR", target)
        // Flags meant for the host build must not leak into the wasm build.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "building the plugins failed; is the target installed (`rustup target add \
             wasm32-wasip2`)? cargo said: {}",
            tail.join(" / ")
        ));
    }
    Ok(target.join("wasm32-wasip2").join("release"))
}

/// Builds the demo's plugins from the embedded sources under `build_dir` (sources in
/// `src/`, cargo's output in `target/`, kept for the next run), one package at a time,
/// calling `progress` before (`None`) and after (`Some(elapsed)`) each. Returns the
/// directory of the `.wasm` files.
///
/// # Errors
///
/// The sources cannot be written, or cargo fails.
pub fn build_embedded_plugins(
    build_dir: &Path,
    mut progress: impl FnMut(&str, Option<Duration>),
) -> Result<PathBuf, String> {
    let manifest = write_plugin_sources(&build_dir.join("src"))?;
    let target = build_dir.join("target");
    let mut out = target.join("wasm32-wasip2").join("release");
    for package in PLUGINS {
        progress(package, None);
        let started = Instant::now();
        out = build_plugins_into(&manifest, &target, &[package])?;
        progress(package, Some(started.elapsed()));
    }
    Ok(out)
}

/// `RUSTC` or `CARGO` when set to an acceptable path ([`hookhost::config::env::path_var`]:
/// absolute, not in the working directory), else `default` from the `PATH`.
fn tool(var: &str, default: &str) -> std::ffi::OsString {
    let workspaces = hookhost::config::env::workspaces_of(None);
    hookhost::config::env::path_var(var, &workspaces)
        .ok()
        .flatten()
        .map_or_else(|| default.into(), Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_workspace_has_the_demo_plugins_and_the_vendored_sdk() {
        let manifest = embedded_manifest().unwrap();
        for plugin in PLUGINS {
            assert!(manifest.contains(&format!("{plugin:?}")), "{manifest}");
        }
        assert!(!manifest.contains("wrong-version"), "{manifest}");
        assert!(
            manifest.contains(r#"hookhost-guest = { path = "hookhost-guest" }"#),
            "{manifest}"
        );
        for plugin in PLUGINS {
            assert!(
                PLUGIN_SOURCES
                    .iter()
                    .any(|(p, _)| *p == format!("{plugin}/src/lib.rs")),
                "{plugin}"
            );
        }
    }

    #[test]
    fn plugin_sources_are_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = write_plugin_sources(dir.path()).unwrap();
        let stamp = std::fs::metadata(&manifest).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        write_plugin_sources(dir.path()).unwrap();
        assert_eq!(
            std::fs::metadata(&manifest).unwrap().modified().unwrap(),
            stamp
        );
        assert!(dir.path().join("hookhost-guest/wit/hook.wit").is_file());
    }
}
