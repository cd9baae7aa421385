use super::*;
use crate::config::env::Otel;
use crate::config::schema::RawTelemetry;

fn env_with(endpoint: &str) -> Otel {
    Otel {
        endpoints: vec![(endpoint.to_string(), "OTEL_EXPORTER_OTLP_ENDPOINT")],
        traces: Some((
            format!("{endpoint}/v1/traces"),
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        )),
        metrics: Some((
            format!("{endpoint}/v1/metrics"),
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        )),
        headers: vec![("x-api-key".into(), "env".into())],
        ..Otel::default()
    }
}

#[test]
fn without_an_endpoint_telemetry_is_off() {
    let settings = crate::policy::tests_support::settings();
    assert_eq!(decide(&settings, &Otel::default()), (None, Vec::new()));
}

#[test]
fn an_environment_endpoint_is_honoured_on_loopback_only() {
    let settings = crate::policy::tests_support::settings();
    for loopback in [
        "http://127.0.0.1:4318",
        "http://localhost:4318",
        "http://[::1]:4318",
    ] {
        let (config, notices) = decide(&settings, &env_with(loopback));
        let config = config.unwrap_or_else(|| panic!("{loopback}: {notices:?}"));
        assert_eq!(config.traces, format!("{loopback}/v1/traces"));
        assert_eq!(config.resource["service.name"], "hookhost");
    }
    for remote in [
        "https://collector.example.com",
        "http://10.0.0.1:4318",
        "http://127.0.0.1.example.com",
        "http://user@127.0.0.1:4318",
        "file:///tmp/x",
    ] {
        let (config, notices) = decide(&settings, &env_with(remote));
        assert!(config.is_none(), "{remote} was honoured");
        assert_eq!(notices.len(), 2, "{remote}: {notices:?}");
    }
}

#[test]
fn managed_policy_wins_over_the_environment() {
    let mut settings = crate::policy::tests_support::settings();
    settings.telemetry = Some(RawTelemetry {
        endpoint: "https://otel.corp.example.com/".into(),
        headers: [("x-api-key".to_string(), "managed".to_string())].into(),
    });
    let mut env = env_with("http://127.0.0.1:9");
    env.disabled = true;
    let (config, _) = decide(&settings, &env);
    let config = config.expect("managed telemetry is not turned off by the environment");
    assert_eq!(config.traces, "https://otel.corp.example.com/v1/traces");
    assert_eq!(config.metrics, "https://otel.corp.example.com/v1/metrics");
    assert_eq!(config.headers["x-api-key"], "managed");
}

/// Red team, stop 37: under managed telemetry, headers from the environment (a
/// repository's `env` block can set them) joined managed policy's: a tenant header
/// (`x-scope-orgid`) the managed headers do not name routed the user's spans to the
/// repository's tenant of a shared collector. Only managed `telemetry.headers` are sent.
#[test]
fn managed_telemetry_sends_only_managed_headers() {
    let mut settings = crate::policy::tests_support::settings();
    settings.telemetry = Some(RawTelemetry {
        endpoint: "https://otel.corp.example.com".into(),
        headers: [("x-api-key".to_string(), "managed".to_string())].into(),
    });
    let mut env = env_with("http://127.0.0.1:9");
    env.headers
        .push(("x-scope-orgid".into(), "repository".into()));
    let (config, notices) = decide(&settings, &env);
    let config = config.unwrap();
    assert_eq!(
        config.headers,
        [("x-api-key".to_string(), "managed".to_string())].into()
    );
    assert!(
        notices
            .iter()
            .any(|n| n.contains("OTEL_EXPORTER_OTLP_HEADERS")),
        "{notices:?}"
    );
}

#[test]
fn sdk_disabled_turns_an_environment_endpoint_off() {
    let settings = crate::policy::tests_support::settings();
    let mut env = env_with("http://127.0.0.1:4318");
    env.disabled = true;
    assert!(decide(&settings, &env).0.is_none());
}

#[test]
fn the_headers_follow_only_endpoints_that_name_one_origin() {
    let settings = crate::policy::tests_support::settings();
    // One collector for every signal, however it is spelled: the headers go with it.
    let mut env = env_with("http://127.0.0.1:4318");
    env.endpoints.push((
        "http://127.0.0.1:4318/other/v1/traces".into(),
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ));
    let (config, notices) = decide(&settings, &env);
    assert_eq!(config.unwrap().headers["x-api-key"], "env", "{notices:?}");
    // A per-signal endpoint elsewhere (another port is another collector, as a repository
    // could set it): both signals still export, neither carries the headers.
    for (other, var) in [
        (
            "http://127.0.0.1:9999/v1/traces",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        (
            "http://localhost:4318/v1/metrics",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        ),
        (
            "https://127.0.0.1:4318/v1/traces",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ),
        ("not a url", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    ] {
        let mut env = env_with("http://127.0.0.1:4318");
        env.endpoints.push((other.into(), var));
        if var.contains("TRACES") {
            env.traces = Some((other.into(), var));
        } else {
            env.metrics = Some((other.into(), var));
        }
        let (config, notices) = decide(&settings, &env);
        let config = config.expect("the collector that was set still exports");
        assert!(config.headers.is_empty(), "{other}: {:?}", config.headers);
        assert!(
            notices
                .iter()
                .any(|n| n.contains("OTEL_EXPORTER_OTLP_HEADERS is not sent") && n.contains(var)),
            "{other}: {notices:?}"
        );
    }
}
