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
}
