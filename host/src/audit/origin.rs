//! Where a line comes from, for a SIEM that collects the logs of many machines: the
//! machine's host name, the user (by the password database, never `$USER`), the
//! hookhost version, and the digest of the managed policy in force.

use std::sync::OnceLock;

use serde::Serialize;

/// The `host`, `user`, `hookhostVersion` and `managedPolicy` of every line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The machine's host name (`gethostname`); empty when it has none.
    host: String,
    /// The user's login name from the password database, else the uid in digits.
    user: String,
    /// This hookhost's version.
    #[serde(rename = "hookhostVersion")]
    version: &'static str,
    /// `sha256:<hex>` over the managed policy files in force (their names and bytes), when
    /// there are any ([`crate::policy::Settings::managed_digest`]).
    #[serde(rename = "managedPolicy", skip_serializing_if = "Option::is_none")]
    managed_policy: Option<String>,
}

impl Origin {
    /// This machine and user, with the managed policy of digest `managed_policy`.
    pub fn here(managed_policy: Option<String>) -> Origin {
        static MACHINE: OnceLock<(String, String)> = OnceLock::new();
        let (host, user) = MACHINE.get_or_init(|| (host_name(), user_name()));
        Origin {
            host: host.clone(),
            user: user.clone(),
            version: env!("CARGO_PKG_VERSION"),
            managed_policy,
        }
    }
}

/// `gethostname`, lossy (empty when it fails).
fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its length; gethostname NUL-terminates
    // within it (or truncates, which the search for NUL below bounds).
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// The longest login name written (Linux's `LOGIN_NAME_MAX`, 256 bytes with its NUL): a
/// longer one, which only whoever writes the password files could make, is written as
/// the uid instead of being copied into every audit line.
const MAX_USER_NAME: usize = 255;

/// The effective user's login name (the password database, [`crate::config::nss`]), else
/// its uid.
fn user_name() -> String {
    let name = crate::config::nss::this_user().map(|user| user.name.as_slice());
    shown_user(name, crate::config::file::effective_uid())
}

/// `name` as the audit line shows it: lossy UTF-8, or `uid` when it is empty, absent or
/// over [`MAX_USER_NAME`].
fn shown_user(name: Option<&[u8]>, uid: u32) -> String {
    match name {
        Some(name) if !name.is_empty() && name.len() <= MAX_USER_NAME => {
            String::from_utf8_lossy(name).into_owned()
        }
        _ => uid.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_name_is_bounded_and_never_empty() {
        assert_eq!(shown_user(Some(b"alice"), 7), "alice");
        assert_eq!(shown_user(Some(&[b'a'; MAX_USER_NAME][..]), 7).len(), 255);
        assert_eq!(shown_user(Some(&[b'a'; MAX_USER_NAME + 1][..]), 7), "7");
        assert_eq!(shown_user(Some(b""), 7), "7");
        assert_eq!(shown_user(None, 7), "7");
        assert_eq!(shown_user(Some(b"\xffx"), 7), "\u{fffd}x");
    }

    #[test]
    fn the_origin_names_this_machine_and_user() {
        let origin = Origin::here(Some("sha256:ab".into()));
        let line = serde_json::to_value(&origin).unwrap();
        assert_eq!(line["hookhostVersion"], env!("CARGO_PKG_VERSION"));
        assert_eq!(line["managedPolicy"], "sha256:ab");
        assert!(!line["user"].as_str().unwrap().is_empty());
        let without = serde_json::to_value(Origin::here(None)).unwrap();
        assert!(without.get("managedPolicy").is_none());
    }
}
