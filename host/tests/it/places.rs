//! Host-owned places are out of every grant (`hookhost::host_owned_places`, checked by
//! `policy::places::refuse` at build and by the sandbox's `PlaceGuard` at use). The test
//! generates the class from the function itself: for every place it lists, grants equal
//! to it, to each of its parents up to `/`, and inside it, read-only and read-write, as
//! an absolute path, through `${home}` and `${workspace}` where they reach it, and through
//! a symlink; every one that the place's guard covers is refused at build and, where the
//! directory exists, at use — each naming the grant and the place.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookhost::config::SourceOptions;
use hookhost::event::Invocation;
use hookhost::handlers::Verdict;
use hookhost::handlers::wasm::PluginCall;
use hookhost::policy::places::HostPlace;
use hookhost::{EventCatalogue, HostFiles, host_owned_places};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::runtime;

/// One generated grant: the path as written, the place it must be refused for, and
/// the directory it names (for the check at use).
struct Case {
    grant: String,
    write: bool,
    place: HostPlace,
    dir: PathBuf,
}

/// Grants over `place`: equal, each parent up to `/`, inside; each as written, through
/// `${home}`/`${workspace}` when under them, and through a symlink in `links`.
fn grants_over(
    place: &HostPlace,
    home: &Path,
    project: &Path,
    links: &Path,
    n: &mut usize,
) -> Vec<(String, PathBuf)> {
    let mut dirs: Vec<PathBuf> = place.path.ancestors().map(Path::to_path_buf).collect();
    dirs.push(place.path.join("inside"));
    let mut out = Vec::new();
    for dir in dirs {
        out.push((dir.display().to_string(), dir.clone()));
        for (var, base) in [("${home}", home), ("${workspace}", project)] {
            if let Ok(rest) = dir.strip_prefix(base) {
                let written = if rest.as_os_str().is_empty() {
                    var.to_string()
                } else {
                    format!("{var}/{}", rest.display())
                };
                out.push((written, dir.clone()));
            }
        }
        if dir.is_dir() {
            *n += 1;
            let link = links.join(format!("link{n}"));
            std::os::unix::fs::symlink(&dir, &link).unwrap();
            out.push((link.display().to_string(), dir.clone()));
        }
    }
    out
}

/// A layout where every place is under a temporary root (the ones the function takes
/// from the system, such as the data directory, are where the system says).
struct Layout {
    _root: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    links: PathBuf,
    sources: SourceOptions,
    trust_store: PathBuf,
    audit_log: PathBuf,
    sessions: PathBuf,
}

fn layout() -> Layout {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let home = base.join("home");
    let project = home.join("work/project");
    let links = base.join("links");
    let sources = SourceOptions {
        managed_dir: Some(base.join("etc/hookhost")),
        project_dir: project.clone(),
        user_dir: Some(home.join(".config/hookhost")),
        home_dir: Some(home.clone()),
        ..SourceOptions::default()
    };
    let trust_store = base.join("data/trust.json");
    let audit_log = base.join("logs/audit.jsonl");
    let sessions = base.join("data/sessions");
    for dir in [
        project.join(".hookhost/plugins"),
        project.join(".claude"),
        project.join(".codex"),
        home.join(".config/hookhost"),
        home.join(".claude"),
        base.join("etc/hookhost"),
        sessions.clone(),
        base.join("logs"),
        links.clone(),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&trust_store, "{}").unwrap();
    Layout {
        _root: root,
        home,
        project,
        links,
        sources,
        trust_store,
        audit_log,
        sessions,
    }
}

fn files(l: &Layout) -> HostFiles<'_> {
    HostFiles {
        trust_store: Some(&l.trust_store),
        audit_log: Some(&l.audit_log),
        session_files: Some(&l.sessions),
    }
}

fn cases(l: &Layout) -> Vec<Case> {
    let places = host_owned_places(&l.sources, &files(l));
    // The function lists every kind of place the issue names.
    for what in [
        "the user config",
        "the data directory",
        "the trust store",
        "the audit log",
        "the session files",
        "the compile cache",
        "Claude Code's user settings",
        "Codex's user settings",
        "managed policy",
        "the project's hook files",
        "the project's Claude Code settings",
        "the hookhost binary",
    ] {
        assert!(
            places.iter().any(|p| p.what.starts_with(what)),
            "`{what}` is not listed: {places:#?}"
        );
    }
    let mut n = 0;
    let mut out = Vec::new();
    for place in &places {
        for (grant, dir) in grants_over(place, &l.home, &l.project, &l.links, &mut n) {
            for write in [false, true] {
                if place.guards(write) {
                    out.push(Case {
                        grant: grant.clone(),
                        write,
                        place: place.clone(),
                        dir: dir.clone(),
                    });
                }
            }
        }
    }
    out
}

fn hook(case: &Case) -> Value {
    json!({
        "type": "wasm",
        "plugin": plugins::HOSTILE,
        "capabilities": {"dirs": [{"path": case.grant, "mode": if case.write { "rw" } else { "ro" }}]},
        "config": {"mode": "echo"}
    })
}

#[test]
fn every_grant_over_a_host_owned_place_is_refused_at_build() {
    let l = layout();
    let cases = cases(&l);
    assert!(cases.len() > 200, "only {} cases", cases.len());
    let hooks: Vec<Value> = cases.iter().map(hook).collect();
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": hooks}]}});
    // Resolved as `HostBuilder::build` resolves (`resolve_options`: real paths, the
    // places), with the layout's home for `${home}`.
    let mut sources = l.sources.clone();
    sources.settings = vec![settings.to_string()];
    let catalogue = Arc::new(EventCatalogue::default());
    let loaded = hookhost::config::load(&sources, &catalogue);
    let options = hookhost::policy::ResolveOptions {
        host_places: host_owned_places(&sources, &files(&l)),
        ..hookhost::resolve_options(&sources)
    };
    let policy = hookhost::policy::resolve(loaded, catalogue, &options);
    for (i, case) in cases.iter().enumerate() {
        let path = format!("$.hooks.PreToolUse[0].hooks[{i}]");
        let error = policy
            .errors
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| {
                panic!(
                    "`{}` ({}) over {} `{}` was not refused at build",
                    case.grant,
                    if case.write { "rw" } else { "ro" },
                    case.place.what,
                    case.place.path.display()
                )
            });
        // The message names the field, the grant and a host-owned place (the nearest
        // one may be another place on the same path: `/` contains them all).
        assert!(
            error.message.contains("`capabilities.dirs[0]`")
                && error.message.contains(&format!("`{}`", case.grant))
                && error.message.contains("a place hookhost owns"),
            "{error}"
        );
    }
    assert!(
        policy.hooks.is_empty(),
        "hooks that reach a host-owned place were built: {:?}",
        policy.hooks.iter().map(|h| &h.id).collect::<Vec<_>>()
    );
}

#[test]
fn every_grant_over_a_host_owned_place_is_refused_at_use() {
    let l = layout();
    let cases = cases(&l);
    let places = Arc::new(host_owned_places(&l.sources, &files(&l)));
    let spec = EventCatalogue::default().get("Stop").unwrap().clone();
    let invocation = Invocation::new(spec, json!({"session_id": "s"}), &l.project).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut checked = 0;
    for case in &cases {
        // Only directories can be opened; `${home}` at use is the process's home.
        if !case.dir.is_dir() || case.grant.starts_with("${home}") {
            continue;
        }
        checked += 1;
        let mut call = PluginCall::new(plugins::HOSTILE);
        call.capabilities = serde_json::from_value(json!({"dirs": [{
            "path": case.grant, "mode": if case.write { "rw" } else { "ro" }
        }]}))
        .unwrap();
        call.config = Some(json!({"mode": "echo"}));
        let run = rt.block_on(runtime().call_governed(&call, &invocation, None, None, &places));
        let Verdict::Failed(failure) = &run.run.verdict else {
            panic!(
                "`{}` ({}) over {} ran at use",
                case.grant,
                if case.write { "rw" } else { "ro" },
                case.place.what
            );
        };
        assert!(
            failure.message.contains("directory grant refused")
                && failure.message.contains(&format!("`{}`", case.grant))
                && failure.message.contains("a place hookhost owns"),
            "{}",
            failure.message
        );
    }
    assert!(checked > 50, "only {checked} checked at use");
}

/// A grant that passed the build and became a symlink to a host-owned place later (the
/// directory swapped after the config was built) is refused when the sandbox opens it.
#[test]
fn a_grant_swapped_for_a_symlink_to_the_user_config_after_build_is_refused_at_use() {
    let l = layout();
    let data = l.project.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let places = Arc::new(host_owned_places(&l.sources, &HostFiles::default()));
    let mut call = PluginCall::new(plugins::HOSTILE);
    call.capabilities =
        serde_json::from_value(json!({"dirs": [{"path": "${workspace}/data", "mode": "rw"}]}))
            .unwrap();
    call.config = Some(json!({"mode": "echo"}));
    let spec = EventCatalogue::default().get("Stop").unwrap().clone();
    let invocation = Invocation::new(spec, json!({"session_id": "s"}), &l.project).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = rt.block_on(runtime().call_governed(&call, &invocation, None, None, &places));
    assert!(
        !matches!(run.run.verdict, Verdict::Failed(_)),
        "{:?}",
        run.run.verdict
    );
    std::fs::remove_dir(&data).unwrap();
    std::os::unix::fs::symlink(l.home.join(".config"), &data).unwrap();
    let run = rt.block_on(runtime().call_governed(&call, &invocation, None, None, &places));
    let Verdict::Failed(failure) = &run.run.verdict else {
        panic!("the swapped grant ran");
    };
    assert!(
        failure.message.contains("`${workspace}/data`")
            && failure.message.contains("contains the user config"),
        "{}",
        failure.message
    );
}

/// The repository's `.git` is a place the host (and the agent) later runs code from: a
/// read-write grant of it (or of its `hooks/`, or its `config` with `core.fsmonitor`)
/// lets a plugin plant a hook that runs natively at the next `git commit` or `git
/// status` of a command hook or the agent. It is refused like the project's `.hookhost/`.
#[test]
fn a_read_write_grant_of_the_repositorys_git_directory_is_refused_at_build() {
    let l = layout();
    std::fs::create_dir_all(l.project.join(".git/hooks")).unwrap();
    let places = host_owned_places(&l.sources, &files(&l));
    let none = hookhost::policy::ceiling::RealPath::default();
    for grant in [".git", ".git/hooks", ".git/"] {
        let expanded = l.project.join(grant);
        let why = hookhost::policy::places::refuse(
            &format!("${{workspace}}/{grant}"),
            &expanded,
            true,
            &places,
            none,
        );
        assert!(
            why.is_some(),
            "rw `${{workspace}}/{grant}` was not refused: git runs its hooks and config"
        );
        // Read-only stays allowed (the repository's history is public to the plugin).
        assert_eq!(
            hookhost::policy::places::refuse("g", &expanded, false, &places, none),
            None
        );
    }
}
