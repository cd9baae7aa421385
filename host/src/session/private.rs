//! The host's private files: directories only this user can reach, files only this user
//! can read, and whole-file replacement. Session state, the env file, the compile cache
//! and the dispatch daemon's sockets all go through these, so a private place is made
//! and checked one way.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::file::{Rule, effective_uid};

/// A failure of the user's state on disk (session state, the env file, the trust
/// notice's record): the path it happened at, and either the I/O error or why the path
/// was refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operation on the path failed.
    #[error("cannot {} `{}`{}: {source}", action.verb(), path.display(), action.tail())]
    Io {
        /// What was being done.
        action: StoreAction,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The path exists but is not what hookhost keeps state in (a symlink, another
    /// user's, not a regular file or directory).
    #[error("`{}` {reason}", path.display())]
    Refused {
        /// The file or directory.
        path: PathBuf,
        /// Why, as the rest of a sentence that starts with the path.
        reason: String,
    },
}

/// What was being done to a state path when the operating system refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreAction {
    /// Creating a directory or file.
    Create,
    /// Reading a file or a path's metadata.
    Read,
    /// Opening a file.
    Open,
    /// Taking a file's lock.
    Lock,
    /// Writing a file.
    Write,
    /// Narrowing a mode to this user's.
    MakePrivate,
}

impl StoreAction {
    /// The verb before the path in a message (`cannot read `x``).
    fn verb(self) -> &'static str {
        match self {
            StoreAction::Create => "create",
            StoreAction::Read => "read",
            StoreAction::Open => "open",
            StoreAction::Lock => "lock",
            StoreAction::Write => "write",
            StoreAction::MakePrivate => "make",
        }
    }

    /// The words after the path (`cannot make `x` private`).
    fn tail(self) -> &'static str {
        match self {
            StoreAction::MakePrivate => " private",
            _ => "",
        }
    }
}

impl StoreError {
    pub(crate) fn io(
        action: StoreAction,
        path: &Path,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.to_path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }

    pub(super) fn refused(path: &Path, reason: String) -> StoreError {
        StoreError::Refused {
            path: path.to_path_buf(),
            reason,
        }
    }
}

impl From<StoreError> for String {
    fn from(error: StoreError) -> String {
        error.to_string()
    }
}

/// Creates `dir` (and missing parents) with mode 0700 and checks the result: a
/// directory, not a symlink, owned by this user; one with a wider mode is narrowed to
/// 0700 (state from older versions was created 0755). The one way hookhost makes a
/// private directory (session state, caches, daemon sockets): its messages name no
/// particular use.
///
/// # Errors
///
/// It cannot be created, or is not a directory owned by this user.
pub fn private_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(StoreError::io(StoreAction::Create, dir))?;
    let meta = std::fs::symlink_metadata(dir).map_err(StoreError::io(StoreAction::Read, dir))?;
    if !meta.is_dir() {
        let kind = crate::config::file::kind_name(&meta);
        return Err(StoreError::refused(
            dir,
            format!("is {kind}, not a directory"),
        ));
    }
    if meta.uid() != effective_uid() {
        return Err(StoreError::refused(
            dir,
            format!(
                "belongs to uid {}, not to this user (uid {}); refusing to keep private files there",
                meta.uid(),
                effective_uid()
            ),
        ));
    }
    if Rule::Private.mode_exceeds(&meta) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(StoreError::io(StoreAction::MakePrivate, dir))?;
    }
    Ok(())
}

/// Opens a state file of this user's for reading and writing without following a
/// symlink or blocking on a FIFO, creating it 0600 when `create`; the opened file must
/// be a regular file owned by this user, and is narrowed to 0600 if its mode is wider.
///
/// # Errors
///
/// `Ok(None)`: absent and not `create`d. `Err`: anything else that is wrong, named.
pub fn open_private_file(path: &Path, create: bool) -> Result<Option<File>, StoreError> {
    use crate::config::file::{FileError, Open, open_checked};
    let how = Open::read(PRIVATE_FILE_CAP)
        .no_follow()
        .write(create.then_some(0o600));
    let (file, meta) = match open_checked(path, &how) {
        Ok(opened) => opened,
        Err(FileError::NotFound) if !create => return Ok(None),
        Err(FileError::Symlink) => {
            let reason = "is a symlink; refusing to follow it".to_string();
            return Err(StoreError::refused(path, reason));
        }
        Err(FileError::NotRegular(kind)) => {
            return Err(StoreError::refused(
                path,
                format!("is {kind}, not a regular file"),
            ));
        }
        Err(FileError::Io(e)) => return Err(StoreError::io(StoreAction::Open, path)(e)),
        Err(e) => return Err(StoreError::refused(path, e.to_string())),
    };
    if Rule::Private.owner_refusal(&meta).is_some() {
        return Err(StoreError::refused(
            path,
            format!(
                "belongs to uid {}, not to this user (uid {})",
                meta.uid(),
                effective_uid()
            ),
        ));
    }
    if Rule::Private.mode_exceeds(&meta) {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(StoreError::io(StoreAction::MakePrivate, path))?;
    }
    Ok(Some(file))
}

/// The largest private state file opened (session state, a session's env file): 16 MiB.
pub const PRIVATE_FILE_CAP: u64 = 16 << 20;

/// Writes `bytes` to `path` through a temporary file in the same private directory and
/// a rename: a reader never sees half a file, and a failed write leaves nothing behind
/// (tempfile removes its file on drop; it creates it 0600 with `O_EXCL`). The one atomic
/// write of the host's private state (sessions, the compile cache).
///
/// # Errors
///
/// The directory is not private ([`private_dir`]), or the write or the rename failed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().expect("state files live in a directory");
    private_dir(dir)?;
    let write = StoreError::io(StoreAction::Write, path);
    let mut tmp = match tempfile::NamedTempFile::new_in(dir) {
        Ok(tmp) => tmp,
        Err(e) => return Err(write(e)),
    };
    match tmp.write_all(bytes) {
        Ok(()) => tmp.persist(path).map(drop).map_err(|e| write(e.error)),
        Err(e) => Err(write(e)),
    }
}
