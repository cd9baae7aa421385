//! Reading files the host does not control — config sources from a repository, plugin
//! files, signatures, the trust store — so that no file can hang, flood or fool it.
//!
//! A repository can carry a symlink to `/dev/zero`, `/dev/tty` or a FIFO where a config
//! file or a plugin is expected. Every such read therefore goes through [`open_regular`]
//! or [`read_regular`]: the file is opened with `O_NONBLOCK` (opening a FIFO with no
//! writer, or a terminal, returns at once instead of blocking), the *opened* file's type
//! is checked (not the path's, which could change between a check and the open), only a
//! regular file is accepted, and no more than a cap of bytes is ever read from it.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// The most bytes read from one config source (a settings file, a `managed.d` entry,
/// `--settings FILE`) or from the trust store: 16 MiB.
pub const CONFIG_CAP: u64 = 16 << 20;

/// The most bytes read from one plugin file (hashed for workspace trust, digested for
/// the allowlist, compiled): 256 MiB. The sandbox's own reads use the same constant.
pub const PLUGIN_CAP: u64 = 256 << 20;

/// Why a file was not read. The message names what was found; callers add the path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// There is nothing at the path.
    #[error("no such file")]
    NotFound,
    /// Something other than a regular file is at the path (after following symlinks).
    #[error("not a regular file (it is {0})")]
    NotRegular(&'static str),
    /// The file is larger than the reader accepts.
    #[error("the file is {size} bytes, above the cap of {cap} bytes")]
    TooLarge {
        /// The size found (at open, or bytes read when it grew while read).
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// The open or the read failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl FileError {
    /// Whether the file is simply absent (optional sources skip it).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::NotFound)
    }
}

/// What kind of file the metadata describes, for messages.
pub fn kind_name(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let ty = meta.file_type();
    if ty.is_file() {
        "a regular file"
    } else if ty.is_dir() {
        "a directory"
    } else if ty.is_fifo() {
        "a FIFO"
    } else if ty.is_char_device() {
        "a character device"
    } else if ty.is_block_device() {
        "a block device"
    } else if ty.is_socket() {
        "a socket"
    } else if ty.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading if it is a regular file of at most `cap` bytes: without
/// blocking (a FIFO or a terminal is refused, not waited on), without making a terminal
/// the process's controlling terminal, and checking the opened file, not the path.
///
/// # Errors
///
/// [`FileError::NotFound`], [`FileError::NotRegular`], [`FileError::TooLarge`], or the
/// I/O error of the open.
pub fn open_regular(path: &Path, cap: u64) -> Result<(File, Metadata), FileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileError::NotFound,
            _ => FileError::Io(e),
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_name(&meta)));
    }
    if meta.len() > cap {
        return Err(FileError::TooLarge {
            size: meta.len(),
            cap,
        });
    }
    Ok((file, meta))
}

/// Reads the regular file at `path`, at most `cap` bytes (see [`open_regular`]); a file
/// that grows past the cap while it is read is refused too.
///
/// # Errors
///
/// As [`open_regular`], or the I/O error of the read.
pub fn read_regular(path: &Path, cap: u64) -> Result<(Vec<u8>, Metadata), FileError> {
    let (file, meta) = open_regular(path, cap)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(FileError::TooLarge {
            size: bytes.len() as u64,
            cap,
        });
    }
    Ok((bytes, meta))
}

/// The sha256 (lowercase hex) of the regular file at `path`, streamed from the opened
/// file (see [`open_regular`]) so that at most `cap` bytes are read and never held at
/// once.
///
/// # Errors
///
/// As [`open_regular`], or the I/O error of the read; [`FileError::TooLarge`] when the
/// file grew past the cap while it was read.
pub fn sha256_regular(path: &Path, cap: u64) -> Result<String, FileError> {
    use sha2::Digest;
    let (file, _) = open_regular(path, cap)?;
    let mut hasher = sha2::Sha256::new();
    let mut limited = file.take(cap.saturating_add(1));
    let mut buffer = vec![0u8; 64 << 10];
    let mut total: u64 = 0;
    loop {
        let n = limited.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > cap {
            return Err(FileError::TooLarge { size: total, cap });
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// What identifies one version of a file: device, inode, owner, mode, size, mtime and
/// ctime. Any write changes the mtime and the ctime, and no user can set a ctime back, so
/// an unchanged stamp means an unchanged file (the compile cache stamps its entries the
/// same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    uid: u32,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            mode: meta.mode(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of a directory as a place rather than a list: which directory (device,
    /// inode), whose it is and who may write it (owner, mode), not the comings and goings
    /// of its entries (they change its mtime and ctime). For a directory believed on who
    /// can write it (the trust store's, managed policy's) whose files are each stamped
    /// on their own: the host writing its session state or caches beside them is no
    /// change of policy.
    pub fn of_place(meta: &Metadata) -> FileStamp {
        FileStamp {
            size: 0,
            mtime: (0, 0),
            ctime: (0, 0),
            ..FileStamp::of(meta)
        }
    }

    /// When the file last changed (the later of its mtime and ctime).
    pub fn changed_at(&self) -> std::time::SystemTime {
        let (secs, nanos) = self.mtime.max(self.ctime);
        let since_epoch =
            std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
        std::time::UNIX_EPOCH + since_epoch
    }
}

/// The stamp as one line of text, as the compile cache records it: a change of the
/// format makes every record stale, so it stays as it is.
impl std::fmt::Display for FileStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dev={} ino={} size={} mtime={}.{:09} ctime={}.{:09}",
            self.dev, self.ino, self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1
        )
    }
}

/// Why a file or directory that decides security (the trust store, managed policy) is
/// not to be believed: owned by a user other than `owners` allows, or writable by
/// others (`forbidden_mode` bits, e.g. `0o022` for group and others).
pub fn unsafe_owner_or_mode(
    meta: &Metadata,
    owners: &[u32],
    forbidden_mode: u32,
) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if !owners.contains(&meta.uid()) {
        return Some(format!(
            "it is owned by uid {}, not by {}",
            meta.uid(),
            owners
                .iter()
                .map(|u| format!("uid {u}"))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    let writable = meta.mode() & forbidden_mode;
    if writable != 0 {
        let who = match (writable & 0o020 != 0, writable & 0o002 != 0) {
            (true, true) => "its group and other users",
            (true, false) => "its group",
            _ => "other users",
        };
        return Some(format!(
            "{who} can write it (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// The real location of `path` (symlinks resolved), `None` where it does not resolve:
/// what [`crate::policy::ResolveOptions::real_path`] compares directory grants and their
/// ceilings by.
pub fn real_path(path: &Path) -> Option<std::path::PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// The effective uid of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, b"{}").unwrap();
        let (bytes, meta) = read_regular(&path, 10).unwrap();
        assert_eq!(bytes, b"{}");
        assert!(meta.is_file());
    }

    #[test]
    fn what_is_not_a_small_regular_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would hang here.
        assert!(matches!(
            read_regular(&fifo, 10),
            Err(FileError::NotRegular("a FIFO"))
        ));
        assert!(matches!(
            read_regular(Path::new("/dev/zero"), 10),
            Err(FileError::NotRegular("a character device"))
        ));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_regular(&link, 10),
            Err(FileError::NotRegular(_))
        ));
        assert!(matches!(
            read_regular(dir.path(), 10),
            Err(FileError::NotRegular("a directory"))
        ));
        assert!(
            read_regular(&dir.path().join("absent"), 10)
                .unwrap_err()
                .is_not_found()
        );
        let big = dir.path().join("big");
        std::fs::write(&big, [b' '; 11]).unwrap();
        assert!(matches!(
            read_regular(&big, 10),
            Err(FileError::TooLarge { size: 11, cap: 10 })
        ));
    }

    #[test]
    fn digests_stream_under_the_cap_and_refuse_devices() {
        use sha2::Digest;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.wasm");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            sha256_regular(&path, 200_000).unwrap(),
            hex::encode(sha2::Sha256::digest(&bytes))
        );
        assert!(matches!(
            sha256_regular(&path, 199_999),
            Err(FileError::TooLarge { .. })
        ));
        assert!(matches!(
            sha256_regular(Path::new("/dev/zero"), PLUGIN_CAP),
            Err(FileError::NotRegular(_))
        ));
    }

    #[test]
    fn stamps_change_with_any_write_and_owners_and_modes_are_judged() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"ab").unwrap();
        let before = FileStamp::of(&std::fs::metadata(&path).unwrap());
        // Same size, same mtime set back: the ctime still moves.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"cd").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let after = FileStamp::of(&std::fs::metadata(&path).unwrap());
        assert_ne!(before, after);

        let me = effective_uid();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(unsafe_owner_or_mode(&meta, &[me], 0o022), None);
        assert!(
            unsafe_owner_or_mode(&meta, &[me + 1], 0o022)
                .unwrap()
                .contains("owned by uid")
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(
            unsafe_owner_or_mode(&meta, &[me], 0o022)
                .unwrap()
                .contains("other users can write it (mode 646)")
        );
    }
}
