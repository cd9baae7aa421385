//! Calls at a path, made by the host on what [`super::target`] checked: the syscall runs
//! relative to the checked parent directory's descriptor with the checked last name, so
//! a symlink swapped on the way after the check (by another writer of the same grant)
//! cannot carry a change into an owned place, nor a read to a private file, as
//! re-resolving the path's text would.

use std::ffi::CString;
use std::os::fd::AsRawFd;

use wasmtime::StoreContextMut;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorStat, ErrorCode, HostDescriptor, MetadataHashValue, NewTimestamp, PathFlags,
};
use wasmtime_wasi::{FsPerms, OpenMode};

use super::{Answer, Target, answer, follows, resolve_error, target};
use crate::handlers::wasm::state::State;

/// What to make at a checked target.
pub(super) enum Change {
    CreateDir,
    Unlink,
    RemoveDir,
    /// A symlink with this text.
    Symlink(String),
    /// Access and modification times.
    Times(NewTimestamp, NewTimestamp),
    /// A hard link of the target at this (checked) new place.
    Link(Target),
    /// The target renamed to this (checked) new place.
    Rename(Target),
}

impl State {
    /// The target of a change at `path` from the directory descriptor `fd`, checked (not hidden,
    /// not owned), after wasmtime-wasi's own refusals (a
    /// file descriptor, a read-only directory).
    pub(super) fn change_target(
        &mut self,
        call: &str,
        fd: u32,
        path: &str,
        follow: bool,
    ) -> wasmtime::Result<Result<Target, ErrorCode>> {
        let Some((dir, perms)) = self.dir_of(fd)? else {
            return Ok(Err(ErrorCode::NotDirectory));
        };
        if perms.write_not_permitted() {
            return Ok(Err(ErrorCode::NotPermitted));
        }
        let target = match target(&dir, path, follow) {
            Ok(t) => t,
            Err(e) => return Ok(Err(resolve_error(e))),
        };
        let real = target.real();
        if self.hidden(call, &real) {
            return Ok(Err(ErrorCode::NoEntry));
        }
        if let Some(code) = self.change_refused(call, &real) {
            return Ok(Err(code));
        }
        Ok(Ok(target))
    }
}

impl State {
    /// The target of a read at `path`, checked: not hidden.
    fn read_target(
        &mut self,
        call: &str,
        fd: u32,
        path: &str,
        follow: bool,
    ) -> wasmtime::Result<Result<(Target, FsPerms), ErrorCode>> {
        let Some((dir, perms)) = self.dir_of(fd)? else {
            return Ok(Err(ErrorCode::NotDirectory));
        };
        let target = match target(&dir, path, follow) {
            Ok(t) => t,
            Err(e) => return Ok(Err(resolve_error(e))),
        };
        if self.hidden(call, &target.real()) {
            return Ok(Err(ErrorCode::NoEntry));
        }
        Ok(Ok((target, perms)))
    }
}

/// What a path-reading call asks of its checked target.
#[derive(Clone, Copy)]
pub(super) enum Read {
    Stat,
    Hash,
}

/// The answer of `stat-at` or `metadata-hash-at`.
pub(super) enum ReadAnswer {
    Stat(DescriptorStat),
    Hash(MetadataHashValue),
}

/// `stat-at` and `metadata-hash-at` on what was checked: the target opened `O_PATH`
/// (never followed, never read) relative to its checked parent, and wasmtime-wasi's own
/// `stat` or `metadata-hash` of that descriptor (the same answers as of an opened file),
/// made on a table entry the guest never sees.
pub(super) async fn read_at(
    store: &mut StoreContextMut<'_, State>,
    call: &str,
    fd: u32,
    flags: PathFlags,
    path: &str,
    read: Read,
) -> Answer<ReadAnswer> {
    let (target, perms) = match store
        .data_mut()
        .read_target(call, fd, path, follows(flags))?
    {
        Ok(t) => t,
        Err(code) => return Ok((Err(code),)),
    };
    let opened = tokio::task::spawn_blocking(move || {
        let name = name_of(&target)?;
        let name = name.to_str().unwrap_or(".");
        crate::config::file::open_at_fd(&target.parent, name, libc::O_PATH | libc::O_NOFOLLOW, 0)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    let file = match opened {
        Ok(f) => f,
        Err(e) => return Ok((Err(resolve_error(e)),)),
    };
    let pinned = Descriptor::File(wasmtime_wasi::filesystem::File::new(
        file,
        perms,
        OpenMode::READ,
        false,
    ));
    let Ok(pinned) = store.data_mut().table.push(pinned) else {
        return Ok((Err(ErrorCode::InsufficientMemory),));
    };
    let borrow = Resource::<Descriptor>::new_borrow(pinned.rep());
    let mut view = store.data_mut().filesystem();
    let done = match read {
        Read::Stat => HostDescriptor::stat(&mut view, borrow)
            .await
            .map(ReadAnswer::Stat),
        Read::Hash => HostDescriptor::metadata_hash(&mut view, borrow)
            .await
            .map(ReadAnswer::Hash),
    };
    store.data_mut().table.delete(pinned)?;
    answer(store, done)
}

/// `readlink-at` on what was checked.
pub(super) async fn readlink_at(
    store: &mut StoreContextMut<'_, State>,
    fd: u32,
    path: &str,
) -> Answer<String> {
    let (target, _) = match store
        .data_mut()
        .read_target("readlink-at", fd, path, false)?
    {
        Ok(t) => t,
        Err(code) => return Ok((Err(code),)),
    };
    let text = tokio::task::spawn_blocking(move || {
        let name = name_of(&target)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: `name` is NUL-terminated, `buf` holds `buf.len()` bytes; readlinkat
        // writes at most that many and returns the count or -1.
        let n = unsafe {
            libc::readlinkat(
                target.parent.as_raw_fd(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(buf)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    Ok((match text {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| ErrorCode::IllegalByteSequence),
        Err(e) => Err(ErrorCode::from(e)),
    },))
}

fn name_of(target: &Target) -> std::io::Result<CString> {
    let name = if target.name.is_empty() {
        "."
    } else {
        &target.name
    };
    CString::new(name).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

fn timespec(t: NewTimestamp) -> libc::timespec {
    match t {
        NewTimestamp::NoChange => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        NewTimestamp::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        NewTimestamp::Timestamp(at) => libc::timespec {
            tv_sec: at.seconds.min(i64::MAX as u64) as libc::time_t,
            tv_nsec: i64::from(at.nanoseconds.min(999_999_999)) as _,
        },
    }
}

fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn make_now(target: &Target, change: &Change) -> std::io::Result<()> {
    let at = target.parent.as_raw_fd();
    let name = name_of(target)?;
    // SAFETY (every call below): the descriptors are open and owned by the targets, the
    // names are NUL-terminated and outlive the call; each syscall returns 0 or -1.
    check(unsafe {
        match change {
            Change::CreateDir => libc::mkdirat(at, name.as_ptr(), 0o777),
            Change::Unlink => libc::unlinkat(at, name.as_ptr(), 0),
            Change::RemoveDir => libc::unlinkat(at, name.as_ptr(), libc::AT_REMOVEDIR),
            Change::Symlink(text) => {
                let text = CString::new(text.as_str())
                    .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
                libc::symlinkat(text.as_ptr(), at, name.as_ptr())
            }
            Change::Times(atime, mtime) => {
                let times = [timespec(*atime), timespec(*mtime)];
                // The last name is the checked one: a symlink swapped in is not followed.
                libc::utimensat(at, name.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
            }
            Change::Link(new) => {
                let new_name = name_of(new)?;
                libc::linkat(
                    at,
                    name.as_ptr(),
                    new.parent.as_raw_fd(),
                    new_name.as_ptr(),
                    0,
                )
            }
            Change::Rename(new) => {
                let new_name = name_of(new)?;
                libc::renameat(at, name.as_ptr(), new.parent.as_raw_fd(), new_name.as_ptr())
            }
        }
    })
}

/// Makes `change` at `target` off the async thread, as wasmtime-wasi makes its calls.
pub(super) async fn make(target: Target, change: Change) -> Result<(), ErrorCode> {
    tokio::task::spawn_blocking(move || make_now(&target, &change))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        .map_err(ErrorCode::from)
}
