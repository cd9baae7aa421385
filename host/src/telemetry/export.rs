//! The export side: one small runtime per process (one worker thread, started with the
//! first pipeline), the bounded span queue and its worker, the periodic metrics reader,
//! and the HTTP client the official exporters send through.
//!
//! The exporters build their requests (protobuf, gzip); [`Http`] sends them with
//! hookhost's reqwest client (no proxy, no roots from the environment, no redirects) and
//! exactly the headers decided in [`super::decide`] (the crate would also add
//! `OTEL_EXPORTER_OTLP_*_HEADERS` it reads itself), and reads at most [`MAX_ANSWER`] of
//! the collector's answer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT,
};
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_otlp::{Compression, Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use super::Config;
use super::metrics::Metrics;

/// Set by [`flush_all`]: the process is about to exit.
static EXITING: AtomicBool = AtomicBool::new(false);
/// Set by [`warn_on_failures`].
static WARN_ON_FAILURES: AtomicBool = AtomicBool::new(false);

/// In a long-lived process (a daemon, whose stderr is its log): a failing export is a
/// warning (once per failure streak). Elsewhere it is a debug line: a one-shot
/// `hookhost dispatch`'s stderr is part of its answer.
pub fn warn_on_failures() {
    WARN_ON_FAILURES.store(true, Ordering::Relaxed);
}
/// The most of a collector's answer read (its status decides; the body is only logged).
const MAX_ANSWER: usize = 64 << 10;
/// Spans sent in one export at most.
const MAX_EXPORT_SPANS: usize = 512;
/// How often a long-lived process (a daemon) exports its metrics.
const METRICS_INTERVAL: Duration = Duration::from_secs(30);
/// Pipelines (distinct configs) one process keeps; a daemon whose managed policy changed
/// gets a new one, and the oldest is let go.
const MAX_PIPELINES: usize = 4;

enum Message {
    Spans(Vec<SpanData>),
    Flush(std::sync::mpsc::Sender<()>),
}

/// One export pipeline: its config, the span queue, the metrics.
pub(super) struct Pipeline {
    pub(super) config: Config,
    queue: tokio::sync::mpsc::Sender<Message>,
    pub(super) metrics: Metrics,
    provider: SdkMeterProvider,
    handle: tokio::runtime::Handle,
    /// Spans dropped (the queue was full), and how many of them a notice has said.
    dropped: AtomicU64,
    said: AtomicU64,
}

impl Pipeline {
    /// Queues a dispatch's spans, or drops and counts them when the queue is full.
    pub(super) fn enqueue(&self, spans: Vec<SpanData>) {
        let count = spans.len() as u64;
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) =
            self.queue.try_send(Message::Spans(spans))
        {
            self.dropped.fetch_add(count, Ordering::Relaxed);
            self.metrics.dropped.add(count, &[]);
        }
    }

    /// A notice when spans were dropped since the last notice.
    pub(super) fn drop_notice(&self) -> Option<String> {
        let dropped = self.dropped.load(Ordering::Relaxed);
        let said = self.said.swap(dropped, Ordering::Relaxed);
        (dropped > said).then(|| {
            format!(
                "telemetry: {} spans were dropped: the export queue to `{}` was full (is the \
                 collector slow or unreachable?)",
                dropped - said,
                crate::text::escape(&self.config.traces)
            )
        })
    }

    /// Exports what is queued and the metrics, waiting at most until `deadline`.
    fn flush(&self, deadline: Instant) -> bool {
        let provider = self.provider.clone();
        let (metrics_done, metrics_wait) = std::sync::mpsc::channel();
        // The SDK's flush blocks until its reader's thread exported (each export bounded
        // by the client's timeout): on a thread of its own, let go at the deadline.
        let _ = std::thread::Builder::new()
            .name("hookhost-otel-flush".into())
            .spawn(move || {
                let _ = provider.force_flush();
                let _ = metrics_done.send(());
            });
        let (spans_done, spans_wait) = std::sync::mpsc::channel();
        let queue = self.queue.clone();
        self.handle.spawn(async move {
            let _ = queue.send(Message::Flush(spans_done)).await;
        });
        let left = || deadline.saturating_duration_since(Instant::now());
        let spans = spans_wait.recv_timeout(left()).is_ok();
        let metrics = metrics_wait.recv_timeout(left()).is_ok();
        spans && metrics
    }
}

/// The process's pipelines.
fn pipelines() -> &'static Mutex<Vec<Arc<Pipeline>>> {
    static PIPELINES: OnceLock<Mutex<Vec<Arc<Pipeline>>>> = OnceLock::new();
    PIPELINES.get_or_init(Mutex::default)
}

/// The telemetry runtime: one worker thread, never shut down (a process exits with it).
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("hookhost-otel")
                .enable_all()
                .build()
                .map_err(|e| tracing::warn!("telemetry: no runtime: {e}; nothing is exported"))
                .ok()
        })
        .as_ref()
}

/// The pipeline of `config`, started on first use.
pub(super) fn pipeline(
    config: &Config,
    http: impl FnOnce() -> reqwest::Client,
) -> Option<Arc<Pipeline>> {
    let mut all = pipelines().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = all.iter().find(|p| p.config == *config) {
        return Some(found.clone());
    }
    let runtime = runtime()?;
    let handle = runtime.handle().clone();
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.insert(name, value);
            }
            _ => tracing::warn!(
                "telemetry: the header `{}` is not a valid HTTP header; not sent",
                crate::text::escape(name)
            ),
        }
    }
    let client = Http {
        client: http(),
        headers,
        handle: handle.clone(),
        timeout: config.timeout,
    };
    let resource = Resource::builder_empty()
        .with_attributes(
            config
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .build();
    let (queue, receiver) = tokio::sync::mpsc::channel(super::QUEUE_BATCHES);
    if !config.traces.is_empty() {
        match opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_endpoint(config.traces.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_compression(Compression::Gzip)
            .with_timeout(config.timeout)
            .build()
        {
            Ok(mut exporter) => {
                exporter.set_resource(&resource);
                handle.spawn(export_spans(exporter, receiver, config.timeout));
            }
            Err(e) => tracing::warn!("telemetry: no span exporter: {e}"),
        }
    }
    let mut provider = SdkMeterProvider::builder().with_resource(resource);
    if !config.metrics.is_empty() {
        match opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(config.metrics.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_compression(Compression::Gzip)
            .with_timeout(config.timeout)
            .with_temporality(Temporality::Delta)
            .build()
        {
            Ok(exporter) => {
                provider = provider.with_reader(
                    PeriodicReader::builder(exporter)
                        .with_interval(METRICS_INTERVAL)
                        .build(),
                );
            }
            Err(e) => tracing::warn!("telemetry: no metric exporter: {e}"),
        }
    }
    let provider = provider.build();
    let metrics = Metrics::new(&provider.meter("hookhost"));
    let pipeline = Arc::new(Pipeline {
        config: config.clone(),
        queue,
        metrics,
        provider,
        handle,
        dropped: AtomicU64::new(0),
        said: AtomicU64::new(0),
    });
    if all.len() >= MAX_PIPELINES {
        all.remove(0);
    }
    all.push(pipeline.clone());
    Some(pipeline)
}

/// The span queue's worker: exports what arrives, in batches, each export bounded by
/// `timeout`; answers flushes once what was queued before them is exported.
async fn export_spans(
    exporter: opentelemetry_otlp::SpanExporter,
    mut queue: tokio::sync::mpsc::Receiver<Message>,
    timeout: Duration,
) {
    static FAILING: AtomicBool = AtomicBool::new(false);
    let mut flushes = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut batch = Vec::new();
        let mut message = Some(first);
        while let Some(taken) = message.take() {
            match taken {
                Message::Spans(spans) => batch.extend(spans),
                Message::Flush(done) => flushes.push(done),
            }
            if batch.len() < MAX_EXPORT_SPANS {
                message = queue.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let result = tokio::time::timeout(timeout, exporter.export(batch)).await;
            let failed = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {timeout:?}")),
            };
            match failed {
                // A one-shot process's stderr reaches the agent with a block's reason
                // (Claude Code reads all of it): there, and at any exit, the failure is
                // only a debug line. Daemons log it ([`warn_on_failures`]).
                Some(why)
                    if !WARN_ON_FAILURES.load(Ordering::Relaxed)
                        || EXITING.load(Ordering::Relaxed) =>
                {
                    tracing::debug!("telemetry: exporting spans failed: {why}");
                }
                Some(why) if !FAILING.swap(true, Ordering::Relaxed) => {
                    tracing::warn!("telemetry: exporting spans failed: {why}");
                }
                None => FAILING.store(false, Ordering::Relaxed),
                _ => {}
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

/// Exports what every pipeline of the process holds, waiting at most `bound` in all
/// (a one-shot dispatch calls it before exiting; a dead or silent collector costs at
/// most `bound`). `true` when everything was exported in time (or nothing was on).
pub fn flush_all(bound: Duration) -> bool {
    EXITING.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + bound;
    let all: Vec<Arc<Pipeline>> = pipelines()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // Every pipeline is flushed, even after one that was not in time.
    let flushed: Vec<bool> = all.iter().map(|p| p.flush(deadline)).collect();
    flushed.into_iter().all(|ok| ok)
}

/// The exporters' HTTP client: hookhost's reqwest client, on the telemetry runtime.
#[derive(Debug, Clone)]
struct Http {
    client: reqwest::Client,
    headers: HeaderMap,
    handle: tokio::runtime::Handle,
    timeout: Duration,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Http {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        // What the exporter says about the body, then what hookhost decided: nothing the
        // crate read from the environment.
        let mut headers = HeaderMap::new();
        for name in [CONTENT_TYPE, CONTENT_ENCODING] {
            if let Some(value) = parts.headers.get(&name) {
                headers.insert(name, value.clone());
            }
        }
        headers.insert(
            USER_AGENT,
            HeaderValue::from_static(concat!("hookhost/", env!("CARGO_PKG_VERSION"))),
        );
        headers.extend(self.headers.clone());
        let request = self
            .client
            .post(parts.uri.to_string())
            .headers(headers)
            .body(body)
            .timeout(self.timeout);
        // On the telemetry runtime whoever polls this (the metrics reader's thread has
        // none): a JoinHandle can be awaited from any executor.
        let answer = self.handle.spawn(async move {
            let mut response = request.send().await?;
            let status = response.status();
            let mut body = Vec::new();
            while body.len() < MAX_ANSWER {
                match response.chunk().await? {
                    Some(chunk) => {
                        let room = MAX_ANSWER - body.len();
                        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    }
                    None => break,
                }
            }
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = answer.await??;
        Ok(http::Response::builder()
            .status(status)
            .body(Bytes::from(body))?)
    }
}
