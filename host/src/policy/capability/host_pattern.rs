//! Host patterns of HTTP grants and ceilings (`https://*.example.com:8443`): parsing,
//! matching an outgoing request, and whether one pattern lies within another.

use std::fmt;

/// A host pattern of an HTTP grant: `host`, `host:port`, `https://host`,
/// `http://host:8080`, `*.example.com`.
///
/// Without a scheme only `https` is allowed; plain `http` must be named. Without a port
/// only the scheme's default port is allowed. `*.example.com` matches subdomains of
/// `example.com`, not `example.com` itself. Host names compare case-insensitively and
/// literally: `localhost` does not match `127.0.0.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    pub(super) scheme: Scheme,
    pub(super) host: HostMatch,
    pub(super) port: Option<u16>,
    text: String,
}

/// The URL scheme of a request or pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
}

impl Scheme {
    /// The scheme's default port.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// Parses `http` / `https` (case-insensitive).
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// What a pattern's host part matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostMatch {
    /// One host, in normal form.
    Exact(String),
    /// `*.suffix`: stores `.suffix`.
    Subdomains(String),
}

impl HostPattern {
    /// Parses a grant pattern.
    ///
    /// # Errors
    ///
    /// A message saying what is wrong with the pattern.
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let original = text.trim();
        if original.is_empty() {
            return Err("empty host pattern".into());
        }
        let (scheme, rest) = match original.split_once("://") {
            Some((s, rest)) => (
                Scheme::parse(s)
                    .ok_or_else(|| format!("`{original}`: scheme must be http or https"))?,
                rest,
            ),
            None => (Scheme::Https, original),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(format!(
                "`{original}`: a host pattern has no path, query or user info"
            ));
        }
        let (host, port) =
            crate::policy::urls::split_port(rest).map_err(|e| format!("`{original}`: {e}"))?;
        let port = match port {
            None => None,
            Some(port) => {
                let port: u16 = port.parse().map_err(|_| {
                    format!("`{original}`: port `{port}` is not a number from 1 to 65535")
                })?;
                if port == 0 {
                    return Err(format!("`{original}`: port 0 is not a port"));
                }
                Some(port)
            }
        };
        // Hosts compare in the one normal form of `urls::normalize_host` (IDNA, case,
        // IPv4 forms, no trailing dot), on both the grant and the request side.
        let host = match host.strip_prefix("*.") {
            Some(suffix) => {
                let suffix = check_host(suffix, original)?;
                if suffix.starts_with('[') || suffix.parse::<std::net::Ipv4Addr>().is_ok() {
                    return Err(format!(
                        "`{original}`: `*.` must be followed by a domain name"
                    ));
                }
                HostMatch::Subdomains(format!(".{suffix}"))
            }
            None => HostMatch::Exact(check_host(host, original)?),
        };
        Ok(HostPattern {
            scheme,
            host,
            port,
            text: original.to_string(),
        })
    }

    /// Whether a request to `scheme://host:port` is allowed (`port` `None` = the scheme's
    /// default).
    pub fn allows(&self, scheme: Scheme, host: &str, port: Option<u16>) -> bool {
        if scheme != self.scheme {
            return false;
        }
        let port = port.unwrap_or(scheme.default_port());
        if port != self.port.unwrap_or(self.scheme.default_port()) {
            return false;
        }
        let Ok(host) = crate::policy::urls::normalize_host(host) else {
            return false;
        };
        match &self.host {
            HostMatch::Exact(h) => host == *h,
            HostMatch::Subdomains(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }

    /// Whether every request this pattern allows is also allowed by `outer` (for
    /// managed ceilings).
    pub fn within(&self, outer: &HostPattern) -> bool {
        let port = |p: &HostPattern| p.port.unwrap_or(p.scheme.default_port());
        if self.scheme != outer.scheme || port(self) != port(outer) {
            return false;
        }
        match (&self.host, &outer.host) {
            (HostMatch::Exact(a), HostMatch::Exact(b)) => a == b,
            (HostMatch::Exact(a), HostMatch::Subdomains(s)) => {
                a.len() > s.len() && a.ends_with(s.as_str())
            }
            (HostMatch::Subdomains(a), HostMatch::Subdomains(s)) => a.ends_with(s.as_str()),
            (HostMatch::Subdomains(_), HostMatch::Exact(_)) => false,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A grant's host in normal form; `*` anywhere but a leading `*.` is refused.
fn check_host(host: &str, original: &str) -> Result<String, String> {
    if host.contains('*') {
        return Err(format!("`{original}`: `{host}` is not a host name"));
    }
    crate::policy::urls::normalize_host(host).map_err(|e| format!("`{original}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Scheme::{Http, Https};

    #[test]
    fn host_patterns_check_scheme_host_and_port() {
        // (pattern, scheme, host, port, allowed)
        let cases: &[(&str, Scheme, &str, Option<u16>, bool)] = &[
            ("api.example.com", Https, "api.example.com", None, true),
            ("api.example.com", Https, "API.Example.com", Some(443), true),
            ("api.example.com", Http, "api.example.com", None, false),
            (
                "api.example.com",
                Https,
                "api.example.com",
                Some(8443),
                false,
            ),
            (
                "api.example.com",
                Https,
                "evil.api.example.com",
                None,
                false,
            ),
            (
                "api.example.com",
                Https,
                "api.example.com.evil.net",
                None,
                false,
            ),
            (
                "api.example.com:8443",
                Https,
                "api.example.com",
                Some(8443),
                true,
            ),
            (
                "api.example.com:8443",
                Https,
                "api.example.com",
                None,
                false,
            ),
            ("http://127.0.0.1:8080", Http, "127.0.0.1", Some(8080), true),
            (
                "http://127.0.0.1:8080",
                Https,
                "127.0.0.1",
                Some(8080),
                false,
            ),
            (
                "http://127.0.0.1:8080",
                Http,
                "localhost",
                Some(8080),
                false,
            ),
            ("http://example.com", Http, "example.com", Some(80), true),
            ("*.example.com", Https, "a.example.com", None, true),
            ("*.example.com", Https, "a.b.example.com", None, true),
            ("*.example.com", Https, "example.com", None, false),
            ("*.example.com", Https, "badexample.com", None, false),
            ("https://Example.COM/", Https, "example.com", None, true),
            // both sides in one normal form: case, trailing dot, IPv4 forms, IDNA, IPv6
            ("api.example.com", Https, "API.EXAMPLE.COM.", None, true),
            ("http://127.0.0.1:8080", Http, "0x7f.1", Some(8080), true),
            (
                "http://127.0.0.1:8080",
                Http,
                "2130706433",
                Some(8080),
                true,
            ),
            (
                "http://0x7f.0.0.1:8080",
                Http,
                "127.0.0.1",
                Some(8080),
                true,
            ),
            ("http://10.0.0.1:8080", Http, "0x7f.1", Some(8080), false),
            ("api.example.com", Https, "0x7f.1", None, false),
            (
                "http://127.0.0.1:8080",
                Http,
                "[::ffff:127.0.0.1]",
                Some(8080),
                false,
            ),
            ("http://[::1]:8080", Http, "[0::1]", Some(8080), true),
            ("http://[::1]", Http, "[::1]", None, true),
            ("bücher.example", Https, "xn--bcher-kva.example", None, true),
            ("*.example.com", Https, "A.EXAMPLE.com.", None, true),
            ("api.example.com", Https, "api.example.com%2e", None, false),
            ("api.example.com", Https, "", None, false),
        ];
        for &(pattern, scheme, host, port, allowed) in cases {
            let p = HostPattern::parse(pattern).unwrap();
            assert_eq!(
                p.allows(scheme, host, port),
                allowed,
                "{pattern} vs {scheme:?}://{host}:{port:?}"
            );
        }
    }

    #[test]
    fn bad_host_patterns_are_errors() {
        for bad in [
            "",
            "ftp://x.com",
            "x.com/path",
            "x.com:0",
            "x.com:99999",
            "user@x.com",
            "*.",
            "*",
            "a b",
            "a*.example.com",
            "*.127.0.0.1",
            "*.[::1]",
            "[::1",
            "x.com:port",
        ] {
            assert!(
                HostPattern::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}
