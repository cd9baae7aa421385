//! The effective user's entry in the password database (login name and home directory):
//! from `/etc/passwd` itself when `/etc/nsswitch.conf` says its files answer first, else
//! through glibc's NSS (`getpwuid_r`), which may load a module (`systemd`, `sss`, LDAP)
//! with `dlopen`.
//!
//! The small client `hookhost-dispatch` is linked statically, and a static glibc program
//! that loads an NSS module can crash in it (the `systemd` module dereferences a
//! thread-local it cannot have: SIGSEGV, which an agent takes for "let the tool run").
//! So the client asks [`from_files`] only, and when the files cannot tell (another source
//! first, or the user is not in them and another source follows) it `exec`s `hookhost`,
//! which is linked dynamically and asks NSS (`config/nss.rs`, which only `hookhost`
//! compiles: the client has no NSS lookup to call). Both programs take the files' answer
//! the same way, so they agree on the daemon's key. This module is compiled into both
//! (`dispatch_client.rs` includes it beside `config/env.rs` and `config/file.rs`).
//!
//! The reading is strict, and anything glibc might read differently (a line with `+` or
//! `-` in front, leading blanks, a uid that is not plain digits, an action such as
//! `[NOTFOUND=return]` after `files`, a second `passwd:` line) makes the files "unable to
//! tell": NSS then decides, in `hookhost`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The files read, and their bounds (a larger file cannot tell).
const NSSWITCH: &str = "/etc/nsswitch.conf";
const PASSWD: &str = "/etc/passwd";
const MAX_NSSWITCH: u64 = 64 << 10;
const MAX_PASSWD: u64 = 4 << 20;

/// A user's entry in the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The login name (bytes, as the database has them).
    pub name: Vec<u8>,
    /// The home directory, when it is absolute.
    pub home: Option<PathBuf>,
}

/// The entry of `uid` as the password database's files give it: `Some(Some(entry))`
/// found, `Some(None)` the files are the only source and do not hold it, `None` the files
/// cannot tell (see the module's documentation).
pub fn from_files(uid: u32) -> Option<Option<Entry>> {
    from_files_at(Path::new(NSSWITCH), Path::new(PASSWD), uid)
}

/// [`from_files`] with the two files at `nsswitch` and `passwd`: each read through the
/// one reader (a FIFO or a device is refused, not waited on), at most its bound.
fn from_files_at(nsswitch: &Path, passwd: &Path, uid: u32) -> Option<Option<Entry>> {
    let read = |path: &Path, cap| {
        super::file::read_regular(path, cap)
            .ok()
            .map(|(bytes, _)| bytes)
    };
    let conf = read(nsswitch, MAX_NSSWITCH)?;
    answer(&conf, || read(passwd, MAX_PASSWD), uid)
}

/// [`from_files`]' answer for the text of `nsswitch.conf` and the `passwd` file (read
/// only when the files come first).
fn answer(
    nsswitch: &[u8],
    passwd: impl FnOnce() -> Option<Vec<u8>>,
    uid: u32,
) -> Option<Option<Entry>> {
    let sources = passwd_sources(nsswitch)?;
    let mut words = sources.split(|&b| b == b' ');
    if words.next()? != b"files" {
        return None;
    }
    let next = words.next();
    if next.is_some_and(|word| word.starts_with(b"[")) {
        return None; // an action after `files`: what it does is not guessed
    }
    match entry_in(&passwd()?, uid)? {
        Some(entry) => Some(Some(entry)),
        // Not in the files: glibc would ask the next source.
        None if next.is_none() => Some(None),
        None => None,
    }
}

/// C's `isspace`, which glibc trims with: Rust's `is_ascii_whitespace` leaves out `\v`.
fn c_blank(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The sources of the `passwd` database in `nsswitch.conf`, blanks squeezed to one space
/// (`files systemd`); `None` when there is no such line, more than one (glibc takes the
/// last, its name in any case, the colon optional), or one this function might read
/// otherwise than glibc (a `#` after the sources: glibc 2.36 reads it as a source; a NUL).
fn passwd_sources(conf: &[u8]) -> Option<Vec<u8>> {
    if conf.contains(&0) {
        return None;
    }
    let mut found = None;
    for line in conf.split(|&b| b == b'\n') {
        let start = line.iter().position(|b| !c_blank(b)).unwrap_or(line.len());
        let line = &line[start..];
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        let name_end = line
            .iter()
            .position(|b| c_blank(b) || *b == b':')
            .unwrap_or(line.len());
        if !line[..name_end].eq_ignore_ascii_case(b"passwd") {
            continue;
        }
        if found.is_some() {
            return None;
        }
        let rest = &line[name_end..];
        let rest = &rest[rest.iter().position(|b| !c_blank(b)).unwrap_or(rest.len())..];
        let sources = rest.strip_prefix(b":")?;
        if sources.contains(&b'#') {
            return None;
        }
        let words: Vec<&[u8]> = sources.split(c_blank).filter(|w| !w.is_empty()).collect();
        found = Some(words.join(&b' '));
    }
    found
}

/// The entry of `uid` in the text of a `passwd` file: `Some(Some(entry))` on the first
/// line with that uid, `Some(None)` when no line has it, `None` when a line up to that
/// one is one glibc might read otherwise than this function (a NUL ends glibc's strings;
/// a line it would skip, such as a bad gid, or that `compat` syntax, `+` and `-`, would
/// make special).
fn entry_in(passwd: &[u8], uid: u32) -> Option<Option<Entry>> {
    let number = |field: &[u8]| -> Option<u32> {
        if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(field).ok()?.parse().ok()
    };
    for line in passwd.split(|&b| b == b'\n') {
        if line.contains(&0) {
            return None;
        }
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        if line.starts_with(b"+") || line.starts_with(b"-") || c_blank(&line[0]) {
            return None;
        }
        let fields: Vec<&[u8]> = line.splitn(7, |&b| b == b':').collect();
        let [name, _password, line_uid, gid, _gecos, dir, _shell] = fields[..] else {
            return None;
        };
        let (line_uid, _) = (number(line_uid)?, number(gid)?);
        if line_uid == uid {
            let dir = PathBuf::from(OsStr::from_bytes(dir));
            return Some(Some(Entry {
                name: name.to_vec(),
                home: dir.is_absolute().then_some(dir),
            }));
        }
    }
    Some(None)
}

#[cfg(test)]
#[path = "passwd/tests.rs"]
mod tests;
