//! A collector for the telemetry tests: OTLP over HTTP/protobuf on
//! 127.0.0.1 (`/v1/traces`, `/v1/metrics`), decoding what arrives with the
//! `opentelemetry-proto` types, as a real collector would.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

#[derive(Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    /// Requests to any other path, or bodies that did not decode.
    other: Vec<String>,
}

pub struct Collector {
    pub url: String,
    received: Arc<Mutex<Received>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A span as received, with the resource of the process that sent it.
#[derive(Debug, Clone)]
pub struct SeenSpan {
    pub service: String,
    pub instance: Option<String>,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_id: String,
    pub attributes: BTreeMap<String, String>,
}

/// A metric as received: who sent it, its name, and each data point's
/// attributes and value (sums and gauges; histograms by their count).
#[derive(Debug, Clone)]
pub struct SeenMetric {
    pub service: String,
    pub instance: Option<String>,
    pub name: String,
    pub points: Vec<(BTreeMap<String, String>, f64)>,
}

impl Collector {
    pub async fn start() -> Collector {
        Collector::start_on("127.0.0.1:0".parse().expect("an address")).await.expect("binding the collector")
    }

    pub async fn start_on(addr: SocketAddr) -> std::io::Result<Collector> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let received: Arc<Mutex<Received>> = Arc::default();
        let sink = received.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let sink = sink.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let sink = sink.clone();
                        async move {
                            let path = req.uri().path().to_owned();
                            let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                            let reply = take(&sink, &path, &body);
                            let answer = hyper::Response::builder()
                                .header("content-type", "application/x-protobuf")
                                .body(Full::new(reply))
                                .expect("an answer");
                            Ok::<_, std::convert::Infallible>(answer)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Collector { url, received, task })
    }

    pub fn is_empty(&self) -> bool {
        let r = self.received.lock().unwrap_or_else(|p| p.into_inner());
        r.traces.is_empty() && r.metrics.is_empty() && r.other.is_empty()
    }

    /// Requests that were not OTLP of a known signal.
    pub fn other(&self) -> Vec<String> {
        self.received.lock().unwrap_or_else(|p| p.into_inner()).other.clone()
    }

    pub fn spans(&self) -> Vec<SeenSpan> {
        let r = self.received.lock().unwrap_or_else(|p| p.into_inner());
        let mut spans = Vec::new();
        for export in &r.traces {
            for rs in &export.resource_spans {
                let resource = rs.resource.as_ref().map(|r| attributes(&r.attributes)).unwrap_or_default();
                for span in rs.scope_spans.iter().flat_map(|s| &s.spans) {
                    spans.push(SeenSpan {
                        service: resource.get("service.name").cloned().unwrap_or_default(),
                        instance: resource.get("service.instance.id").cloned(),
                        name: span.name.clone(),
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_id: hex(&span.parent_span_id),
                        attributes: attributes(&span.attributes),
                    });
                }
            }
        }
        spans
    }

    pub fn metrics(&self) -> Vec<SeenMetric> {
        use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as N};
        let r = self.received.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = Vec::new();
        for export in &r.metrics {
            for rm in &export.resource_metrics {
                let resource = rm.resource.as_ref().map(|r| attributes(&r.attributes)).unwrap_or_default();
                for metric in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                    let number = |p: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint| {
                        let v = match p.value {
                            Some(N::AsInt(i)) => i as f64,
                            Some(N::AsDouble(d)) => d,
                            None => f64::NAN,
                        };
                        (attributes(&p.attributes), v)
                    };
                    let points = match &metric.data {
                        Some(Data::Sum(s)) => s.data_points.iter().map(number).collect(),
                        Some(Data::Gauge(g)) => g.data_points.iter().map(number).collect(),
                        Some(Data::Histogram(h)) => {
                            h.data_points.iter().map(|p| (attributes(&p.attributes), p.count as f64)).collect()
                        }
                        _ => Vec::new(),
                    };
                    seen.push(SeenMetric {
                        service: resource.get("service.name").cloned().unwrap_or_default(),
                        instance: resource.get("service.instance.id").cloned(),
                        name: metric.name.clone(),
                        points,
                    });
                }
            }
        }
        seen
    }
}

/// Keeps what arrived at `path` and answers it as a collector does.
fn take(sink: &Mutex<Received>, path: &str, body: &[u8]) -> Bytes {
    let mut r = sink.lock().unwrap_or_else(|p| p.into_inner());
    match path {
        "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
            Ok(export) => {
                r.traces.push(export);
                return ExportTraceServiceResponse::default().encode_to_vec().into();
            }
            Err(e) => r.other.push(format!("{path}: {e}")),
        },
        "/v1/metrics" => match ExportMetricsServiceRequest::decode(body) {
            Ok(export) => {
                r.metrics.push(export);
                return ExportMetricsServiceResponse::default().encode_to_vec().into();
            }
            Err(e) => r.other.push(format!("{path}: {e}")),
        },
        other => r.other.push(other.to_owned()),
    }
    Bytes::new()
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map(text).unwrap_or_default())).collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
