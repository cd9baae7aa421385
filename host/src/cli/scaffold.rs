//! `hookhost plugin new`: scaffolds a plugin in Rust, Python or JavaScript from templates
//! embedded in the binary. Each scaffold builds to a `hookhost:hook@0.2.0` component and
//! carries a unit test of its rules that passes out of the box.
//!
//! Nothing here depends on where the binary was built: a `cargo install`ed `hookhost`
//! has no source tree beside it. A Rust scaffold therefore gets a copy of the guest SDK
//! the binary carries (`hookhost-guest/`, with its WIT), unless `--sdk` names another.

use std::path::{Path, PathBuf};

/// The WIT world every plugin implements, copied into Python and JS scaffolds (their
/// toolchains read it at build time) and into the vendored guest SDK.
pub const WIT: &str = include_str!("../../wit/hook.wit");

/// The guest SDK's source, vendored into Rust scaffolds.
pub const GUEST_SDK_LIB: &str = include_str!("../../vendor/guest-sdk/src/lib.rs");

/// The vendored guest SDK's manifest: standalone (no workspace inheritance).
const GUEST_SDK_MANIFEST: &str = include_str!("../../templates/rust/hookhost-guest/Cargo.toml.in");

/// The directory of the vendored guest SDK in a Rust scaffold.
pub const VENDORED_SDK_DIR: &str = "hookhost-guest";

/// The files of a standalone copy of the guest SDK, as (relative path, text).
pub fn guest_sdk_files() -> [(&'static str, String); 3] {
    [
        (
            "Cargo.toml",
            GUEST_SDK_MANIFEST.replace("{{sdk_version}}", env!("CARGO_PKG_VERSION")),
        ),
        ("src/lib.rs", GUEST_SDK_LIB.to_string()),
        ("wit/hook.wit", WIT.to_string()),
    ]
}

/// Writes a standalone copy of the guest SDK into `dir` (created).
///
/// # Errors
///
/// A write failure, naming the path.
pub fn write_guest_sdk(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for (relative, text) in guest_sdk_files() {
        let path = dir.join(relative);
        write_file(&path, &text)?;
        written.push(path);
    }
    Ok(written)
}

/// Writes `text` to `path`, creating its directory.
fn write_file(path: &Path, text: &str) -> Result<(), String> {
    let shown = |p: &Path| hookhost::text::escape(&p.display().to_string()).into_owned();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create `{}`: {e}", shown(parent)))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write `{}`: {e}", shown(path)))
}

/// A plugin language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust with the `hookhost-guest` SDK, built with `cargo --target wasm32-wasip2`.
    Rust,
    /// Python, built with componentize-py.
    Python,
    /// JavaScript, built with componentize-js.
    Js,
}

impl Lang {
    /// Parses `rust`, `python` / `py`, `js` / `javascript`.
    pub fn parse(name: &str) -> Option<Lang> {
        match name {
            "rust" | "rs" => Some(Lang::Rust),
            "python" | "py" => Some(Lang::Python),
            "js" | "javascript" => Some(Lang::Js),
            _ => None,
        }
    }

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    /// (relative path, template text, executable) of the scaffold's files.
    fn files(self) -> &'static [(&'static str, &'static str, bool)] {
        match self {
            Lang::Rust => &[
                (
                    "Cargo.toml",
                    include_str!("../../templates/rust/Cargo.toml.in"),
                    false,
                ),
                (
                    "src/lib.rs",
                    include_str!("../../templates/rust/src/lib.rs"),
                    false,
                ),
                (
                    "README.md",
                    include_str!("../../templates/rust/README.md"),
                    false,
                ),
                (".gitignore", "/target\n", false),
            ],
            Lang::Python => &[
                (
                    "app.py",
                    include_str!("../../templates/python/app.py"),
                    false,
                ),
                (
                    "rules.py",
                    include_str!("../../templates/python/rules.py"),
                    false,
                ),
                (
                    "test_rules.py",
                    include_str!("../../templates/python/test_rules.py"),
                    false,
                ),
                (
                    "build.sh",
                    include_str!("../../templates/python/build.sh"),
                    true,
                ),
                (
                    "README.md",
                    include_str!("../../templates/python/README.md"),
                    false,
                ),
                ("wit/hook.wit", WIT, false),
                (".gitignore", "*.wasm\n__pycache__\n", false),
            ],
            Lang::Js => &[
                ("app.js", include_str!("../../templates/js/app.js"), false),
                (
                    "rules.mjs",
                    include_str!("../../templates/js/rules.mjs"),
                    false,
                ),
                (
                    "rules.test.mjs",
                    include_str!("../../templates/js/rules.test.mjs"),
                    false,
                ),
                (
                    "build.mjs",
                    include_str!("../../templates/js/build.mjs"),
                    false,
                ),
                (
                    "package.json",
                    include_str!("../../templates/js/package.json"),
                    false,
                ),
                (
                    "README.md",
                    include_str!("../../templates/js/README.md"),
                    false,
                ),
                ("wit/hook.wit", WIT, false),
                (".gitignore", "*.wasm\nnode_modules\n", false),
            ],
        }
    }
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct NewPlugin {
    /// The language.
    pub lang: Lang,
    /// The plugin name: lowercase letters, digits and `-`, starting with a letter.
    pub name: String,
    /// The directory to create (must not exist or be empty).
    pub dir: PathBuf,
    /// Rust only: a `guest-sdk` directory the crate depends on by path. `None` writes a
    /// copy of the SDK this binary carries into the scaffold's `hookhost-guest/`, so the
    /// plugin builds anywhere.
    pub sdk: Option<PathBuf>,
}

/// Checks a plugin name.
///
/// # Errors
///
/// A message naming the name and the rule it breaks.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad plugin name `{name}`: use lowercase letters, digits and `-`, starting with a \
             letter (e.g. `no-force-push`)"
        ))
    }
}

/// Writes the scaffold and returns the files written (relative to `dir`).
///
/// # Errors
///
/// A bad name, a `dir` that exists and is not empty, a Rust scaffold without a
/// `guest-sdk` to depend on, or a write failure, each naming the path.
pub fn new_plugin(spec: &NewPlugin) -> Result<Vec<PathBuf>, String> {
    check_name(&spec.name)?;
    if let Ok(mut entries) = std::fs::read_dir(&spec.dir)
        && entries.next().is_some()
    {
        return Err(format!(
            "`{}` exists and is not empty; pick a new directory",
            spec.dir.display()
        ));
    }
    let mut written = Vec::new();
    let sdk_dependency = match (spec.lang, &spec.sdk) {
        (Lang::Rust, Some(sdk)) => {
            if !sdk.join("Cargo.toml").is_file() {
                return Err(format!(
                    "`{}` is not the guest SDK: it has no Cargo.toml",
                    hookhost::text::escape(&sdk.display().to_string())
                ));
            }
            let sdk = std::path::absolute(sdk).unwrap_or(sdk.clone());
            let sdk = sdk.to_str().ok_or("the `--sdk` path is not UTF-8")?;
            format!("hookhost-guest = {{ path = {} }}", toml_string(sdk))
        }
        (Lang::Rust, None) => {
            for path in write_guest_sdk(&spec.dir.join(VENDORED_SDK_DIR))? {
                written.push(path.strip_prefix(&spec.dir).unwrap_or(&path).to_path_buf());
            }
            format!("hookhost-guest = {{ path = {VENDORED_SDK_DIR:?} }}")
        }
        _ => String::new(),
    };
    let wasm_name = spec.name.replace('-', "_");
    for (relative, template, executable) in spec.lang.files() {
        let text = template
            .replace("{{name}}", &spec.name)
            .replace("{{wasm_name}}", &wasm_name)
            .replace("{{sdk_dependency}}", &sdk_dependency);
        let path = spec.dir.join(relative);
        write_file(&path, &text)?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("cannot make `{}` executable: {e}", path.display()))?;
        }
        written.push(PathBuf::from(relative));
    }
    Ok(written)
}

/// `text` as a TOML basic string (quotes, backslashes and controls escaped).
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What to run next in a fresh scaffold, for the CLI to print.
pub fn next_steps(lang: Lang, name: &str) -> String {
    let wasm = name.replace('-', "_");
    match lang {
        Lang::Rust => format!(
            "cargo test && cargo build --release --target wasm32-wasip2\n\
             # plugin: target/wasm32-wasip2/release/{wasm}.wasm"
        ),
        Lang::Python => format!(
            "python3 -m unittest && pip install componentize-py==0.25.1 && ./build.sh\n\
             # plugin: {wasm}.wasm (give it \"limits\": {{\"memoryMb\": 128}})"
        ),
        Lang::Js => format!(
            "npm install && npm test && npm run build\n\
             # plugin: {wasm}.wasm (give it \"limits\": {{\"memoryMb\": 128}})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("no-force-push").is_ok());
        for bad in ["", "Caps", "1st", "has space", "trailing-", "under_score"] {
            let e = check_name(bad).expect_err(bad);
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn scaffolds_fill_every_placeholder() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let dir = tempfile::tempdir().unwrap();
            let spec = NewPlugin {
                lang,
                name: "my-hook".into(),
                dir: dir.path().join("p"),
                sdk: None,
            };
            let files = new_plugin(&spec).unwrap();
            for file in files {
                let text = std::fs::read_to_string(spec.dir.join(&file)).unwrap();
                assert!(!text.contains("{{"), "{lang:?} {}: {text}", file.display());
            }
            let e = new_plugin(&spec).expect_err("second scaffold into the same dir");
            assert!(e.contains("is not empty"), "{e}");
        }
    }

    #[test]
    fn a_rust_scaffold_carries_the_guest_sdk() {
        let dir = tempfile::tempdir().unwrap();
        let spec = NewPlugin {
            lang: Lang::Rust,
            name: "my-hook".into(),
            dir: dir.path().join("p"),
            sdk: None,
        };
        let files = new_plugin(&spec).unwrap();
        for file in [
            "hookhost-guest/Cargo.toml",
            "hookhost-guest/src/lib.rs",
            "hookhost-guest/wit/hook.wit",
        ] {
            assert!(files.contains(&PathBuf::from(file)), "{file} in {files:?}");
        }
        let manifest = std::fs::read_to_string(spec.dir.join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("hookhost-guest = { path = \"hookhost-guest\" }"),
            "{manifest}"
        );
        assert_eq!(
            std::fs::read_to_string(spec.dir.join("hookhost-guest/src/lib.rs")).unwrap(),
            GUEST_SDK_LIB
        );
    }

    /// The vendored manifest lists the dependencies and features of `guest-sdk/Cargo.toml`,
    /// at the versions of the workspace (it cannot inherit them).
    #[test]
    fn the_vendored_sdk_manifest_matches_the_real_one() {
        let real = include_str!("../../vendor/guest-sdk/Cargo.toml.in");
        let workspace = include_str!("../../vendor/Cargo.toml.in");
        let vendored = guest_sdk_files()[0].1.clone();
        let section = |text: &str, name: &str| -> Vec<String> {
            text.split(&format!("[{name}]\n"))
                .nth(1)
                .unwrap_or("")
                .lines()
                .take_while(|l| !l.starts_with('['))
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .map(String::from)
                .collect()
        };
        let names = |lines: Vec<String>| -> Vec<String> {
            lines
                .iter()
                .map(|l| l.split('=').next().unwrap().trim().to_string())
                .collect()
        };
        assert_eq!(
            names(section(real, "dependencies")),
            names(section(&vendored, "dependencies"))
        );
        assert_eq!(section(real, "features"), section(&vendored, "features"));
        for line in section(&vendored, "dependencies") {
            let name = line.split('=').next().unwrap().trim();
            let version = line.split('"').nth(1).unwrap();
            let pinned = workspace
                .lines()
                .find(|l| l.starts_with(&format!("{name} =")))
                .unwrap_or_else(|| panic!("{name} is not a workspace dependency"));
            assert!(
                pinned.contains(&format!("\"{version}")),
                "{name}: vendored {version}, workspace {pinned}"
            );
        }
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string(r#"/a "b"\c"#), r#""/a \"b\"\\c""#);
        assert_eq!(toml_string("/a\nb"), r#""/a\u000Ab""#);
    }
}
