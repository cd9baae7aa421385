//! The HTTP handler: POST the input JSON, read the answer like stdout.
//!
//! - `allowedHttpHookUrls` is checked before any connection is made;
//! - header values interpolate `$VAR` / `${VAR}` only for variables the hook lists in
//!   `allowedEnvVars` (and, when set, the settings' `httpHookAllowedEnvVars`); others
//!   become empty strings;
//! - a 2xx response with a JSON object is parsed like command stdout; 2xx with an empty
//!   body is a plain success; any other body, any other status, a body over 1 MiB (read
//!   no further than that), a connection failure or a timeout is a non-blocking error
//!   (HTTP hooks block only through a JSON decision);
//! - redirects are not followed: a redirect could leave the allowlist.

use std::time::Instant;

use super::capture::Capture;
use super::output::{Stdout, classify_stdout};
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::{Hook, HttpSpec, Settings};

/// Bytes of a response body read at most.
const BODY_LIMIT: usize = 1 << 20;

/// Runs an HTTP hook once.
pub async fn run(
    client: &reqwest::Client,
    spec: &HttpSpec,
    hook: &Hook,
    invocation: &Invocation,
    settings: &Settings,
) -> HandlerRun {
    let started = Instant::now();
    // The URL is parsed once: the allowlist checks the same parse that is contacted.
    let target = match settings.url_allowlist_for(hook.origin.kind) {
        None => spec.url.clone(),
        Some(allowlist) => match allowlist.check(&spec.url) {
            Ok(url) => url.to_string(),
            Err(why) => {
                let patterns: Vec<&str> = allowlist.patterns().collect();
                return HandlerRun::failed(
                    FailureKind::Refused,
                    format!(
                        "URL `{}` is not in `allowedHttpHookUrls` {patterns:?} ({why}); not contacted",
                        spec.url
                    ),
                    started,
                );
            }
        },
    };
    let mut request = client
        .post(&target)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(invocation.input_json.clone());
    for (name, template) in spec
        .headers
        .iter()
        .filter(|(name, _)| !crate::policy::is_framing_header(name))
    {
        request = request.header(name, interpolate(template, &spec.allowed_env_vars));
    }
    let exchange = async {
        let mut response = request.send().await?;
        let status = response.status();
        // The JSON's strings past `capture::STRING_KEEP` are dropped (a deny quoting a
        // long command still parses); one byte past the limit otherwise is enough to know
        // the answer is too long: the rest is not waited for (a server that streams on,
        // or stalls, is not read to its end).
        let mut body = Capture::new(BODY_LIMIT);
        while let Some(chunk) = response.chunk().await? {
            body.push(&chunk);
            if body.overflow {
                break;
            }
        }
        Ok::<_, reqwest::Error>((status, body))
    };
    let (status, body) = match tokio::time::timeout(hook.timeout, exchange).await {
        Err(_) => {
            return HandlerRun::failed(
                FailureKind::Timeout,
                format!("POST {} timed out after {:?}", spec.url, hook.timeout),
                started,
            );
        }
        Ok(Err(e)) => {
            // No socket for the request (out of descriptors, memory): could not start.
            if let Some(io) = super::out_of_resources(&e) {
                return super::start_failed(&format!("POST {}", spec.url), io, started);
            }
            let e = without_url(e);
            return HandlerRun::failed(
                FailureKind::Http,
                format!("POST {} failed: {e}", spec.url),
                started,
            );
        }
        Ok(Ok(result)) => result,
    };
    let code = Some(i32::from(status.as_u16()));
    let text = String::from_utf8_lossy(body.bytes());
    let verdict = if body.overflow {
        Verdict::failed(
            FailureKind::InvalidOutput,
            format!(
                "POST {} answered more than {BODY_LIMIT} bytes; ignored",
                spec.url
            ),
        )
    } else if !status.is_success() {
        Verdict::failed(
            FailureKind::Http,
            format!("POST {} answered HTTP {status}", spec.url),
        )
    } else {
        let parsed = classify_stdout(&text, &invocation.spec.name);
        let parsed = if body.cut {
            super::capture::restrictive_or_invalid(parsed, &format!("POST {}'s answer", spec.url))
        } else {
            parsed
        };
        match parsed {
            Stdout::Empty => Verdict::Answer(Answer::default()),
            Stdout::Json(output) => Verdict::Answer(Answer {
                output,
                ..Answer::default()
            }),
            Stdout::InvalidJson(e) => Verdict::failed(FailureKind::InvalidOutput, e),
            Stdout::Text(_) => Verdict::failed(
                FailureKind::InvalidOutput,
                format!(
                    "POST {} answered plain text, not a JSON object; ignored",
                    spec.url
                ),
            ),
        }
    };
    HandlerRun {
        verdict,
        exit_code: code,
        duration: started.elapsed(),
        usage: Usage::default(),
        diagnostics: None,
    }
}

/// A reqwest error's text with its causes, without the URL (which the caller names).
pub(crate) fn without_url(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// Replaces `$VAR` and `${VAR}` with the variable's value when `allowed` names it, and
/// with the empty string otherwise.
pub fn interpolate(template: &str, allowed: &[String]) -> String {
    let lookup = |name: &str| {
        if allowed.iter().any(|a| a == name) {
            crate::config::env::granted(name)
                .and_then(|v| v.into_string().ok())
                .unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(braced) = after.strip_prefix('{')
            && let Some(end) = braced.find('}')
        {
            out.push_str(&lookup(&braced[..end]));
            rest = &braced[end + 1..];
            continue;
        }
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len == 0 {
            out.push('$');
        } else {
            out.push_str(&lookup(&after[..name_len]));
        }
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_uses_only_allowed_vars() {
        // PATH and HOME exist on any machine that runs the tests.
        let path = std::env::var("PATH").unwrap();
        let allowed = vec!["PATH".to_string()];
        assert_eq!(
            interpolate("Bearer $PATH", &allowed),
            format!("Bearer {path}")
        );
        assert_eq!(interpolate("x${PATH}y", &allowed), format!("x{path}y"));
        assert_eq!(interpolate("$HOME", &allowed), "");
        assert_eq!(interpolate("${HOME}!", &allowed), "!");
        assert_eq!(interpolate("cost: $5 $", &allowed), "cost:  $");
        assert_eq!(interpolate("plain", &allowed), "plain");
    }
}
