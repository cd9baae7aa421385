//! [`resolve`]: which provider answers a hook, where, with which key and model, and
//! whether policy lets it: the one check every model request passes.

use std::sync::Arc;

use super::wire::{HttpModel, Wire};
use super::{ModelClient, ModelError, Resolved, Secret};
use crate::config::schema::ModelProviderKind;
use crate::handlers::FailureKind;
use crate::policy::Settings;
use crate::policy::models::ModelProvider;

/// The model of Anthropic prompt hooks that name none: Claude Code's fast model.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-haiku-4-5";

/// Claude Code's model aliases, on Anthropic: `haiku`, `sonnet`, `opus` → the current
/// model of that family. Other names pass unchanged.
pub fn model_alias(kind: ModelProviderKind, model: &str) -> String {
    match (kind, model) {
        (ModelProviderKind::Anthropic, "haiku") => DEFAULT_ANTHROPIC_MODEL.into(),
        (ModelProviderKind::Anthropic, "sonnet") => "claude-sonnet-4-5".into(),
        (ModelProviderKind::Anthropic, "opus") => "claude-opus-4-1".into(),
        _ => model.to_string(),
    }
}

/// What a hook asks for: its `provider` and `model`, whether it comes from managed
/// policy (managed ceilings hold the others).
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The hook's `provider`.
    pub provider: Option<ModelProviderKind>,
    /// The hook's `model`.
    pub model: Option<&'a str>,
    /// Whether the hook is managed policy's own.
    pub managed: bool,
}

/// Chooses and checks the provider of one hook run: the hook's `provider`, else
/// `modelProvider`, else the embedder's model when there is one, else Anthropic. The
/// endpoint is `modelProvider.baseUrl` (when that provider is chosen), else the
/// environment's `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else the provider's own; it
/// must pass `allowedHttpHookUrls` and managed `ceilings.models`. A base URL from the
/// environment (which a repository can set through Claude Code's project `env` block) is
/// honoured only for a loopback host or under an allowlist that names it. The key comes
/// from the environment only (`apiKeyEnv`, default `ANTHROPIC_API_KEY` /
/// `OPENAI_API_KEY`), and goes only to the provider's own host or to an endpoint the
/// user's files or managed policy named (`key_withheld`): any other endpoint is asked
/// without it ([`Resolved::key_withheld`] says why). A managed hook takes
/// `modelProvider` from managed policy only and is held to managed `allowedHttpHookUrls`
/// only ([`Settings::url_allowlist_for`]): a
/// project's file cannot point a managed guard (and the key) at a server of its own. A
/// variable `apiKeyEnv` names is held to `httpHookAllowedEnvVars`
/// ([`Settings::env_var_limit_for`]), as the variables an HTTP hook's headers carry.
///
/// # Errors
///
/// Why no request may be sent ([`FailureKind::Refused`]) or none can be
/// ([`FailureKind::CannotStart`]: no key, no model, no embedder).
pub fn resolve(
    wanted: Wanted<'_>,
    settings: &Settings,
    http: impl FnOnce() -> reqwest::Client,
    embedder: Option<&Arc<dyn ModelClient>>,
) -> Result<Resolved, ModelError> {
    // A managed hook is held to managed policy alone: another file's `modelProvider` (a
    // project's) chooses neither its provider nor its endpoint nor its key, and only
    // managed `allowedHttpHookUrls` names hosts for it (as for a managed HTTP hook).
    let configured = settings
        .model_provider
        .as_ref()
        .filter(|p| p.managed || !wanted.managed);
    let source = if wanted.managed {
        crate::config::SourceKind::Managed
    } else {
        crate::config::SourceKind::User
    };
    let allowlist = settings.url_allowlist_for(source);
    let kind = wanted
        .provider
        .or(configured.map(|p| p.kind))
        .unwrap_or(if embedder.is_some() {
            ModelProviderKind::Embedder
        } else {
            ModelProviderKind::Anthropic
        });
    // `modelProvider`'s endpoint, key and default model serve its own kind only.
    let config: Option<&ModelProvider> = configured.filter(|p| p.kind == kind);
    let ceiling = settings
        .ceilings
        .as_ref()
        .and_then(|c| c.models())
        .filter(|_| !wanted.managed);
    let budget = ceiling.and_then(|c| c.tokens_per_event);
    let refused = |message: String| ModelError::new(FailureKind::Refused, message);
    let model = wanted
        .model
        .map(str::to_string)
        .or_else(|| config.and_then(|c| c.default_model.clone()))
        .map(|m| model_alias(kind, &m));

    let wire = match kind {
        ModelProviderKind::Embedder => {
            // The client that dispatched the event (over `hookhost serve`), else the
            // program that embeds the host.
            let Some(client) = super::caller_model().or_else(|| embedder.cloned()) else {
                return Err(ModelError::new(
                    FailureKind::CannotStart,
                    "provider `embedder`: no model client (neither the embedding program \
                     nor the dispatching client gives one)",
                ));
            };
            if let Some(ceiling) = ceiling {
                ceiling.check(kind, None).map_err(refused)?;
            }
            return Ok(Resolved::new(kind, model, None, client, budget));
        }
        ModelProviderKind::Anthropic => Wire::Anthropic,
        ModelProviderKind::Openai => Wire::OpenAi,
    };
    // Through the one reader of the environment (`config/env.rs`), each by its name.
    let (base_var, base_env, key_var, default_base) = match wire {
        Wire::Anthropic => (
            "ANTHROPIC_BASE_URL",
            crate::config::env::var("ANTHROPIC_BASE_URL"),
            "ANTHROPIC_API_KEY",
            "https://api.anthropic.com",
        ),
        Wire::OpenAi => (
            "OPENAI_BASE_URL",
            crate::config::env::var("OPENAI_BASE_URL"),
            "OPENAI_API_KEY",
            "https://api.openai.com/v1",
        ),
    };
    let from_config = config.is_some_and(|c| c.base_url.is_some());
    let (base, origin) = match config.and_then(|c| c.base_url.clone()) {
        Some(base) => (base, config.map_or_else(String::new, |c| c.origin.clone())),
        None => match base_env.and_then(|v| v.into_string().ok()) {
            Some(base) => (base, base_var.to_string()),
            None => (default_base.to_string(), "the provider's own".to_string()),
        },
    };
    let target = wire.endpoint(&base);
    let url = crate::policy::urls::parse_target(&target).map_err(|e| {
        refused(format!(
            "model endpoint `{target}` ({origin}) is refused: {e}"
        ))
    })?;
    if origin == base_var {
        let loopback = crate::policy::urls::is_loopback(&url);
        let named = allowlist.is_some() || ceiling.is_some_and(|c| c.names_hosts());
        if !loopback && !named {
            return Err(refused(format!(
                "`{base_var}` `{base}` is honoured only for a loopback host or under \
                 `allowedHttpHookUrls` / managed `ceilings.models.hosts` (a repository can \
                 set it through Claude Code's project `env` block); not contacted"
            )));
        }
    }
    if let Some(allowlist) = allowlist
        && let Err(why) = allowlist.check(url.as_str())
    {
        let patterns: Vec<&str> = allowlist.patterns().collect();
        return Err(refused(format!(
            "model endpoint `{target}` (from {origin}) is not in `allowedHttpHookUrls` \
             {patterns:?} ({why}); not contacted"
        )));
    }
    if let Some(ceiling) = ceiling {
        ceiling
            .check(kind, Some(&url))
            .map_err(|e| refused(format!("model endpoint (from {origin}): {e}")))?;
    }
    // Where the key may go: the provider's own host, or an endpoint the user's files or
    // managed policy named; never one the environment or a project's file alone named.
    let withheld = key_withheld(
        &url,
        default_base,
        from_config.then_some(config).flatten(),
        settings,
        kind,
    )
    .map(|why| format!("the key is not sent to `{target}` (from {origin}): {why}"));
    let chosen = config.and_then(|c| c.api_key_env.clone());
    // A variable `apiKeyEnv` chose goes into a request header, as an HTTP hook's
    // `allowedEnvVars` do: held to the same `httpHookAllowedEnvVars`.
    if let (Some(name), Some(limit)) = (&chosen, settings.env_var_limit_for(source))
        && !limit.contains(name)
    {
        return Err(refused(format!(
            "`apiKeyEnv` `{name}` is not in `httpHookAllowedEnvVars` {limit:?}; not sent"
        )));
    }
    let key_var = chosen.unwrap_or_else(|| key_var.to_string());
    // A declared variable through its reader; a name `apiKeyEnv` chose is a grant of the
    // settings to this hook (any name may be granted, as to an HTTP hook's headers).
    let key = match crate::config::env::declared(&key_var).map(|v| v.kind) {
        Some(crate::config::env::Kind::Passthrough) => crate::config::env::var(&key_var),
        Some(_) => {
            return Err(refused(format!(
                "`apiKeyEnv` `{key_var}` names a variable hookhost reads for itself"
            )));
        }
        None => crate::config::env::granted(&key_var).filter(|v| !v.is_empty()),
    }
    .filter(|_| withheld.is_none())
    .and_then(|v| v.into_string().ok())
    .map(Secret::new);
    // A server the key may not go to is asked without one (a local model needs none).
    if key.is_none() && withheld.is_none() && wire == Wire::Anthropic {
        return Err(ModelError::new(
            FailureKind::CannotStart,
            format!("`{key_var}` is not set: the Anthropic API needs a key"),
        ));
    }
    let model = match (model, wire) {
        (Some(model), _) => model,
        (None, Wire::Anthropic) => DEFAULT_ANTHROPIC_MODEL.to_string(),
        (None, Wire::OpenAi) => {
            return Err(ModelError::new(
                FailureKind::CannotStart,
                "provider `openai` has no model: set the hook's `model` or \
                 `modelProvider.defaultModel`",
            ));
        }
    };
    let endpoint = url.to_string();
    let client = HttpModel {
        wire,
        url,
        key,
        withheld: withheld.clone(),
        client: http(),
    };
    Ok(
        Resolved::new(kind, Some(model), Some(endpoint), Arc::new(client), budget)
            .with_key_withheld(withheld),
    )
}

/// Why the API key may not go to `url` (`None`: it may). The one rule of where a key
/// goes: to the provider's own endpoint (`default_base`'s scheme, host and port), or to an
/// endpoint the user's own files or managed policy chose: a `modelProvider.baseUrl` they
/// set (`config`, when the endpoint is its `baseUrl`), their `allowedHttpHookUrls`
/// ([`Settings::key_allowed_http_hook_urls`]), or managed `ceilings.models.hosts`. A base
/// URL from the environment (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`: a repository sets
/// them through Claude Code's project `env` block) or from a project's or `--settings`'
/// file is still asked when policy lets it, but without the key: loopback included (a
/// dev server the repository's code runs listens there).
fn key_withheld(
    url: &url::Url,
    default_base: &str,
    config: Option<&ModelProvider>,
    settings: &Settings,
    kind: ModelProviderKind,
) -> Option<String> {
    let own = url::Url::parse(default_base).is_ok_and(|own| own.origin() == url.origin());
    let chosen_by_config = config.is_some_and(|c| c.vouched);
    let allowlisted = settings
        .key_allowed_http_hook_urls
        .as_ref()
        .is_some_and(|list| list.allows(url.as_str()));
    let ceiling_names = settings
        .ceilings
        .as_ref()
        .and_then(|c| c.models())
        .is_some_and(|c| c.names_hosts() && c.check(kind, Some(url)).is_ok());
    if own || chosen_by_config || allowlisted || ceiling_names {
        return None;
    }
    Some(
        "a key goes only to the provider's own host or to an endpoint the user's hooks.json \
         or managed policy names (`allowedHttpHookUrls`, `modelProvider.baseUrl`, managed \
         `ceilings.models.hosts`), never to one only the environment or a project's file \
         names"
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::{RawCeilings, RawModelCeiling};
    use crate::policy::UrlAllowlist;
    use crate::policy::ceiling::Ceilings;
    use crate::policy::tests_support::settings;

    struct Never;
    impl ModelClient for Never {
        fn complete<'a>(
            &'a self,
            _: &'a super::super::ModelRequest,
        ) -> futures_util::future::BoxFuture<'a, Result<super::super::ModelReply, ModelError>>
        {
            unreachable!("a refused provider is never asked")
        }
    }

    /// Every provider kind, from the config schema itself (a kind added later is in it).
    fn every_kind() -> Vec<ModelProviderKind> {
        let schema = serde_json::to_value(schemars::schema_for!(ModelProviderKind)).unwrap();
        let values = schema["oneOf"]
            .as_array()
            .or_else(|| schema["enum"].as_array())
            .expect("the schema lists the kinds")
            .iter()
            .filter_map(|v| v["const"].as_str().or_else(|| v.as_str()))
            .map(|name| serde_json::from_value(serde_json::json!(name)).unwrap())
            .collect::<Vec<_>>();
        assert!(values.len() >= 3, "{schema}");
        values
    }

    fn refusal(kind: ModelProviderKind, settings: &Settings) -> String {
        let wanted = Wanted {
            provider: Some(kind),
            model: Some("m"),
            managed: false,
        };
        let embedder: Arc<dyn ModelClient> = Arc::new(Never);
        match resolve(
            wanted,
            settings,
            || panic!("no client is built for a refused request"),
            Some(&embedder),
        ) {
            Ok(resolved) => panic!("{kind:?} was not refused: {resolved:?}"),
            Err(e) => {
                assert_eq!(e.kind, FailureKind::Refused, "{kind:?}: {}", e.message);
                e.message
            }
        }
    }

    /// The one check every model request passes holds every provider kind: to managed
    /// `ceilings.models.providers`, and (each kind with an endpoint) to
    /// `allowedHttpHookUrls` and `ceilings.models.hosts`, before anything is built or sent.
    #[test]
    fn every_provider_kind_is_held_to_the_allowlist_and_the_ceilings() {
        for kind in every_kind() {
            let others: Vec<_> = every_kind().into_iter().filter(|k| *k != kind).collect();
            let mut s = settings();
            s.ceilings = Some(
                Ceilings::new(&RawCeilings {
                    models: Some(RawModelCeiling {
                        providers: Some(others),
                        ..RawModelCeiling::default()
                    }),
                    ..RawCeilings::default()
                })
                .0,
            );
            assert!(refusal(kind, &s).contains("ceilings.models.providers"));

            // No wildcard: a new kind must say whether it has an endpoint.
            let has_endpoint = match kind {
                ModelProviderKind::Anthropic | ModelProviderKind::Openai => true,
                ModelProviderKind::Embedder => false,
            };
            if !has_endpoint {
                continue;
            }
            let mut s = settings();
            s.model_provider = Some(ModelProvider {
                kind,
                base_url: Some("https://models.example.invalid".into()),
                api_key_env: None,
                default_model: None,
                origin: "test".into(),
                managed: false,
                vouched: false,
            });
            s.allowed_http_hook_urls =
                Some(UrlAllowlist::new(&["https://api.example.com/*".into()]));
            assert!(refusal(kind, &s).contains("allowedHttpHookUrls"));
            s.allowed_http_hook_urls = None;
            s.ceilings = Some(
                Ceilings::new(&RawCeilings {
                    models: Some(RawModelCeiling {
                        hosts: Some(vec!["api.example.com".into()]),
                        ..RawModelCeiling::default()
                    }),
                    ..RawCeilings::default()
                })
                .0,
            );
            assert!(refusal(kind, &s).contains("ceilings.models.hosts"));
        }
    }

    /// The one rule of where a key goes, generated: every endpoint shape (the provider's
    /// own, look-alikes of it, loopback, a LAN address, a public host) × every voucher
    /// (none, each non-vouching file's `modelProvider`, the user's or managed
    /// `modelProvider`, the user's/managed `allowedHttpHookUrls`, managed
    /// `ceilings.models.hosts`). Only the provider's own origin and a vouched endpoint
    /// get the key.
    #[test]
    fn the_key_goes_only_to_the_providers_own_host_or_a_vouched_endpoint() {
        let endpoints: [(&str, bool); 9] = [
            ("https://api.anthropic.com/v1/messages", true),
            ("https://api.anthropic.com:443/v1/messages", true),
            ("http://api.anthropic.com/v1/messages", false),
            ("https://api.anthropic.com:8443/v1/messages", false),
            ("https://api.anthropic.com.evil.example/v1/messages", false),
            ("http://127.0.0.1:8080/v1/messages", false),
            ("http://localhost:11434/v1/messages", false),
            ("http://[::1]:8080/v1/messages", false),
            ("http://192.0.2.7/v1/messages", false),
        ];
        for (endpoint, own) in endpoints {
            let url = url::Url::parse(endpoint).unwrap();
            let origin = url.origin().ascii_serialization();
            let s = settings();
            let go = |s: &Settings, config: Option<&ModelProvider>| {
                key_withheld(
                    &url,
                    "https://api.anthropic.com",
                    config,
                    s,
                    ModelProviderKind::Anthropic,
                )
                .is_none()
            };
            assert_eq!(go(&s, None), own, "{endpoint}, nothing vouches");
            for vouched in [false, true] {
                let provider = ModelProvider {
                    kind: ModelProviderKind::Anthropic,
                    base_url: Some(endpoint.into()),
                    api_key_env: None,
                    default_model: None,
                    origin: "test".into(),
                    managed: false,
                    vouched,
                };
                assert_eq!(
                    go(&s, Some(&provider)),
                    own || vouched,
                    "{endpoint}, modelProvider vouched: {vouched}"
                );
            }
            let mut listed = settings();
            listed.key_allowed_http_hook_urls = Some(UrlAllowlist::new(&[format!("{origin}/*")]));
            assert!(go(&listed, None), "{endpoint} under the user's allowlist");
            // The union every non-managed hook is held to (a project's list in it)
            // vouches for nothing.
            let mut union = settings();
            union.allowed_http_hook_urls = Some(UrlAllowlist::new(&[format!("{origin}/*")]));
            assert_eq!(
                go(&union, None),
                own,
                "{endpoint} under a project's allowlist"
            );
            let mut ceiling = settings();
            ceiling.ceilings = Some(
                Ceilings::new(&RawCeilings {
                    models: Some(RawModelCeiling {
                        hosts: Some(vec![origin.clone()]),
                        ..RawModelCeiling::default()
                    }),
                    ..RawCeilings::default()
                })
                .0,
            );
            assert!(go(&ceiling, None), "{endpoint} under ceilings.models.hosts");
        }
    }

    #[test]
    fn aliases_name_anthropic_models_only() {
        assert_eq!(
            model_alias(ModelProviderKind::Anthropic, "haiku"),
            DEFAULT_ANTHROPIC_MODEL
        );
        assert_eq!(
            model_alias(ModelProviderKind::Anthropic, "sonnet"),
            "claude-sonnet-4-5"
        );
        assert_eq!(model_alias(ModelProviderKind::Openai, "haiku"), "haiku");
    }
}
