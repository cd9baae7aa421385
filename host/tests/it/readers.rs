//! Every reader of the host fed what must not be read: a FIFO with no writer (a blocking
//! open would hang the test for ever), a device (`/dev/zero` never ends), a symlink to
//! each, a file above the reader's cap, and (as root) another user's file where the reader
//! believes its file. Each must refuse with a message naming the file, and never block.
//! The readers are the public doors onto `config/file.rs`'s `open_checked`; the grep in
//! `config/file/tests.rs` keeps every other open out.

use std::path::{Path, PathBuf};

use hookhost::audit::AuditLog;
use hookhost::config::{SourceOptions, load};
use hookhost::handlers::Verdict;
use hookhost::handlers::wasm::PluginCall;
use hookhost::policy::allowlist::PluginAllowlist;
use hookhost::trust::TrustStore;
use hookhost::{EventCatalogue, event::Invocation};
use hookhost_test_plugins::plugins;
use serde_json::json;

use crate::support::runtime;

/// What a reader is fed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Hostile {
    Fifo,
    Device,
    LinkToFifo,
    LinkToDevice,
    Huge,
    Foreign,
}

const ALL: [Hostile; 6] = [
    Hostile::Fifo,
    Hostile::Device,
    Hostile::LinkToFifo,
    Hostile::LinkToDevice,
    Hostile::Huge,
    Hostile::Foreign,
];

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Puts `what` at `path` (its directory exists); `false` when it cannot be made here
/// (another user's file when not root).
fn plant(what: Hostile, path: &Path, cap: u64) -> bool {
    let _ = std::fs::remove_file(path);
    let aside = path.with_extension("target");
    let _ = std::fs::remove_file(&aside);
    match what {
        Hostile::Fifo => mkfifo(path),
        Hostile::Device => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Hostile::LinkToFifo => {
            mkfifo(&aside);
            std::os::unix::fs::symlink(&aside, path).unwrap();
        }
        Hostile::LinkToDevice => {
            std::os::unix::fs::symlink("/dev/zero", &aside).unwrap();
            std::os::unix::fs::symlink(&aside, path).unwrap();
        }
        Hostile::Huge => std::fs::File::create(path)
            .unwrap()
            .set_len(cap + 1)
            .unwrap(),
        Hostile::Foreign => {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return false;
            }
            std::fs::write(path, "{}").unwrap();
            std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
        }
    }
    true
}

/// One reader: where its file is, its cap, whether it believes its file (owner and mode
/// checked), and how to read it (the error it reports, or `None` when it read it).
struct Reader {
    name: &'static str,
    file: fn(&Path) -> PathBuf,
    cap: u64,
    believes: bool,
    read: fn(&Path, &Path) -> Option<String>,
}

fn config_error(sources: &SourceOptions) -> Option<String> {
    let loaded = load(sources, &EventCatalogue::default());
    loaded.failed.first().map(|f| f.error.to_string())
}

fn readers() -> Vec<Reader> {
    vec![
        Reader {
            name: "project hooks",
            file: |root| root.join("project/.hookhost/hooks.json"),
            cap: 16 << 20,
            believes: false,
            read: |root, _| {
                config_error(&SourceOptions {
                    project_dir: root.join("project"),
                    ..SourceOptions::default()
                })
            },
        },
        Reader {
            name: "user hooks",
            file: |root| root.join("user/hooks.json"),
            cap: 16 << 20,
            believes: false,
            read: |root, _| {
                config_error(&SourceOptions {
                    project_dir: root.join("project"),
                    user_dir: Some(root.join("user")),
                    ..SourceOptions::default()
                })
            },
        },
        Reader {
            name: "--settings file",
            file: |root| root.join("settings.json"),
            cap: 16 << 20,
            believes: false,
            read: |root, file| {
                config_error(&SourceOptions {
                    project_dir: root.join("project"),
                    settings: vec![file.display().to_string()],
                    ..SourceOptions::default()
                })
            },
        },
        Reader {
            name: "managed policy",
            file: |root| root.join("managed/managed.json"),
            cap: 16 << 20,
            believes: true,
            read: |root, _| {
                config_error(&SourceOptions {
                    project_dir: root.join("project"),
                    managed_dir: Some(root.join("managed")),
                    ..SourceOptions::default()
                })
            },
        },
        Reader {
            name: "trust store",
            file: |root| root.join("data/trust.json"),
            cap: 16 << 20,
            believes: true,
            read: |_, file| TrustStore::new(file).list().err().map(|e| e.to_string()),
        },
        Reader {
            name: "audit log (hookhost audit)",
            file: |root| root.join("logs/audit.jsonl"),
            cap: hookhost::audit::READ_CAP,
            believes: true,
            read: |_, file| AuditLog::new(file).read().err(),
        },
        Reader {
            name: "env file",
            file: |root| root.join("sessions/s/env"),
            cap: hookhost::session::PRIVATE_FILE_CAP,
            believes: true,
            read: |_, file| {
                hookhost::session::prepare_env_file(file)
                    .err()
                    .map(|e| e.to_string())
            },
        },
        Reader {
            name: "plugin",
            file: |root| root.join("plugins/p.wasm"),
            cap: hookhost::config::file::PLUGIN_CAP,
            believes: false,
            read: |_, file| runtime().inspect(file).err().map(|e| e.to_string()),
        },
        Reader {
            name: "plugin signature",
            file: |root| root.join("signed/p.wasm.sig"),
            cap: 4096,
            believes: false,
            read: |root, _| {
                let plugin = root.join("signed/p.wasm");
                if !plugin.exists() {
                    std::fs::copy(plugins::HOSTILE, &plugin).unwrap();
                }
                let signing =
                    hookhost::policy::allowlist::parse_signing_key("11".repeat(32).as_bytes())
                        .unwrap();
                let key = hookhost::config::schema::RawAllowEntry {
                    public_key: Some(hex::encode(signing.verifying_key().as_bytes())),
                    ..Default::default()
                };
                let (list, errors) = PluginAllowlist::new(&[("k".into(), 0, key)], true);
                assert!(errors.is_empty(), "{errors:?}");
                let spec = EventCatalogue::default().get("Stop").unwrap().clone();
                let invocation = Invocation::new(spec, json!({"session_id": "s"}), root).unwrap();
                let call = PluginCall::new(&plugin);
                let run = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(runtime().call_admitted(&call, &invocation, Some(&list)));
                match run.run.verdict {
                    Verdict::Failed(f) => Some(f.message),
                    _ => None,
                }
            },
        },
    ]
}

#[test]
fn every_reader_refuses_fifos_devices_symlinks_huge_and_foreign_files_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in [
        "project/.hookhost",
        "user",
        "managed",
        "data",
        "logs",
        "sessions/s",
        "plugins",
        "signed",
    ] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let mut refused = 0;
    for reader in readers() {
        let file = (reader.file)(&root);
        for what in ALL {
            if what == Hostile::Foreign && !reader.believes {
                continue;
            }
            if !plant(what, &file, reader.cap) {
                continue;
            }
            let error = (reader.read)(&root, &file)
                .unwrap_or_else(|| panic!("{} read {what:?} at {}", reader.name, file.display()));
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                error.contains(&name),
                "{} on {what:?}: the message does not name the file: {error}",
                reader.name
            );
            let why = [
                "not a regular file",
                "is a FIFO",
                "a character device",
                "symlink",
                "above the cap",
                "larger than",
                "owned by uid",
                "belongs to uid",
            ];
            assert!(
                why.iter().any(|w| error.contains(w)),
                "{} on {what:?}: the message does not say why: {error}",
                reader.name
            );
            refused += 1;
        }
        let _ = std::fs::remove_file(&file);
    }
    assert!(refused >= 45, "only {refused} refusals");
}
