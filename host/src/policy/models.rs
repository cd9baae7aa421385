//! Model providers in policy: `modelProvider` (validated, after precedence) and managed
//! `ceilings.models` (which providers and hosts model hooks may use, and a token budget
//! per hook and event). Pure: the handlers' model layer (`handlers::model`) asks
//! [`ModelCeiling::check`] before every request it sends.

use super::capability::{HostPattern, Scheme};
use crate::config::schema::{ModelProviderKind, RawModelCeiling, RawModelProvider};
use crate::config::{ConfigError, ConfigLayer};

/// `modelProvider`, validated: the provider of `prompt` hooks that name none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelProvider {
    /// Which wire format (or the embedder's model).
    pub kind: ModelProviderKind,
    /// The API's base URL, when the file sets one (else the environment's or the
    /// provider's own).
    pub base_url: Option<String>,
    /// The variable holding the API key, when the file names one.
    pub api_key_env: Option<String>,
    /// The model of hooks that name none.
    pub default_model: Option<String>,
    /// Where it was set (`<file>: $.modelProvider`), for messages.
    pub origin: String,
    /// Whether managed policy set it: only then does it serve managed hooks.
    pub managed: bool,
    /// Whether the user's own file or managed policy set it (not a project's, not
    /// `--settings`): only then does its `baseUrl` receive the API key.
    pub vouched: bool,
}

/// Whether `name` can be an environment variable's name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Validates one `modelProvider`.
///
/// # Errors
///
/// `(field, message)` naming the field.
pub fn validate(raw: &RawModelProvider) -> Result<(), (&'static str, String)> {
    if let Some(url) = &raw.base_url {
        super::urls::parse_target(url)
            .map_err(|e| ("baseUrl", format!("`{url}` is refused: {e}")))?;
    }
    if let Some(name) = &raw.api_key_env
        && !is_variable_name(name)
    {
        return Err((
            "apiKeyEnv",
            format!("`{name}` is not an environment variable's name"),
        ));
    }
    if let Some(model) = &raw.default_model
        && model.trim().is_empty()
    {
        return Err(("defaultModel", "is empty".into()));
    }
    Ok(())
}

/// The `modelProvider` of the first layer (in precedence order) that sets a valid one;
/// an invalid one is an error naming its file and field, and is not used.
pub(super) fn provider_of(
    layers: &[&ConfigLayer],
    errors: &mut Vec<ConfigError>,
) -> Option<ModelProvider> {
    let mut chosen = None;
    for layer in layers {
        let Some(raw) = &layer.settings.model_provider else {
            continue;
        };
        match validate(raw) {
            Err((field, message)) => errors.push(ConfigError {
                location: layer.origin.location.clone(),
                path: format!("$.modelProvider.{field}"),
                message,
            }),
            Ok(()) if chosen.is_none() => {
                chosen = Some(ModelProvider {
                    kind: raw.kind,
                    base_url: raw.base_url.clone(),
                    api_key_env: raw.api_key_env.clone(),
                    default_model: raw.default_model.clone(),
                    origin: format!("{}: $.modelProvider", layer.origin.location),
                    managed: layer.origin.kind == crate::config::SourceKind::Managed,
                    vouched: matches!(
                        layer.origin.kind,
                        crate::config::SourceKind::Managed | crate::config::SourceKind::User
                    ),
                });
            }
            Ok(()) => {}
        }
    }
    chosen
}

/// Managed `ceilings.models`, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelCeiling {
    providers: Option<Vec<ModelProviderKind>>,
    hosts: Option<Vec<HostPattern>>,
    /// Tokens (input + output) one hook may spend on one event.
    pub tokens_per_event: Option<u64>,
}

impl ModelCeiling {
    /// Validates the ceiling; an invalid host pattern is left out (the ceiling only gets
    /// lower) and reported as `(JSON path, message)`.
    pub fn new(raw: &RawModelCeiling, errors: &mut Vec<(String, String)>) -> ModelCeiling {
        let hosts = raw.hosts.as_ref().map(|list| {
            list.iter()
                .enumerate()
                .filter_map(|(i, p)| match HostPattern::parse(p) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        errors.push((format!("$.ceilings.models.hosts[{i}]"), e));
                        None
                    }
                })
                .collect()
        });
        ModelCeiling {
            providers: raw.providers.clone(),
            hosts,
            tokens_per_event: raw.tokens_per_event,
        }
    }

    /// Whether a request to `kind`'s endpoint at `url` (`None`: the embedder's model,
    /// which has no URL) may be sent.
    ///
    /// # Errors
    ///
    /// Why not, naming the ceiling.
    pub fn check(&self, kind: ModelProviderKind, url: Option<&url::Url>) -> Result<(), String> {
        if let Some(providers) = &self.providers
            && !providers.contains(&kind)
        {
            let names: Vec<&str> = providers.iter().map(|p| p.as_str()).collect();
            return Err(format!(
                "provider `{}` is not in managed `ceilings.models.providers` {names:?}",
                kind.as_str()
            ));
        }
        if let (Some(hosts), Some(url)) = (&self.hosts, url) {
            let scheme = Scheme::parse(url.scheme());
            let host = url.host_str().unwrap_or_default();
            let allowed = scheme.is_some_and(|scheme| {
                hosts
                    .iter()
                    .any(|p| p.allows(scheme, host, url.port_or_known_default()))
            });
            if !allowed {
                let names: Vec<&str> = hosts.iter().map(HostPattern::as_str).collect();
                return Err(format!(
                    "`{}` is not within managed `ceilings.models.hosts` {names:?}",
                    url.origin().ascii_serialization()
                ));
            }
        }
        Ok(())
    }

    /// Whether the ceiling names the hosts a provider may use.
    pub fn names_hosts(&self) -> bool {
        self.hosts.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(json: serde_json::Value) -> ModelCeiling {
        let raw: RawModelCeiling = serde_json::from_value(json).unwrap();
        let mut errors = Vec::new();
        let c = ModelCeiling::new(&raw, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        c
    }

    #[test]
    fn providers_and_hosts_outside_the_ceiling_are_refused() {
        let c = ceiling(serde_json::json!({
            "providers": ["anthropic"],
            "hosts": ["api.anthropic.com", "http://127.0.0.1:8080"]
        }));
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert!(
            c.check(
                ModelProviderKind::Anthropic,
                Some(&url("https://api.anthropic.com/v1/messages"))
            )
            .is_ok()
        );
        assert!(
            c.check(
                ModelProviderKind::Anthropic,
                Some(&url("http://127.0.0.1:8080/v1/messages"))
            )
            .is_ok()
        );
        let no = c
            .check(
                ModelProviderKind::Anthropic,
                Some(&url("https://evil.example/v1/messages")),
            )
            .unwrap_err();
        assert!(no.contains("ceilings.models.hosts"), "{no}");
        // Same host, other port or scheme: refused.
        for u in [
            "http://127.0.0.1:8081/v1",
            "http://api.anthropic.com/v1/messages",
        ] {
            assert!(
                c.check(ModelProviderKind::Anthropic, Some(&url(u)))
                    .is_err(),
                "{u}"
            );
        }
        let no = c.check(ModelProviderKind::Openai, None).unwrap_err();
        assert!(no.contains("ceilings.models.providers"), "{no}");
        assert!(
            ModelCeiling::default()
                .check(ModelProviderKind::Embedder, None)
                .is_ok()
        );
    }

    #[test]
    fn a_provider_names_its_bad_field() {
        let bad = |json: serde_json::Value| {
            validate(&serde_json::from_value(json).unwrap())
                .unwrap_err()
                .0
        };
        assert_eq!(
            bad(serde_json::json!({"kind": "openai", "baseUrl": "ftp://x"})),
            "baseUrl"
        );
        assert_eq!(
            bad(serde_json::json!({"kind": "openai", "apiKeyEnv": "A-B"})),
            "apiKeyEnv"
        );
        assert_eq!(
            bad(serde_json::json!({"kind": "openai", "defaultModel": " "})),
            "defaultModel"
        );
    }
}
