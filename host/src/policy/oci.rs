//! Plugins from OCI registries: the `oci://registry/repository:tag@sha256:…` reference a
//! wasm hook's `plugin` may be, and managed policy's say over it (`ceilings.registries`,
//! `ceilings.ociTags`). Pure: the pull, the cache and the registry protocol are the
//! sandbox's (`handlers/wasm/oci/`).

use std::collections::BTreeMap;
use std::fmt;

use crate::config::lock::RawLock;

/// The pins of a project's `hookhost.lock` (`registry/repository:tag` → manifest digest),
/// or why the file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// The lock file's path, for messages.
    pub location: String,
    pins: Result<BTreeMap<String, String>, String>,
}

impl Pins {
    /// The pins of a lock as read, each entry judged as a reference pinned by its digest.
    pub fn from_raw(raw: &RawLock) -> Pins {
        let pins = raw.entries.clone().and_then(|entries| {
            let mut pins = BTreeMap::new();
            let mut first = BTreeMap::new();
            for (i, (reference, digest)) in entries.iter().enumerate() {
                let pinned = OciRef::parse(&format!("{reference}@{digest}"))
                    .map_err(|e| format!("`$.plugins[{i}]`: {e}"))?;
                let (name, digest) = (pinned.name(), pinned.digest.unwrap_or_default());
                // One name pinned twice (spelled alike or not: `R.example` is `r.example`)
                // at two digests: a reader of the lock sees one, the last would run.
                if let Some(earlier) = pins.get(&name)
                    && *earlier != digest
                {
                    return Err(format!(
                        "`$.plugins[{i}]` pins `{name}` at another digest than                          `$.plugins[{}]`",
                        first[&name]
                    ));
                }
                first.entry(name.clone()).or_insert(i);
                pins.insert(name, digest);
            }
            Ok(pins)
        });
        Pins {
            location: raw.location.clone(),
            pins,
        }
    }

    /// Whether the lock can be used.
    ///
    /// # Errors
    ///
    /// Why not, naming the file.
    pub fn check(&self) -> Result<(), String> {
        self.get("").map(drop)
    }

    /// The digest the lock pins `name` (`registry/repository:tag`) to.
    ///
    /// # Errors
    ///
    /// The lock cannot be used (named).
    pub fn get(&self, name: &str) -> Result<Option<&str>, String> {
        match &self.pins {
            Ok(pins) => Ok(pins.get(name).map(String::as_str)),
            Err(why) => Err(format!("`{}` cannot be used: {why}", self.location)),
        }
    }

    /// `reference` as the lock binds it: a reference the lock pins runs at the lock's
    /// digest (`Some`, the reference pinned); a digest written in the reference must agree
    /// with it; a tag-only reference the lock does not pin, or any when the lock is
    /// broken, is refused rather than run at whatever the tag names today. `None`: the
    /// lock has nothing to say (the reference pins its own digest and is not in the lock).
    ///
    /// # Errors
    ///
    /// A disagreement, a tag the lock leaves out, or a broken lock, naming the file.
    pub fn bind(&self, reference: &OciRef) -> Result<Option<OciRef>, String> {
        let name = reference.name();
        let locked = match self.get(&name) {
            Ok(locked) => locked,
            Err(why) if reference.digest.is_none() => {
                return Err(format!("`{reference}` is not bound: {why}"));
            }
            Err(_) => return Ok(None),
        };
        match (locked, &reference.digest) {
            (Some(locked), Some(pinned)) if locked != pinned => Err(format!(
                "`{reference}` pins sha256:{pinned}, but `{}` pins sha256:{locked} \
                 (run `hookhost plugin lock`)",
                self.location
            )),
            (Some(locked), _) => Ok(Some(reference.pinned(locked))),
            (None, None) => Err(format!(
                "`{reference}` is a tag that `{}` does not pin (run `hookhost plugin lock`)",
                self.location
            )),
            (None, Some(_)) => Ok(None),
        }
    }
}

/// The scheme that makes a hook's `plugin` a registry reference instead of a file.
pub const SCHEME: &str = "oci://";

/// The longest reference read (the distribution spec caps a repository name at 255
/// characters together with the registry; a tag at 128).
const MAX_REFERENCE: usize = 512;

/// A plugin in an OCI registry: where it is, and by what it is pinned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciRef {
    /// `host[:port]`, lowercase.
    pub registry: String,
    /// The repository path (`team/gate`).
    pub repository: String,
    /// The tag, if the reference names one.
    pub tag: Option<String>,
    /// The manifest's sha256 (64 lowercase hex digits), if the reference pins one.
    pub digest: Option<String>,
}

impl OciRef {
    /// Whether `text` is meant as a registry reference (it starts with [`SCHEME`]).
    pub fn is_reference(text: &str) -> bool {
        text.trim_start().starts_with(SCHEME)
    }

    /// Reads `oci://registry/repository[:tag][@sha256:hex]` (the scheme may be left out).
    ///
    /// # Errors
    ///
    /// What is wrong with it, in words a config error can carry.
    pub fn parse(text: &str) -> Result<OciRef, String> {
        let text = text.trim();
        if text.len() > MAX_REFERENCE {
            return Err(format!(
                "an OCI reference of {} bytes is above the cap of {MAX_REFERENCE}",
                text.len()
            ));
        }
        let rest = text.strip_prefix(SCHEME).unwrap_or(text);
        let (rest, digest) = match rest.split_once('@') {
            Some((rest, digest)) => {
                let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
                    format!("the digest `{digest}` is not `sha256:` and 64 hex digits")
                })?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!(
                        "the digest `{digest}` is not `sha256:` and 64 hex digits"
                    ));
                }
                (rest, Some(hex.to_ascii_lowercase()))
            }
            None => (rest, None),
        };
        let (registry, path) = rest.split_once('/').ok_or_else(|| {
            format!("`{text}` names no repository (`oci://registry/repository:tag@sha256:…`)")
        })?;
        let registry = registry.to_ascii_lowercase();
        check_registry(&registry)?;
        // A tag follows the last `:` after the last `/` (a port belongs to the registry).
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => {
                let cut = path.len() - tag.len() - 1;
                (&path[..cut], Some(tag.to_string()))
            }
            None => (path, None),
        };
        check_repository(repository)?;
        if let Some(tag) = &tag {
            check_tag(tag)?;
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("`{text}` names neither a tag nor a digest"));
        }
        Ok(OciRef {
            registry,
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// `registry/repository:tag` (or `@sha256:…` without a tag): the name a lock file and
    /// the tag records key by, without the pinned digest.
    pub fn name(&self) -> String {
        match &self.tag {
            Some(tag) => format!("{}/{}:{tag}", self.registry, self.repository),
            None => format!("{}/{}", self.registry, self.repository),
        }
    }

    /// The same reference pinned to `digest` (64 lowercase hex digits).
    pub fn pinned(&self, digest: &str) -> OciRef {
        OciRef {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// Whether the registry is on this machine: spoken to over plain HTTP (as container
    /// tools do), every other registry over HTTPS.
    /// Read as a URL's authority, as the client will use it (`[::1].corp.example` is no
    /// URL, so not loopback).
    pub fn is_loopback(&self) -> bool {
        url::Url::parse(&format!("http://{}/", self.registry))
            .is_ok_and(|url| super::urls::is_loopback(&url))
    }

    /// Whether `ceilings.registries` (`host[:port]`, `*.suffix` for any host below it, a
    /// port when listed must match) lets the reference through.
    pub fn registry_within(&self, allowed: &[String]) -> bool {
        allowed
            .iter()
            .any(|entry| registry_matches(entry, &self.registry))
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.name())?;
        if let Some(digest) = &self.digest {
            write!(f, "@sha256:{digest}")?;
        }
        Ok(())
    }
}

fn registry_matches(entry: &str, registry: &str) -> bool {
    let entry = entry.trim().to_ascii_lowercase();
    let Some(suffix) = entry.strip_prefix("*.") else {
        return entry == registry;
    };
    let (want_host, want_port) = match suffix.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (suffix, None),
    };
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p)) if !registry.starts_with('[') => (h, Some(p)),
        _ => (registry, None),
    };
    host.ends_with(&format!(".{want_host}")) && (want_port.is_none() || want_port == port)
}

/// Whether `entry` of `ceilings.registries` is a registry name (`host[:port]`) or a
/// `*.suffix` pattern of one.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_registry_entry(entry: &str) -> Result<(), String> {
    check_registry(entry.strip_prefix("*.").unwrap_or(entry))
}

fn check_registry(registry: &str) -> Result<(), String> {
    let ok = !registry.is_empty()
        && registry.len() <= 255
        && registry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the registry `{registry}` is not a host name with an optional port"
        ))
    }
}

fn check_repository(repository: &str) -> Result<(), String> {
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_' || b == b'-'
            })
            && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && c.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    if repository.len() <= 255 && repository.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(format!(
            "the repository `{repository}` is not lowercase letters, digits and `._-` \
             between slashes"
        ))
    }
}

fn check_tag(tag: &str) -> Result<(), String> {
    let ok = (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the tag `{tag}` is not 1 to 128 letters, digits and `._-`"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn lock(entries: Result<Vec<(&str, &str)>, &str>) -> Pins {
        Pins::from_raw(&RawLock {
            location: "/p/hookhost.lock".into(),
            entries: entries
                .map(|e| {
                    e.iter()
                        .map(|(r, d)| (r.to_string(), d.to_string()))
                        .collect()
                })
                .map_err(str::to_string),
        })
    }

    #[test]
    fn a_lock_binds_tags_to_its_digests_and_refuses_what_it_cannot_bind() {
        let other = "a".repeat(64);
        let digest = format!("sha256:{HEX}");
        let pins = lock(Ok(vec![("oci://r.example/team/gate:v1", &digest)]));
        let tag = OciRef::parse("oci://r.example/team/gate:v1").unwrap();
        assert_eq!(pins.bind(&tag), Ok(Some(tag.pinned(HEX))));
        // A digest written in the reference must agree with the lock.
        assert_eq!(pins.bind(&tag.pinned(HEX)), Ok(Some(tag.pinned(HEX))));
        let clash = pins.bind(&tag.pinned(&other)).unwrap_err();
        assert!(clash.contains("/p/hookhost.lock"), "{clash}");
        // A tag the lock leaves out is refused; a pinned reference it leaves out is its own.
        let loose = OciRef::parse("oci://r.example/team/other:v1").unwrap();
        assert!(pins.bind(&loose).unwrap_err().contains("does not pin"));
        assert_eq!(pins.bind(&loose.pinned(&other)), Ok(None));
        // A broken lock binds no tag; a lock entry that is no reference breaks the lock.
        for broken in [
            lock(Err("not JSON")),
            lock(Ok(vec![("oci://r.example/team/gate:v1", "sha256:short")])),
        ] {
            assert!(broken.check().is_err());
            assert!(broken.bind(&tag).is_err());
            assert_eq!(broken.bind(&tag.pinned(HEX)), Ok(None));
        }
    }

    /// Red team, stop 37: a lock naming one plugin twice at two digests (spelled alike, or
    /// differently but the same name: registry case, the scheme left out) let the last
    /// entry win silently, while a reviewer of the lock reads the first. Such a lock is
    /// broken; the same digest twice is harmless.
    #[test]
    fn a_lock_that_pins_one_name_at_two_digests_is_broken() {
        let other = format!("sha256:{}", "a".repeat(64));
        let digest = format!("sha256:{HEX}");
        let tag = OciRef::parse("oci://r.example/team/gate:v1").unwrap();
        for second in [
            "oci://r.example/team/gate:v1",
            "oci://R.Example/team/gate:v1",
            "r.example/team/gate:v1",
        ] {
            let pins = lock(Ok(vec![
                ("oci://r.example/team/gate:v1", &digest),
                (second, &other),
            ]));
            let why = pins.check().unwrap_err();
            assert!(
                why.contains("$.plugins[1]") && why.contains("$.plugins[0]"),
                "{why}"
            );
            assert!(pins.bind(&tag).is_err(), "{second}");
            let upper = format!("sha256:{}", HEX.to_uppercase());
            let same = lock(Ok(vec![
                ("oci://r.example/team/gate:v1", &digest),
                (second, &upper),
            ]));
            assert_eq!(same.bind(&tag), Ok(Some(tag.pinned(HEX))), "{second}");
        }
    }

    #[test]
    fn references_are_read_and_written_back_alike() {
        for (text, registry, repository, tag, digest) in [
            (
                format!("oci://localhost:5000/team/gate:v1@sha256:{HEX}"),
                "localhost:5000",
                "team/gate",
                Some("v1"),
                Some(HEX),
            ),
            (
                format!("oci://ghcr.io/a/b@sha256:{HEX}"),
                "ghcr.io",
                "a/b",
                None,
                Some(HEX),
            ),
            (
                "oci://Registry.Example.com/gate:1.2.3".to_string(),
                "registry.example.com",
                "gate",
                Some("1.2.3"),
                None,
            ),
        ] {
            let r = OciRef::parse(&text).unwrap();
            assert_eq!(r.registry, registry);
            assert_eq!(r.repository, repository);
            assert_eq!(r.tag.as_deref(), tag);
            assert_eq!(r.digest.as_deref(), digest);
            assert_eq!(OciRef::parse(&r.to_string()).unwrap(), r);
        }
    }

    #[test]
    fn malformed_references_are_refused_with_the_part_named() {
        for (text, words) in [
            ("oci://localhost:5000", "no repository"),
            ("oci://localhost:5000/gate", "neither a tag nor a digest"),
            ("oci://localhost:5000/Gate:v1", "repository"),
            ("oci://localhost:5000/gate:v1@sha256:abc", "digest"),
            ("oci://localhost:5000/gate:v1@md5:abc", "digest"),
            ("oci://local host/gate:v1", "registry"),
            ("oci://localhost/gate:-v1", "tag"),
        ] {
            let e = OciRef::parse(text).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
        assert!(OciRef::parse(&format!("oci://a/{}:v", "b".repeat(600))).is_err());
    }

    #[test]
    fn registries_match_exactly_or_below_a_wildcard() {
        let r = |s: &str| OciRef::parse(&format!("oci://{s}/x:1")).unwrap();
        let list = vec!["localhost:5000".to_string(), "*.corp.example".to_string()];
        assert!(r("localhost:5000").registry_within(&list));
        assert!(!r("localhost:5001").registry_within(&list));
        assert!(!r("localhost").registry_within(&list));
        assert!(r("reg.corp.example").registry_within(&list));
        assert!(r("reg.corp.example:443").registry_within(&list));
        assert!(!r("corp.example").registry_within(&list));
        assert!(!r("evilcorp.example").registry_within(&list));
        assert!(r("127.0.0.1:5000").is_loopback());
        assert!(r("localhost:5000").is_loopback());
        assert!(!r("ghcr.io").is_loopback());
        // Red team, stop 36: a name that starts like a loopback address is not one.
        assert!(!r("[::1].corp.example").is_loopback());
        assert!(r("[::1]:5000").is_loopback());
    }
}
