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

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-link-arg-bin=hookhost=-no-pie");
    }
    let link = if target_os == "linux" && target_env == "gnu" {
        match static_client() {
            Ok(()) => "static".to_string(),
            Err(why) => format!("dynamic: {why}"),
        }
    } else {
        format!(
            "dynamic: a static client is built for Linux with glibc only, not {target_os}/{target_env}"
        )
    };
    println!("cargo:rustc-env={LINK_ENV}={link}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
}

/// Links `hookhost-dispatch` statically (`-static-pie`), as `-C target-feature=+crt-static`
/// would; `Err` (and a dynamically linked client, which behaves the same) when the C
/// toolchain has no static archive for one of the libraries.
///
/// Cargo passes rustc flags to every crate of a build, and `crt-static` on the host's
/// target breaks the build's proc-macros, so the flag cannot be given to this one binary.
/// Its link line is rewritten instead, from the outside: rustc names std's and the `libc`
/// crate's libraries after `-Bdynamic` (`-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`);
/// a directory searched before the system's holds, for each of them, a `lib*.so` that is
/// a linker script naming the static archives (`libgcc_s.so` names `libgcc_eh.a` and
/// `libgcc.a`, as crt-static links). With `-static-pie` the C driver starts the program
/// with `rcrt1.o` (it relocates itself) and tells the linker `--no-dynamic-linker`.
/// A library rustc names that is not shadowed here would be linked as a shared object
/// into a program without a loader: the tests check that the client has neither an
/// interpreter nor a needed library (`dispatch_client::the_small_client_is_linked_statically`),
/// and every client test runs it.
///
/// glibc's `getpwuid_r` (the password database's home, `config/env.rs`) in a static
/// program reads `/etc/passwd` as before; a user found only through another NSS module
/// (`systemd`, `sss`) is looked up by `dlopen`ing it, which needs the glibc the client
/// was built with. Should that fail, the client finds no home, computes another daemon's
/// key than `hookhost`, finds none, and `exec`s `hookhost` (slower, the same answer).
fn static_client() -> Result<(), String> {
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_string());
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let dir = out.join("static-client");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let libraries: [(&str, &[&str]); 7] = [
        ("c", &["libc.a"]),
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
    println!(
        "cargo:rustc-link-arg-bin=hookhost-dispatch=-L{}",
        dir.display()
    );
    println!("cargo:rustc-link-arg-bin=hookhost-dispatch=-static-pie");
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
