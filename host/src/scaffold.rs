//! `hookhost plugin new`: scaffolds a plugin in Rust, Python or JavaScript from templates
//! embedded in the binary. Each scaffold builds to a `hookhost:hook@0.1.0` component and
//! carries a unit test of its rules that passes out of the box.

use std::path::{Path, PathBuf};

/// The WIT world every plugin implements, copied into Python and JS scaffolds (their
/// toolchains read it at build time).
pub const WIT: &str = include_str!("../../wit/hook.wit");

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
                    include_str!("../templates/rust/Cargo.toml"),
                    false,
                ),
                (
                    "src/lib.rs",
                    include_str!("../templates/rust/src/lib.rs"),
                    false,
                ),
                (
                    "README.md",
                    include_str!("../templates/rust/README.md"),
                    false,
                ),
                (".gitignore", "/target\n", false),
            ],
            Lang::Python => &[
                ("app.py", include_str!("../templates/python/app.py"), false),
                (
                    "rules.py",
                    include_str!("../templates/python/rules.py"),
                    false,
                ),
                (
                    "test_rules.py",
                    include_str!("../templates/python/test_rules.py"),
                    false,
                ),
                (
                    "build.sh",
                    include_str!("../templates/python/build.sh"),
                    true,
                ),
                (
                    "README.md",
                    include_str!("../templates/python/README.md"),
                    false,
                ),
                ("wit/hook.wit", WIT, false),
                (".gitignore", "*.wasm\n__pycache__\n", false),
            ],
            Lang::Js => &[
                ("app.js", include_str!("../templates/js/app.js"), false),
                (
                    "rules.mjs",
                    include_str!("../templates/js/rules.mjs"),
                    false,
                ),
                (
                    "rules.test.mjs",
                    include_str!("../templates/js/rules.test.mjs"),
                    false,
                ),
                (
                    "build.mjs",
                    include_str!("../templates/js/build.mjs"),
                    false,
                ),
                (
                    "package.json",
                    include_str!("../templates/js/package.json"),
                    false,
                ),
                (
                    "README.md",
                    include_str!("../templates/js/README.md"),
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
    /// Rust only: the `guest-sdk` directory the crate depends on by path. `None` uses
    /// the SDK of the source tree this binary was built from when it still exists.
    pub sdk: Option<PathBuf>,
}

/// The `guest-sdk` of the source tree this binary was built from, if it is still there.
pub fn bundled_sdk() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    dir.join("Cargo.toml")
        .is_file()
        .then(|| dir.canonicalize().unwrap_or(dir))
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
    let sdk_dependency = match spec.lang {
        Lang::Rust => {
            let sdk = spec.sdk.clone().or_else(bundled_sdk).ok_or_else(|| {
                "no hookhost guest SDK found: pass `--sdk PATH` to a `guest-sdk` directory of \
                 a hookhost checkout"
                    .to_string()
            })?;
            if !sdk.join("Cargo.toml").is_file() {
                return Err(format!(
                    "`{}` is not the guest SDK: it has no Cargo.toml",
                    sdk.display()
                ));
            }
            let sdk = std::path::absolute(&sdk).unwrap_or(sdk);
            format!(
                "hookhost-guest = {{ path = {:?} }}",
                sdk.display().to_string()
            )
        }
        _ => String::new(),
    };
    let wasm_name = spec.name.replace('-', "_");
    let mut written = Vec::new();
    for (relative, template, executable) in spec.lang.files() {
        let text = template
            .replace("{{name}}", &spec.name)
            .replace("{{wasm_name}}", &wasm_name)
            .replace("{{sdk_dependency}}", &sdk_dependency);
        let path = spec.dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create `{}`: {e}", parent.display()))?;
        }
        std::fs::write(&path, text)
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("cannot make `{}` executable: {e}", path.display()))?;
        }
        written.push(PathBuf::from(relative));
    }
    Ok(written)
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
}
