//! `/__ursula/` operational endpoints of the client plane: readiness and
//! metrics, rendered by `crate::ops` as on a node's admin plane.

use http::Method;

use super::Shared;
use crate::backend::Backend;
use crate::error::ApiError;
use crate::ops::{metrics_answer, ready_answer};
use crate::render::Answer;

pub async fn ops<B: Backend>(shared: &Shared<B>, path: &str, method: &Method) -> Result<Answer, ApiError> {
    // An unknown operational path is `404` whatever the method.
    if !matches!(path, "ready" | "metrics" | "gateway/metrics" | "usage") {
        return Err(ApiError::NotFound);
    }
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::MethodNotAllowed);
    }
    let cluster_id = Some(shared.options.cluster_id.as_str());
    match path {
        "ready" => Ok(ready_answer(shared.backend.readiness(), cluster_id)),
        // A gateway's own figures (routing, upstream errors) under its path.
        "metrics" | "gateway/metrics" => Ok(metrics_answer(shared.metrics().await, cluster_id)),
        "usage" => match shared.backend.usage().await {
            Some(report) => Ok(crate::ops::json_answer(http::StatusCode::OK, report)),
            None => Err(ApiError::NotFound),
        },
        _ => Err(ApiError::NotFound),
    }
}
