//! `/__ursula/` operational endpoints of a node: readiness and metrics.

use http::{Method, StatusCode, header};

use super::Shared;
use crate::backend::Backend;
use crate::error::ApiError;
use crate::render::{self, Answer};

pub async fn ops<B: Backend>(shared: &Shared<B>, path: &str, method: &Method) -> Result<Answer, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::MethodNotAllowed);
    }
    let body = match path {
        "ready" | "health" => serde_json::json!({"ready": true}),
        "metrics" => serde_json::json!({"status": "ok", "backend": shared.backend.stats().await}),
        _ => return Err(ApiError::NotFound),
    };
    let b = render::builder(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store");
    Ok(render::finish(b, render::full(body.to_string())))
}
