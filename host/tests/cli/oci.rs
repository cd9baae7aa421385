//! Plugins from OCI registries, against Debian's `docker-registry` (the CNCF distribution
//! registry) started on loopback by each test, with and without basic auth, and against a
//! hostile loopback server for answers no real registry gives.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::{TestEnv, TestServer, bash_input, deny_dangerous_bash, hooks, wait_until};

const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// A distribution registry on a free loopback port, its storage in a temp dir; killed
/// when dropped.
pub(crate) struct Registry {
    child: Child,
    host: String,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// Starts one (`auth`: htpasswd basic auth for `alice:s3cret`); `None` (reported as
    /// skipped) when the registry or `htpasswd` is not installed.
    pub(crate) fn start(test: &str, auth: bool) -> Option<Registry> {
        if !Path::new(REGISTRY_BIN).exists() {
            skipped(
                test,
                "needs /usr/bin/docker-registry (Debian `docker-registry`)",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut auth_config = String::new();
        if auth {
            let Ok(out) = Command::new("htpasswd")
                .args(["-Bbn", "alice", "s3cret"])
                .output()
            else {
                skipped(test, "needs htpasswd (Debian `apache2-utils`)");
                return None;
            };
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, out.stdout).unwrap();
            auth_config = format!(
                "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                file.display()
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: {host}\n  secret: test\n{auth_config}",
                dir.path().join("store").display()
            ),
        )
        .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let registry = Registry {
            child,
            host: host.clone(),
            _dir: dir,
        };
        wait_until("the registry to listen", || {
            std::net::TcpStream::connect(&host).is_ok()
        });
        Some(registry)
    }

    pub(crate) fn reference(&self, repository_tag: &str) -> String {
        format!("oci://{}/{repository_tag}", self.host)
    }
}

/// An empty docker config directory outside the project (no credentials), so that the
/// machine's own `~/.docker` plays no part.
pub(crate) fn no_docker_config(env: &TestEnv) -> PathBuf {
    let dir = env.home.join("docker");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn run(env: &TestEnv, docker: &Path, args: &[&str]) -> crate::support::Run {
    env.run_with(env.command().env("DOCKER_CONFIG", docker).args(args), "")
}

/// `plugin push FILE REF`; returns the pinned reference it prints.
pub(crate) fn push(env: &TestEnv, docker: &Path, file: &str, reference: &str) -> String {
    let run = run(env, docker, &["plugin", "push", file, reference]);
    assert_eq!(run.code, 0, "push failed: {}", run.stderr);
    run.stdout.trim().to_string()
}

pub(crate) fn wasm_hook(plugin: &str) -> Value {
    hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "id": "gate", "plugin": plugin}]),
    )
}

pub(crate) fn dispatch(env: &TestEnv, docker: &Path, command: &str) -> Value {
    let run = env.run_with(
        env.command()
            .env("DOCKER_CONFIG", docker)
            .args(["dispatch", "PreToolUse"]),
        &bash_input(command).to_string(),
    );
    assert_eq!(run.code, 0, "dispatch failed: {}", run.stderr);
    run.json()
}

/// The files under `dir`, recursively (empty when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_pushed_plugin_is_pulled_run_and_audited_and_runs_offline_from_a_warm_cache() {
    let env = TestEnv::new();
    let Some(registry) = Registry::start(
        "a_pushed_plugin_is_pulled_run_and_audited_and_runs_offline_from_a_warm_cache",
        false,
    ) else {
        return;
    };
    let docker = no_docker_config(&env);
    let file = deny_dangerous_bash().to_str().unwrap();
    let pinned = push(&env, &docker, file, &registry.reference("team/gate:v1"));
    assert!(
        pinned.starts_with(&format!("{}@sha256:", registry.reference("team/gate:v1"))),
        "{pinned}"
    );
    env.project_hooks(wasm_hook(&pinned));
    // The first dispatch pulls (within the hook's timeout) and runs the plugin.
    let out = dispatch(&env, &docker, "rm -rf /");
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["hooks"][0]["plugin"], pinned.as_str(), "{out}");
    let cached = files_under(&env.data.join("oci/layers"));
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert_eq!(
        std::fs::read(&cached[0]).unwrap(),
        std::fs::read(file).unwrap(),
        "the cached layer is the component's bytes"
    );
    // The audit line names the reference and its digest.
    let audit = env.audit_entries();
    assert_eq!(audit.last().unwrap()["hooks"][0]["plugin"], pinned.as_str());
    // The registry gone, the warm cache still runs it.
    drop(registry);
    let out = dispatch(&env, &docker, "rm -rf /");
    assert_eq!(out["decision"], "deny", "offline: {out}");
    let out = dispatch(&env, &docker, "ls");
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    // And `plugin pull` of the pinned reference answers from the cache.
    let pulled = run(&env, &docker, &["plugin", "pull", &pinned]);
    assert_eq!(pulled.code, 0, "{}", pulled.stderr);
    assert_eq!(pulled.stdout.trim(), pinned);
}

#[test]
fn a_registry_that_is_down_with_a_cold_cache_fails_the_hook_named() {
    let env = TestEnv::new();
    let docker = no_docker_config(&env);
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let reference = format!(
        "oci://127.0.0.1:{port}/team/gate:v1@sha256:{}",
        "a".repeat(64)
    );
    env.project_hooks(wasm_hook(&reference));
    let out = dispatch(&env, &docker, "ls");
    assert_eq!(out["hooks"][0]["status"], "failed", "{out}");
    let message = out["hooks"][0]["message"].as_str().unwrap();
    assert!(message.contains("cannot be reached"), "{message}");
}

#[test]
fn a_tag_moved_after_locking_is_reported_by_validate() {
    let env = TestEnv::new();
    let Some(registry) =
        Registry::start("a_tag_moved_after_locking_is_reported_by_validate", false)
    else {
        return;
    };
    let docker = no_docker_config(&env);
    let tag = registry.reference("team/gate:v1");
    let pinned = push(&env, &docker, deny_dangerous_bash().to_str().unwrap(), &tag);
    env.project_hooks(wasm_hook(&pinned));
    let lock = run(&env, &docker, &["plugin", "lock"]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(env.project.join("hookhost.lock")).unwrap())
            .unwrap();
    let digest = pinned.rsplit_once('@').unwrap().1;
    assert_eq!(written["plugins"][0]["digest"], digest, "{written}");
    let ok = run(&env, &docker, &["validate"]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    // Someone pushes another component under the same tag.
    push(
        &env,
        &docker,
        hookhost_test_plugins::plugins::PROTECT_PATHS,
        &tag,
    );
    let moved = run(&env, &docker, &["validate"]);
    assert_eq!(moved.code, 1, "{}{}", moved.stdout, moved.stderr);
    assert!(
        moved.stderr.contains("moved after locking"),
        "{}",
        moved.stderr
    );
    assert!(
        moved.stderr.contains(".hookhost/hooks.json")
            && moved
                .stderr
                .contains("$.hooks.PreToolUse[0].hooks[0].plugin")
            && moved.stderr.contains("hook `gate`"),
        "names file, field and hook: {}",
        moved.stderr
    );
}

/// The lock binds what runs: a tag that names another component now (and that a pull
/// has cached so) still runs at the digest `hookhost.lock` pins; a tag the lock leaves
/// out is refused rather than run at whatever it names today.
#[test]
fn a_locked_tag_runs_the_locked_digest_whatever_the_tag_names_now() {
    let env = TestEnv::new();
    let Some(registry) = Registry::start(
        "a_locked_tag_runs_the_locked_digest_whatever_the_tag_names_now",
        false,
    ) else {
        return;
    };
    let docker = no_docker_config(&env);
    env.managed(json!({"ceilings": {"ociTags": true}}));
    let tag = registry.reference("team/gate:v1");
    let locked = push(&env, &docker, deny_dangerous_bash().to_str().unwrap(), &tag);
    env.project_hooks(wasm_hook(&tag));
    let lock = run(&env, &docker, &["plugin", "lock"]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    // The tag moves to a component that lets `rm -rf /` through, and a pull caches it.
    let moved = push(
        &env,
        &docker,
        hookhost_test_plugins::plugins::PROTECT_PATHS,
        &tag,
    );
    assert_ne!(moved, locked);
    let pulled = run(&env, &docker, &["plugin", "pull", &tag]);
    assert_eq!(pulled.stdout.trim(), moved, "{}", pulled.stderr);
    let out = dispatch(&env, &docker, "rm -rf /");
    assert_eq!(out["decision"], "deny", "the locked component ran: {out}");
    assert_eq!(out["hooks"][0]["plugin"], locked.as_str(), "{out}");
    // A tag the lock does not pin is refused, naming the lock (the last good version of
    // the file, bound by the lock, stays in force); so is every tag when the lock is
    // broken.
    let other = registry.reference("team/other:v1");
    env.project_hooks(wasm_hook(&other));
    let out = dispatch(&env, &docker, "rm -rf /");
    assert!(out["notices"].to_string().contains("does not pin"), "{out}");
    assert!(!out["hooks"].to_string().contains("team/other"), "{out}");
    std::fs::write(env.project.join("hookhost.lock"), "{").unwrap();
    env.project_hooks(wasm_hook(&tag));
    let out = dispatch(&env, &docker, "rm -rf /");
    assert!(out["notices"].to_string().contains("not JSON"), "{out}");
    assert!(!out["hooks"].to_string().contains(&moved), "{out}");
    // `plugin lock` writes the lock anew over a broken one, from the references as written.
    let relock = run(&env, &docker, &["plugin", "lock"]);
    assert_eq!(relock.code, 0, "{}", relock.stderr);
    let written = std::fs::read_to_string(env.project.join("hookhost.lock")).unwrap();
    assert!(
        written.contains(moved.rsplit_once('@').unwrap().1),
        "{written}"
    );
}

#[test]
fn references_need_a_digest_and_an_allowed_registry() {
    let env = TestEnv::new();
    let docker = no_docker_config(&env);
    // A tag alone is refused unless managed policy allows tags.
    env.project_hooks(wasm_hook("oci://127.0.0.1:5999/team/gate:v1"));
    let run1 = run(&env, &docker, &["validate"]);
    assert_eq!(run1.code, 1, "{}", run1.stdout);
    assert!(
        run1.stderr.contains("names a tag but no digest"),
        "{}",
        run1.stderr
    );
    assert!(run1.stderr.contains("ceilings.ociTags"), "{}", run1.stderr);
    env.managed(json!({"ceilings": {"ociTags": true}}));
    let run2 = run(&env, &docker, &["validate"]);
    assert!(!run2.stderr.contains("names a tag"), "{}", run2.stderr);
    // A registry outside `ceilings.registries` is refused at load, named.
    env.managed(json!({"ceilings": {"registries": ["registry.corp.example", "*.mirror.example"]}}));
    env.project_hooks(wasm_hook(&format!(
        "oci://127.0.0.1:5999/team/gate:v1@sha256:{}",
        "b".repeat(64)
    )));
    let refused = run(&env, &docker, &["validate"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("hook refused by managed policy")
            && refused.stderr.contains("`ceilings.registries`")
            && refused.stderr.contains("127.0.0.1:5999"),
        "{}",
        refused.stderr
    );
    let out = dispatch(&env, &docker, "ls");
    assert!(
        out["notices"].to_string().contains("ceilings.registries"),
        "{out}"
    );
    assert!(out["hooks"].as_array().unwrap().is_empty(), "{out}");
}

#[test]
fn credentials_come_from_the_docker_config_never_from_the_project() {
    let env = TestEnv::new();
    let Some(registry) = Registry::start(
        "credentials_come_from_the_docker_config_never_from_the_project",
        true,
    ) else {
        return;
    };
    let file = deny_dangerous_bash().to_str().unwrap();
    let tag = registry.reference("team/gate:v1");
    // No credentials: refused, saying where they are looked for.
    let empty = no_docker_config(&env);
    let denied = run(&env, &empty, &["plugin", "push", file, &tag]);
    assert_eq!(denied.code, 1);
    assert!(
        denied.stderr.contains("none were found"),
        "{}",
        denied.stderr
    );
    // A docker config in the project (a repository could set DOCKER_CONFIG) is refused.
    let auth = json!({"auths": {registry.host.clone(): {"auth": "YWxpY2U6czNjcmV0"}}});
    let planted = env.write("docker/config.json", &auth.to_string());
    let refused = run(
        &env,
        planted.parent().unwrap(),
        &["plugin", "push", file, &tag],
    );
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("DOCKER_CONFIG"),
        "{}",
        refused.stderr
    );
    // The user's docker config: push, then a dispatch pulls and runs it.
    let docker = env.home.join("docker-user");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(docker.join("config.json"), auth.to_string()).unwrap();
    let pinned = push(&env, &docker, file, &tag);
    env.project_hooks(wasm_hook(&pinned));
    let out = dispatch(&env, &docker, "rm -rf /");
    assert_eq!(out["decision"], "deny", "{out}");
    // `HOOKHOST_REGISTRY_AUTH` names the registry its credentials are for.
    let other = TestEnv::new();
    let pulled = other.run_with(
        other
            .command()
            .env("DOCKER_CONFIG", no_docker_config(&other))
            .env(
                "HOOKHOST_REGISTRY_AUTH",
                format!("{}=alice:s3cret", registry.host),
            )
            .args(["plugin", "pull", &pinned]),
        "",
    );
    assert_eq!(pulled.code, 0, "{}", pulled.stderr);
}

#[test]
fn a_signature_travels_with_the_plugin_as_a_referrer() {
    let env = TestEnv::new();
    let Some(registry) =
        Registry::start("a_signature_travels_with_the_plugin_as_a_referrer", false)
    else {
        return;
    };
    let docker = no_docker_config(&env);
    let key = env.home.join("signing.key");
    let keygen = env.run(&["keygen", "--out", key.to_str().unwrap()], "");
    assert_eq!(keygen.code, 0, "{}", keygen.stderr);
    let public = keygen.stdout.trim().to_string();
    let file = deny_dangerous_bash().to_str().unwrap();
    let signed = run(
        &env,
        &docker,
        &[
            "plugin",
            "push",
            "--sign",
            key.to_str().unwrap(),
            file,
            &registry.reference("team/signed:v1"),
        ],
    );
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    let signed = signed.stdout.trim().to_string();
    // The same component under another repository, without a signature.
    let unsigned = push(&env, &docker, file, &registry.reference("team/unsigned:v1"));
    env.managed(json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"publicKey": public, "name": "test key"}],
    }));
    env.project_hooks(wasm_hook(&signed));
    let out = dispatch(&env, &docker, "rm -rf /");
    assert_eq!(
        out["decision"], "deny",
        "admitted by the pulled signature: {out}"
    );
    let sigs: Vec<PathBuf> = files_under(&env.data.join("oci/layers"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "sig"))
        .collect();
    assert_eq!(sigs.len(), 1, "{sigs:?}");
    // The same layer pushed elsewhere with another key's signature: a pull of it does not
    // replace the `.sig` other projects' allowlists read (red team, stop 36).
    let first = std::fs::read(&sigs[0]).unwrap();
    let other_key = env.home.join("other.key");
    let other_keygen = env.run(&["keygen", "--out", other_key.to_str().unwrap()], "");
    assert_eq!(other_keygen.code, 0, "{}", other_keygen.stderr);
    let resigned = run(
        &env,
        &docker,
        &[
            "plugin",
            "push",
            "--sign",
            other_key.to_str().unwrap(),
            file,
            &registry.reference("team/resigned:v1"),
        ],
    );
    assert_eq!(resigned.code, 0, "{}", resigned.stderr);
    let pulled = run(&env, &docker, &["plugin", "pull", resigned.stdout.trim()]);
    assert_eq!(pulled.code, 0, "{}", pulled.stderr);
    assert_eq!(
        std::fs::read(&sigs[0]).unwrap(),
        first,
        "the .sig was replaced"
    );
    // Another machine (data dir) pulling the unsigned artifact has no signature.
    let other = TestEnv::new();
    other.managed(json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"publicKey": public}],
    }));
    other.project_hooks(wasm_hook(&unsigned));
    let out = dispatch(&other, &no_docker_config(&other), "rm -rf /");
    assert_eq!(out["hooks"][0]["failure"], "notAdmitted", "{out}");
}

/// A registry that answers `manifest` for any manifest and `blob` for any blob.
fn hostile(manifest: String, blob: String) -> TestServer {
    TestServer::start(move |request| {
        let body = if request.path.contains("/manifests/") {
            manifest.clone()
        } else if request.path.contains("/blobs/") {
            blob.clone()
        } else {
            "{}".to_string()
        };
        (200, body, std::time::Duration::ZERO)
    })
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

pub(crate) fn wasm_manifest(layer: &[u8], config_type: &str) -> String {
    json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": config_type, "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": format!("sha256:{}", sha256(layer)), "size": layer.len()}],
    })
    .to_string()
}

#[test]
fn hostile_registry_answers_are_refused_before_anything_is_cached_or_compiled() {
    let component = b"pretend component".to_vec();
    let good = wasm_manifest(&component, "application/vnd.wasm.config.v0+json");
    let wrong_type = wasm_manifest(&component, "application/vnd.oci.image.config.v1+json");
    let oversized = format!("{{\"pad\": \"{}\"}}", "x".repeat(100 << 10));
    for (name, manifest, blob, pin, words) in [
        (
            "digest mismatch",
            good.clone(),
            "pretend component".to_string(),
            "c".repeat(64),
            "not the pinned digest",
        ),
        (
            "oversized manifest",
            oversized.clone(),
            String::new(),
            sha256(oversized.as_bytes()),
            "above the cap",
        ),
        (
            "wrong media type",
            wrong_type.clone(),
            "pretend component".to_string(),
            sha256(wrong_type.as_bytes()),
            "not `application/vnd.wasm.config.v0+json`",
        ),
        (
            "layer not matching its digest",
            good.clone(),
            "x".repeat(component.len()),
            sha256(good.as_bytes()),
            "does not match the manifest's",
        ),
        // Red team, stop 36: read up to the plugin cap though the manifest said less.
        (
            "layer longer than the manifest says",
            good.clone(),
            "x".repeat(component.len() + 4096),
            sha256(good.as_bytes()),
            "above the cap of",
        ),
    ] {
        let env = TestEnv::new();
        let docker = no_docker_config(&env);
        let server = hostile(manifest, blob);
        let host = server.url.trim_start_matches("http://");
        let reference = format!("oci://{host}/team/gate:v1@sha256:{pin}");
        let pulled = run(&env, &docker, &["plugin", "pull", &reference]);
        assert_eq!(pulled.code, 1, "{name}: {}", pulled.stdout);
        assert!(pulled.stderr.contains(words), "{name}: {}", pulled.stderr);
        assert!(
            pulled.stderr.contains("nothing was cached") || name == "oversized manifest",
            "{name}: {}",
            pulled.stderr
        );
        // Through a dispatch: the hook fails named, nothing cached, nothing compiled.
        env.project_hooks(wasm_hook(&reference));
        let out = dispatch(&env, &docker, "ls");
        assert_eq!(out["hooks"][0]["status"], "failed", "{name}: {out}");
        assert!(
            out["hooks"][0]["message"].as_str().unwrap().contains(words),
            "{name}: {out}"
        );
        assert!(
            files_under(&env.data.join("oci")).is_empty(),
            "{name}: cached"
        );
        assert!(
            files_under(&env.data.join("cache"))
                .iter()
                .all(|p| !p.to_string_lossy().ends_with(".cwasm")),
            "{name}: compiled"
        );
    }
}

/// Concurrent events of one daemon that find the same plugin uncached wait for one pull
/// (red team, stop 36: each started its own). The registry answers slowly, so all four
/// events are waiting while the first pull is under way.
#[test]
fn concurrent_events_of_a_daemon_pull_a_plugin_once() {
    let env = TestEnv::new();
    let docker = no_docker_config(&env);
    let layer = b"pretend component".to_vec();
    let manifest = wasm_manifest(&layer, "application/vnd.wasm.config.v0+json");
    let pin = sha256(manifest.as_bytes());
    let blob = String::from_utf8(layer).unwrap();
    let server = TestServer::start(move |request| {
        if request.path.contains("/manifests/") {
            (200, manifest.clone(), std::time::Duration::from_millis(700))
        } else if request.path.contains("/blobs/") {
            (200, blob.clone(), std::time::Duration::ZERO)
        } else {
            (404, "{}".to_string(), std::time::Duration::ZERO)
        }
    });
    let host = server.url.trim_start_matches("http://");
    let reference = format!("oci://{host}/team/gate:v1@sha256:{pin}");
    env.project_hooks(wasm_hook(&reference));
    let daemon = crate::serve::Daemon::start_with(&env, {
        let mut command = env.command();
        command.env("DOCKER_CONFIG", &docker);
        command
    });
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut client = daemon.client();
            std::thread::spawn(move || client.call("PreToolUse", bash_input("ls")))
        })
        .collect();
    for thread in threads {
        let outcome = thread.join().unwrap();
        // Not a component: each hook fails at compile, after the pull.
        assert_eq!(outcome["hooks"][0]["status"], "failed", "{outcome}");
    }
    let pulls = server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(&format!("/manifests/sha256:{pin}")))
        .count();
    assert_eq!(
        pulls,
        1,
        "{:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
}

/// Red team, stop 36: `plugin lock` wrote `hookhost.lock` through a symlink the
/// repository ships (here to a file of the user's). The lock is a new file renamed into
/// place: the link is replaced, its target untouched.
#[test]
fn plugin_lock_replaces_a_symlinked_lock_file_and_never_writes_through_it() {
    let env = TestEnv::new();
    let docker = no_docker_config(&env);
    let victim = env.home.join("victim.txt");
    std::fs::write(&victim, "the user's own file\n").unwrap();
    let lock = env.project.join("hookhost.lock");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let locked = run(&env, &docker, &["plugin", "lock"]);
    assert_eq!(locked.code, 0, "{}", locked.stderr);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the user's own file\n"
    );
    assert!(!std::fs::symlink_metadata(&lock).unwrap().is_symlink());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(written["version"], 1, "{written}");
}
