//! The admin plane (`server.admin_listen`, `127.0.0.1:4438` by default;
//! spec/08, spec/35 "Admin endpoints"): operator routes kept off the client
//! plane. It serves `GET /__ursula/metrics` (with this process's
//! `process_incarnation`), `GET /__ursula/ready`, `/__ursula/usage`, the
//! cold flush of one stream, leadership transfers, snapshots on demand,
//! quorum proofs, the maintenance mark
//! (`/__ursula/leadership-shed/maintenance`), bucket purge, the backup
//! export and the restore's cold check and import. Every mutation needs `x-ursula-process-incarnation` naming this
//! process (`428` without it, `412` for another).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use ursula_http::Operations;
use ursula_http::error::ApiError;
use ursula_http::ops::{json_answer, metrics_answer, ready_answer};
use ursula_http::render::Answer;
use ursula_stream::ErrorCode;
use ursula_stream::StreamKey;

use crate::backend::NodeBackend;
use crate::cold::Cold;
use crate::engine::{AdminError, GroupEngine, TransferError};
use crate::process::process_incarnation;

const INCARNATION_HEADER: &str = "x-ursula-process-incarnation";
/// A recovery plan is a few hundred bytes.
const PLAN_BYTES: usize = 64 * 1024;

pub struct Admin<E> {
    pub backend: Arc<NodeBackend<E>>,
    pub engine: Arc<E>,
    pub cold: Option<Arc<Cold>>,
    pub node_id: u64,
    pub cluster_id: String,
}

/// An admin refusal, rendered as every refusal of the client plane is.
fn refusal(error: ApiError) -> Answer {
    ursula_http::render::error(&error, false)
}

fn admin_refusal(status: StatusCode, code: ErrorCode, message: impl Into<std::borrow::Cow<'static, str>>) -> ApiError {
    ApiError::Admin { status, code, message: message.into() }
}

impl<E: GroupEngine> Admin<E> {
    async fn handle(&self, req: Request<Incoming>) -> Answer {
        let path = req.uri().path().to_string();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (req.method(), segments.as_slice()) {
            // spec/35: both planes name the deployment in these answers.
            (&Method::GET, ["__ursula", "metrics"]) => {
                metrics_answer(self.backend.metrics().await, Some(&self.cluster_id))
            }
            (&Method::GET, ["__ursula", "ready"]) => ready_answer(self.backend.readiness(), Some(&self.cluster_id)),
            (&Method::GET, ["__ursula", "usage"]) => match self.backend.usage().await {
                Some(report) => json_answer(StatusCode::OK, report),
                None => refusal(ApiError::NotFound),
            },
            (&Method::POST, ["__ursula", "flush-cold", bucket, stream]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.flush_cold(bucket, stream).await
            }
            (&Method::POST, ["__ursula", "raft", group, "leader", "transfer", node]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.transfer_leader(group, node).await
            }
            (&Method::GET, ["__ursula", "leadership-shed"])
            | (&Method::GET, ["__ursula", "leadership-shed", "maintenance"]) => self.maintenance(None).await,
            (&Method::POST | &Method::DELETE, ["__ursula", "leadership-shed", "maintenance"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.maintenance(Some(req.method() == Method::POST)).await
            }
            (&Method::POST, ["__ursula", "raft", group, "snapshot"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.snapshot(group).await
            }
            (&Method::POST, ["__ursula", "raft", group, "membership"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                let Ok(group) = group.parse::<u32>() else {
                    return refusal(ApiError::NotFound);
                };
                let voters = req.uri().query().and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("voters=")));
                let voters: Option<std::collections::BTreeSet<u64>> = voters
                    .map(|list| list.split(',').filter(|v| !v.is_empty()).map(|v| v.parse().ok()).collect())
                    .and_then(|parsed: Option<std::collections::BTreeSet<u64>>| parsed.filter(|set| !set.is_empty()));
                let Some(voters) = voters else {
                    let why = "membership needs ?voters=<node id>,... naming at least one voter";
                    return refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why));
                };
                admin_answer(self.engine.replace_voters(group, voters).await)
            }
            (&Method::POST, ["__ursula", "raft", group, "purge"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                let upto = req.uri().query().and_then(|q| {
                    q.split('&').find_map(|kv| kv.strip_prefix("upto=")).and_then(|n| n.parse::<u64>().ok())
                });
                let Ok(group) = group.parse::<u32>() else {
                    return refusal(ApiError::NotFound);
                };
                let Some(upto) = upto else {
                    let why = "purge needs ?upto=<log index>";
                    return refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why));
                };
                admin_answer(self.engine.purge_log(group, upto).await)
            }
            (&Method::GET, ["__ursula", "backup", "info"]) => {
                json_answer(StatusCode::OK, serde_json::json!(crate::backup::info(&*self.engine, &self.cluster_id)))
            }
            (&Method::GET, ["__ursula", "backup", "group", group]) => self.export(group),
            (&Method::POST, ["__ursula", "backup", "group", group, action @ ("import" | "cold-check")]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                let import = *action == "import";
                let group = group.to_string();
                self.restore_step(&group, req, import).await
            }
            (&Method::DELETE, ["__ursula", "purge", bucket]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.purge(bucket).await
            }
            (&Method::POST, ["__ursula", "raft", group, "recovery", "accept-unsynced-loss"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                let group = group.to_string();
                self.accept_unsynced_loss(&group, req).await
            }
            (&Method::GET, ["__ursula", "raft", group, "quorum"]) => {
                if let Err(refused) = check_incarnation(&req) {
                    return refusal(refused);
                }
                self.quorum(group).await
            }
            (_, ["__ursula", "raft", _, "leader", "transfer", _])
            | (_, ["__ursula", "raft", _, "snapshot" | "quorum"])
            | (_, ["__ursula", "raft", _, "recovery", "accept-unsynced-loss"])
            | (_, ["__ursula", "leadership-shed", ..])
            | (_, ["__ursula", "purge", _])
            | (_, ["__ursula", "backup", "info" | "group", ..])
            | (_, ["__ursula", "flush-cold", ..])
            | (_, ["__ursula", "metrics" | "ready" | "usage"]) => refusal(ApiError::MethodNotAllowed),
            _ => refusal(ApiError::NotFound),
        }
    }

    async fn flush_cold(&self, bucket: &str, stream: &str) -> Answer {
        let key = match StreamKey::parse(bucket, stream) {
            Ok(key) => key,
            Err(e) => return refusal(ApiError::InvalidId(e)),
        };
        let Some(cold) = &self.cold else {
            let why = "this node has no cold backend";
            return refusal(admin_refusal(StatusCode::NOT_IMPLEMENTED, ErrorCode::NoColdStore, why));
        };
        match crate::cold::flush::flush_stream(&self.engine, cold, &key, self.node_id).await {
            Some(flushed) => json_answer(StatusCode::OK, serde_json::json!({ "flushed_bytes": flushed })),
            None => refusal(admin_refusal(
                StatusCode::CONFLICT,
                ErrorCode::NotLeader,
                "this node does not lead the stream's group",
            )),
        }
    }
}

impl<E: GroupEngine> Admin<E> {
    /// `POST /__ursula/raft/{group}/leader/transfer/{node}` (spec/35).
    async fn transfer_leader(&self, group: &str, node: &str) -> Answer {
        let Ok(group) = group.parse::<u32>() else {
            return refusal(ApiError::NotFound);
        };
        let Ok(to) = node.parse::<u64>() else {
            let why = "the target must be a node id";
            return refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why));
        };
        let refused = match self.engine.transfer_leader(group, to).await {
            Ok(t) => {
                let body = serde_json::json!({
                    "raft_group_id": t.group, "from": t.from, "to": t.to, "term": t.term, "status": "triggered",
                });
                return json_answer(StatusCode::OK, body);
            }
            Err(e) => e,
        };
        let (status, code, message) = match refused {
            TransferError::UnknownGroup(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such raft group"),
            TransferError::NotLeader { .. } => {
                (StatusCode::CONFLICT, ErrorCode::NotLeader, "this node does not lead the group")
            }
            TransferError::InvalidTarget(why) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why),
            TransferError::TargetNotReady(why) => (StatusCode::CONFLICT, ErrorCode::InvalidRequest, why),
            TransferError::Stopped { group, why } => {
                tracing::error!(group, error = %why, "a leadership transfer found its group stopped");
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, "the group's Raft stopped")
            }
        };
        refusal(admin_refusal(status, code, message))
    }
}

impl<E: GroupEngine> Admin<E> {
    /// `GET`, `POST` and `DELETE /__ursula/leadership-shed/maintenance` (spec/35).
    async fn maintenance(&self, set: Option<bool>) -> Answer {
        admin_answer(self.engine.maintenance(set).await)
    }

    /// `GET /__ursula/backup/group/{group}`: the group object, with the
    /// replica's applied index and the object's digest in headers.
    fn export(&self, group: &str) -> Answer {
        let Some(group) = group.parse::<u32>().ok().filter(|g| *g < self.engine.group_count()) else {
            return refusal(ApiError::NotFound);
        };
        match crate::backup::export(&*self.engine, group) {
            Ok(e) => {
                let b = ursula_http::render::builder(StatusCode::OK)
                    .header(http::header::CONTENT_TYPE, "application/vnd.msgpack")
                    .header(http::header::CACHE_CONTROL, "no-store")
                    .header("x-ursula-backup-format", ursula_stream::backup::BACKUP_FORMAT.to_string())
                    .header("x-ursula-backup-commit-index", e.commit_index.to_string())
                    .header("x-ursula-backup-blake3", e.blake3)
                    .header("x-ursula-backup-buckets", e.buckets.to_string())
                    .header("x-ursula-backup-streams", e.streams.to_string());
                ursula_http::render::finish(b, ursula_http::render::full(e.bytes))
            }
            Err(e) => {
                tracing::error!(group, error = %e, "exporting a group for a backup failed");
                refusal(admin_refusal(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, "the export failed"))
            }
        }
    }

    /// `DELETE /__ursula/purge/{bucket}` (spec/35 "Tenant offboarding").
    async fn purge(&self, bucket: &str) -> Answer {
        let bucket = match ursula_stream::BucketId::parse(bucket) {
            Ok(bucket) => bucket,
            Err(e) => return refusal(ApiError::InvalidId(e)),
        };
        match crate::purge::purge_bucket(&self.engine, self.cold.as_ref(), &bucket).await {
            Ok(report) => json_answer(StatusCode::OK, serde_json::json!(report)),
            Err(e) => refusal(ApiError::from(crate::backend::internal(e))),
        }
    }

    /// `GET /__ursula/raft/{group}/quorum` (spec/34 "verify-quorum").
    async fn quorum(&self, group: &str) -> Answer {
        let Ok(group) = group.parse::<u32>() else {
            return refusal(ApiError::NotFound);
        };
        admin_answer(self.engine.quorum(group).await)
    }

    /// `POST /__ursula/raft/{group}/recovery/accept-unsynced-loss` (spec/35):
    /// a JSON recovery plan; `422` for a body of another form.
    async fn accept_unsynced_loss(&self, group: &str, req: Request<Incoming>) -> Answer {
        let Some(group) = group.parse::<u32>().ok().filter(|g| *g < self.engine.group_count()) else {
            return refusal(ApiError::NotFound);
        };
        let body = match http_body_util::Limited::new(req.into_body(), PLAN_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return refusal(ApiError::RequestTooLarge { limit: PLAN_BYTES as u64 });
            }
            Err(_) => return refusal(ApiError::BodyUnreadable),
        };
        let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
            let why = "the recovery plan must be a JSON object";
            return refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why));
        };
        let plan = match serde_json::from_value::<crate::raft::recovery_plan::PlanRequest>(json) {
            Ok(plan) => plan,
            Err(e) => {
                let why = format!(
                    "the recovery plan needs leader, point, cut, step ({{\"lead\": {{\"highest_term\"}}}} or \
                     {{\"follow\": {{\"leader_term\"}}}}) and expected: {e}"
                );
                return refusal(admin_refusal(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidRequest, why));
            }
        };
        admin_answer(self.engine.accept_unsynced_loss(group, plan).await)
    }

    /// `POST /__ursula/raft/{group}/snapshot` (spec/35).
    async fn snapshot(&self, group: &str) -> Answer {
        let Ok(group) = group.parse::<u32>() else {
            return refusal(ApiError::NotFound);
        };
        admin_answer(self.engine.snapshot(group).await)
    }
}

impl<E: GroupEngine> Admin<E> {
    /// `POST /__ursula/backup/group/{group}/cold-check` and `.../import`
    /// (spec/35): the body is the group's backup object. The check looks
    /// up every cold object it references; the import proposes it as one
    /// replicated write, and needs `x-ursula-backup-blake3`.
    async fn restore_step(&self, group: &str, req: Request<Incoming>, import: bool) -> Answer {
        let Some(group) = group.parse::<u32>().ok().filter(|g| *g < self.engine.group_count()) else {
            return refusal(ApiError::NotFound);
        };
        let claimed = req.headers().get("x-ursula-backup-blake3").and_then(|v| v.to_str().ok()).map(str::to_string);
        let limit = crate::backup::MAX_IMPORT_BYTES;
        let body = match http_body_util::Limited::new(req.into_body(), limit).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return refusal(ApiError::RequestTooLarge { limit: limit as u64 });
            }
            Err(_) => return refusal(ApiError::BodyUnreadable),
        };
        let checked = match crate::backup::check_object(&*self.engine, group, &body, claimed.as_deref(), import) {
            Ok(checked) => checked,
            Err(why) => {
                return refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why.to_string()));
            }
        };
        if !import {
            return match crate::backup::cold_check(&*self.engine, self.cold.as_deref(), group, &checked).await {
                Ok(report) => json_answer(StatusCode::OK, serde_json::json!(report)),
                Err(crate::backup::ExportError::Cold(e)) => {
                    refusal(admin_refusal(StatusCode::BAD_GATEWAY, ErrorCode::ColdStoreFailed, e.to_string()))
                }
                Err(e) => {
                    tracing::error!(group, error = %e, "a cold check failed");
                    refusal(admin_refusal(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, "the check failed"))
                }
            };
        }
        match crate::backup::import(&*self.engine, group, checked).await {
            Ok(Ok(report)) => {
                tracing::info!(
                    group,
                    already = report.already,
                    streams = report.streams,
                    "a backup group was imported"
                );
                json_answer(StatusCode::OK, serde_json::json!(report))
            }
            Ok(Err(rejection)) => refusal(ApiError::from(rejection)),
            Err(e) => refusal(ApiError::from(crate::backend::internal(e))),
        }
    }
}

/// `200` with the JSON of what an admin operation returned, or its refusal.
fn admin_answer<T: serde::Serialize>(result: Result<T, AdminError>) -> Answer {
    match result {
        Ok(done) => json_answer(StatusCode::OK, serde_json::json!(done)),
        Err(e) => admin_error(e),
    }
}

fn admin_error(e: AdminError) -> Answer {
    match e {
        AdminError::NotLeader(_) => {
            refusal(admin_refusal(StatusCode::CONFLICT, ErrorCode::NotLeader, "this node does not lead the group"))
        }
        AdminError::NoRaft | AdminError::UnknownGroup(_) => refusal(ApiError::NotFound),
        AdminError::Busy(_) => {
            let why = "no snapshot of the group could start in time: retry";
            let mut answer = refusal(admin_refusal(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::RaftSnapshotBusy, why));
            answer.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
            answer
        }
        AdminError::Invalid(why) => refusal(admin_refusal(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, why)),
        // spec/35: the refusal names the current leader beside its error.
        AdminError::LedElsewhere { leader, .. } => json_answer(
            StatusCode::CONFLICT,
            serde_json::json!({
                "error": {"code": ErrorCode::NotLeader.as_str(), "message": "this node does not lead the group"},
                "leader_id": leader,
            }),
        ),
        AdminError::PurgeBusy(_) => {
            let why = "a snapshot of the group builds or an earlier purge has not landed: retry";
            let mut answer = refusal(admin_refusal(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::RaftSnapshotBusy, why));
            answer.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
            answer
        }
        AdminError::PlanRefused(body) => json_answer(StatusCode::CONFLICT, *body),
        AdminError::Failed(why) => {
            tracing::error!(error = %why, "an admin operation failed");
            refusal(admin_refusal(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal, "the operation failed"))
        }
    }
}

fn check_incarnation<T>(req: &Request<T>) -> Result<(), ApiError> {
    match req.headers().get(INCARNATION_HEADER).and_then(|v| v.to_str().ok()) {
        None => Err(admin_refusal(
            StatusCode::PRECONDITION_REQUIRED,
            ErrorCode::ProcessIncarnationRequired,
            "admin mutations need x-ursula-process-incarnation from GET /__ursula/metrics",
        )),
        Some(id) if id != process_incarnation() => Err(admin_refusal(
            StatusCode::PRECONDITION_FAILED,
            ErrorCode::ProcessIncarnationMismatch,
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
