//! `/__ursula/` operational endpoints of a node: readiness and metrics.

use http::{Method, StatusCode, header};

use super::Shared;
use crate::backend::{Backend, Readiness};
use crate::error::ApiError;
use crate::render::{self, Answer};

pub async fn ops<B: Backend>(shared: &Shared<B>, path: &str, method: &Method) -> Result<Answer, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::MethodNotAllowed);
    }
    let cluster_id = serde_json::Value::from(shared.options.cluster_id.as_str());
    let (status, body) = match path {
        "ready" => {
            let mut m = shared.backend.readiness_details();
            m.insert("cluster_id".into(), cluster_id);
            let status = match shared.backend.readiness() {
                Readiness::Ready => {
                    m.insert("ready".into(), true.into());
                    StatusCode::OK
                }
                Readiness::Unready(reason) => {
                    m.insert("ready".into(), false.into());
                    m.insert("reason".into(), reason.into());
                    StatusCode::SERVICE_UNAVAILABLE
                }
            };
            (status, serde_json::Value::Object(m))
        }
        // A gateway's own figures (routing, upstream errors) under its path.
        "metrics" | "gateway/metrics" => {
            let mut m = shared.backend.metrics().await;
            if let Some(cache) = &shared.cache {
                use std::sync::atomic::Ordering::Relaxed;
                m.insert("immutable_cache_hits".into(), cache.hits.load(Relaxed).into());
                m.insert("immutable_cache_misses".into(), cache.misses.load(Relaxed).into());
                m.insert("immutable_cache_bytes".into(), cache.bytes().into());
            }
            if let Some(u) = &shared.uploads {
                use std::sync::atomic::Ordering::Relaxed;
                m.insert("upload_budget_bytes".into(), u.limits.budget_bytes.into());
                m.insert("upload_reserved_bytes".into(), u.reserved_bytes().into());
                m.insert("upload_refusals_budget".into(), u.refusals_budget.load(Relaxed).into());
                m.insert("upload_refusals_too_slow".into(), u.refusals_too_slow.load(Relaxed).into());
                m.insert("body_bytes_buffered".into(), u.bytes_buffered.load(Relaxed).into());
                m.insert("refusal_drain_bytes".into(), u.refusal_drain_bytes.load(Relaxed).into());
            }
            m.insert("status".into(), "ok".into());
            m.insert("cluster_id".into(), cluster_id);
            (StatusCode::OK, serde_json::Value::Object(m))
        }
        _ => return Err(ApiError::NotFound),
    };
    let b = render::builder(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store");
    Ok(render::finish(b, render::full(body.to_string())))
}
