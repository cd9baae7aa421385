//! URLs and hosts under allowlists: `allowedHttpHookUrls` (where HTTP hooks may post), and
//! the host normalisation that the wasm HTTP grants and the managed ceilings share.
//!
//! A URL is parsed once, with the `url` crate (the WHATWG URL standard, the parser reqwest
//! itself uses), and its parts are matched separately: scheme, host (after IDNA, case
//! folding, IPv4 normalisation such as `0x7f.1` → `127.0.0.1`, and without a trailing dot),
//! port (the scheme's default when absent), and the normalised path (`..` and `%2e%2e`
//! segments resolved). A URL with user info, without a host, or with an encoded `.`, `/` or
//! `\` left in its path is refused whatever the patterns say: each is a way to make one
//! string mean two places.

use regex::Regex;
use url::{Host, Url};

/// The longest URL pattern accepted.
pub const MAX_URL_PATTERN_BYTES: usize = 2048;

/// The most `*` a URL pattern may hold.
pub const MAX_URL_WILDCARDS: usize = 16;

/// A host name or address in the one form every allowlist compares: a lowercase ASCII
/// domain (IDNA applied) without a trailing dot, a dotted IPv4 address, or a bracketed IPv6
/// address.
///
/// # Errors
///
/// A message when `host` is empty or not a valid host.
pub fn normalize_host(host: &str) -> Result<String, String> {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    if trimmed.is_empty() {
        return Err("the host is empty".into());
    }
    match Host::parse(trimmed) {
        Ok(Host::Domain(domain)) if domain.is_empty() || domain.ends_with('.') => {
            Err(format!("`{host}` is not a host name"))
        }
        Ok(Host::Domain(domain)) => Ok(domain),
        Ok(Host::Ipv4(address)) => Ok(address.to_string()),
        Ok(Host::Ipv6(address)) => Ok(format!("[{address}]")),
        Err(e) => Err(format!("`{host}` is not a host name: {e}")),
    }
}

/// Parses a URL that a hook will be sent to, refusing the forms that could mean another
/// place than they seem to. The fragment is dropped (it is never sent).
///
/// # Errors
///
/// Why the URL is refused.
pub fn parse_target(url: &str) -> Result<Url, String> {
    let mut parsed = Url::parse(url).map_err(|e| format!("it is not a valid URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("scheme `{}` is not http or https", parsed.scheme()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("it has user info (`user@`), which hides the real host".into());
    }
    match parsed.host() {
        None => return Err("it has no host".into()),
        Some(Host::Domain("")) => return Err("its host is empty".into()),
        Some(_) => {}
    }
    let path = parsed.path().to_ascii_lowercase();
    if path.contains("%2e") || path.contains("%2f") || path.contains("%5c") {
        return Err(
            "its path has an encoded `.`, `/` or `\\`, which a server may decode into another path"
                .into(),
        );
    }
    parsed.set_fragment(None);
    Ok(parsed)
}

/// One `allowedHttpHookUrls` pattern: `scheme://host[:port][/path]`, with `*` wildcards.
#[derive(Debug, Clone)]
struct UrlPattern {
    /// `None`: http or https.
    scheme: Option<&'static str>,
    host: HostPattern,
    port: PortPattern,
    /// Matched against the path and query; `None`: any path.
    path: Option<Regex>,
}

#[derive(Debug, Clone)]
enum HostPattern {
    Any,
    Exact(String),
    /// `*.example.com`: stores `.example.com`.
    Subdomains(String),
}

#[derive(Debug, Clone, Copy)]
enum PortPattern {
    Any,
    /// No port in the pattern: the scheme's default port only.
    Default,
    Exact(u16),
}

impl UrlPattern {
    fn parse(text: &str) -> Result<UrlPattern, String> {
        let pattern = text.trim();
        if pattern.len() > MAX_URL_PATTERN_BYTES {
            return Err(format!(
                "URL pattern `{}` is longer than {MAX_URL_PATTERN_BYTES} bytes",
                crate::matcher::shell::clip(pattern)
            ));
        }
        let bad = |why: &str| format!("URL pattern `{pattern}`: {why}");
        if pattern.matches('*').count() > MAX_URL_WILDCARDS {
            return Err(bad(&format!("more than {MAX_URL_WILDCARDS} `*`")));
        }
        if pattern == "*" {
            return Ok(UrlPattern {
                scheme: None,
                host: HostPattern::Any,
                port: PortPattern::Any,
                path: None,
            });
        }
        let (scheme, rest) = pattern
            .split_once("://")
            .ok_or_else(|| bad("expected `http://`, `https://` or `*://` before the host"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Some("http"),
            "https" => Some("https"),
            "*" => None,
            _ => return Err(bad("the scheme must be http, https or *")),
        };
        if rest.contains('\\') {
            return Err(bad("a backslash is not allowed"));
        }
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(bad("user info (`user@`) is not allowed"));
        }
        if path.contains('#') {
            return Err(bad("a fragment (`#`) is not allowed"));
        }
        let (host, port) = split_port(authority).map_err(|e| bad(&e))?;
        let port = match port {
            None => PortPattern::Default,
            Some("*") => PortPattern::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => PortPattern::Exact(n),
                _ => {
                    return Err(bad(&format!(
                        "port `{p}` is not `*` or a number from 1 to 65535"
                    )));
                }
            },
        };
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            let suffix = normalize_host(suffix).map_err(|e| bad(&e))?;
            if suffix.starts_with('[') || suffix.parse::<std::net::Ipv4Addr>().is_ok() {
                return Err(bad("`*.` must be followed by a domain name"));
            }
            HostPattern::Subdomains(format!(".{suffix}"))
        } else if host.contains('*') {
            return Err(bad(
                "a `*` in the host must be the whole host or its first label (`*.example.com`)",
            ));
        } else {
            HostPattern::Exact(normalize_host(host).map_err(|e| bad(&e))?)
        };
        let path = if path.is_empty() {
            None
        } else {
            if !path.starts_with('/') {
                return Err(bad("the path must start with `/`"));
            }
            let lower = path.to_ascii_lowercase();
            if path.split(['/', '?']).any(|segment| segment == "..")
                || lower.contains("%2e")
                || lower.contains("%2f")
                || lower.contains("%5c")
            {
                return Err(bad(
                    "`..` and encoded `.`, `/` or `\\` are not allowed in the path",
                ));
            }
            let regex = format!(
                "^{}$",
                path.split('*')
                    .map(regex::escape)
                    .collect::<Vec<_>>()
                    .join(".*")
            );
            Some(Regex::new(&regex).map_err(|e| bad(&e.to_string()))?)
        };
        Ok(UrlPattern {
            scheme,
            host,
            port,
            path,
        })
    }

    fn allows(&self, url: &Url) -> bool {
        if self.scheme.is_some_and(|s| s != url.scheme()) {
            return false;
        }
        let Some(port) = url.port_or_known_default() else {
            return false;
        };
        let port_ok = match self.port {
            PortPattern::Any => true,
            PortPattern::Default => url.port().is_none(),
            PortPattern::Exact(p) => p == port,
        };
        if !port_ok {
            return false;
        }
        let Some(host) = url.host_str().and_then(|h| normalize_host(h).ok()) else {
            return false;
        };
        let host_ok = match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(h) => *h == host,
            HostPattern::Subdomains(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        };
        if !host_ok {
            return false;
        }
        match &self.path {
            None => true,
            Some(path) => {
                let target = match url.query() {
                    Some(q) => format!("{}?{q}", url.path()),
                    None => url.path().to_string(),
                };
                path.is_match(&target)
            }
        }
    }
}

/// `host:port`, `[v6]:port`, `host` → host and port text.
pub(crate) fn split_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if authority.starts_with('[') {
        let close = authority
            .find(']')
            .ok_or_else(|| "an IPv6 address lacks its `]`".to_string())?;
        let (host, rest) = authority.split_at(close + 1);
        return match rest.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if rest.is_empty() => Ok((host, None)),
            None => Err(format!("unexpected `{rest}` after the IPv6 address")),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

/// Compiled `allowedHttpHookUrls` patterns. An empty list allows nothing; invalid patterns
/// allow nothing (they are reported where the settings load, see [`validate_pattern`]).
#[derive(Debug, Clone)]
pub struct UrlAllowlist {
    written: Vec<String>,
    patterns: Vec<UrlPattern>,
}

/// Whether `url`'s host is this machine: `localhost` (any case) or a loopback address.
/// The one reading of "loopback" for every endpoint that is trusted more there (a model
/// base URL, a telemetry endpoint, a registry's token service).
pub fn is_loopback(url: &Url) -> bool {
    url.host().is_some_and(|h| match h {
        Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(a) => a.is_loopback(),
        Host::Ipv6(a) => a.is_loopback(),
    })
}

/// Checks one `allowedHttpHookUrls` pattern.
///
/// # Errors
///
/// What is wrong with it, quoting it.
pub fn validate_pattern(pattern: &str) -> Result<(), String> {
    UrlPattern::parse(pattern).map(|_| ())
}

impl UrlAllowlist {
    /// Compiles the patterns; invalid ones are left out.
    pub fn new(patterns: &[String]) -> UrlAllowlist {
        UrlAllowlist {
            written: patterns.to_vec(),
            patterns: patterns
                .iter()
                .filter_map(|p| UrlPattern::parse(p).ok())
                .collect(),
        }
    }

    /// The URL to contact if `url` is allowed, parsed once for the check and the request.
    ///
    /// # Errors
    ///
    /// Why it is refused.
    pub fn check(&self, url: &str) -> Result<Url, String> {
        let parsed = parse_target(url)?;
        if self.patterns.iter().any(|p| p.allows(&parsed)) {
            Ok(parsed)
        } else {
            Err("it matches no pattern".into())
        }
    }

    /// Whether `url` may be called.
    pub fn allows(&self, url: &str) -> bool {
        self.check(url).is_ok()
    }

    /// The patterns as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.written.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_allowlist_table() {
        let rows: &[(&str, &str, bool)] = &[
            (
                "https://hooks.example.com/*",
                "https://hooks.example.com/x",
                true,
            ),
            (
                "https://hooks.example.com/*",
                "https://HOOKS.Example.com./x",
                true,
            ),
            (
                "https://hooks.example.com/*",
                "http://hooks.example.com/x",
                false,
            ),
            (
                "https://hooks.example.com/*",
                "https://hooks.example.com.evil.io/x",
                false,
            ),
            (
                "https://hooks.example.com/*",
                "https://hooks.example.com:443/x",
                true,
            ),
            (
                "https://hooks.example.com/*",
                "https://hooks.example.com:8443/x",
                false,
            ),
            (
                "https://hooks.example.com/*",
                "https://hooks.example.com/x#frag",
                true,
            ),
            ("https://*.example.com/*", "https://a.example.com/x", true),
            ("https://*.example.com/*", "https://a.b.example.com/x", true),
            ("https://*.example.com/*", "https://example.com/x", false),
            ("https://*.example.com/*", "https://badexample.com/x", false),
            // the path cannot carry the host
            (
                "http://*.example.com/*",
                "http://127.0.0.1:8080/.example.com/",
                false,
            ),
            (
                "http://*.example.com/*",
                "http://127.0.0.1/.example.com/",
                false,
            ),
            // user info never passes for the host
            (
                "http://hooks.internal/*",
                "http://hooks.internal:1@127.0.0.1/",
                false,
            ),
            (
                "http://hooks.internal/*",
                "http://hooks.internal@127.0.0.1/",
                false,
            ),
            ("http://127.0.0.1:*", "http://user:pw@127.0.0.1:9/", false),
            ("http://127.0.0.1:*", "http://127.0.0.1:8080/hook", true),
            ("http://127.0.0.1:*", "http://127.0.0.1/hook", true),
            // odd IPv4 forms are the address they name
            ("http://127.0.0.1:*", "http://0x7f.1:8080/", true),
            ("http://127.0.0.1:*", "http://2130706433:8080/", true),
            ("http://127.0.0.1:*", "http://0177.0.0.1:8080/", true),
            ("http://10.0.0.1:*", "http://0x7f.1:8080/", false),
            ("http://example.com/*", "http://0x7f.1/", false),
            (
                "http://127.0.0.1:*",
                "http://[::ffff:127.0.0.1]:8080/",
                false,
            ),
            ("http://[::1]:*", "http://[0:0::1]:8080/", true),
            ("http://[::1]:*", "http://[::2]:8080/", false),
            // exact paths; `..` and encoded dots are resolved or refused
            (
                "http://127.0.0.1:8080/hook",
                "http://127.0.0.1:8080/hook",
                true,
            ),
            (
                "http://127.0.0.1:8080/hook",
                "http://127.0.0.1:8080/hook2",
                false,
            ),
            (
                "http://127.0.0.1:8080/hook",
                "http://127.0.0.1:8080/hook?x=1",
                false,
            ),
            ("http://h.example/hooks/*", "http://h.example/hooks/a", true),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/../admin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/%2e%2e/admin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/%2E%2e/admin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/..%2fadmin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/%2e%2e%2fadmin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/..%5cadmin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks\\..\\admin",
                false,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example\\hooks\\a",
                true,
            ),
            (
                "http://h.example/hooks/*",
                "http://h.example/hooks/a@b",
                true,
            ),
            // backslash and `@` tricks resolve to the real host
            (
                "http://good.example/*",
                "http://evil.example\\@good.example/",
                false,
            ),
            (
                "http://good.example/*",
                "http://evil.example/@good.example/",
                false,
            ),
            (
                "http://good.example/*",
                "http://good.example#@evil.example/",
                true,
            ),
            // default ports
            ("http://localhost", "http://localhost/anything", true),
            ("http://localhost", "http://localhost:80/anything", true),
            ("http://localhost", "http://localhost:8080/anything", false),
            ("http://localhost:80/*", "http://localhost/x", true),
            // IDN and case
            (
                "https://bücher.example/*",
                "https://xn--bcher-kva.example/x",
                true,
            ),
            (
                "https://xn--bcher-kva.example/*",
                "https://BÜCHER.example/x",
                true,
            ),
            ("https://ExAmple.COM/*", "https://example.com/x", true),
            ("https://example.com./*", "https://example.com/x", true),
            // schemes
            ("*://example.com/*", "http://example.com/x", true),
            ("*://example.com/*", "https://example.com/x", true),
            ("*", "https://anything.example/x", true),
            ("*", "https://u@anything.example/x", false),
            ("*", "ftp://anything.example/x", false),
            ("*", "http:///x", true),
            ("*", "http://:80/x", false),
            ("*", "not a url", false),
        ];
        for &(pattern, url, expected) in rows {
            validate_pattern(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            let list = UrlAllowlist::new(&[pattern.to_string()]);
            assert_eq!(list.allows(url), expected, "{pattern} vs {url}");
        }
        assert!(!UrlAllowlist::new(&[]).allows("http://127.0.0.1/"));
    }

    #[test]
    fn bad_patterns_are_errors_and_allow_nothing() {
        for bad in [
            "hooks.example.com/*",
            "ftp://x.example/*",
            "http://user@x.example/*",
            "http://a*.example.com/*",
            "http://*example.com/*",
            "http://x.example:0/",
            "http://x.example:99999/",
            "http://x.example:port/",
            "http://x.example/a/../b",
            "http://x.example/a%2fb",
            "http://x.example/a#f",
            "http://*.127.0.0.1/",
            "http://[::1/",
            "http:///x",
            &format!("http://x.example/{}", "*".repeat(100)),
            &format!("http://x.example/{}", "a".repeat(3 << 20)),
        ] {
            let e = validate_pattern(bad).unwrap_err();
            assert!(e.len() < 400, "message not cut: {}", e.len());
            assert!(!UrlAllowlist::new(&[bad.to_string()]).allows("http://x.example/a"));
        }
    }

    #[test]
    fn hosts_normalise_to_one_form() {
        for (host, expected) in [
            ("Example.COM.", "example.com"),
            ("0x7f.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("[0:0::1]", "[::1]"),
            ("bücher.example", "xn--bcher-kva.example"),
        ] {
            assert_eq!(normalize_host(host).unwrap(), expected);
        }
        for bad in [
            "",
            ".",
            "a b",
            "exa mple.com",
            "[::1",
            "a%2fb",
            "a/b",
            "a@b",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad:?}");
        }
    }
}
