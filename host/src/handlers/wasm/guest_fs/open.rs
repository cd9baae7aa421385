//! `open-at`, made by the host rather than by wasmtime-wasi ([`super`]): relative to
//! the checked parent directory, without following a last symlink, non-blocking, and
//! judged by `fstat` of what was opened.

use std::fs::File;

use wasmtime::StoreContextMut;
use wasmtime::component::Resource;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, OpenFlags, PathFlags,
};

use super::{Answer, Target, follows, resolve_error, target};
use crate::handlers::wasm::state::{Refused, State};

/// `open-at`, made here ([the module](self)): the target checked (as [`State::change_target`]
/// checks), a descriptor taken from the host's budget, the file opened relative to the
/// checked parent without following a last symlink and without blocking, and the opened
/// descriptor's type decided by `fstat` before the guest gets it.
pub(super) async fn open_at(
    store: &mut StoreContextMut<'_, State>,
    fd: Resource<Descriptor>,
    path_flags: PathFlags,
    path: String,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Answer<Resource<Descriptor>> {
    let Some((dir, perms)) = store.data().dir_of(fd.rep())? else {
        return Ok((Err(ErrorCode::NotDirectory),));
    };
    // wasmtime-wasi's own refusals, in its order.
    if flags.intersects(
        DescriptorFlags::FILE_INTEGRITY_SYNC
            | DescriptorFlags::DATA_INTEGRITY_SYNC
            | DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Ok((Err(ErrorCode::Unsupported),));
    }
    if oflags.contains(OpenFlags::DIRECTORY)
        && oflags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE)
    {
        return Ok((Err(ErrorCode::Invalid),));
    }
    let mut mode = OpenMode::empty();
    let mut os = libc::O_NOFOLLOW;
    if oflags.contains(OpenFlags::CREATE) {
        os |= libc::O_CREAT;
        if oflags.contains(OpenFlags::EXCLUSIVE) {
            os |= libc::O_EXCL;
        }
        mode |= OpenMode::WRITE;
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        os |= libc::O_TRUNC;
        mode |= OpenMode::WRITE;
    }
    if oflags.contains(OpenFlags::DIRECTORY) {
        os |= libc::O_DIRECTORY;
    }
    if flags.contains(DescriptorFlags::WRITE) {
        mode |= OpenMode::WRITE;
    }
    if flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE) {
        mode |= OpenMode::READ;
    }
    os |= match (
        mode.contains(OpenMode::READ),
        mode.contains(OpenMode::WRITE),
    ) {
        (true, true) => libc::O_RDWR,
        (false, true) => libc::O_WRONLY,
        _ => libc::O_RDONLY,
    };
    if perms.write_not_permitted() && mode.contains(OpenMode::WRITE) {
        return Ok((Err(ErrorCode::NotPermitted),));
    }
    let change =
        mode.contains(OpenMode::WRITE) || flags.contains(DescriptorFlags::MUTATE_DIRECTORY);
    let target = match target(&dir, &path, follows(path_flags)) {
        Ok(t) => t,
        Err(e) => return Ok((Err(resolve_error(e)),)),
    };
    let real = target.real();
    let data = store.data_mut();
    if data.hidden("open-at", &real) {
        return Ok((Err(ErrorCode::NoEntry),));
    }
    if change && let Some(code) = data.change_refused("open-at", &real) {
        return Ok((Err(code),));
    }
    if let Err(refused) = data.descriptors.take() {
        data.limiter.refused = Some(Refused::Descriptor(refused));
        return Ok((Err(ErrorCode::Quota),));
    }
    let opened = tokio::task::spawn_blocking(move || open_target(&target, os, change))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    let descriptor = match opened {
        Ok(Opened::Dir(file)) => Descriptor::Dir(Dir::new(file, perms, mode, false)),
        Ok(Opened::File(file)) => Descriptor::File(wasmtime_wasi::filesystem::File::new(
            file, perms, mode, false,
        )),
        Ok(Opened::Refused | Opened::Linked) | Err(_) => {
            let data = store.data_mut();
            data.descriptors.untake();
            let code = match opened {
                Err(e) => resolve_error(e),
                Ok(Opened::Linked) => {
                    data.keep_refusal(linked_refusal("open-at", &real));
                    ErrorCode::NotPermitted
                }
                _ => ErrorCode::Access,
            };
            return Ok((Err(code),));
        }
    };
    let data = store.data_mut();
    match data.table.push(descriptor) {
        Ok(descriptor) => {
            data.descriptors.opened(descriptor.rep());
            Ok((Ok(descriptor),))
        }
        Err(e) => {
            data.descriptors.untake();
            Err(e.into())
        }
    }
}

/// What [`open_target`] opened.
enum Opened {
    File(File),
    Dir(File),
    /// Neither a regular file nor a directory: closed.
    Refused,
    /// A regular file with other names, opened to change it: closed.
    Linked,
}

/// The refusal of a change to a regular file with more than one name: the check sees
/// only the name the guest uses, and another (a hard link made from outside the
/// sandbox) may be host-owned (`.git/config`).
pub(super) fn linked_refusal(call: &str, real: &std::path::Path) -> String {
    format!(
        "`{call}` refused: `{}` has other names (hard links), which may be host-owned; \
         no plugin may change a file with more than one name",
        real.display()
    )
}

/// Opens `target` with `flags` (relative to its checked parent; non-blocking, no
/// controlling terminal, close-on-exec: [`crate::config::file::open_at_fd`]) and keeps it
/// only if `fstat` says it is a regular file or a directory: a FIFO, a device or a socket
/// swapped in at any moment is closed, never waited on.
fn open_target(target: &Target, flags: libc::c_int, change: bool) -> std::io::Result<Opened> {
    use std::os::unix::fs::MetadataExt;
    let name = if target.name.is_empty() {
        "."
    } else {
        &target.name
    };
    // A change truncates only once the file is known to have no other name.
    let file =
        crate::config::file::open_at_fd(&target.parent, name, flags & !libc::O_TRUNC, 0o666)?;
    let meta = file.metadata()?;
    if !(meta.is_file() || meta.is_dir()) {
        return Ok(Opened::Refused);
    }
    if change && meta.is_file() && meta.nlink() > 1 {
        return Ok(Opened::Linked);
    }
    if flags & libc::O_TRUNC != 0 {
        file.set_len(0)?;
    }
    // The guest's reads and writes of a regular file may wait, as wasmtime-wasi's do.
    crate::config::file::set_blocking(&file)?;
    Ok(if meta.is_dir() {
        Opened::Dir(file)
    } else {
        Opened::File(file)
    })
}
