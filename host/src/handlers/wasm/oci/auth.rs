//! Registry credentials: the user's, never a project's. `HOOKHOST_REGISTRY_AUTH`
//! (`registry=user:password`, for that registry only), else the `auths` of the docker
//! config (`$DOCKER_CONFIG/config.json`, a `DOCKER_CONFIG` inside the workspace refused as
//! every path variable is, else `~/.docker/config.json`), read through the one reader.
//! Credential helpers (`credsStore`, `credHelpers`) are programs: hookhost starts none.

use std::path::PathBuf;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::config::file::{Open, Owners, Rule, read_checked};

/// The largest docker config read.
const CONFIG_CAP: u64 = 1 << 20;

/// A user name and password for one registry, and where they came from.
#[derive(Clone)]
pub(crate) struct Credentials {
    user: String,
    password: String,
    /// Where they were found, for messages (never the secret).
    pub(crate) from: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({} from {})", self.user, self.from)
    }
}

impl Credentials {
    /// The basic-auth token, `base64(user:password)`.
    pub(crate) fn basic(&self) -> String {
        STANDARD.encode(format!("{}:{}", self.user, self.password))
    }
}

/// The credentials for `registry` (`host[:port]`), if the user has any, with notices
/// about what was refused on the way.
pub(crate) fn for_registry(registry: &str) -> (Option<Credentials>, Vec<String>) {
    let mut notices = Vec::new();
    if let Some(value) = crate::config::env::var("HOOKHOST_REGISTRY_AUTH") {
        let value = value.to_string_lossy();
        match value.split_once('=') {
            Some((name, pair)) if name.trim().eq_ignore_ascii_case(registry) => {
                if let Some((user, password)) = pair.split_once(':') {
                    return (
                        Some(Credentials {
                            user: user.into(),
                            password: password.into(),
                            from: "HOOKHOST_REGISTRY_AUTH".into(),
                        }),
                        notices,
                    );
                }
                notices.push("HOOKHOST_REGISTRY_AUTH is not `registry=user:password`".into());
            }
            Some(_) => {}
            None => notices.push("HOOKHOST_REGISTRY_AUTH is not `registry=user:password`".into()),
        }
    }
    let Some(path) = docker_config(&mut notices) else {
        return (None, notices);
    };
    let how = Open::read(CONFIG_CAP).rule(Rule::Believed(Owners::MeOrRoot));
    let bytes = match read_checked(&path, &how) {
        Ok((bytes, _)) => bytes,
        Err(e) if e.is_not_found() => return (None, notices),
        Err(e) => {
            notices.push(format!(
                "the docker config `{}` is not read: {e}",
                path.display()
            ));
            return (None, notices);
        }
    };
    let found = from_docker_config(&bytes, registry).map(|(user, password)| Credentials {
        user,
        password,
        from: path.display().to_string(),
    });
    (found, notices)
}

/// Where the docker config is: `$DOCKER_CONFIG/config.json` when that variable passes the
/// path checks, else `~/.docker/config.json`.
fn docker_config(notices: &mut Vec<String>) -> Option<PathBuf> {
    let workspaces = crate::config::env::workspaces_of(None);
    match crate::config::env::path_var("DOCKER_CONFIG", &workspaces) {
        Ok(Some(dir)) => return Some(dir.join("config.json")),
        Ok(None) => {}
        Err(notice) => notices.push(notice),
    }
    crate::config::env::home_dir().map(|home| home.join(".docker").join("config.json"))
}

/// The user and password of `registry` in a docker config's `auths` (keys compared
/// without a scheme or a path: `https://host:5000/v1/` is `host:5000`).
fn from_docker_config(bytes: &[u8], registry: &str) -> Option<(String, String)> {
    let json: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let auths = json.get("auths")?.as_object()?;
    auths.iter().find_map(|(key, entry)| {
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        if !host.eq_ignore_ascii_case(registry) {
            return None;
        }
        if let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) {
            let decoded = STANDARD.decode(auth.trim()).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (user, password) = text.split_once(':')?;
            return Some((user.to_string(), password.to_string()));
        }
        let user = entry.get("username")?.as_str()?;
        let password = entry.get("password")?.as_str()?;
        Some((user.to_string(), password.to_string()))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn docker_config_auths_are_found_by_registry_only() {
        let config = br#"{"auths": {
            "https://localhost:5000/v1/": {"auth": "YWxpY2U6czNjcjN0"},
            "other.example": {"username": "bob", "password": "pw"}
        }, "credsStore": "desktop"}"#;
        assert_eq!(
            super::from_docker_config(config, "localhost:5000"),
            Some(("alice".into(), "s3cr3t".into()))
        );
        assert_eq!(
            super::from_docker_config(config, "other.example"),
            Some(("bob".into(), "pw".into()))
        );
        assert_eq!(super::from_docker_config(config, "localhost:5001"), None);
        assert_eq!(super::from_docker_config(b"[]", "localhost:5000"), None);
    }
}
