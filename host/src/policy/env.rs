//! The one rule for names that hold credentials, and the allowlist that exempts some.
//!
//! [`is_credential_name`] decides, for every place that has to: the environment scrubber
//! of command hooks (a credential-looking variable is removed unless `envAllowlist`
//! names it), and the audit log (the value of a credential-looking JSON key, of a
//! `NAME=value` / `NAME: value` assignment, and of a URL query parameter is masked).
//! Keeping one rule means that a name the scrubber hides from hooks is never written in
//! clear to the log, and the other way round.
//!
//! Names are compared ASCII case-insensitively, as bytes: an environment variable's name
//! need not be UTF-8.

/// Substrings that mark a name as a credential wherever they occur (`GITHUB_TOKEN`,
/// `ENCRYPTION_KEY`, `apiKey`, `db_password`, `X-Authorization`).
pub const CREDENTIAL_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "KEY",
    "CREDENTIAL",
    "PRIVATE",
    "AUTHORIZATION",
    "OAUTH",
];

/// Prefixes of cloud credentials (`AWS_SESSION_TOKEN`, `GCP_SA_JSON`, `GOOGLE_…`).
pub const CREDENTIAL_PREFIXES: &[&str] = &["AWS_", "AZURE_", "GCP_", "GOOGLE_"];

/// Whole names of variables that usually embed credentials.
pub const CREDENTIAL_NAMES: &[&str] = &["DATABASE_URL", "NETRC"];

/// Words that mark a credential only as a whole segment of the name (segments are
/// separated by `_`, `-`, `.` and lower-to-upper camel-case steps): `BASIC_AUTH`,
/// `httpAuth`, `DB_PASS`, `GITHUB_PAT`, `SENTRY_DSN`, but not `AUTHOR`, `PASSTHROUGH`,
/// `PATH` or `PATTERN`.
pub const CREDENTIAL_SEGMENTS: &[&str] = &["AUTH", "PASS", "PAT", "DSN"];

/// Whether a name (an environment variable, a JSON key, the left side of an
/// assignment, a URL query parameter) looks like it holds a credential.
pub fn is_credential_name(name: &str) -> bool {
    is_credential_name_bytes(name.as_bytes())
}

/// [`is_credential_name`] on raw bytes (environment names need not be UTF-8).
pub fn is_credential_name_bytes(name: &[u8]) -> bool {
    let upper = name.to_ascii_uppercase();
    let contains = |needle: &str| {
        upper
            .windows(needle.len())
            .any(|window| window == needle.as_bytes())
    };
    CREDENTIAL_MARKERS.iter().any(|m| contains(m))
        || CREDENTIAL_PREFIXES
            .iter()
            .any(|p| upper.starts_with(p.as_bytes()))
        || CREDENTIAL_NAMES.iter().any(|n| upper == n.as_bytes())
        || segments(name).any(|segment| {
            CREDENTIAL_SEGMENTS
                .iter()
                .any(|s| segment.eq_ignore_ascii_case(s.as_bytes()))
        })
}

/// Lowercase literals of which every credential name contains at least one (compared
/// ASCII case-insensitively): a cheap pre-filter for text that may hold such a name.
pub fn credential_name_triggers() -> impl Iterator<Item = &'static str> {
    CREDENTIAL_MARKERS
        .iter()
        .chain(CREDENTIAL_PREFIXES)
        .chain(CREDENTIAL_NAMES)
        .chain(CREDENTIAL_SEGMENTS)
        .copied()
}

/// The segments of a name: split at `_`, `-`, `.`, and before an uppercase letter that
/// follows a lowercase letter or a digit.
fn segments(name: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(name);
    std::iter::from_fn(move || {
        let text = rest?;
        for (i, &byte) in text.iter().enumerate() {
            if matches!(byte, b'_' | b'-' | b'.') {
                rest = Some(&text[i + 1..]);
                return Some(&text[..i]);
            }
            if i > 0
                && byte.is_ascii_uppercase()
                && (text[i - 1].is_ascii_lowercase() || text[i - 1].is_ascii_digit())
            {
                rest = Some(&text[i..]);
                return Some(&text[..i]);
            }
        }
        rest = None;
        Some(text)
    })
}

/// Whether `name` matches an allowlist entry (`*` is a wildcard; case-sensitive).
pub fn allowlisted(name: &str, allowlist: &[String]) -> bool {
    allowlisted_bytes(name.as_bytes(), allowlist)
}

/// [`allowlisted`] on raw bytes (environment names need not be UTF-8).
pub fn allowlisted_bytes(name: &[u8], allowlist: &[String]) -> bool {
    allowlist
        .iter()
        .any(|pattern| wildcard_match(pattern.as_bytes(), name))
}

/// `*` matches any run of bytes (including none); everything else matches itself.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let parts: Vec<&[u8]> = pattern.split(|&b| b == b'*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in parts[1..parts.len() - 1].iter().filter(|p| !p.is_empty()) {
        match rest.windows(part.len()).position(|window| window == *part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        for name in [
            "GITHUB_TOKEN",
            "AWS_REGION",
            "ANTHROPIC_API_KEY",
            "db_password",
            "MY_SECRET_X",
            "DATABASE_URL",
            "ENCRYPTION_KEY",
            "SIGNING_KEY",
            "SSH_KEY",
            "MASTER_KEY",
            "GCP_PROJECT_SA",
            "key",
            "apiKey",
            "access_token",
            "Authorization",
            "BASIC_AUTH",
            "httpAuth",
            "DB_PASS",
            "GITHUB_PAT",
            "SENTRY_DSN",
            "OAUTH_CLIENT",
            "npm_config__auth",
            "GPG_PASSPHRASE",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "SHELL",
            "USER",
            "AUTHOR",
            "GIT_AUTHOR_NAME",
            "PWD",
            "OLDPWD",
            "PATTERN",
            "BYPASS",
            "page",
            "file_path",
            "session_id",
            "",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
        assert!(is_credential_name_bytes(b"\xffSECRET\xfe"));
        assert!(!is_credential_name_bytes(b"\xff\xfe"));
    }

    /// The triggers are a sound pre-filter: every name the rule flags contains one.
    #[test]
    fn every_credential_name_contains_a_trigger() {
        let triggers: Vec<String> = credential_name_triggers()
            .map(str::to_ascii_lowercase)
            .collect();
        let words = [
            "TOKEN", "Secret", "x", "AUTH", "pass", "Pat", "dsn", "AWS", "gcp", "Key", "url",
            "DATABASE", "NETRC", "oauth", "Author", "path",
        ];
        for a in words {
            for separator in ["_", "-", ".", ""] {
                for b in words {
                    let name = format!("{a}{separator}{b}");
                    if is_credential_name(&name) {
                        let lower = name.to_ascii_lowercase();
                        assert!(
                            triggers.iter().any(|t| lower.contains(t.as_str())),
                            "{name} has no trigger"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn segments_split_on_separators_and_camel_case() {
        let got: Vec<&[u8]> = segments(b"basicAuth_DB-pass.x9Y").collect();
        assert_eq!(got, [&b"basic"[..], b"Auth", b"DB", b"pass", b"x9", b"Y"]);
        assert_eq!(segments(b"").collect::<Vec<_>>(), [&b""[..]]);
    }

    #[test]
    fn allowlist_wildcards() {
        let list = vec![
            "GITHUB_TOKEN".to_string(),
            "NPM_*".to_string(),
            "*_PUBLIC_KEY".to_string(),
        ];
        assert!(allowlisted("GITHUB_TOKEN", &list));
        assert!(allowlisted("NPM_TOKEN", &list));
        assert!(allowlisted("SSH_PUBLIC_KEY", &list));
        assert!(!allowlisted("GITLAB_TOKEN", &list));
        assert!(wildcard_match(b"a*b*c", b"aXbYc"));
        assert!(!wildcard_match(b"a*b*c", b"aXcYb"));
        assert!(!wildcard_match(b"ab*ba", b"aba"));
        assert!(wildcard_match(b"a**b", b"ab"));
        assert!(allowlisted_bytes(b"NPM_\xff", &list));
    }
}
