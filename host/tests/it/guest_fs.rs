//! The guest's filesystem chokepoint (`handlers/wasm/guest_fs.rs`), attacked from a
//! hostile component built from the WIT (`plugins/hostile-raw`), over generated classes:
//!
//! - every method of `wasi:filesystem/types.descriptor` in the WIT the linker defines,
//!   against every host-owned name (`policy::places::OWNED_DIR_NAMES` and
//!   `OWNED_FILE_NAMES`) inside a read-write grant, reached directly, through a
//!   directory opened first and through a symlink: refused, and nothing changes;
//! - every private file (`policy::places::PRIVATE_FILES`) under a read-only
//!   `${workspace}` grant, read every way a guest reads: not found, not listed.

use std::collections::BTreeMap;
use std::path::Path;

use hookhost::outcome::{HookStatus, Outcome};
use hookhost::policy::places::{OWNED_DIR_NAMES, OWNED_FILE_NAMES, PRIVATE_FILES};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::*;

/// Every method of `descriptor` in the WIT of the WASI the linker defines (the
/// kitchen-sink fixture carries it): a method added there is attempted here, or the
/// hostile plugin answers `unknown` and the test fails.
fn descriptor_methods() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut resolve = wit_parser::Resolve::default();
    // The fixture imports hookhost's interfaces of both WIT versions.
    for dir in ["../wit/v0.1.0", "../wit"] {
        resolve.push_dir(manifest.join(dir)).unwrap();
    }
    resolve
        .push_dir(manifest.join("tests/fixtures/kitchen-sink"))
        .unwrap();
    let mut methods: Vec<String> = resolve
        .interfaces
        .iter()
        .filter(|(_, i)| i.name.as_deref() == Some("types"))
        .filter(|(_, i)| {
            i.package.is_some_and(|p| {
                resolve.packages[p]
                    .name
                    .to_string()
                    .starts_with("wasi:filesystem")
            })
        })
        .flat_map(|(_, i)| i.functions.keys())
        .filter_map(|n| n.strip_prefix("[method]descriptor."))
        .map(str::to_owned)
        .collect();
    methods.sort();
    assert!(methods.len() >= 27, "{methods:?}");
    methods
}

/// Every file under `dir` (names starting `g-`, which the plugin may make, and the
/// control directory left out): kind, bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("g-") || name == "plain" || name == "l-plain" {
                continue;
            }
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let what = if meta.is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                walk(root, &path, out);
                format!("dir {:?}", meta.modified().unwrap())
            } else {
                format!(
                    "file {:?} {:?}",
                    std::fs::read(&path).unwrap(),
                    meta.modified().unwrap()
                )
            };
            out.insert(rel, what);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What the plugin said, as the JSON object it returns.
fn said(outcome: &Outcome) -> serde_json::Map<String, Value> {
    let report = only_report(outcome);
    assert_eq!(report.status, HookStatus::Ok, "{outcome:#?}");
    let text = outcome.additional_context.join("");
    serde_json::from_str::<Value>(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}"))
        .as_object()
        .cloned()
        .unwrap()
}

/// Methods whose attempt needs a descriptor opened for writing, which no open of an
/// owned file gives: refused whether or not the descriptor's own path is checked, so the
/// control case does not expect them to get through.
const NEED_A_WRITABLE_DESCRIPTOR: &[&str] =
    &["write", "write-via-stream", "append-via-stream", "set-size"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_filesystem_call_changes_a_host_owned_name_inside_a_read_write_grant() {
    let project = tempfile::tempdir().unwrap();
    let src = project.path().join("src");
    std::fs::create_dir(&src).unwrap();
    let mut cases = serde_json::Map::new();
    // A real nested repository, as `git init` makes it.
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(src.join("repo"))
        .status()
        .unwrap();
    assert!(git.success());
    let mut dirs: Vec<(String, String)> = OWNED_DIR_NAMES
        .iter()
        .map(|(name, _)| (name.to_string(), name.to_string()))
        .collect();
    dirs.push(("repo-git".into(), "repo/.git".into()));
    let methods = descriptor_methods();
    // The control: the same calls on plain names, one directory per method (its calls
    // change it), must get through.
    for method in &methods {
        let dir = format!("plain/{method}");
        std::fs::create_dir_all(src.join(&dir).join("empty")).unwrap();
        std::fs::write(src.join(&dir).join("config"), "plain").unwrap();
        cases.insert(
            format!("plain:{method}"),
            json!({"only": method, "base": dir, "existing": "config", "fresh": "new",
                   "empty_dir": "empty"}),
        );
    }
    for (kind, dir) in &dirs {
        let at = src.join(dir);
        std::fs::create_dir_all(at.join("empty")).unwrap();
        std::fs::write(at.join("config"), "owned").unwrap();
        let link = format!("l-{kind}");
        std::os::unix::fs::symlink(dir, src.join(&link)).unwrap();
        cases.insert(
            format!("{kind}:direct"),
            json!({"existing": format!("{dir}/config"), "fresh": format!("{dir}/new"),
                   "empty_dir": format!("{dir}/empty")}),
        );
        cases.insert(
            format!("{kind}:via-dir"),
            json!({"base": dir, "existing": "config", "fresh": "new", "empty_dir": "empty"}),
        );
        cases.insert(
            format!("{kind}:via-link"),
            json!({"existing": format!("{link}/config"), "fresh": format!("{link}/new"),
                   "empty_dir": format!("{link}/empty")}),
        );
    }
    for (name, _) in OWNED_FILE_NAMES {
        std::fs::write(src.join(name), "owned").unwrap();
        let sub = format!("sub-{name}");
        std::fs::create_dir(src.join(&sub)).unwrap();
        std::os::unix::fs::symlink(name, src.join(format!("l-{name}"))).unwrap();
        cases.insert(
            format!("{name}:direct"),
            json!({"existing": name, "fresh": format!("{sub}/{name}"),
                   "link": format!("l-{name}")}),
        );
    }
    let before = snapshot(&src);
    // One hook per kind (what one hook may say is capped), all in one event.
    let mut kinds: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    for (name, case) in &cases {
        let kind = name.split_once(':').unwrap().0.to_string();
        kinds
            .entry(kind)
            .or_default()
            .insert(name.clone(), case.clone());
    }
    let hooks = kinds
        .iter()
        .map(|(kind, cases)| {
            wasm_hook(
                plugins::HOSTILE_RAW,
                json!({"id": format!("fs-{kind}"), "timeout": 60,
                       "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
                       "config": {"attack": "fs-changes", "methods": methods, "cases": cases}}),
            )
        })
        .collect();
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", hooks),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    assert_eq!(outcome.hooks.len(), kinds.len(), "{outcome:#?}");
    let mut got = serde_json::Map::new();
    for (report, text) in outcome.hooks.iter().zip(&outcome.additional_context) {
        assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
        let said: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        got.extend(said.as_object().unwrap().clone());
    }
    let mut through = Vec::new();
    let mut attempted = 0;
    for (key, verdict) in &got {
        let verdict = verdict.as_str().unwrap();
        let (case, method) = key.split_once('/').unwrap();
        assert_ne!(verdict, "unknown", "the plugin does not attempt `{method}`");
        assert!(!verdict.starts_with("base:"), "{key}: {verdict}");
        if verdict == "reads" || verdict == "n/a" {
            continue;
        }
        if case.starts_with("plain:") {
            // The control: outside owned names the same calls get through.
            if !NEED_A_WRITABLE_DESCRIPTOR.contains(&method) {
                assert_eq!(verdict, "ok", "control {key}");
            }
            continue;
        }
        attempted += 1;
        if verdict == "ok"
            || (verdict != "err:not-permitted" && !NEED_A_WRITABLE_DESCRIPTOR.contains(&method))
        {
            through.push(format!("{key}: {verdict}"));
        }
    }
    let owned_cases = cases.keys().filter(|c| !c.starts_with("plain:")).count();
    assert_eq!(got.len(), owned_cases * methods.len() + methods.len());
    assert!(attempted > 100, "{attempted}");
    assert!(through.is_empty(), "got through:\n{}", through.join("\n"));
    assert_eq!(snapshot(&src), before, "a host-owned name changed");
    // The refusals are named in the hooks' reports.
    let diagnostics: String = outcome
        .hooks
        .iter()
        .filter_map(|h| h.diagnostics.clone())
        .collect();
    assert!(
        diagnostics.contains("filesystem: `") && diagnostics.contains("host-owned by its name"),
        "{diagnostics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_files_are_not_found_under_a_read_only_workspace_grant() {
    let project = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (i, (dir, file, _)) in PRIVATE_FILES.iter().enumerate() {
        for at in [dir.to_string(), format!("nested/{dir}")] {
            std::fs::create_dir_all(project.path().join(&at)).unwrap();
            let path = format!("{at}/{file}");
            // (The project's own are read by hookhost as config: valid, and empty.)
            let secret = if at == *dir {
                "{}".to_string()
            } else {
                format!("TOKEN-{i}")
            };
            std::fs::write(project.path().join(&path), secret).unwrap();
            paths.push(path.clone());
            // A symlink to it, and a public neighbour (the control).
            let link = format!("link-{i}-{}", paths.len());
            std::os::unix::fs::symlink(&path, project.path().join(&link)).unwrap();
            paths.push(link);
        }
        std::fs::write(project.path().join(dir).join("public.json"), "{}").unwrap();
    }
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "reads",
               "capabilities": {"dirs": [{"path": "${workspace}", "mode": "ro"}]},
               "config": {"attack": "fs-reads", "paths": paths}}),
    );
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", vec![hook]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let got = said(&outcome);
    let text = serde_json::to_string(&got).unwrap();
    assert!(
        !text.contains("TOKEN-") && !text.contains("found:{}"),
        "a private file was read: {text}"
    );
    for (key, what) in &got {
        let what = what.as_str().unwrap();
        let is_link = key.starts_with("link-");
        let expected: &[&str] = if key.ends_with("/list") {
            // A link is listed (its name is no secret); the private file is not.
            if is_link {
                &["found:listed"]
            } else {
                &["found:unlisted"]
            }
        } else {
            &["err:no-entry"]
        };
        assert!(expected.contains(&what), "{key}: {what}");
    }
    // The control: a public file beside them is read.
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "reads",
               "capabilities": {"dirs": [{"path": "${workspace}", "mode": "ro"}]},
               "config": {"attack": "fs-reads", "paths": [".claude/public.json"]}}),
    );
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", vec![hook]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let got = said(&outcome);
    assert_eq!(got[".claude/public.json/open"], "found:{}", "{got:?}");
    assert_eq!(got[".claude/public.json/list"], "found:listed", "{got:?}");
}

/// A path swapped between a regular file and a FIFO while a plugin opens it again and
/// again: an open checked by path and then made (the old `stat-at` then `open-at`) could
/// find the FIFO and block a thread of the host for ever (in `hookhost serve`, for the
/// life of the daemon). The open is made non-blocking and judged by `fstat` of what it
/// opened: every open ends, as opened or refused, and the hook answers well within its
/// timeout (a blocked open would end it as a timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_swapped_in_while_a_plugin_opens_never_blocks_the_host() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let target = dir.join("target");
    let fifo = |path: &Path| {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    std::fs::write(&target, "file").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir, target) = (stop.clone(), dir.clone(), target.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (file, pipe) = (dir.join("f.tmp"), dir.join("p.tmp"));
                std::fs::write(&file, "file").unwrap();
                fifo(&pipe);
                std::fs::rename(&pipe, &target).unwrap();
                std::fs::rename(&file, &target).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    const OPENS: u64 = 2_000;
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "opener", "timeout": 30,
               "capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "ro"}]},
               "config": {"attack": "open-many", "arg": target, "n": OPENS}}),
    );
    let config = settings("PreToolUse", "*", vec![hook]);
    let mut results = Vec::new();
    for _ in 0..3 {
        let outcome = dispatch(project.path(), &config, "PreToolUse", bash("ls")).await;
        results.push(outcome);
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0);
    for outcome in &results {
        let report = only_report(outcome);
        assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
        let said = outcome.additional_context.join("");
        let (opened, refused) = said
            .strip_prefix("opened ")
            .and_then(|r| r.split_once(", refused "))
            .map(|(o, r)| (o.parse::<u64>().unwrap(), r.parse::<u64>().unwrap()))
            .unwrap_or_else(|| panic!("{said}"));
        assert_eq!(opened + refused, OPENS, "{said}");
    }
}
