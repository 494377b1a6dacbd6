//! What the surface tells an operator whatever exports it (spec/37): one
//! boundary span per request (`http.append`, `http.read`, ...) with the
//! client's W3C trace context as its parent, request counters for
//! `/__ursula/metrics`, and the seam an OTLP exporter uses when the binary
//! installs one: trace context into and out of gRPC metadata, the figures
//! read at export time, and the latency histograms.
//!
//! With no exporter installed nothing here calls OpenTelemetry: the
//! context is neither extracted nor injected and no latency is recorded.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::ops::Metrics;
use crate::route::{Route, Sub};

/// The kind of a request, named as its boundary span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Append,
    Delete,
    Read,
    Head,
    Snapshot,
    Bootstrap,
    Ops,
    Other,
}

const OPS: [Op; 9] =
    [Op::Create, Op::Append, Op::Delete, Op::Read, Op::Head, Op::Snapshot, Op::Bootstrap, Op::Ops, Op::Other];

impl Op {
    /// The kind of a request to `routed` (`None`: no route).
    pub fn of(method: &Method, routed: Option<&Route>) -> Op {
        let Some(routed) = routed else { return Op::Other };
        match (routed, method) {
            (_, &Method::OPTIONS) => Op::Other,
            (Route::Stream(_), &Method::PUT) => Op::Create,
            (Route::Stream(_), &Method::POST) => Op::Append,
            (Route::Stream(_), &Method::DELETE) => Op::Delete,
            (Route::Stream(_), &Method::HEAD) => Op::Head,
            (Route::Stream(_), &Method::GET) | (Route::Sub(_, Sub::Chunk { .. }), _) => Op::Read,
            (Route::Sub(_, Sub::Bootstrap), _) => Op::Bootstrap,
            (Route::Sub(..), _) => Op::Snapshot,
            (Route::Ops(_), _) => Op::Ops,
            _ => Op::Other,
        }
    }

    pub fn span_name(self) -> &'static str {
        match self {
            Op::Create => "http.create",
            Op::Append => "http.append",
            Op::Delete => "http.delete",
            Op::Read => "http.read",
            Op::Head => "http.head",
            Op::Snapshot => "http.snapshot",
            Op::Bootstrap => "http.bootstrap",
            Op::Ops => "http.ops",
            Op::Other => "http.other",
        }
    }

    /// Its slot in `RequestStats`: `OPS` lists the kinds in declaration order.
    fn index(self) -> usize {
        self as usize
    }
}

/// Requests answered, by kind, and the figures spec/38 names for reads.
#[derive(Default)]
pub struct RequestStats {
    answered: [AtomicU64; OPS.len()],
    appends_accepted: AtomicU64,
    reads: AtomicU64,
    refused: AtomicU64,
    pub sse_streams_opened: AtomicU64,
    pub sse_error_events: AtomicU64,
}

impl RequestStats {
    pub fn answered(&self, op: Op, status: StatusCode) {
        self.answered[op.index()].fetch_add(1, Relaxed);
        if status.is_success() {
            match op {
                Op::Append => self.appends_accepted.fetch_add(1, Relaxed),
                Op::Read => self.reads.fetch_add(1, Relaxed),
                _ => 0,
            };
        } else if status.is_client_error() || status.is_server_error() {
            self.refused.fetch_add(1, Relaxed);
        }
    }

    pub fn fill(&self, m: &mut Metrics) {
        let by_op: serde_json::Map<String, serde_json::Value> =
            OPS.iter().map(|op| (op.span_name().to_owned(), self.answered[op.index()].load(Relaxed).into())).collect();
        m.detail("http_requests", by_op);
        m.count("http_requests_total", self.answered.iter().map(|a| a.load(Relaxed)).sum());
        m.count("http_refusals", self.refused.load(Relaxed));
        m.count("http_appends_accepted", self.appends_accepted.load(Relaxed));
        m.count("http_reads", self.reads.load(Relaxed));
        m.count("sse_streams_opened", self.sse_streams_opened.load(Relaxed));
        m.count("sse_error_events", self.sse_error_events.load(Relaxed));
    }
}

/// Set once by the binary when it exports traces: only then do requests
/// make spans, read trace context or pass it on.
static TRACE_EXPORT: AtomicBool = AtomicBool::new(false);
/// The share of requests without a client's decision that start a trace.
static ROOT_RATIO: AtomicU64 = AtomicU64::new(0);

/// Turns tracing of requests on, keeping `ratio` of new root traces
/// (`OTEL_TRACES_SAMPLER_ARG`); a client's `traceparent` decides for its own.
pub fn enable_trace_context(ratio: f64) {
    ROOT_RATIO.store(ratio.clamp(0.0, 1.0).to_bits(), Relaxed);
    TRACE_EXPORT.store(true, Relaxed);
}

fn trace_context_on() -> bool {
    TRACE_EXPORT.load(Relaxed)
}

/// The sampled flag of a well-formed W3C `traceparent`
/// (`00-{32 hex}-{16 hex}-{2 hex flags}`), or `None`. Checked here rather
/// than by the SDK's propagator, which takes a trace id of 31 digits.
fn parent_sampled(headers: &HeaderMap) -> Option<bool> {
    let value = headers.get(TRACEPARENT)?.to_str().ok()?;
    let parts: Vec<&str> = value.trim().split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    match parts.as_slice() {
        [version, trace, span, flags] if hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2) => {
            u8::from_str_radix(flags, 16).ok().map(|f| f & 1 == 1)
        }
        _ => None,
    }
}

/// Whether a request is traced: never without export; as its client
/// decided; else one in `1 / ratio`. Deciding here, before any span
/// exists, is what keeps an unsampled request free of span work.
fn traced_request(headers: &HeaderMap) -> bool {
    trace_context_on()
        && parent_sampled(headers).unwrap_or_else(|| fastrand::f64() < f64::from_bits(ROOT_RATIO.load(Relaxed)))
}

/// The boundary span of a request; `route` names its stream. Never the
/// payload, never a credential. A request that is not traced gets none.
pub fn boundary_span(op: Op, route: Option<&Route>, headers: &HeaderMap) -> Span {
    if !traced_request(headers) {
        return Span::none();
    }
    let span = tracing::info_span!(
        "http.request",
        otel.name = op.span_name(),
        otel.kind = "server",
        bucket = Empty,
        stream = Empty,
        http.response.status_code = Empty,
    );
    if let Some(Route::Stream(key) | Route::Sub(key, _)) = route {
        span.record("bucket", key.bucket.as_str());
        span.record("stream", key.stream.as_str());
    }
    adopt_parent(&span, headers);
    span
}

/// The span of a call on the private gRPC planes (`name`: its gRPC path,
/// `ursula.stream.v1.StreamService/Append`), child of the caller's span.
/// Only a call whose metadata carries a sampled trace gets one: traces
/// start where clients arrive (a gateway, a node's HTTP), never in Raft's
/// own traffic.
pub fn rpc_span(name: &str, headers: &HeaderMap) -> Span {
    if !(trace_context_on() && parent_sampled(headers) == Some(true)) {
        return Span::none();
    }
    let span = tracing::info_span!("rpc", otel.name = name, otel.kind = "server");
    adopt_parent(&span, headers);
    span
}

/// A gRPC request carrying the current span's trace context.
pub fn traced<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    inject_current(request.metadata_mut().as_mut());
    request
}

/// A tonic interceptor: every call carries the current trace context.
pub fn carry_trace_context(mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
    inject_current(request.metadata_mut().as_mut());
    Ok(request)
}

/// The signature of [`carry_trace_context`], for client types.
pub type TraceInterceptor = fn(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status>;

/// Makes the W3C `traceparent` of `headers`, if any, the parent of `span`.
fn adopt_parent(span: &Span, headers: &HeaderMap) {
    if span.is_disabled() || !headers.contains_key(TRACEPARENT) {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Writes the current span's trace context into the headers (gRPC
/// metadata) of an outgoing call. Trace context never enters a Raft entry.
pub fn inject_current(headers: &mut HeaderMap) {
    if !trace_context_on() {
        return;
    }
    let context = Span::current().context();
    if context.span().span_context().is_valid() {
        opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut HeadersMut(headers)));
    }
}

/// Whether the current span is in a sampled trace whose context goes
/// upstream: such a call travels alone so its trace reaches the voter.
pub fn current_trace_sampled() -> bool {
    trace_context_on() && Span::current().context().span().span_context().is_sampled()
}

const TRACEPARENT: &str = "traceparent";

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(key.as_bytes()), HeaderValue::from_str(&value)) {
            self.0.insert(name, value);
        }
    }
}

/// The figures of the process's surface, as `/__ursula/metrics` has them.
pub type MetricsFuture = Pin<Box<dyn Future<Output = Metrics> + Send>>;
type Source = Arc<dyn Fn() -> MetricsFuture + Send + Sync>;

static SOURCE: RwLock<Option<(tokio::runtime::Handle, Source)>> = RwLock::new(None);

/// Makes `source` what an exporter reads (the last surface published wins).
pub fn publish_metrics(handle: tokio::runtime::Handle, source: Source) {
    *SOURCE.write().unwrap_or_else(|p| p.into_inner()) = Some((handle, source));
}

/// The figures now, for an exporter's collection on its own thread (never
/// on a runtime's): `None` before a surface was published.
pub fn collect_metrics() -> Option<Metrics> {
    let (handle, source) = SOURCE.read().unwrap_or_else(|p| p.into_inner()).clone()?;
    Some(handle.block_on(source()))
}

/// Latency histograms, when the binary exports metrics.
pub struct Latency {
    pub append: opentelemetry::metrics::Histogram<f64>,
    pub read: opentelemetry::metrics::Histogram<f64>,
}

static LATENCY: OnceLock<Latency> = OnceLock::new();

pub fn install_latency(latency: Latency) {
    let _ = LATENCY.set(latency);
}

/// When the request started, only when a latency will be recorded.
pub fn latency_clock(op: Op) -> Option<Instant> {
    (matches!(op, Op::Append | Op::Read) && LATENCY.get().is_some()).then(Instant::now)
}

pub fn record_latency(op: Op, started: Option<Instant>, status: StatusCode) {
    let (Some(started), Some(latency)) = (started, LATENCY.get()) else { return };
    let seconds = started.elapsed().as_secs_f64();
    let status = [opentelemetry::KeyValue::new("http.response.status_code", i64::from(status.as_u16()))];
    match op {
        Op::Append => latency.append.record(seconds, &status),
        Op::Read => latency.read.record(seconds, &status),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::route;

    #[test]
    fn requests_are_named_by_route_and_method() {
        let cases = [
            (Method::PUT, "/demo/s", Op::Create),
            (Method::POST, "/demo/s", Op::Append),
            (Method::GET, "/demo/s", Op::Read),
            (Method::HEAD, "/demo/s", Op::Head),
            (Method::DELETE, "/demo/s", Op::Delete),
            (Method::GET, "/demo/s/bootstrap", Op::Bootstrap),
            (Method::GET, "/demo/s/incarnation/1/chunk/2", Op::Read),
            (Method::PUT, "/demo/s/snapshot/00000000000000000001", Op::Snapshot),
            (Method::GET, "/__ursula/metrics", Op::Ops),
            (Method::OPTIONS, "/demo/s", Op::Other),
            (Method::PUT, "/demo", Op::Other),
            (Method::GET, "/demo/s/x/y", Op::Other),
        ];
        for (method, path, op) in cases {
            assert_eq!(Op::of(&method, route(path).ok().as_ref()), op, "{method} {path}");
        }
    }

    #[test]
    fn every_kind_has_its_own_slot() {
        for (i, op) in OPS.iter().enumerate() {
            assert_eq!(op.index(), i, "{op:?}");
        }
    }

    #[test]
    fn counters_split_accepted_from_refused() {
        let stats = RequestStats::default();
        stats.answered(Op::Append, StatusCode::NO_CONTENT);
        stats.answered(Op::Append, StatusCode::CONFLICT);
        stats.answered(Op::Read, StatusCode::OK);
        let mut m = Metrics::new();
        stats.fill(&mut m);
        assert_eq!(m.get("http_appends_accepted"), Some(&1.into()));
        assert_eq!(m.get("http_reads"), Some(&1.into()));
        assert_eq!(m.get("http_refusals"), Some(&1.into()));
        assert_eq!(m.get("http_requests_total"), Some(&3.into()));
    }

    #[test]
    fn a_clients_sampling_decision_is_read_from_its_traceparent() {
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(TRACEPARENT, HeaderValue::from_str(value).expect("a header value"));
            parent_sampled(&h)
        };
        assert_eq!(with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), Some(true));
        assert_eq!(with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"), Some(false));
        assert_eq!(with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"), None);
        assert_eq!(with("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"), None);
        assert_eq!(with("zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), None);
        assert_eq!(parent_sampled(&HeaderMap::new()), None);
    }

    #[test]
    fn without_an_exporter_no_request_is_traced() {
        let mut h = HeaderMap::new();
        h.insert(TRACEPARENT, HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        assert!(!traced_request(&h));
        assert!(boundary_span(Op::Append, None, &h).is_none());
        assert!(rpc_span("x", &h).is_none());
    }

    #[test]
    fn without_an_exporter_no_context_is_passed_on() {
        let mut headers = HeaderMap::new();
        inject_current(&mut headers);
        assert!(headers.is_empty());
    }
}
