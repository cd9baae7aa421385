use std::path::{Path, PathBuf};

use super::{Entry, MAX_PASSWD, passwd_sources};

/// The home of an answer, as `hookhost-dispatch` and `config::nss` take it.
fn homes(answer: Option<Option<Entry>>) -> Option<Option<PathBuf>> {
    answer.map(|entry| entry.and_then(|e| e.home))
}

fn home_in(passwd: &[u8], uid: u32) -> Option<Option<PathBuf>> {
    homes(super::entry_in(passwd, uid))
}

fn answer(
    nsswitch: &[u8],
    passwd: impl FnOnce() -> Option<Vec<u8>>,
    uid: u32,
) -> Option<Option<PathBuf>> {
    homes(super::answer(nsswitch, passwd, uid))
}

fn from_files_at(nsswitch: &Path, passwd: &Path, uid: u32) -> Option<Option<PathBuf>> {
    homes(super::from_files_at(nsswitch, passwd, uid))
}

const PASSWD: &[u8] = b"root:x:0:0:root:/root:/bin/bash\n\
    # a comment\n\
    \n\
    alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash\n\
    svc:x:0999:999::relative:/usr/sbin/nologin\n\
    alias:x:1000:1000::/home/second:/bin/sh\n";

fn home(path: &str) -> Option<Option<PathBuf>> {
    Some(Some(PathBuf::from(path)))
}

#[test]
fn the_first_line_with_the_uid_gives_the_home() {
    assert_eq!(home_in(PASSWD, 0), home("/root"));
    // glibc's files return the first entry with the uid, not a later alias.
    assert_eq!(home_in(PASSWD, 1000), home("/home/alice"));
    // Leading zeros are the same number (strtoul); a relative home is no home.
    assert_eq!(home_in(PASSWD, 999), Some(None));
    // Not in the file: an answer (no entry), which the caller weighs against nsswitch.
    assert_eq!(home_in(PASSWD, 4242), Some(None));
    // The login name of the same line.
    let name = |uid| super::entry_in(PASSWD, uid).flatten().map(|e| e.name);
    assert_eq!(name(1000).as_deref(), Some(&b"alice"[..]));
    assert_eq!(name(999).as_deref(), Some(&b"svc"[..]));
    // A shell field with colons in it is still the last field.
    assert_eq!(
        home_in(b"bob:x:7:7::/home/bob:/bin/sh:extra\n", 7),
        home("/home/bob")
    );
}

#[test]
fn a_line_glibc_might_read_otherwise_cannot_tell() {
    for odd in [
        "+alice::::::\n",
        "-bob:x:7:7::/home/bob:/bin/sh\n",
        " alice:x:1000:1000::/home/alice:/bin/sh\n",
        "alice:x:1000:1000::/home/alice\n",
        "alice:x::1000::/home/alice:/bin/sh\n",
        "alice:x:+1000:1000::/home/alice:/bin/sh\n",
        "alice:x: 1000:1000::/home/alice:/bin/sh\n",
        "alice:x:99999999999:1000::/home/alice:/bin/sh\n",
        // A gid glibc refuses: it skips the line.
        "alice:x:1000::/home/evil:/home/evil:/bin/sh\n",
        "alice:x:1000:-1::/home/evil:/bin/sh\n",
        "alice:x:1000:99999999999::/home/evil:/bin/sh\n",
        // C's blanks include `\v`: glibc reads these as a comment and a `+` line.
        "\x0b#alice:x:1000:1000::/home/evil:/bin/sh\n",
        "\x0b+alice:x:1000:1000::/home/evil:/bin/sh\n",
        // A NUL ends glibc's strings (its home would be `/home/a`).
        "alice:x:1000:1000::/home/a\0b:/bin/sh\n",
        "al\0ice:x:1000:1000::/home/evil:/bin/sh\n",
    ] {
        let text = format!("{odd}carol:x:1000:1000::/home/carol:/bin/sh\n");
        assert_eq!(home_in(text.as_bytes(), 1000), None, "{odd:?}");
    }
    // Only the lines up to the user's matter: glibc stops at the first match.
    let text = b"alice:x:1000:1000::/home/alice:/bin/sh\n+::::::\n";
    assert_eq!(home_in(text, 1000), home("/home/alice"));
}

#[test]
fn nsswitch_gives_the_passwd_sources_of_its_one_passwd_line() {
    let conf = b"# comment\npasswd:         files systemd\ngroup: files\n";
    assert_eq!(passwd_sources(conf).as_deref(), Some(&b"files systemd"[..]));
    let conf = b"passwd:files\n";
    assert_eq!(passwd_sources(conf).as_deref(), Some(&b"files"[..]));
    // glibc 2.36 reads a `#` after the sources as a source, older ones as a comment.
    assert_eq!(passwd_sources(b"passwd: files # evil\n"), None);
    let conf = b"passwd: files [NOTFOUND=return] sss\n";
    assert_eq!(
        passwd_sources(conf).as_deref(),
        Some(&b"files [NOTFOUND=return] sss"[..])
    );
    // None, or two: glibc's reading is not guessed.
    assert_eq!(passwd_sources(b"group: files\n"), None);
    assert_eq!(passwd_sources(b"passwd: files\npasswd: sss\n"), None);
    // A commented-out line is no line.
    assert_eq!(passwd_sources(b"#passwd: sss\n"), None);
    // glibc takes the last line, its name in any case, after C blanks (`\v` too), the
    // colon optional: each of these is a second line.
    for second in [
        "passwd evil",
        "PASSWD: evil",
        "\x0bpasswd: evil",
        "passwd\x0b: evil",
    ] {
        let conf = format!("passwd: files\n{second}\n");
        assert_eq!(passwd_sources(conf.as_bytes()), None, "{second:?}");
    }
    // A name that only starts like it is another database.
    let conf = b"passwd: files\npasswd_compat: nis\n";
    assert_eq!(passwd_sources(conf).as_deref(), Some(&b"files"[..]));
    assert_eq!(passwd_sources(b"passwd: files\0 evil\n"), None);
}

#[test]
fn the_files_answer_only_when_they_come_first_and_hold_the_user_or_are_alone() {
    let passwd = || Some(PASSWD.to_vec());
    let conf = |line: &str| format!("group: files\n{line}\n").into_bytes();
    // Files first, the user in them: their answer, whatever follows.
    assert_eq!(
        answer(&conf("passwd: files systemd"), passwd, 1000),
        home("/home/alice")
    );
    assert_eq!(answer(&conf("passwd: files"), passwd, 0), home("/root"));
    // Not in them: only when nothing follows is that the database's answer.
    assert_eq!(answer(&conf("passwd: files"), passwd, 4242), Some(None));
    assert_eq!(answer(&conf("passwd: files systemd"), passwd, 4242), None);
    assert_eq!(answer(&conf("passwd:\tfiles   sss"), passwd, 4242), None);
    // Another source first, an action after `files`, `compat`, a look-alike: NSS decides.
    for line in [
        "passwd: sss files",
        "passwd: files [NOTFOUND=return] sss",
        "passwd: files[SUCCESS=continue] sss",
        "passwd: compat",
        "passwd: filesystem",
        "passwd:",
    ] {
        assert_eq!(answer(&conf(line), passwd, 0), None, "{line}");
    }
    // The passwd file unreadable: no answer either.
    assert_eq!(answer(&conf("passwd: files"), || None, 0), None);
}

/// From the other side: what sits at the files' paths is read through the one reader.
/// A FIFO (or a device) is refused at once, not waited on; a file over the bound, or no
/// file, cannot tell; a symlink is followed, as glibc follows it.
#[test]
fn a_fifo_a_huge_file_or_no_file_cannot_tell_and_a_symlink_is_followed() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nsswitch.conf");
    let passwd = dir.path().join("passwd");
    std::fs::write(&conf, "passwd: files\n").unwrap();
    let fifo = dir.path().join("fifo");
    let name = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path it is given.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    // Nothing ever writes the FIFO: a reader that waited would hang the test.
    assert_eq!(from_files_at(&conf, &fifo, 0), None);
    assert_eq!(from_files_at(&fifo, &passwd, 0), None);
    assert_eq!(from_files_at(&conf, Path::new("/dev/zero"), 0), None);
    // Over the bound (a sparse file: no bytes written).
    let huge = std::fs::File::create(&passwd).unwrap();
    huge.set_len(MAX_PASSWD + 1).unwrap();
    assert_eq!(from_files_at(&conf, &passwd, 0), None);
    assert_eq!(from_files_at(&dir.path().join("none"), &passwd, 0), None);
    std::fs::write(&passwd, PASSWD).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&passwd, &link).unwrap();
    assert_eq!(from_files_at(&conf, &link, 1000), home("/home/alice"));
}
