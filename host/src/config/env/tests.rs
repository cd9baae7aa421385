use super::*;

#[test]
fn paths_must_be_absolute_and_outside_the_workspace() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let repo = base.join("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::os::unix::fs::symlink(repo.join("sub"), base.join("link")).unwrap();
    let ws = workspaces(&[&repo]);
    let ok = |v: &str| check_path(OsStr::new(v), &ws);
    assert!(ok(base.join("data").to_str().unwrap()).is_ok());
    assert!(ok(base.join("repository").to_str().unwrap()).is_ok());
    for refused in [
        "data".to_string(),
        "./data".to_string(),
        format!("{}/../repo/x", base.join("elsewhere").display()),
        repo.display().to_string(),
        repo.join("sub/x").display().to_string(),
        // A symlink outside that leads inside.
        base.join("link/x").display().to_string(),
    ] {
        assert!(ok(&refused).is_err(), "{refused} was accepted");
    }
    // Bytes that are not UTF-8 do not panic and are judged like any other.
    let odd = OsStr::from_bytes(b"/tmp/\xff\xfe");
    assert!(check_path(odd, &ws).is_ok());
    let odd_inside = [repo.as_os_str().as_bytes(), b"/\xff"].concat();
    assert!(check_path(OsStr::from_bytes(&odd_inside), &ws).is_err());
}

/// A path whose existing part cannot be resolved is refused, whatever the reason (it
/// might lead into the workspace); one that does not exist yet is judged by its parent.
#[test]
fn a_path_that_cannot_be_resolved_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let ws = workspaces(&[&base.join("repo")]);
    std::os::unix::fs::symlink(base.join("b"), base.join("a")).unwrap();
    std::os::unix::fs::symlink(base.join("a"), base.join("b")).unwrap();
    std::fs::write(base.join("file"), "").unwrap();
    let long_name = "n".repeat(300);
    for refused in [
        base.join("a/data"),             // a symlink loop
        base.join(&long_name).join("x"), // a name over NAME_MAX
    ] {
        let judged = check_path(refused.as_os_str(), &ws);
        assert!(
            judged.as_ref().is_err_and(|e| e.contains("cannot be told")),
            "{refused:?}: {judged:?}"
        );
    }
    // Absent (or under a file): judged by what exists above it, and accepted here.
    for absent in [base.join("none/data"), base.join("file/data")] {
        assert!(check_path(absent.as_os_str(), &ws).is_ok(), "{absent:?}");
    }
}

#[test]
fn the_root_and_the_home_directory_are_not_workspaces() {
    assert!(workspaces(&[Path::new("/")]).is_empty());
    if let Some(home) = password_home() {
        assert!(workspaces(&[&home]).is_empty());
        if let Some(parent) = home.parent() {
            assert!(workspaces(&[parent]).is_empty());
        }
    }
}

/// Every read of the process environment in `host/src`, found by grepping the code: each
/// must be in this file (`config/env.rs`), or in [`ALLOWED`] with its reason. A new read
/// anywhere else fails here the day it is added.
#[test]
fn every_read_of_the_environment_is_here() {
    // What reads the environment, directly or through a crate that does.
    const READS: &[&str] = &[
        "env::var",
        "var_os",
        "vars_os",
        "env::vars",
        "BaseDirs",
        "ProjectDirs",
        "UserDirs",
        "temp_dir",
        "env::home_dir",
        "dirs::",
        "directories::",
        "try_from_env",
        "from_env(\"",
        "from_default_env",
        "load_native_certs",
        "getenv",
        "option_env!",
        "Client::new()",
        "Client::default()",
    ];
    // Reads outside config/env.rs: (file, the line's text, why it is not a choice).
    const ALLOWED: &[(&str, &str, &str)] = &[];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut hits = Vec::new();
    for file in rust_files(&src) {
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative == "config/env.rs" || relative.starts_with("config/env/") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests (at the end of a file) may read what they like.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for line in code.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("//") {
                continue;
            }
            // Calls of this file's readers are the reads it wants.
            let elsewhere = trimmed
                .replace("config::env::", "")
                .replace("super::env::", "");
            if READS.iter().any(|read| elsewhere.contains(read)) {
                hits.push((relative.clone(), trimmed.to_string()));
            }
        }
    }
    let unexplained: Vec<_> = hits
        .iter()
        .filter(|(file, line)| {
            !ALLOWED
                .iter()
                .any(|(f, l, _)| f == file && line.contains(l))
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "reads of the environment outside config/env.rs (read through config::env, or \
         add them to ALLOWED with the reason): {unexplained:#?}"
    );
    for (file, line, _) in ALLOWED {
        assert!(
            hits.iter().any(|(f, l)| f == file && l.contains(line)),
            "ALLOWED names a read that is gone: {file}: {line}"
        );
    }
}

/// Every variable name the code names (a `HOOKHOST_*`, `XDG_*`, `SSL_*`, `CLAUDE_*`,
/// `CODEX_*` or `OTEL_*` literal, `TRACEPARENT`, `TRACESTATE`, and every literal handed
/// to a reader of this file) is declared in [`VARIABLES`], with the kind its reader
/// expects.
#[test]
fn every_variable_the_code_names_is_declared() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let named = regex::Regex::new(
        r#""((?:HOOKHOST|XDG|SSL|CLAUDE|CODEX|OTEL)_[A-Z0-9_]+|TRACE(?:PARENT|STATE))""#,
    )
    .unwrap();
    let read = regex::Regex::new(r#"env::(var|path_var|number|granted)\(\s*"([^"]+)""#).unwrap();
    let mut undeclared = Vec::new();
    for file in rust_files(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for name in named.captures_iter(code).map(|c| c[1].to_string()) {
            if declared(&name).is_none() {
                undeclared.push((file.display().to_string(), name));
            }
        }
        for c in read.captures_iter(code) {
            let expected = match &c[1] {
                "var" => &[Kind::Passthrough, Kind::Workspace][..],
                "path_var" => &[Kind::Path][..],
                "number" => &[Kind::Number][..],
                _ => continue,
            };
            if !declared(&c[2]).is_some_and(|v| expected.contains(&v.kind)) {
                undeclared.push((file.display().to_string(), c[2].to_string()));
            }
        }
    }
    assert!(
        undeclared.is_empty(),
        "not declared in config::env::VARIABLES (or with another kind): {undeclared:#?}"
    );
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out
}

/// The code-loading rule covers the named examples and whole classes (names no list
/// holds), and keeps ordinary variables.
#[test]
fn code_loading_variables_are_a_class() {
    for name in [
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_ls%%",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "PROMPT_COMMAND",
        "PS4",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "GIT_CONFIG_COUNT",
        "GIT_SSH_COMMAND",
        "NPM_CONFIG_SCRIPT_SHELL",
        "LUA_INIT",
        "DOTNET_STARTUP_HOOKS",
        "OPENSSL_CONF",
        "GLIBC_TUNABLES",
        "ZDOTDIR",
        "ld_preload",
        "Node_Options",
        "NEWLANG_OPTIONS",
        "FUTURELANG_PATH",
        "x-y",
        "",
        "f()",
        // Unnamed by the first list, each runs a command or loads a module.
        "LESSOPEN",
        "LESSCLOSE",
        "VIMINIT",
        "EXINIT",
        "MANPAGER",
        "PHPRC",
        "OPENSSL_ENGINES",
        "OPENSSL_MODULES",
        "GTK_MODULES",
        "KUBECONFIG",
        "AWS_CONFIG_FILE",
        "BROWSER",
    ] {
        assert!(is_code_loading(name.as_bytes()), "{name} passes");
    }
    for name in [
        "PATH",
        "HOME",
        "USER",
        "LANG",
        "TERM",
        "NODE_ENV",
        "HOOKHOST_LOG",
        "http_proxy",
        "AWS_PROFILE",
        "TZ",
    ] {
        assert!(!is_code_loading(name.as_bytes()), "{name} is dropped");
    }
    assert!(
        !is_code_loading(b"ODD\xffNAME"),
        "bytes that are not UTF-8 are not a class"
    );
}

/// Hostile values: not UTF-8, with newlines, huge: judged without panicking, and a
/// notice quotes at most 200 characters.
#[test]
fn hostile_values_are_judged_not_echoed_whole() {
    let huge = "/x".repeat(100_000);
    assert!(shown(OsStr::new(&huge)).chars().count() <= 201);
    assert!(check_path(OsStr::new("/tmp/a\nb"), &[]).is_err());
    assert!(check_path(OsStr::new(&huge), &[]).is_err());
    assert!(check_path(OsStr::new("a\n/tmp"), &[]).is_err());
    assert!(check_path(OsStr::from_bytes(b"\xff/x"), &[]).is_err());
}
