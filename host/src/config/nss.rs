//! The password database through glibc's NSS (`getpwuid_r`), which may load a module
//! (`systemd`, `sss`, LDAP) with `dlopen`: only in `hookhost`, which is linked
//! dynamically. The small client `hookhost-dispatch` is linked statically and compiles
//! `config/passwd.rs` (the files) without this module, so it has no lookup here to call
//! (and `dispatch_client::the_small_client_links_no_nss_lookup` checks its binary).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::passwd::{Entry, from_files};

/// The largest buffer `getpwuid_r` is given for one entry.
const MAX_ENTRY: usize = 1 << 20;

/// The effective user's entry (login name and home), looked up once per process: the
/// files' answer when they can tell, else `getpwuid_r`'s. The home directory's default
/// and the audit log's user name are both read here, so they come from one look-up
/// (glibc's first NSS look-up in a process cost a one-shot `dispatch` ~60 µs).
pub fn this_user() -> Option<&'static Entry> {
    static USER: OnceLock<Option<Entry>> = OnceLock::new();
    USER.get_or_init(|| {
        let uid = super::file::effective_uid();
        from_files(uid).unwrap_or_else(|| from_nss(uid))
    })
    .as_ref()
}

/// `getpwuid_r`'s entry of `uid`, its home when absolute.
fn from_nss(uid: u32) -> Option<Entry> {
    let (name, dir) = entry(uid)?;
    let dir = PathBuf::from(OsString::from_vec(dir));
    Some(Entry {
        name,
        home: dir.is_absolute().then_some(dir),
    })
}

/// The password database's entry of `uid` through glibc's NSS (`getpwuid_r`): its login
/// name and home directory (empty when the entry has none).
fn entry(uid: u32) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buffer = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to overwrite.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let rc = loop {
        // SAFETY: every pointer is valid for the call and the buffer's length is passed;
        // the strings written point into `buffer`, which outlives their use below.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        // An entry longer than the buffer: a larger one, up to a bound.
        if rc != libc::ERANGE || buffer.len() >= MAX_ENTRY {
            break rc;
        }
        buffer.resize(buffer.len() * 4, 0);
    };
    if rc != 0 || found.is_null() {
        return None;
    }
    let bytes = |field: *const libc::c_char| {
        if field.is_null() {
            return Vec::new();
        }
        // SAFETY: getpwuid_r succeeded, so a field that is not null is a NUL-terminated
        // string in `buffer`, which is alive here.
        unsafe { std::ffi::CStr::from_ptr(field) }
            .to_bytes()
            .to_vec()
    };
    Some((bytes(entry.pw_name), bytes(entry.pw_dir)))
}

#[cfg(test)]
mod tests {
    /// Where the files can tell, they tell what glibc does (on this machine's files): the
    /// same login name and home.
    #[test]
    fn this_machines_files_agree_with_glibc_where_they_can_tell() {
        let uid = super::super::file::effective_uid();
        if let Some(from_files) = super::from_files(uid) {
            assert_eq!(from_files, super::from_nss(uid));
            assert_eq!(super::this_user(), from_files.as_ref());
        }
    }
}
