//! The one reader of the host: every file hookhost reads (config sources, managed policy,
//! plugin files and their signatures, the trust store, session and env files, the compile
//! cache, the audit log for `hookhost audit`, agent settings for `install`) is opened by
//! [`open_checked`] (or its shorthands [`open_regular`], [`read_regular`],
//! [`sha256_regular`]), so that no file can hang, flood or fool it. A test
//! (`tests::every_open_goes_through_the_one_reader`) greps the sources and fails on any
//! other open that is not in its commented allow-table.
//!
//! A repository can carry a symlink to `/dev/zero`, `/dev/tty` or a FIFO where a config
//! file or a plugin is expected, and a plugin granted a directory can swap a FIFO into it.
//! So the file is opened with `O_NONBLOCK` (opening a FIFO with no writer, or a terminal,
//! returns at once instead of blocking) and `O_NOCTTY`, without following a symlink where
//! the caller says so ([`Open::no_follow`]: state the host keeps, and project files), the
//! *opened* file's type is checked (not the path's, which could change between a check
//! and the open), only a regular file is accepted, it is held to one owner and mode rule
//! ([`Rule`]) where the caller believes it, and no more than a cap of bytes is ever read.

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
    /// The path is a symlink and the reader does not follow one here.
    #[error("it is a symlink, which is not followed here")]
    Symlink,
    /// The owner or the mode of the file fails the [`Rule`] it is held to.
    #[error("{0}")]
    Unsafe(String),
    /// The open or the read failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl FileError {
    /// Whether the file is simply absent (optional sources skip it).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::NotFound)
    }

    /// Whether the open or the read failed for want of the host's own resources
    /// ([`is_host_failure`]), which says nothing about the file.
    pub fn is_host_failure(&self) -> bool {
        matches!(self, FileError::Io(e) if is_host_failure(e))
    }
}

/// Whether an I/O error is the host failing, not the file: out of descriptors (EMFILE,
/// ENFILE) or of memory (ENOMEM, ENOBUFS, an allocation that failed). The config loader
/// makes such a source a host error, never a broken file whose hooks are skipped
/// (`config::load`, [`crate::config::LoadedConfig::host_failures`]).
pub fn is_host_failure(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
    ) || e.kind() == std::io::ErrorKind::OutOfMemory
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

/// Who may own a file that is believed ([`Rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owners {
    /// This user (the effective uid).
    Me,
    /// Root.
    Root,
    /// This user or root.
    MeOrRoot,
}

impl Owners {
    fn uids(self) -> Vec<u32> {
        match self {
            Owners::Me => vec![effective_uid()],
            Owners::Root => vec![0],
            Owners::MeOrRoot => vec![effective_uid(), 0],
        }
    }
}

/// The one owner and mode rule of the host, with its named levels. Before it there were
/// three unrelated checks (`0o002` for managed policy, `0o022` for the trust store, the
/// cache and the audit log, `0o077` for session state and keys); they are levels of one
/// rule because they answer two different questions:
///
/// - [`Rule::Believed`] — *can anyone else change it?* For what decides what runs or what
///   is trusted (managed policy, the trust store, compile-cache records, the audit log):
///   owned by the listed owners, and writable by neither group nor others (`0o022`).
///   Managed policy used to allow a group-writable file (`0o002`); a group that can write
///   it can give itself any hook, so it is held to the same level now.
/// - [`Rule::Private`] — *can anyone else read it?* For this user's secrets (session state,
///   env files, the compile cache's key, the daemon's place): owned by this user, with no
///   group or other bits at all (`0o077`). The host's own private files are narrowed to
///   0600/0700 when wider ([`Rule::mode_exceeds`]), not refused.
/// - [`Rule::Holder`] — a directory that only *holds* files, each opened by name without
///   following a symlink and judged on its own (the audit log's, a socket's): owned by
///   this user or root, writable by others only when sticky (others cannot then replace
///   or remove what they do not own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Owned by these owners, writable by no one else.
    Believed(Owners),
    /// This user's, readable and writable by no one else.
    Private,
    /// A directory of this user or root, not writable by others unless sticky.
    Holder,
}

impl Rule {
    /// The mode bits this level forbids.
    pub fn forbidden_bits(self) -> u32 {
        match self {
            Rule::Believed(_) | Rule::Holder => 0o022,
            Rule::Private => 0o077,
        }
    }

    fn owners(self) -> Owners {
        match self {
            Rule::Believed(owners) => owners,
            Rule::Private => Owners::Me,
            Rule::Holder => Owners::MeOrRoot,
        }
    }

    /// Why the owner of `meta` fails this rule, if it does.
    pub fn owner_refusal(self, meta: &Metadata) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let owners = self.owners().uids();
        (!owners.contains(&meta.uid())).then(|| {
            format!(
                "it is owned by uid {}, not by {}",
                meta.uid(),
                owners
                    .iter()
                    .map(|u| format!("uid {u}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        })
    }

    /// Whether the mode of `meta` has bits this rule forbids (a sticky directory passes
    /// [`Rule::Holder`]).
    pub fn mode_exceeds(self, meta: &Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        let sticky = meta.is_dir() && meta.mode() & libc::S_ISVTX != 0;
        meta.mode() & self.forbidden_bits() != 0 && !(self == Rule::Holder && sticky)
    }

    /// Why `meta` fails this rule (owner first, then mode), if it does.
    pub fn judge(self, meta: &Metadata) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        if let Some(why) = self.owner_refusal(meta) {
            return Some(why);
        }
        if !self.mode_exceeds(meta) {
            return None;
        }
        let bits = meta.mode() & self.forbidden_bits();
        let verb = if self == Rule::Private {
            "can read or write"
        } else {
            "can write"
        };
        let who = match (bits & 0o070 != 0, bits & 0o007 != 0) {
            (true, true) => "its group and other users",
            (true, false) => "its group",
            _ => "other users",
        };
        Some(format!("{who} {verb} it (mode {:o})", meta.mode() & 0o7777))
    }
}

/// How [`open_checked`] opens a file: the size cap, whether a symlink is followed, the
/// directory handle the path is relative to, read or read-write, and the [`Rule`] the
/// opened file is held to.
#[derive(Debug, Clone, Copy)]
pub struct Open<'a> {
    cap: u64,
    follow: bool,
    dir: Option<&'a File>,
    access: Access,
    rule: Option<Rule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    ReadWrite,
    Create(u32),
}

impl Open<'static> {
    /// Read-only, following symlinks, at most `cap` bytes, any owner.
    pub fn read(cap: u64) -> Open<'static> {
        Open {
            cap,
            follow: true,
            dir: None,
            access: Access::Read,
            rule: None,
        }
    }
}

impl<'a> Open<'a> {
    /// A symlink at the path is refused ([`FileError::Symlink`]), not followed.
    pub fn no_follow(self) -> Open<'a> {
        Open {
            follow: false,
            ..self
        }
    }

    /// The path is relative to the open directory `dir` (`openat`).
    pub fn at<'b>(self, dir: &'b File) -> Open<'b> {
        Open {
            dir: Some(dir),
            cap: self.cap,
            follow: self.follow,
            access: self.access,
            rule: self.rule,
        }
    }

    /// Read-write; created with `mode` when absent if `create` is `Some(mode)`.
    pub fn write(self, create: Option<u32>) -> Open<'a> {
        Open {
            access: create.map_or(Access::ReadWrite, Access::Create),
            ..self
        }
    }

    /// The opened file must pass `rule` ([`FileError::Unsafe`] otherwise).
    pub fn rule(self, rule: Rule) -> Open<'a> {
        Open {
            rule: Some(rule),
            ..self
        }
    }
}

/// The one reader's open: `path` as `how` says, without blocking (a FIFO or a terminal
/// is refused, not waited on), without making a terminal the controlling terminal, and
/// checking the opened file, not the path: a regular file, of at most the cap, passing
/// the rule, and (opened to be written) with no other name (hard link).
///
/// # Errors
///
/// [`FileError::NotFound`], [`FileError::Symlink`], [`FileError::NotRegular`],
/// [`FileError::Unsafe`], [`FileError::TooLarge`], or the I/O error of the open.
pub fn open_checked(path: &Path, how: &Open<'_>) -> Result<(File, Metadata), FileError> {
    use std::os::fd::AsRawFd;
    let mut flags = 0;
    if !how.follow {
        flags |= libc::O_NOFOLLOW;
    }
    let mode: libc::c_uint = match how.access {
        Access::Read => 0,
        Access::ReadWrite => {
            flags |= libc::O_RDWR;
            0
        }
        Access::Create(mode) => {
            flags |= libc::O_RDWR | libc::O_CREAT;
            mode
        }
    };
    let dir = how.dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    let file = raw_open(dir, path.as_os_str(), flags, mode, false).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENOENT) => FileError::NotFound,
            Some(libc::ELOOP) if !how.follow => FileError::Symlink,
            // A FIFO opened for writing with no reader, or a device without its peer.
            Some(libc::ENXIO) => FileError::NotRegular("a FIFO or a device"),
            _ => FileError::Io(e),
        }
    })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_name(&meta)));
    }
    // Written to, a file with other names is written under each of them: a hard link
    // placed at the path the host was given (the agent's env file, in its own layout)
    // to `~/.bashrc` passes every check of the path and no-follow alike.
    if how.access != Access::Read && std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(FileError::Unsafe(format!(
            "it has {} names (hard links): what is written to it reaches each",
            std::os::unix::fs::MetadataExt::nlink(&meta)
        )));
    }
    if let Some(why) = how.rule.and_then(|rule| rule.judge(&meta)) {
        return Err(FileError::Unsafe(why));
    }
    if meta.len() > how.cap {
        return Err(FileError::TooLarge {
            size: meta.len(),
            cap: how.cap,
        });
    }
    Ok((file, meta))
}

/// The one open of the host (its own files through [`open_checked`], the wasm guest's
/// through [`open_beneath`] and [`open_at_fd`]): `flags` plus `O_NONBLOCK` (a FIFO or a
/// device is never waited on: the caller `fstat`s what it opened and decides),
/// `O_NOCTTY` and `O_CLOEXEC`; relative to `dir`, and with `beneath` resolved as
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (no absolute path, no `..` above
/// `dir`, no symlink out of it, no `/proc` magic link).
fn raw_open(
    dir: libc::c_int,
    path: &std::ffi::OsStr,
    flags: libc::c_int,
    mode: libc::c_uint,
    beneath: bool,
) -> std::io::Result<File> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // (`O_PATH` opens nothing, and openat2 takes no other access flag with it.)
    let flags = if flags & libc::O_PATH != 0 {
        flags | libc::O_CLOEXEC
    } else {
        flags | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC
    };
    let fd = if beneath {
        // SAFETY: an all-zero `open_how` is valid; its fields are set below.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = flags as u64;
        how.mode = if flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE {
            u64::from(mode)
        } else {
            0
        };
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: `name` is NUL-terminated, `how` a valid `open_how` of the size passed;
        // openat2 returns a new descriptor or -1.
        unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                name.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            ) as libc::c_int
        }
    } else {
        // SAFETY: `name` is NUL-terminated and `dir` an open directory or AT_FDCWD;
        // openat returns a new descriptor or -1.
        unsafe { libc::openat(dir, name.as_ptr(), flags, mode) }
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the open and is owned by nothing else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Opens `path` beneath the directory `dir` (`raw_open` with `beneath`): how the
/// sandbox resolves a guest's path, without blocking.
///
/// # Errors
///
/// The open's: `EXDEV` for a path that leaves `dir`, `ENOSYS` on kernels before 5.6
/// (the guest's filesystem calls then fail closed).
pub fn open_beneath(
    dir: &impl std::os::fd::AsRawFd,
    path: &str,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> std::io::Result<std::os::fd::OwnedFd> {
    raw_open(dir.as_raw_fd(), path.as_ref(), flags, mode, true).map(std::os::fd::OwnedFd::from)
}

/// Opens the single name `name` in the directory `dir` (`raw_open`; the caller adds
/// `O_NOFOLLOW` where a symlink must not be followed).
///
/// # Errors
///
/// The open's.
pub fn open_at_fd(
    dir: &impl std::os::fd::AsRawFd,
    name: &str,
    flags: libc::c_int,
    mode: libc::c_uint,
) -> std::io::Result<File> {
    if name.contains('/') {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    raw_open(dir.as_raw_fd(), name.as_ref(), flags, mode, true)
}

/// Clears `O_NONBLOCK` on a file opened by `raw_open`, for callers that read or write
/// it as an ordinary file once they have checked what it is.
///
/// # Errors
///
/// `fcntl`'s.
pub fn set_blocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor `file` owns.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Opens `path` for reading if it is a regular file of at most `cap` bytes
/// ([`open_checked`] with [`Open::read`]).
///
/// # Errors
///
/// As [`open_checked`].
pub fn open_regular(path: &Path, cap: u64) -> Result<(File, Metadata), FileError> {
    open_checked(path, &Open::read(cap))
}

/// Reads what [`open_checked`] opened, at most the cap; a file that grows past the cap
/// while it is read is refused too.
///
/// # Errors
///
/// As [`open_checked`], or the I/O error of the read.
pub fn read_checked(path: &Path, how: &Open<'_>) -> Result<(Vec<u8>, Metadata), FileError> {
    let (file, meta) = open_checked(path, how)?;
    let cap = how.cap;
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

/// Reads the regular file at `path`, at most `cap` bytes (see [`open_regular`]); a file
/// that grows past the cap while it is read is refused too.
///
/// # Errors
///
/// As [`open_regular`], or the I/O error of the read.
pub fn read_regular(path: &Path, cap: u64) -> Result<(Vec<u8>, Metadata), FileError> {
    read_checked(path, &Open::read(cap))
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

    /// When the file last changed: its ctime, which the kernel sets to the current time
    /// at every write or change of metadata. Not the mtime, which anyone who can write the
    /// file may set to any time: a future one would leave it "just changed" for ever (a
    /// daemon rebuilding it at every poll, a compile-cache digest never trusted).
    pub fn changed_at(&self) -> std::time::SystemTime {
        let (secs, nanos) = self.ctime;
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

/// The soft `RLIMIT_NOFILE` of this process (1024 when it cannot be read): how many files
/// the host may hold open, which every descriptor budget is cut from.
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct we pass; nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    }
}

#[cfg(test)]
#[path = "file/tests.rs"]
mod tests;
