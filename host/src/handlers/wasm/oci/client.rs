//! The part of the OCI distribution protocol hookhost speaks, on the host's one reqwest:
//! manifests and blobs by digest or tag, blob uploads (monolithic), and the referrers of a
//! manifest (the API, else the `sha256-<hex>` tag fallback). Every byte a registry sends
//! is bounded before it is held ([`read_bounded`]); nothing of the client comes from the
//! environment (no proxy, no extra roots); credentials go only to the registry they are
//! for ([`super::auth`]), by basic auth or a bearer token got with them.

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode};
use tokio::sync::Mutex;

use super::auth::Credentials;
use crate::policy::oci::OciRef;

/// The largest token answer, error body or referrers list read.
const SMALL_CAP: u64 = 64 << 10;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait for the next bytes of an answer.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest one request may last, its answer read (a layer at the plugin cap
/// included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// One registry, with the credentials for it and the token they earned.
pub(crate) struct Registry {
    http: reqwest::Client,
    base: String,
    registry: String,
    credentials: Option<Credentials>,
    /// What was refused on the way to the credentials (a `DOCKER_CONFIG` in the
    /// workspace), told when the registry asks for some.
    notices: Vec<String>,
    authorization: Mutex<Option<String>>,
}

/// A response read whole, within its cap.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Registry {
    /// A client of `reference`'s registry: plain HTTP on loopback, HTTPS with the
    /// system's and the Mozilla roots elsewhere.
    pub(crate) fn new(
        reference: &OciRef,
        (credentials, notices): (Option<Credentials>, Vec<String>),
    ) -> Result<Registry, String> {
        let scheme = if reference.is_loopback() {
            "http"
        } else {
            "https"
        };
        let http = crate::handlers::system_roots()
            .into_iter()
            .fold(
                reqwest::Client::builder()
                    .no_proxy()
                    .connect_timeout(CONNECT_TIMEOUT)
                    // A registry that drips: no read waits longer, no request lasts longer.
                    .read_timeout(READ_TIMEOUT)
                    .timeout(REQUEST_TIMEOUT)
                    .tls_built_in_native_certs(false)
                    .tls_built_in_webpki_certs(true)
                    // Blobs may live elsewhere (storage redirects); reqwest drops the
                    // credentials on a redirect to another host.
                    .redirect(reqwest::redirect::Policy::limited(5)),
                |b, cert| b.add_root_certificate(cert),
            )
            .build()
            .map_err(|e| format!("cannot build the registry client: {e}"))?;
        Ok(Registry {
            http,
            base: format!("{scheme}://{}", reference.registry),
            registry: reference.registry.clone(),
            credentials,
            notices,
            authorization: Mutex::new(None),
        })
    }

    /// Whether `url` is on the registry's own origin (scheme, host and port).
    fn own_origin(&self, url: &str) -> bool {
        match (url::Url::parse(url), url::Url::parse(&self.base)) {
            (Ok(url), Ok(base)) => url.origin() == base.origin(),
            _ => false,
        }
    }

    /// The URL of `path` below `/v2/`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/v2/{path}", self.base)
    }

    /// Sends a request, answering one authentication challenge (basic, or a bearer token
    /// asked of the realm the registry names), and reads the answer within `cap` bytes.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(reqwest::header::HeaderName, String)],
        body: Option<bytes::Bytes>,
        cap: u64,
    ) -> Result<Answer, String> {
        let mut challenged = false;
        loop {
            let mut request = self.http.request(method.clone(), url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            // The registry's credentials (or its token) go to the registry's own origin
            // only: an upload `Location` or a URL elsewhere gets none.
            if self.own_origin(url)
                && let Some(auth) = self.authorization.lock().await.clone()
            {
                request = request.header(AUTHORIZATION, auth);
            }
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let response = request.send().await.map_err(|e| {
                format!(
                    "registry `{}` cannot be reached: {}",
                    self.registry,
                    chain(&e)
                )
            })?;
            if response.status() == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                let challenge = response
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let auth = self.answer(&challenge).await?;
                *self.authorization.lock().await = Some(auth);
                continue;
            }
            let status = response.status();
            let headers = response.headers().clone();
            let body = if method == Method::HEAD {
                Vec::new()
            } else {
                read_bounded(response, cap, url).await?
            };
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                return Err(format!(
                    "registry `{}` refused the credentials {} (HTTP {status}: {})",
                    self.registry,
                    match &self.credentials {
                        Some(c) => format!("from {}", c.from),
                        None => "(none were found for it)".to_string(),
                    },
                    shown_body(&body)
                ));
            }
            return Ok(Answer {
                status,
                headers,
                body,
            });
        }
    }

    /// The `Authorization` value that answers `challenge`.
    async fn answer(&self, challenge: &str) -> Result<String, String> {
        let Some(credentials) = &self.credentials else {
            return if challenge.to_ascii_lowercase().starts_with("bearer") {
                self.token(challenge, None).await
            } else {
                Err(format!(
                    "registry `{}` asks for credentials and none were found for it (in \
                     `~/.docker/config.json` `auths`, `$DOCKER_CONFIG/config.json` or \
                     `HOOKHOST_REGISTRY_AUTH`){}",
                    self.registry,
                    self.notices
                        .iter()
                        .map(|n| format!("; {n}"))
                        .collect::<String>()
                ))
            };
        };
        if challenge.to_ascii_lowercase().starts_with("bearer") {
            self.token(challenge, Some(credentials)).await
        } else {
            Ok(format!("Basic {}", credentials.basic()))
        }
    }

    /// A bearer token from the realm of a `Bearer realm=…,service=…,scope=…` challenge.
    async fn token(
        &self,
        challenge: &str,
        credentials: Option<&Credentials>,
    ) -> Result<String, String> {
        let params = challenge_params(challenge);
        let realm = params
            .iter()
            .find(|(k, _)| k == "realm")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| {
                format!(
                    "registry `{}` sent a bearer challenge without a realm",
                    self.registry
                )
            })?;
        let query: Vec<(String, String)> = params
            .into_iter()
            .filter(|(k, _)| k == "service" || k == "scope")
            .collect();
        // The user's password goes to a token service only over HTTPS (or to a loopback
        // one): a challenge naming a plain-HTTP realm elsewhere gets no credentials.
        let parsed = url::Url::parse(&realm).map_err(|e| {
            format!(
                "registry `{}` named a realm that is not a URL: {e}",
                self.registry
            )
        })?;
        if parsed.scheme() != "https" && !crate::policy::urls::is_loopback(&parsed) {
            return Err(format!(
                "registry `{}` asks for a token from `{realm}`, which is neither HTTPS nor \
                 loopback: no credentials are sent there",
                self.registry
            ));
        }
        let mut request = self.http.get(&realm).query(&query);
        if let Some(c) = credentials {
            request = request.header(AUTHORIZATION, format!("Basic {}", c.basic()));
        }
        let response = request.send().await.map_err(|e| {
            format!(
                "the token service `{realm}` cannot be reached: {}",
                chain(&e)
            )
        })?;
        let status = response.status();
        let body = read_bounded(response, SMALL_CAP, &realm).await?;
        if !status.is_success() {
            return Err(format!(
                "the token service of registry `{}` refused (HTTP {status}: {})",
                self.registry,
                shown_body(&body)
            ));
        }
        let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            format!(
                "the token service of `{}` answered no JSON: {e}",
                self.registry
            )
        })?;
        json.get("token")
            .or_else(|| json.get("access_token"))
            .and_then(|t| t.as_str())
            .map(|t| format!("Bearer {t}"))
            .ok_or_else(|| format!("the token service of `{}` answered no token", self.registry))
    }

    /// The manifest `reference` (a tag or `sha256:…`) of `repository`, within `cap` bytes,
    /// with its content type.
    pub(crate) async fn manifest(
        &self,
        repository: &str,
        reference: &str,
        accept: &str,
        cap: u64,
    ) -> Result<Option<(Vec<u8>, String)>, String> {
        let url = self.url(&format!("{repository}/manifests/{reference}"));
        let answer = self
            .send(
                Method::GET,
                &url,
                &[(ACCEPT, accept.to_string())],
                None,
                cap,
            )
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        expect(&answer, StatusCode::OK, &url)?;
        let kind = answer
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Ok(Some((answer.body, kind)))
    }

    /// The blob `sha256:hex` of `repository`, within `cap` bytes.
    pub(crate) async fn blob(
        &self,
        repository: &str,
        hex: &str,
        cap: u64,
    ) -> Result<Vec<u8>, String> {
        let url = self.url(&format!("{repository}/blobs/sha256:{hex}"));
        let answer = self.send(Method::GET, &url, &[], None, cap).await?;
        expect(&answer, StatusCode::OK, &url)?;
        Ok(answer.body)
    }

    /// Uploads `bytes` as a blob of `repository` (nothing when the registry has it).
    pub(crate) async fn push_blob(&self, repository: &str, bytes: &[u8]) -> Result<String, String> {
        let digest = format!("sha256:{}", super::sha256_hex(bytes));
        let head = self.url(&format!("{repository}/blobs/{digest}"));
        if self.send(Method::HEAD, &head, &[], None, 0).await?.status == StatusCode::OK {
            return Ok(digest);
        }
        let start = self.url(&format!("{repository}/blobs/uploads/"));
        let answer = self
            .send(Method::POST, &start, &[], None, SMALL_CAP)
            .await?;
        expect(&answer, StatusCode::ACCEPTED, &start)?;
        let location = answer
            .headers
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("`{start}` answered no upload location"))?;
        let location = if location.starts_with('/') {
            format!("{}{location}", self.base)
        } else {
            location.to_string()
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{separator}digest={digest}");
        let answer = self
            .send(
                Method::PUT,
                &put,
                &[(CONTENT_TYPE, "application/octet-stream".into())],
                Some(bytes::Bytes::copy_from_slice(bytes)),
                SMALL_CAP,
            )
            .await?;
        expect(&answer, StatusCode::CREATED, &put)?;
        Ok(digest)
    }

    /// Puts a manifest under `reference` (a tag or its digest); whether the registry took
    /// its `subject` (the `OCI-Subject` header of a registry that keeps referrers).
    pub(crate) async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        bytes: Vec<u8>,
    ) -> Result<bool, String> {
        let url = self.url(&format!("{repository}/manifests/{reference}"));
        let answer = self
            .send(
                Method::PUT,
                &url,
                &[(CONTENT_TYPE, media_type.to_string())],
                Some(bytes.into()),
                SMALL_CAP,
            )
            .await?;
        expect(&answer, StatusCode::CREATED, &url)?;
        Ok(answer.headers.contains_key("oci-subject"))
    }

    /// The referrers index of manifest `hex`: the API's answer, else the `sha256-<hex>`
    /// tag's (registries without the API), else none.
    pub(crate) async fn referrers(
        &self,
        repository: &str,
        hex: &str,
    ) -> Result<Option<Vec<u8>>, String> {
        let url = self.url(&format!("{repository}/referrers/sha256:{hex}"));
        let answer = self
            .send(
                Method::GET,
                &url,
                &[(ACCEPT, super::INDEX_MEDIA_TYPE.into())],
                None,
                SMALL_CAP,
            )
            .await?;
        let is_index = answer
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with(super::INDEX_MEDIA_TYPE));
        if answer.status == StatusCode::OK && is_index {
            return Ok(Some(answer.body));
        }
        let fallback = format!("sha256-{hex}");
        Ok(self
            .manifest(repository, &fallback, super::INDEX_MEDIA_TYPE, SMALL_CAP)
            .await?
            .map(|(body, _)| body))
    }
}

/// Refuses an answer whose status is not `want`, with what the registry said.
pub(crate) fn expect(answer: &Answer, want: StatusCode, url: &str) -> Result<(), String> {
    if answer.status == want {
        Ok(())
    } else {
        Err(format!(
            "`{url}` answered HTTP {} ({})",
            answer.status,
            shown_body(&answer.body)
        ))
    }
}

/// Reads a response body, refusing one longer than `cap` (by its `Content-Length`
/// before reading, and as it arrives).
pub(crate) async fn read_bounded(
    mut response: reqwest::Response,
    cap: u64,
    url: &str,
) -> Result<Vec<u8>, String> {
    let too_long = |n: u64| format!("`{url}` sent {n} bytes or more, above the cap of {cap}");
    if let Some(length) = response.content_length()
        && length > cap
    {
        return Err(too_long(length));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading `{url}`: {}", chain(&e)))?
    {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(too_long(body.len() as u64 + chunk.len() as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first 200 characters of a body a registry sent, escaped for a terminal.
fn shown_body(body: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
    crate::text::escape(text.trim()).into_owned()
}

/// An error with its causes (reqwest's top line alone says "error sending request").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The `key="value"` pairs of an authentication challenge.
fn challenge_params(challenge: &str) -> Vec<(String, String)> {
    let rest = challenge.split_once(' ').map_or("", |(_, r)| r);
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let v: String = chars.by_ref().take_while(|c| *c != '"').collect();
            v
        } else {
            chars.by_ref().take_while(|c| *c != ',').collect()
        };
        params.push((key.trim().to_ascii_lowercase(), value));
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(reference: &str) -> Registry {
        Registry::new(&OciRef::parse(reference).unwrap(), (None, Vec::new())).unwrap()
    }

    /// Red team, stop 36: an upload `Location` on another host got the registry's
    /// `Authorization`. Credentials go to the registry's own origin only.
    #[test]
    fn credentials_stay_on_the_registrys_own_origin() {
        let local = registry("oci://127.0.0.1:5000/a/b:v1");
        assert!(local.own_origin("http://127.0.0.1:5000/v2/a/b/blobs/uploads/x"));
        for elsewhere in [
            "http://127.0.0.2:5000/upload/x",
            "http://127.0.0.1:5001/upload/x",
            "https://127.0.0.1:5000/upload/x",
            "http://localhost:5000/upload/x",
            "not a url",
        ] {
            assert!(!local.own_origin(elsewhere), "{elsewhere}");
        }
    }

    /// Red team, stop 36: a bearer challenge naming a plain-HTTP realm on another host got
    /// the user's password. Refused before anything is sent (the realm is unroutable).
    #[tokio::test]
    async fn a_plain_http_realm_elsewhere_gets_no_credentials() {
        let local = registry("oci://127.0.0.1:5000/a/b:v1");
        let refused = local
            .token(
                r#"Bearer realm="http://192.0.2.2:5012/token",service="r""#,
                None,
            )
            .await
            .unwrap_err();
        assert!(refused.contains("neither HTTPS nor loopback"), "{refused}");
    }
    #[test]
    fn challenges_are_read_with_quoted_commas() {
        let p = challenge_params(
            r#"Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(
            p,
            vec![
                ("realm".into(), "https://auth.example/token".into()),
                ("service".into(), "reg".into()),
                ("scope".into(), "repository:a/b:pull,push".into()),
            ]
        );
    }
}
