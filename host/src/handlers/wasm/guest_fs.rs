//! The guest's filesystem: the one place every `wasi:filesystem` call of a plugin that
//! names a path, changes a file or lists a directory passes, so that what the host owns
//! stays out of reach inside a grant as much as outside it.
//!
//! [`DESCRIPTOR_METHODS`] classifies every method of `descriptor` (a unit test holds it
//! to the WIT the linker defines: a method added to WASI fails CI until it is
//! classified). For each call that reaches a path, the target is resolved as the
//! sandbox resolves it ([`target`]: beneath the descriptor's directory, its parent's real
//! path from the kernel, its last name as given, a symlink in the last name followed
//! only when the call follows it), and then:
//!
//! - **Changes** (create, open for write or truncate, set times, link, rename, symlink,
//!   unlink, remove; and write, set-size, set-times and the write streams on an open
//!   descriptor, by the descriptor's own real path) are refused with `not-permitted`
//!   when the target is or lies inside a host-owned place a read-write grant may not
//!   reach ([`super::grants::PlaceGuard::owns`]), or has a component named in
//!   [`OWNED_DIR_NAMES`] or a last name in
//!   [`crate::policy::places::OWNED_FILE_NAMES`] (a nested `.git`, `.hookhost`,
//!   `.claude`, `.codex`, a `CLAUDE.md`): these are host-owned by their name wherever
//!   they are. Both ends of a link or a rename count (a hard link out of `.git` is a
//!   writable alias of what git runs), and a renamed directory counts for everything
//!   below it ([`walk`]: bounded, refused when too large to check). The change is then made by the host ([`at`]) on
//!   the checked parent's descriptor and the checked last name, not by re-resolving the
//!   path's text: a symlink swapped on the way after the check (by another writer of the
//!   same grant) carries nothing into an owned place.
//! - **Reads** of a private file ([`crate::policy::places::PRIVATE_FILES`]: the user's local settings) answer
//!   `no-entry`, and directory listings leave it out, whatever the grant.
//! - **Opens** (`open-at`) are made here, not by wasmtime-wasi: relative to the checked
//!   parent directory's descriptor with `O_NOFOLLOW` (so the path cannot change between
//!   the check and the open), non-blocking (a FIFO or a device swapped in cannot hold a
//!   thread), and the opened descriptor is `fstat`ed before the guest gets it: anything
//!   but a regular file or a directory is closed and refused with `access`.
//!
//! Every refusal is kept for the hook's diagnostics, naming the call and the path.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::FsPerms;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as fs, DescriptorFlags, ErrorCode, HostDescriptor, NewTimestamp, OpenFlags, PathFlags,
};
use wasmtime_wasi_io::streams::DynOutputStream;

mod at;
mod open;
mod walk;

use at::{Change, Read, ReadAnswer};

use super::hostcalls::{FUEL_PER_HOST_CALL, WASI, charge, cost};
use super::state::State;
use crate::policy::places::{owned_by_name, private_by_name};

/// What a method of `descriptor` does to the files it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Touch {
    /// Acts on its own open descriptor and changes nothing (or only flushes).
    Nothing,
    /// Lists its own directory: private files are left out.
    Lists,
    /// Changes its own open file or directory: checked by its real path.
    ChangesSelf,
    /// Looks a path up and reads what is there: private files are not found.
    ReadsPath,
    /// Creates, changes, links, renames or removes at a path (or two).
    ChangesPath,
    /// `open-at`: a change when it may write, create or truncate, a read otherwise.
    Opens,
}

/// Every method of `wasi:filesystem/types.descriptor`, as [`Touch`] classifies it.
pub(super) const DESCRIPTOR_METHODS: &[(&str, Touch)] = &[
    ("read-via-stream", Touch::Nothing),
    ("write-via-stream", Touch::ChangesSelf),
    ("append-via-stream", Touch::ChangesSelf),
    ("advise", Touch::Nothing),
    ("sync-data", Touch::Nothing),
    ("get-flags", Touch::Nothing),
    ("get-type", Touch::Nothing),
    ("set-size", Touch::ChangesSelf),
    ("set-times", Touch::ChangesSelf),
    ("read", Touch::Nothing),
    ("write", Touch::ChangesSelf),
    ("read-directory", Touch::Lists),
    ("sync", Touch::Nothing),
    ("create-directory-at", Touch::ChangesPath),
    ("stat", Touch::Nothing),
    ("stat-at", Touch::ReadsPath),
    ("set-times-at", Touch::ChangesPath),
    ("link-at", Touch::ChangesPath),
    ("open-at", Touch::Opens),
    ("readlink-at", Touch::ReadsPath),
    ("remove-directory-at", Touch::ChangesPath),
    ("rename-at", Touch::ChangesPath),
    ("symlink-at", Touch::ChangesPath),
    ("unlink-file-at", Touch::ChangesPath),
    ("is-same-object", Touch::Nothing),
    ("metadata-hash", Touch::Nothing),
    ("metadata-hash-at", Touch::ReadsPath),
];

/// The methods [`add`] defines, and those [`super::hostcalls`] checks (`write`,
/// `read-directory`): every method [`DESCRIPTOR_METHODS`] says reaches a path, changes a
/// file or lists one must be among them, or the linker is not built.
const CHECKED: &[&str] = &[
    "open-at",
    "create-directory-at",
    "unlink-file-at",
    "remove-directory-at",
    "readlink-at",
    "stat-at",
    "metadata-hash-at",
    "set-times-at",
    "link-at",
    "rename-at",
    "symlink-at",
    "set-size",
    "set-times",
    "write-via-stream",
    "append-via-stream",
    "write",
    "read-directory",
];

/// Symlinks followed in the last name of one path, as the kernel's `MAXSYMLINKS`.
const MAX_FOLLOWS: usize = 40;
/// Refusals kept per call for the diagnostics; more are counted.
const MAX_REFUSALS_KEPT: usize = 8;

/// A path as the sandbox reaches it: its parent directory, opened (`O_PATH`) and with its
/// real path, and its last name.
pub(super) struct Target {
    parent: OwnedFd,
    parent_real: PathBuf,
    /// The last name; empty when the path names its directory itself (`.`, `a/..`).
    name: String,
}

impl Target {
    /// Where the target is, symlinks of its parent resolved.
    pub(super) fn real(&self) -> PathBuf {
        if self.name.is_empty() {
            self.parent_real.clone()
        } else {
            self.parent_real.join(&self.name)
        }
    }
}

fn real_path_of(fd: &impl AsRawFd) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Resolves `path` from the directory `dir` as the sandbox does: beneath `dir` (an
/// absolute path, a `..` above it or a symlink out of it is `not-permitted`), every
/// directory on the way followed, and the last name followed too when `follow` (up to
/// [`MAX_FOLLOWS`] times, each link's text taken from where the link is).
pub(super) fn target(dir: &File, path: &str, follow: bool) -> std::io::Result<Target> {
    use crate::config::file::open_beneath;
    let mut path = path.to_owned();
    for _ in 0..MAX_FOLLOWS {
        let trimmed = path.trim_end_matches('/');
        let (parent, name) = match trimmed.rsplit_once('/') {
            Some(("", name)) => ("/", name),
            Some((parent, name)) => (parent, name),
            None => (".", trimmed),
        };
        if name.is_empty() || name == "." || name == ".." {
            let whole = if trimmed.is_empty() { "." } else { trimmed };
            let fd = open_beneath(dir, whole, libc::O_PATH | libc::O_DIRECTORY, 0)?;
            let parent_real = real_path_of(&fd)?;
            return Ok(Target {
                parent: fd,
                parent_real,
                name: String::new(),
            });
        }
        let fd = open_beneath(dir, parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        if follow && let Some(text) = link_text(&fd, name)? {
            if text.starts_with('/') {
                return Err(std::io::Error::from_raw_os_error(libc::EXDEV));
            }
            path = if parent == "." {
                text
            } else {
                format!("{parent}/{text}")
            };
            continue;
        }
        let parent_real = real_path_of(&fd)?;
        return Ok(Target {
            parent: fd,
            parent_real,
            name: name.to_owned(),
        });
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// The text of the symlink `name` in the directory `dir`, or `None` when it is absent or
/// not a symlink.
fn link_text(dir: &OwnedFd, name: &str) -> std::io::Result<Option<String>> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `c` is NUL-terminated, `buf` holds `buf.len()` bytes; readlinkat writes at
    // most that many and returns the count or -1.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINVAL | libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    buf.truncate(n as usize);
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EILSEQ))
}

/// The error a guest gets for a path that cannot be resolved: escapes are
/// `not-permitted`, as the sandbox answers them.
fn resolve_error(e: std::io::Error) -> ErrorCode {
    match e.raw_os_error() {
        Some(libc::EXDEV) => ErrorCode::NotPermitted,
        _ => ErrorCode::from(e),
    }
}

impl State {
    /// Why the guest may not change `real` (its call `call`), kept for the diagnostics.
    fn change_refused(&mut self, call: &str, real: &Path) -> Option<ErrorCode> {
        let why = self.places.owns(real, true).or_else(|| {
            owned_by_name(real)
                .map(|what| format!("`{}` is {what}, host-owned by its name", real.display()))
                .or_else(|| self.git_dirs.why(real))
        })?;
        self.keep_refusal(format!("`{call}` refused: {why}; no plugin may change it"));
        Some(ErrorCode::NotPermitted)
    }

    /// Whether `real` is hidden from the guest (a private file), kept for the diagnostics.
    fn hidden(&mut self, call: &str, real: &Path) -> bool {
        let Some(what) = private_by_name(real).or_else(|| {
            self.places
                .owns(real, false)
                .map(|_| "a place hookhost owns")
        }) else {
            return false;
        };
        self.keep_refusal(format!(
            "`{call}` of `{}` answered not found: {what} is private to the user",
            real.display()
        ));
        true
    }

    fn keep_refusal(&mut self, text: String) {
        if self.fs_refused.len() < MAX_REFUSALS_KEPT {
            self.fs_refused.push(text);
        } else {
            self.fs_refused_more += 1;
        }
    }

    /// The directory of a descriptor, or `None` for a file.
    fn dir_of(&self, fd: u32) -> wasmtime::Result<Option<(Arc<File>, FsPerms)>> {
        Ok(
            match self.table.get(&Resource::<Descriptor>::new_borrow(fd))? {
                Descriptor::Dir(d) => Some((d.dir.clone(), d.perms)),
                Descriptor::File(_) => None,
            },
        )
    }

    /// Whether two descriptors have the same permissions (wasmtime-wasi's rule for a
    /// link or rename between them); `true` when either is not a directory (the call
    /// then answers `not-directory`).
    fn same_perms(&self, a: u32, b: u32) -> wasmtime::Result<bool> {
        Ok(match (self.dir_of(a)?, self.dir_of(b)?) {
            (Some((_, a)), Some((_, b))) => a == b,
            _ => true,
        })
    }

    /// The refusal of a change to the descriptor's own file or directory.
    pub(super) fn self_change_refused(
        &mut self,
        call: &str,
        fd: u32,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let file = match self.table.get(&Resource::<Descriptor>::new_borrow(fd))? {
            Descriptor::Dir(d) => d.dir.clone(),
            Descriptor::File(f) => f.file.clone(),
        };
        let real = match real_path_of(&*file) {
            Ok(real) => real,
            Err(e) => return Ok(Some(ErrorCode::from(e))),
        };
        // A regular file with other names (hard links made from outside): one may be owned.
        if file.metadata().is_ok_and(|m| m.is_file() && m.nlink() > 1) {
            self.keep_refusal(open::linked_refusal(call, &real));
            return Ok(Some(ErrorCode::NotPermitted));
        }
        Ok(self.change_refused(call, &real))
    }

    /// Whether the entry `name` of the directory whose real path is `dir` may be listed.
    pub(super) fn listed(&self, dir: &Path, name: &str) -> bool {
        let real = dir.join(name);
        private_by_name(&real).is_none() && self.places.owns(&real, false).is_none()
    }

    /// The real path of a directory descriptor, for filtering its listing.
    pub(super) fn dir_real_path(&self, fd: u32) -> wasmtime::Result<Option<PathBuf>> {
        Ok(self
            .dir_of(fd)?
            .and_then(|(dir, _)| real_path_of(&*dir).ok()))
    }
}

/// The guest's answer for a refused or failed call.
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Converts a wasmtime-wasi result into the guest's answer.
fn answer<T>(
    store: &mut StoreContextMut<'_, State>,
    result: Result<T, wasmtime_wasi::p2::FsError>,
) -> Answer<T> {
    Ok((match result {
        Ok(v) => Ok(v),
        Err(e) => Err(fs::Host::convert_error_code(
            &mut store.data_mut().filesystem(),
            e,
        )?),
    },))
}

fn follows(flags: PathFlags) -> bool {
    flags.contains(PathFlags::SYMLINK_FOLLOW)
}

/// Adds the checked versions of every `descriptor` method that reaches a path or
/// changes its own file (`write` and `read-directory` are checked in
/// [`super::hostcalls`], which also meters them), over wasmtime-wasi's.
pub(super) fn add(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    for (name, touch) in DESCRIPTOR_METHODS {
        if *touch != Touch::Nothing && !CHECKED.contains(name) {
            wasmtime::bail!("`descriptor.{name}` ({touch:?}) is not checked (guest_fs::CHECKED)");
        }
    }
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI}"))?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, path_flags, path, oflags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                charge(&mut store, cost(path.len()))?;
                open::open_at(&mut store, fd, path_flags, path, oflags, flags).await
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store: StoreContextMut<'_, State>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                let target =
                    match data.change_target("create-directory-at", fd.rep(), &path, false)? {
                        Ok(t) => t,
                        Err(code) => return Ok((Err(code),)),
                    };
                Ok((at::make(target, Change::CreateDir).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.unlink-file-at",
        |mut store: StoreContextMut<'_, State>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                let target = match data.change_target("unlink-file-at", fd.rep(), &path, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                Ok((at::make(target, Change::Unlink).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        |mut store: StoreContextMut<'_, State>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                let target =
                    match data.change_target("remove-directory-at", fd.rep(), &path, false)? {
                        Ok(t) => t,
                        Err(code) => return Ok((Err(code),)),
                    };
                Ok((at::make(target, Change::RemoveDir).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.readlink-at",
        |mut store: StoreContextMut<'_, State>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move { at::readlink_at(&mut store, fd.rep(), &path).await })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.stat-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, flags, path): (Resource<Descriptor>, PathFlags, String)| {
            Box::new(async move {
                let got =
                    at::read_at(&mut store, "stat-at", fd.rep(), flags, &path, Read::Stat).await?;
                Ok((got.0.map(|got| match got {
                    ReadAnswer::Stat(v) => v,
                    _ => unreachable!("asked for stat"),
                }),))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.metadata-hash-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, flags, path): (Resource<Descriptor>, PathFlags, String)| {
            Box::new(async move {
                let got = at::read_at(
                    &mut store,
                    "metadata-hash-at",
                    fd.rep(),
                    flags,
                    &path,
                    Read::Hash,
                )
                .await?;
                Ok((got.0.map(|got| match got {
                    ReadAnswer::Hash(v) => v,
                    _ => unreachable!("asked for hash"),
                }),))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-times-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, flags, path, atime, mtime): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        )| {
            Box::new(async move {
                let data = store.data_mut();
                let target =
                    match data.change_target("set-times-at", fd.rep(), &path, follows(flags))? {
                        Ok(t) => t,
                        Err(code) => return Ok((Err(code),)),
                    };
                Ok((at::make(target, Change::Times(atime, mtime)).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, old_flags, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                // wasmtime-wasi's refusal: a link of what a symlink points at.
                if follows(old_flags) {
                    return Ok((Err(ErrorCode::Invalid),));
                }
                let data = store.data_mut();
                if !data.same_perms(fd.rep(), new_fd.rep())? {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                // The old name too: a hard link out of an owned place is a writable alias.
                let old = match data.change_target("link-at", fd.rep(), &old, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                let new = match data.change_target("link-at", new_fd.rep(), &new, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                Ok((at::make(old, Change::Link(new)).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            Box::new(async move {
                let data = store.data_mut();
                if !data.same_perms(fd.rep(), new_fd.rep())? {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let old = match data.change_target("rename-at", fd.rep(), &old, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                // A directory moves what it holds; each entry walked is charged as the
                // host call that would have listed it.
                let (refused, walked) = walk::rename_refusal(&old.parent, &old.name, &old.real());
                charge(&mut store, walked as u64 * FUEL_PER_HOST_CALL)?;
                let data = store.data_mut();
                if let Some(why) = refused {
                    data.keep_refusal(format!(
                        "`rename-at` refused: {why}; no plugin may move it"
                    ));
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                let new = match data.change_target("rename-at", new_fd.rep(), &new, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                Ok((at::make(old, Change::Rename(new)).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: StoreContextMut<'_, State>,
         (fd, text, new): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let data = store.data_mut();
                let target = match data.change_target("symlink-at", fd.rep(), &new, false)? {
                    Ok(t) => t,
                    Err(code) => return Ok((Err(code),)),
                };
                Ok((at::make(target, Change::Symlink(text)).await,))
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-size",
        |mut store: StoreContextMut<'_, State>, (fd, size): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                if let Some(code) = store.data_mut().self_change_refused("set-size", fd.rep())? {
                    return Ok((Err(code),));
                }
                let mut view = store.data_mut().filesystem();
                let done = HostDescriptor::set_size(&mut view, fd, size).await;
                answer(&mut store, done)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-times",
        |mut store: StoreContextMut<'_, State>,
         (fd, atime, mtime): (Resource<Descriptor>, NewTimestamp, NewTimestamp)| {
            Box::new(async move {
                if let Some(code) = store
                    .data_mut()
                    .self_change_refused("set-times", fd.rep())?
                {
                    return Ok((Err(code),));
                }
                let mut view = store.data_mut().filesystem();
                let done = HostDescriptor::set_times(&mut view, fd, atime, mtime).await;
                answer(&mut store, done)
            })
        },
    )?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |mut store: StoreContextMut<'_, State>,
         (fd, offset): (Resource<Descriptor>, u64)|
         -> Answer<Resource<DynOutputStream>> {
            let refused = store
                .data_mut()
                .self_change_refused("write-via-stream", fd.rep())?;
            if let Some(code) = refused {
                return Ok((Err(code),));
            }
            let mut view = store.data_mut().filesystem();
            let done = HostDescriptor::write_via_stream(&mut view, fd, offset);
            answer(&mut store, done)
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |mut store: StoreContextMut<'_, State>,
         (fd,): (Resource<Descriptor>,)|
         -> Answer<Resource<DynOutputStream>> {
            let refused = store
                .data_mut()
                .self_change_refused("append-via-stream", fd.rep())?;
            if let Some(code) = refused {
                return Ok((Err(code),));
            }
            let mut view = store.data_mut().filesystem();
            let done = HostDescriptor::append_via_stream(&mut view, fd);
            answer(&mut store, done)
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
