//! The OpenTelemetry variables (`OTEL_*`) as the environment gives them, read and bounded
//! here; whether the endpoint is honoured is the telemetry's decision, which needs the
//! policy (`crate::telemetry::decide`: a loopback host, or one that the user's or managed
//! `allowedHttpHookUrls` admits; a managed `telemetry.endpoint` wins over all of it).

use super::{number, read, shown};

/// Headers and resource attributes: at most this many pairs are read…
const MAX_PAIRS: usize = 32;
/// …and at most this many bytes of a variable that lists them (a longer value is ignored
/// with a notice).
const MAX_LIST_BYTES: usize = 8 << 10;
/// The longest endpoint URL read.
const MAX_URL_BYTES: usize = 2048;

/// What the `OTEL_*` variables say, read and bounded (not yet judged against the policy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Otel {
    /// The traces URL and the variable it came from: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` appended.
    pub traces: Option<(String, &'static str)>,
    /// The metrics URL, by the same rule (`/v1/metrics`).
    pub metrics: Option<(String, &'static str)>,
    /// Every endpoint variable that is set, as given (`OTEL_EXPORTER_OTLP_ENDPOINT` and the
    /// per-signal ones): the headers follow only endpoints that agree on one origin.
    pub endpoints: Vec<(String, &'static str)>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`, decoded.
    pub headers: Vec<(String, String)>,
    /// `OTEL_SERVICE_NAME`.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES`, decoded.
    pub resource: Vec<(String, String)>,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds.
    pub timeout_ms: Option<u64>,
    /// `OTEL_SDK_DISABLED=true`.
    pub disabled: bool,
}

/// The `OTEL_*` variables, and notices for the values that were ignored.
pub fn otel() -> (Otel, Vec<String>) {
    let mut notices = Vec::new();
    let mut text = |name: &'static str, cap: usize| -> Option<String> {
        let value = read(name)?;
        match value.to_str() {
            Some(v) if v.len() <= cap => Some(v.to_string()),
            _ => {
                notices.push(format!(
                    "{name} `{}` is not UTF-8 or longer than {cap} bytes; ignored",
                    shown(&value)
                ));
                None
            }
        }
    };
    let base = text("OTEL_EXPORTER_OTLP_ENDPOINT", MAX_URL_BYTES);
    let signal = |own: Option<String>, own_name: &'static str, path: &str| {
        own.map(|url| (url, own_name)).or_else(|| {
            base.as_ref().map(|base| {
                (
                    format!("{}{path}", base.trim_end_matches('/')),
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                )
            })
        })
    };
    let traces_own = text("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", MAX_URL_BYTES);
    let metrics_own = text("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", MAX_URL_BYTES);
    let headers = text("OTEL_EXPORTER_OTLP_HEADERS", MAX_LIST_BYTES);
    let service_name = text("OTEL_SERVICE_NAME", 256);
    let resource = text("OTEL_RESOURCE_ATTRIBUTES", MAX_LIST_BYTES);
    let disabled = text("OTEL_SDK_DISABLED", 16).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let endpoints = [
        (base.clone(), "OTEL_EXPORTER_OTLP_ENDPOINT"),
        (traces_own.clone(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        (metrics_own.clone(), "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
    ]
    .into_iter()
    .filter_map(|(url, var)| Some((url?, var)))
    .collect();
    let otel = Otel {
        endpoints,
        traces: signal(
            traces_own,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "/v1/traces",
        ),
        metrics: signal(
            metrics_own,
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "/v1/metrics",
        ),
        headers: headers.as_deref().map(pairs).unwrap_or_default(),
        service_name,
        resource: resource.as_deref().map(pairs).unwrap_or_default(),
        timeout_ms: match number("OTEL_EXPORTER_OTLP_TIMEOUT", 1, 60_000) {
            Ok(ms) => ms,
            Err(notice) => {
                notices.push(notice);
                None
            }
        },
        disabled,
    };
    (otel, notices)
}

/// `k=v,k2=v2` as the OTLP exporter specification writes headers and resource
/// attributes: keys trimmed, values percent-decoded and trimmed; a pair without `=`, with
/// an empty key, or whose key or value is not a valid HTTP header token (control
/// characters) is left out. At most [`MAX_PAIRS`].
pub fn pairs(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let key = key.trim();
            let value = percent_decode(value.trim())?;
            let value = value.trim();
            let token = |s: &str| !s.bytes().any(|b| b.is_ascii_control());
            (!key.is_empty() && token(key) && token(value) && !key.contains([' ', ':']))
                .then(|| (key.to_string(), value.to_string()))
        })
        .take(MAX_PAIRS)
        .collect()
}

/// `%XX` decoded (a bad escape or bytes that are not UTF-8: `None`).
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_as_the_specification_writes_them() {
        assert_eq!(
            pairs("api-key=secret%20one, x-team = a ,bad, =v,k=%zz,ctl=a\u{1}b"),
            vec![
                ("api-key".to_string(), "secret one".to_string()),
                ("x-team".to_string(), "a".to_string()),
            ]
        );
        let many: Vec<String> = (0..100).map(|i| format!("k{i}=v")).collect();
        assert_eq!(pairs(&many.join(",")).len(), MAX_PAIRS);
    }
}
