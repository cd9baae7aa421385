//! Binding the daemon's unix socket safely: only its own user can reach it, only a stale
//! socket of that user is replaced, and the socket file is removed only if it is still
//! the one bound.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::file::effective_uid;

/// A unix socket bound for `Server::serve_bound`: created with mode 0600 in a private
/// directory and only then linked at its path, so that no other user can connect to it
/// at any moment, whatever the umask.
#[derive(Debug)]
pub struct BoundSocket {
    pub(super) listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    /// The socket file's inode, when this process made it (and so removes it at the end);
    /// `None` for a socket passed by a supervisor, whose file is the supervisor's.
    inode: Option<u64>,
}

/// `sun_path` holds 108 bytes with its terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

fn refused(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{}: {why}", path.display()))
}

impl BoundSocket {
    /// Binds a socket at `path`. Only a stale socket of this user (one nothing listens
    /// on) is replaced; anything else at `path` (a live socket, a regular file, a
    /// symlink, a directory) is an error, and so is a directory that another user owns
    /// or may write to (without the sticky bit), since that user could swap the socket.
    ///
    /// # Errors
    ///
    /// The directory is missing or unsafe, the path is taken or too long, or binding
    /// fails; each message names the path.
    pub async fn bind(path: &Path) -> io::Result<BoundSocket> {
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(refused(
                path,
                format!("a socket path holds at most {MAX_SOCKET_PATH} bytes; this one has {len}"),
            ));
        }
        if path.file_name().is_none() {
            return Err(refused(path, "not a file name"));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = match std::fs::metadata(&parent) {
            Ok(meta) if meta.is_dir() => meta,
            Ok(_) => return Err(refused(&parent, "not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refused(
                    &parent,
                    "the directory does not exist (create it first)",
                ));
            }
            Err(e) => return Err(refused(&parent, e)),
        };
        let me = effective_uid();
        if dir.uid() != me && dir.uid() != 0 {
            return Err(refused(
                &parent,
                format!(
                    "the directory belongs to uid {}, who could replace the socket",
                    dir.uid()
                ),
            ));
        }
        if crate::config::file::Rule::Holder.mode_exceeds(&dir) {
            return Err(refused(
                &parent,
                "other users may write to this directory (and it has no sticky bit): they could replace the socket",
            ));
        }
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(refused(path, e)),
            Ok(meta) if !meta.file_type().is_socket() => {
                let kind = crate::config::file::kind_name(&meta);
                return Err(refused(
                    path,
                    format!("exists and is {kind}, not a socket (only a stale socket is replaced)"),
                ));
            }
            Ok(meta) if meta.uid() != me => {
                return Err(refused(
                    path,
                    format!("the socket belongs to uid {}; not replacing it", meta.uid()),
                ));
            }
            Ok(_) => match tokio::net::UnixStream::connect(path).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(|e| refused(path, e))?; // stale
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("a daemon already listens on {}", path.display()),
                    ));
                }
            },
        }
        // Bound where nobody else can reach it, made 0600, then linked into place: a
        // hard link fails if anything appeared at `path` meanwhile.
        let private = tempfile::Builder::new()
            .prefix(".hh")
            .rand_bytes(6)
            .tempdir_in(&parent)
            .map_err(|e| refused(&parent, format!("cannot create a private directory: {e}")))?;
        let staged = private.path().join("s");
        if staged.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(refused(
                path,
                format!(
                    "too long to bind safely: {} with a short file name fits in {MAX_SOCKET_PATH} bytes",
                    parent.display()
                ),
            ));
        }
        let listener = std::os::unix::net::UnixListener::bind(&staged)
            .map_err(|e| refused(path, format!("cannot bind: {e}")))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| refused(path, e))?;
        std::fs::hard_link(&staged, path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                refused(
                    path,
                    "something appeared at this path while the socket was bound",
                )
            } else {
                refused(path, e)
            }
        })?;
        drop(private); // removes the staging name and its directory
        let inode = std::fs::symlink_metadata(path)
            .map_err(|e| refused(path, e))?
            .ino();
        Ok(BoundSocket {
            listener,
            path: path.to_path_buf(),
            inode: Some(inode),
        })
    }

    /// A listening unix stream socket passed by a supervisor (systemd's socket
    /// activation: descriptor 3 with `LISTEN_FDS=1`), checked to be one: a socket, of the
    /// unix family, a stream, listening. It is made close-on-exec (so no hook inherits
    /// it), and its file is left in place at the end: it is the supervisor's.
    ///
    /// # Errors
    ///
    /// The descriptor is not a listening unix stream socket; the message says what it is.
    pub fn inherited(fd: std::os::fd::OwnedFd) -> io::Result<BoundSocket> {
        use std::os::fd::AsRawFd;
        let raw = fd.as_raw_fd();
        let not = |what: &str| {
            io::Error::other(format!(
                "the inherited descriptor {raw} (LISTEN_FDS) is not {what}"
            ))
        };
        let option = |name: libc::c_int| -> io::Result<libc::c_int> {
            let mut value: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `raw` is an open descriptor owned by `fd`; `value` and `len` are
            // valid for writes of the sizes passed.
            let rc = unsafe {
                libc::getsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    name,
                    (&mut value as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            if rc == 0 {
                Ok(value)
            } else {
                Err(io::Error::last_os_error())
            }
        };
        match option(libc::SO_DOMAIN) {
            Ok(libc::AF_UNIX) => {}
            Ok(_) => return Err(not("a unix socket")),
            Err(_) => return Err(not("a socket")),
        }
        if option(libc::SO_TYPE)? != libc::SOCK_STREAM {
            return Err(not("a stream socket (ListenStream=)"));
        }
        if option(libc::SO_ACCEPTCONN)? == 0 {
            return Err(not("listening"));
        }
        // SAFETY: fcntl on a descriptor `fd` owns; setting FD_CLOEXEC changes no memory.
        if unsafe { libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = std::os::unix::net::UnixListener::from(fd);
        let path = listener
            .local_addr()?
            .as_pathname()
            .map_or_else(|| PathBuf::from("(unnamed socket)"), Path::to_path_buf);
        Ok(BoundSocket {
            listener,
            path,
            inode: None,
        })
    }

    /// Where it is bound.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file, if this process made it and it is still this one.
    pub(super) fn remove(&self) {
        let Some(inode) = self.inode else {
            return;
        };
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
