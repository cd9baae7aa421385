//! How the two programs are linked on Linux, for their start-up: each is started once per
//! agent event, so its start-up is paid on every hook.
//!
//! - `hookhost` is a position-dependent executable. As a PIE, the dynamic loader must
//!   apply ~58,000 relative relocations to the 40 MB binary before `main`, touching (and
//!   copying) every page of its read-only data: most of the process's own start-up time.
//!   Linked at a fixed address, those relocations are resolved by the linker instead.
//! - The small client `hookhost-dispatch` is a static PIE with glibc: no dynamic loader,
//!   no `libc.so.6` and `libgcc_s.so.1` to map, relocate and fault in (measured: a call
//!   its daemon answers 0.75–0.79× of the same client dynamically linked). See
//!   [`static_client`].

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the tests read of the client's link (`static`, or `dynamic: why`).
const LINK_ENV: &str = "HOOKHOST_DISPATCH_CLIENT_LINK";

/// The trial link's program ([`trial_link`]): `static` when no shared object is mapped
/// into it.
const TRIAL_PROGRAM: &str = r#"fn main() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let shared = maps.lines().any(|l| l.ends_with(".so") || l.contains(".so."));
    print!("{}", if maps.is_empty() || shared { "dynamic" } else { "static" });
}
"#;

/// A variable cargo sets for build scripts ("" when unset).
fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn main() {
    let target_os = var("CARGO_CFG_TARGET_OS");
    let target_env = var("CARGO_CFG_TARGET_ENV");
    if target_os == "linux" {
        println!("cargo:rustc-link-arg-bin=hookhost=-no-pie");
    }
    let (host, target) = (var("HOST"), var("TARGET"));
    let link = if target_os == "linux" && target_env == "gnu" && host == target {
        match static_client() {
            Ok(()) => "static".to_string(),
            Err(why) => format!("dynamic: {why}"),
        }
    } else {
        format!(
            "dynamic: a static client is built for Linux with glibc only, on the target \
             itself (not {target_os}/{target_env}, {target} on {host})"
        )
    };
    println!("cargo:rustc-env={LINK_ENV}={link}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
}

/// Links `hookhost-dispatch` statically (`-static-pie`), as `-C target-feature=+crt-static`
/// would; `Err` (and a dynamically linked client, which behaves the same) when the C
/// toolchain has no static archive for one of the libraries, or a trial link of a small
/// program the same way fails or does not run ([`trial_link`]).
///
/// Cargo passes rustc flags to every crate of a build, and `crt-static` on the host's
/// target breaks the build's proc-macros, so the flag cannot be given to this one binary.
/// Its link line is rewritten instead, from the outside: rustc names std's and the `libc`
/// crate's libraries after `-Bdynamic` (`-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`);
/// a directory searched before the system's holds, for each of them, a `lib*.so` that is
/// a linker script naming the static archives (`libgcc_s.so` names `libgcc_eh.a` and
/// `libgcc.a`, as crt-static links). With `-static-pie` the C driver starts the program
/// with `rcrt1.o` (it relocates itself) and tells the linker `--no-dynamic-linker`.
/// A library rustc names that is not shadowed here, or a system library directory that
/// a dependency's build script puts before this one, would link a shared object into a
/// program without a loader: the trial link catches the first, and the tests check that
/// the client has neither an interpreter nor a needed library
/// (`dispatch_client::the_small_client_is_linked_statically`) and run it in every
/// client test.
///
/// A static glibc program must not load an NSS module (the `systemd` module crashes
/// in one): the client reads the password database's files itself and leaves every
/// other lookup to `hookhost` (`config/passwd.rs`).
fn static_client() -> Result<(), String> {
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_string());
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    if out.to_str().is_none_or(|o| o.contains(['\n', '\r'])) {
        return Err("its build directory's path cannot be passed to the linker".into());
    }
    let dir = out.join("static-client");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // libc.a needs libgcc's helpers, and GNU ld reads archives in order: glibc's group
    // carries them, as the C driver's own static link does.
    let libraries: [(&str, &[&str]); 7] = [
        ("c", &["libc.a", "libgcc.a", "libgcc_eh.a"]),
        ("m", &["libm.a"]),
        ("pthread", &["libpthread.a"]),
        ("rt", &["librt.a"]),
        ("dl", &["libdl.a"]),
        ("util", &["libutil.a"]),
        ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
    ];
    let mut scripts = Vec::new();
    for (name, archives) in libraries {
        let mut group = String::from("GROUP (");
        for archive in archives {
            let path = archive_path(&linker, archive)?;
            // A toolchain upgrade that moves or replaces it links the client again.
            println!("cargo:rerun-if-changed={}", path.display());
            let shown = path
                .to_str()
                .filter(|p| !p.contains('"'))
                .ok_or_else(|| format!("{archive} is at a path a linker script cannot name"))?;
            group.push_str(&format!(" \"{shown}\""));
        }
        group.push_str(" )\n");
        scripts.push((dir.join(format!("lib{name}.so")), group));
    }
    for (path, script) in scripts {
        std::fs::write(&path, script).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let args = [format!("-L{}", dir.display()), "-static-pie".to_string()];
    trial_link(&out, &args)?;
    for arg in args {
        println!("cargo:rustc-link-arg-bin=hookhost-dispatch={arg}");
    }
    Ok(())
}

/// Links a small program the way the client will be linked (this build's rustc, target,
/// flags and linker, and `link_args`), and runs it: it says whether a shared object is
/// mapped into it (`/proc/self/maps`). A linker that reads the scripts otherwise, flags
/// that cannot link statically, a C driver without `-static-pie`, a shared library that
/// slips in (a program without a loader that needs one crashes at once) or a link that
/// came out dynamic after all each leave the client dynamically linked instead.
fn trial_link(out: &Path, link_args: &[String]) -> Result<(), String> {
    let source = out.join("static-client-trial.rs");
    let program = out.join("static-client-trial");
    std::fs::write(&source, TRIAL_PROGRAM).map_err(|e| format!("{}: {e}", source.display()))?;
    let mut rustc = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()));
    rustc
        .args([
            "--edition=2024",
            "--crate-type=bin",
            "--target",
            &var("TARGET"),
        ])
        .arg("-o")
        .arg(&program)
        .arg(&source);
    for flag in var("CARGO_ENCODED_RUSTFLAGS")
        .split('\x1f')
        .filter(|f| !f.is_empty())
    {
        rustc.arg(flag);
    }
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        rustc.arg(format!("-Clinker={linker}"));
    }
    for arg in link_args {
        rustc.arg(format!("-Clink-arg={arg}"));
    }
    let linked = rustc
        .output()
        .map_err(|e| format!("cannot run rustc for a trial link: {e}"))?;
    if !linked.status.success() {
        let why = String::from_utf8_lossy(&linked.stderr);
        let first = why.lines().find(|l| l.contains("error")).unwrap_or("");
        return Err(format!("a trial static link failed: {first}"));
    }
    let ran = Command::new(&program)
        .output()
        .map_err(|e| format!("cannot run the trial program: {e}"))?;
    if !ran.status.success() || ran.stdout != b"static" {
        return Err(format!(
            "the trial program did not run statically ({}: {})",
            ran.status,
            String::from_utf8_lossy(&ran.stdout)
        ));
    }
    Ok(())
}

/// Where the C toolchain `linker` finds the static archive `name`.
fn archive_path(linker: &str, name: &str) -> Result<PathBuf, String> {
    let printed = Command::new(linker)
        .arg(format!("-print-file-name={name}"))
        .output()
        .map_err(|e| format!("cannot run `{linker}`: {e}"))?;
    let text = String::from_utf8(printed.stdout).unwrap_or_default();
    let path = Path::new(text.trim());
    // Not found, the driver prints the name back.
    if !printed.status.success() || !path.is_absolute() || !path.is_file() {
        return Err(format!(
            "`{linker}` has no {name} (glibc's static libraries: libc6-dev on Debian, \
             glibc-static on Fedora)"
        ));
    }
    Ok(path.to_path_buf())
}
