//! The published crates hold everything their build reads: each file an `include_str!`,
//! `include_bytes!` or `#[path]` names, and each WIT file a bindings macro's `path:`
//! names, lies inside the package and is in `cargo package --list` (CI also runs
//! `cargo publish --dry-run`; the build it would verify is not run there, see `.ci/run`).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// `cargo package --list` of the crate whose manifest is in `dir`.
fn package_list(dir: &Path) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "package",
            "--list",
            "--allow-dirty",
            "--offline",
            "--manifest-path",
        ])
        .arg(dir.join("Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo package --list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `path` with `.` and `..` taken away lexically (a symlink in the package is packaged as
/// the file it names, so it is not resolved); `None` when it leaves `root`.
fn inside(root: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = Vec::new();
    for part in relative.components() {
        match part {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn wit_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = dir.join(entry.file_name());
        if path.is_dir() {
            wit_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "wit") {
            out.push(path);
        }
    }
}

/// Every file the sources of the crate in `root` read at compile time, as a path
/// relative to `root`, or the reference that leaves the package.
fn compiled_files(root: &Path) -> Vec<Result<String, String>> {
    let include = regex::Regex::new(r#"include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)"#).unwrap();
    let path_attr = regex::Regex::new(r#"#\[path\s*=\s*"([^"]+)"\]"#).unwrap();
    let bindgen =
        regex::Regex::new(r#"(?s)(?:bindgen|generate)!\(\{[^}]*?path:\s*"([^"]+)""#).unwrap();
    let mut sources = Vec::new();
    rust_files(&root.join("src"), &mut sources);
    sources.push(root.join("build.rs"));
    let mut found = Vec::new();
    for file in sources.iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(file).unwrap();
        let here = file.parent().unwrap();
        let mut named: Vec<PathBuf> = include
            .captures_iter(&text)
            .chain(path_attr.captures_iter(&text))
            .map(|c| here.join(&c[1]))
            .collect();
        for c in bindgen.captures_iter(&text) {
            let dir = root.join(&c[1]);
            let mut wit = Vec::new();
            wit_files(&dir, &mut wit);
            assert!(!wit.is_empty(), "no WIT under {}", dir.display());
            named.extend(wit);
        }
        for path in named {
            assert!(
                path.is_file(),
                "{} names {}, which is not a file",
                file.display(),
                path.display()
            );
            found.push(inside(root, &path).ok_or_else(|| {
                format!(
                    "{} names {}, outside the package",
                    file.display(),
                    path.display()
                )
            }));
        }
    }
    found
}

fn check(crate_dir: &str, must: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir);
    let root = std::path::absolute(root).unwrap();
    let root = PathBuf::from(
        inside(Path::new("/"), &root)
            .map(|r| format!("/{r}"))
            .unwrap(),
    );
    let listed = package_list(&root);
    let compiled = compiled_files(&root);
    assert!(compiled.len() >= 2, "{compiled:?}");
    let mut missing = Vec::new();
    for file in compiled
        .iter()
        .map(|f| f.as_deref())
        .chain(must.iter().map(|m| Ok(*m)))
    {
        match file {
            Ok(file) if listed.contains(file) => {}
            Ok(file) => missing.push(format!("{file}: not in `cargo package --list`")),
            Err(outside) => missing.push(outside.to_string()),
        }
    }
    assert!(missing.is_empty(), "{crate_dir}: {missing:#?}");
}

#[test]
fn the_hookhost_package_holds_every_file_its_build_reads() {
    check(
        "host",
        &[
            "LICENSE",
            "README.md",
            "templates/rust/src/lib.rs",
            "wit/hook.wit",
        ],
    );
}

#[test]
fn the_guest_sdk_package_holds_every_file_its_build_reads() {
    check(
        "guest-sdk",
        &["LICENSE", "wit/hook.wit", "wit/v0.1.0/hook.wit"],
    );
}
