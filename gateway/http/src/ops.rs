//! `/__ursula/metrics` and `/__ursula/ready`: the figures and readiness a
//! backend reports, and the one place both become JSON answers, for the
//! client plane and a node's admin plane alike.

use http::{StatusCode, header};
use serde_json::{Map, Value};

use crate::render::{self, Answer};

/// The figures of `/__ursula/metrics`, each under its documented name at the
/// top level of the answer (spec/37-observability.md). Counters and gauges
/// are numbers; a few figures are lists or objects (per-group state).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    fields: Map<String, Value>,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// A counter or gauge.
    pub fn count(&mut self, name: &str, value: u64) {
        self.fields.insert(name.to_owned(), value.into());
    }

    /// A yes/no figure.
    pub fn flag(&mut self, name: &str, value: bool) {
        self.fields.insert(name.to_owned(), value.into());
    }

    /// A named value, such as the engine's name.
    pub fn text(&mut self, name: &str, value: impl Into<String>) {
        self.fields.insert(name.to_owned(), Value::String(value.into()));
    }

    /// A structured figure (a list of groups, a map of peers).
    pub fn detail(&mut self, name: &str, value: impl Into<Value>) {
        self.fields.insert(name.to_owned(), value.into());
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.get(name)
    }

    /// Every figure of `other`, over any of the same name here.
    pub fn extend(&mut self, other: Metrics) {
        self.fields.extend(other.fields);
    }

    pub fn into_json(self) -> Value {
        Value::Object(self.fields)
    }
}

/// Figures an engine gathered under their documented names.
impl From<Map<String, Value>> for Metrics {
    fn from(fields: Map<String, Value>) -> Metrics {
        Metrics { fields }
    }
}

/// Whether a process may serve, else the first typed reason of
/// spec/38-troubleshooting.md that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    Ready,
    Unready(&'static str),
}

/// What `/__ursula/ready` answers: the verdict and the fields it carries
/// whatever the verdict (such as `peer_cluster_mismatches`).
#[derive(Debug, Clone, PartialEq)]
pub struct Readiness {
    pub ready: Ready,
    pub details: Metrics,
}

impl Readiness {
    pub fn ready() -> Readiness {
        Readiness { ready: Ready::Ready, details: Metrics::new() }
    }

    pub fn unready(reason: &'static str) -> Readiness {
        Readiness { ready: Ready::Unready(reason), details: Metrics::new() }
    }

    pub fn is_ready(&self) -> bool {
        self.ready == Ready::Ready
    }
}

/// `GET /__ursula/ready`: `200`, or `503` with the reason.
pub fn ready_answer(readiness: Readiness, cluster_id: Option<&str>) -> Answer {
    let mut body = readiness.details;
    if let Some(id) = cluster_id {
        body.text("cluster_id", id);
    }
    let status = match readiness.ready {
        Ready::Ready => {
            body.flag("ready", true);
            StatusCode::OK
        }
        Ready::Unready(reason) => {
            body.flag("ready", false);
            body.text("reason", reason);
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    json_answer(status, body.into_json())
}

/// `GET /__ursula/metrics`.
pub fn metrics_answer(mut metrics: Metrics, cluster_id: Option<&str>) -> Answer {
    metrics.text("status", "ok");
    if let Some(id) = cluster_id {
        metrics.text("cluster_id", id);
    }
    json_answer(StatusCode::OK, metrics.into_json())
}

/// A JSON answer that no cache keeps.
pub fn json_answer(status: StatusCode, body: Value) -> Answer {
    let b = render::builder(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store");
    render::finish(b, render::full(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(answer: Answer) -> Value {
        let bytes = answer.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    }

    #[tokio::test]
    async fn an_unready_answer_is_503_with_its_reason_and_details() {
        let mut r = Readiness::unready("no_leader");
        r.details.detail("peer_cluster_mismatches", Vec::<Value>::new());
        let answer = ready_answer(r, Some("c1"));
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers()[header::CACHE_CONTROL], "no-store");
        let json = body(answer).await;
        assert_eq!(json["ready"], false);
        assert_eq!(json["reason"], "no_leader");
        assert_eq!(json["cluster_id"], "c1");
        assert!(json["peer_cluster_mismatches"].is_array());
    }

    #[tokio::test]
    async fn metrics_carry_their_names_at_the_top_level() {
        let mut m = Metrics::new();
        m.count("streams", 3);
        m.text("engine", "memory");
        let json = body(metrics_answer(m, None)).await;
        assert_eq!(json["streams"], 3);
        assert_eq!(json["engine"], "memory");
        assert_eq!(json["status"], "ok");
        assert!(json.get("cluster_id").is_none());
    }
}
