//! The admin plane (`server.admin_listen`, `127.0.0.1:4438` by default;
//! spec/08, spec/35 "Admin endpoints"): operator routes kept off the client
//! plane. It serves `GET /__ursula/metrics` (with this process's
//! `process_incarnation`), `GET /__ursula/ready`, and `POST
//! /__ursula/flush-cold/{bucket}/{stream}`, which like every admin
//! mutation needs `x-ursula-process-incarnation` naming this process
//! (`428` without it, `412` for another).

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use ursula_gateway::{Backend, Readiness};
use ursula_stream::StreamKey;

use crate::backend::NodeBackend;
use crate::cold::Cold;
use crate::engine::GroupEngine;

const INCARNATION_HEADER: &str = "x-ursula-process-incarnation";

/// This process's identity, drawn once at startup.
pub fn process_incarnation() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{:016x}", fastrand::u64(..)))
}

pub struct Admin<E> {
    pub backend: Arc<NodeBackend<E>>,
    pub engine: Arc<E>,
    pub cold: Option<Arc<Cold>>,
    pub node_id: u64,
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::from(body.to_string())));
    *answer.status_mut() = status;
    answer.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    answer.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    answer
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    json(status, serde_json::json!({ "error": { "code": code, "message": message } }))
}

impl<E: GroupEngine> Admin<E> {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_string();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (req.method(), segments.as_slice()) {
            (&Method::GET, ["__ursula", "metrics"]) => {
                let mut m = self.backend.metrics().await;
                m.insert("process_incarnation".into(), process_incarnation().into());
                json(StatusCode::OK, serde_json::Value::Object(m))
            }
            (&Method::GET, ["__ursula", "ready"]) => match self.backend.readiness() {
                Readiness::Ready => json(StatusCode::OK, serde_json::json!({ "ready": true })),
                Readiness::Unready(reason) => {
                    json(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({ "ready": false, "reason": reason }))
                }
            },
            (&Method::POST, ["__ursula", "flush-cold", bucket, stream]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refused;
                }
                self.flush_cold(bucket, stream).await
            }
            (_, ["__ursula", "flush-cold", ..]) | (_, ["__ursula", "metrics" | "ready"]) => {
                refusal(StatusCode::METHOD_NOT_ALLOWED, "METHOD_NOT_ALLOWED", "method not allowed on this route")
            }
            _ => refusal(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route"),
        }
    }

    async fn flush_cold(&self, bucket: &str, stream: &str) -> Response<Full<Bytes>> {
        let Ok(key) = StreamKey::parse(bucket, stream) else {
            return refusal(StatusCode::BAD_REQUEST, "INVALID_STREAM_ID", "not a bucket and stream id");
        };
        let Some(cold) = &self.cold else {
            return refusal(StatusCode::NOT_IMPLEMENTED, "NO_COLD_STORE", "this node has no cold backend");
        };
        match crate::cold::flush::flush_stream(&self.engine, cold, &key, self.node_id).await {
            Some(flushed) => json(StatusCode::OK, serde_json::json!({ "flushed_bytes": flushed })),
            None => refusal(StatusCode::CONFLICT, "NOT_LEADER", "this node does not lead the stream's group"),
        }
    }
}

#[allow(clippy::result_large_err)]
fn check_incarnation<T>(req: &Request<T>) -> Result<(), Response<Full<Bytes>>> {
    match req.headers().get(INCARNATION_HEADER).and_then(|v| v.to_str().ok()) {
        None => Err(refusal(
            StatusCode::PRECONDITION_REQUIRED,
            "PROCESS_INCARNATION_REQUIRED",
            "admin mutations need x-ursula-process-incarnation from GET /__ursula/metrics",
        )),
        Some(id) if id != process_incarnation() => Err(refusal(
            StatusCode::PRECONDITION_FAILED,
            "PROCESS_INCARNATION_MISMATCH",
            "the node restarted since its process incarnation was read",
        )),
        Some(_) => Ok(()),
    }
}

/// Serves the admin plane on `listener` until `shutdown` resolves.
pub async fn serve<E: GroupEngine>(admin: Arc<Admin<E>>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(_) => continue,
            },
            _ = &mut shutdown => return,
        };
        let admin = admin.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let admin = admin.clone();
                async move { Ok::<_, Infallible>(admin.handle(req).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}
