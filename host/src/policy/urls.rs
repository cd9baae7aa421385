//! `allowedHttpHookUrls`: where HTTP hooks may post.

use regex::Regex;

/// Compiled URL patterns. `*` matches any run of characters; the host part matches
/// case-insensitively and ignores a trailing dot; a pattern without a path allows every
/// path on that origin.
#[derive(Debug, Clone)]
pub struct UrlAllowlist {
    patterns: Vec<(String, Regex)>,
}

impl UrlAllowlist {
    /// Compiles the patterns. An empty list allows nothing.
    pub fn new(patterns: &[String]) -> UrlAllowlist {
        let patterns = patterns.iter().map(|p| (p.clone(), compile(p))).collect();
        UrlAllowlist { patterns }
    }

    /// Whether `url` may be called.
    pub fn allows(&self, url: &str) -> bool {
        let url = normalize(url);
        self.patterns.iter().any(|(_, re)| re.is_match(&url))
    }

    /// The patterns as written.
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(|(p, _)| p.as_str())
    }
}

/// Splits `scheme://host[:port]/rest` into its parts.
fn split(url: &str) -> (&str, &str, &str) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    (scheme, &rest[..host_end], &rest[host_end..])
}

fn normalize(url: &str) -> String {
    let (scheme, host, rest) = split(url);
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => (name, Some(port)),
        _ => (host, None),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    format!("{}://{name}{port}{rest}", scheme.to_ascii_lowercase())
}

fn compile(pattern: &str) -> Regex {
    let (scheme, host, rest) = split(pattern);
    let wild = |s: &str| {
        s.split('*')
            .map(regex::escape)
            .collect::<Vec<_>>()
            .join(".*")
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let rest = if rest.is_empty() {
        "(?:[/?#].*)?".to_string()
    } else {
        wild(rest)
    };
    let scheme = if scheme.is_empty() {
        "[a-z]+".to_string()
    } else {
        wild(&scheme.to_ascii_lowercase())
    };
    Regex::new(&format!("^{scheme}://{}{rest}$", wild(&host)))
        .expect("escaped pattern is a valid regex")
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
            ("https://*.example.com/*", "https://a.example.com/x", true),
            ("https://*.example.com/*", "https://example.com/x", false),
            ("http://127.0.0.1:*", "http://127.0.0.1:8080/hook", true),
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
            ("http://localhost", "http://localhost/anything", true),
            ("*", "https://anything.example/x", true),
        ];
        for &(pattern, url, expected) in rows {
            let list = UrlAllowlist::new(&[pattern.to_string()]);
            assert_eq!(list.allows(url), expected, "{pattern} vs {url}");
        }
        assert!(!UrlAllowlist::new(&[]).allows("http://127.0.0.1/"));
    }
}
