//! Logs and OpenTelemetry export (spec/37-observability.md). Logs go to
//! stderr, filtered by `RUST_LOG` (default `info`), as text or JSON lines.
//! With an OTLP endpoint in the environment (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! or the per-signal `_TRACES_`/`_METRICS_ENDPOINT`), spans and metrics are
//! exported over OTLP/HTTP-protobuf by the SDK's own threads with a
//! blocking HTTP client, so export never runs on a request's thread.
//! Without one nothing of OpenTelemetry is installed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter, MeterProvider};
use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};
use ursula_http::Metrics;
use ursula_http::telemetry as surface;

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Which process this is, for the resource every span and metric carries.
pub struct Identity {
    /// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    pub service: &'static str,
    /// `service.instance.id`: the node id, when the process has one.
    pub instance: Option<u64>,
}

/// The installed exporters; dropping it flushes and stops them.
#[must_use]
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // A backstop only: spans and metrics export continuously.
        if let Some(t) = self.tracer.take() {
            let _ = t.shutdown();
        }
        if let Some(m) = self.meter.take() {
            let _ = m.shutdown();
        }
    }
}

/// The default filter: `info`, with openraft's per-RPC lines off (ours say
/// once when a peer goes and comes back); `RUST_LOG` replaces it.
const DEFAULT_FILTER: &str = "info,openraft=off";

fn filter() -> EnvFilter {
    // `URSULA_LOG` is the older name of the same setting.
    EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_from_env("URSULA_LOG"))
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Whether each signal is exported, from the standard variables.
fn signals() -> (bool, bool) {
    let any = env_set("OTEL_EXPORTER_OTLP_ENDPOINT");
    (any || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), any || env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
}

/// Installs the logger and, when configured, the exporters. Call before
/// any runtime starts: the blocking HTTP client must not be built on one.
pub fn init(identity: &Identity, format: LogFormat) -> anyhow::Result<Telemetry> {
    let (traces, metrics) = signals();
    let resource = (traces || metrics).then(|| resource(identity));
    let tracer = match &resource {
        Some(resource) if traces => Some(tracer_provider(resource.clone())?),
        _ => None,
    };
    let otel_layer = tracer.as_ref().map(|provider| {
        opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
        surface::enable_trace_context(root_ratio());
        tracing_opentelemetry::layer().with_tracer(provider.tracer("ursula"))
    });
    // Colour only for a person at a terminal, never into a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt_layer = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr).boxed(),
    };
    tracing_subscriber::registry().with(filter()).with(fmt_layer).with(otel_layer).try_init().context("logging")?;
    let meter = match resource {
        Some(resource) if metrics => Some(meter_provider(resource)?),
        _ => None,
    };
    Ok(Telemetry { tracer, meter })
}

fn resource(identity: &Identity) -> Resource {
    // The builder reads `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME`.
    let mut builder = Resource::builder();
    if !env_set("OTEL_SERVICE_NAME") {
        builder = builder.with_service_name(identity.service);
    }
    if let Some(id) = identity.instance {
        builder = builder.with_attribute(KeyValue::new("service.instance.id", id.to_string()));
    }
    builder.build()
}

/// `OTEL_TRACES_SAMPLER_ARG`: the share of new root traces kept (default
/// 1.0). The surface decides it per request before it makes any span (a
/// client's `traceparent` decides for its own), so the SDK keeps every
/// span it is given.
fn root_ratio() -> f64 {
    std::env::var("OTEL_TRACES_SAMPLER_ARG")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|r| (0.0..=1.0).contains(r))
        .unwrap_or(1.0)
}

fn sampler() -> Sampler {
    Sampler::ParentBased(Box::new(Sampler::AlwaysOn))
}

fn tracer_provider(resource: Resource) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .context("the OTLP span exporter")?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler())
        .with_resource(resource)
        .build())
}

fn meter_provider(resource: Resource) -> anyhow::Result<SdkMeterProvider> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .context("the OTLP metric exporter")?;
    // The interval comes from `OTEL_METRIC_EXPORT_INTERVAL` (default 60 s).
    let reader = PeriodicReader::builder(exporter).build();
    let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource).build();
    let meter = provider.meter("ursula");
    register_instruments(&meter);
    surface::install_latency(surface::Latency {
        append: meter.f64_histogram("ursula.append.duration").with_unit("s").build(),
        read: meter.f64_histogram("ursula.read.duration").with_unit("s").build(),
    });
    Ok(provider)
}

/// Counters read from `/__ursula/metrics` figures at export time:
/// (instrument, field).
const COUNTERS: &[(&str, &str)] = &[
    ("ursula.appends.accepted", "appends_accepted"),
    ("ursula.reads", "reads"),
    ("ursula.mutations.applied", "mutations_applied"),
    ("ursula.raft_apply.ns", "raft_apply_ns"),
    ("ursula.wal.records", "wal_frames_written"),
    ("ursula.wal.fsyncs", "wal_fsyncs"),
    ("ursula.wal.rotations", "wal_rotations"),
    ("ursula.wal.reclaims", "wal_reclaims"),
    ("ursula.wal.reclaimed_bytes", "wal_reclaimed_bytes"),
    ("ursula.wal.rewritten_bytes", "wal_rewritten_bytes"),
    ("ursula.ttl_expiry.sweeps", "ttl_expiry_sweeps"),
    ("ursula.ttl_expiry.swept_streams", "ttl_expiry_swept_streams"),
    ("ursula.cold.flushed_bytes", "cold_bytes_flushed"),
    ("ursula.cold.fetches", "cold_fetches"),
    ("ursula.raft.peer_cluster_refusals", "raft_grpc_peer_cluster_refusals"),
    ("ursula.raft.unidentified_peer_refusals", "raft_grpc_unidentified_peer_refusals"),
    ("ursula.raft.leader_transfers", "raft_leader_transfers_triggered"),
    ("ursula.http.requests", "http_requests_total"),
    ("ursula.http.appends_accepted", "http_appends_accepted"),
    ("ursula.http.reads", "http_reads"),
    ("ursula.http.refusals", "http_refusals"),
    ("ursula.sse.opened", "sse_streams_opened"),
    ("ursula.sse.errors", "sse_error_events"),
    ("ursula.gateway.upstream_calls", "upstream_calls"),
    ("ursula.gateway.upstream_errors", "upstream_errors"),
    ("ursula.gateway.routing_hops", "routing_hops"),
    ("ursula.gateway.cache_hits", "immutable_cache_hits"),
    ("ursula.gateway.cache_misses", "immutable_cache_misses"),
];

/// Counters that add up every figure named with a prefix: (instrument, prefix).
const REFUSALS: &[(&str, &str)] =
    &[("ursula.gateway.auth_refusals", "auth_refusals_"), ("ursula.gateway.quota_refusals", "quota_refusals_")];

/// Gauges: (instrument, field).
const GAUGES: &[(&str, &str)] = &[
    ("ursula.streams", "streams"),
    ("ursula.live_readers", "live_readers"),
    ("ursula.hot_bytes", "hot_bytes"),
    ("ursula.wal.physical_bytes", "wal_physical_bytes"),
    ("ursula.wal.segments", "wal_segments"),
    ("ursula.wal.dirty_segments", "wal_dirty_segments"),
    ("ursula.wal.lagging_groups", "wal_lagging_groups"),
    ("ursula.raft.leaderships", "raft_leaderships"),
    ("ursula.gateway.cache_bytes", "immutable_cache_bytes"),
    ("ursula.gateway.upstreams_ejected", "upstream_ejected"),
];

/// Gauges counting the groups a figure lists: (instrument, field).
const LISTED: &[(&str, &str)] = &[("ursula.raft.apply_stopped", "apply_stopped_groups")];

fn register_instruments(meter: &Meter) {
    let figures = Figures::default();
    for &(name, field) in LISTED {
        let f = figures.clone();
        meter
            .u64_observable_gauge(name)
            .with_callback(move |o| {
                if let Some(Value::Array(groups)) = f.now().get(field) {
                    o.observe(groups.len() as u64, &[]);
                }
            })
            .build();
    }
    // spec/35: the groups at their recovery gate, closed and stalled, and 1
    // while any is closed after a start that may have lost the unsynced tail.
    let gates = |m: &Metrics, status: &str| m.get("recovery_gates")?.get(status)?.as_array().map(|g| g.len() as u64);
    let f = figures.clone();
    meter
        .u64_observable_gauge("ursula.raft.recovery_gates")
        .with_callback(move |o| {
            let now = f.now();
            for status in ["closed", "stalled"] {
                if let Some(n) = gates(&now, status) {
                    o.observe(n, &[KeyValue::new("status", status)]);
                }
            }
        })
        .build();
    let f = figures.clone();
    meter
        .u64_observable_gauge("ursula.wal.recovering")
        .with_callback(move |o| {
            if let Some(closed) = gates(&f.now(), "closed") {
                o.observe(u64::from(closed > 0), &[]);
            }
        })
        .build();
    for &(name, field) in COUNTERS {
        meter.u64_observable_counter(name).with_callback(figure(&figures, field)).build();
    }
    for &(name, prefix) in REFUSALS {
        let f = figures.clone();
        meter
            .u64_observable_counter(name)
            .with_callback(move |o| {
                if let Value::Object(all) = f.now().into_json() {
                    for (reason, v) in all.iter().filter(|(k, _)| k.starts_with(prefix)) {
                        let reason = reason.trim_start_matches(prefix).to_owned();
                        o.observe(v.as_u64().unwrap_or(0), &[KeyValue::new("reason", reason)]);
                    }
                }
            })
            .build();
    }
    // spec/35: rewinds to followers that lost acknowledged entries, by follower.
    let f = figures.clone();
    meter
        .u64_observable_counter("ursula.raft.follower_log_reversions")
        .with_callback(move |o| {
            if let Some(Value::Object(by)) = f.now().get("raft_follower_log_reversions") {
                for (follower, n) in by {
                    o.observe(n.as_u64().unwrap_or(0), &[KeyValue::new("follower", follower.clone())]);
                }
            }
        })
        .build();
    for &(name, field) in GAUGES {
        meter.u64_observable_gauge(name).with_callback(figure(&figures, field)).build();
    }
    let f = figures.clone();
    meter
        .u64_observable_gauge("ursula.cluster.info")
        .with_callback(move |o| {
            if let Some(id) = f.now().get("cluster_id").and_then(Value::as_str) {
                o.observe(1, &[KeyValue::new("cluster_id", id.to_owned())]);
            }
        })
        .build();
    // Per group, bounded by the group count: who leads and how far apply lags.
    let f = figures.clone();
    meter
        .u64_observable_gauge("ursula.raft.group.leader")
        .with_callback(move |o| {
            for (group, g) in groups(&f.now()) {
                if let Some(leader) = g.get("current_leader").and_then(Value::as_u64) {
                    o.observe(leader, &[KeyValue::new("group", group)]);
                }
            }
        })
        .build();
    meter
        .u64_observable_gauge("ursula.raft.group.apply_lag")
        .with_callback(move |o| {
            for (group, g) in groups(&figures.now()) {
                let committed = g.get("committed_index").and_then(Value::as_u64).unwrap_or(0);
                let applied = g.get("last_applied_index").and_then(Value::as_u64).unwrap_or(0);
                o.observe(committed.saturating_sub(applied), &[KeyValue::new("group", group)]);
            }
        })
        .build();
}

/// Observes the figure `field`, when this process has it.
fn figure(figures: &Figures, field: &'static str) -> impl Fn(&dyn AsyncInstrument<u64>) + Send + Sync + 'static {
    let figures = figures.clone();
    move |o| {
        if let Some(v) = figures.now().get(field).and_then(Value::as_u64) {
            o.observe(v, &[]);
        }
    }
}

fn groups(m: &Metrics) -> Vec<(i64, serde_json::Map<String, Value>)> {
    let Some(Value::Array(groups)) = m.get("raft_groups") else { return Vec::new() };
    groups
        .iter()
        .filter_map(|g| {
            let id = g.get("raft_group_id")?.as_i64()?;
            Some((id, g.as_object()?.clone()))
        })
        .collect()
}

/// The surface's figures, read once per collection however many
/// instruments ask (the callbacks run one after another on the reader's thread).
#[derive(Clone, Default)]
struct Figures {
    last: Arc<Mutex<Option<(Instant, Metrics)>>>,
}

const FRESH: Duration = Duration::from_millis(200);

impl Figures {
    fn now(&self) -> Metrics {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, m)) = last.as_ref()
            && at.elapsed() < FRESH
        {
            return m.clone();
        }
        let m = surface::collect_metrics().unwrap_or_default();
        *last = Some((Instant::now(), m.clone()));
        m
    }
}
