//! The gateway's view of the voters: one lazily connected `StreamService`
//! channel per `--upstream`, the cluster id and group count they report,
//! and each group's leader as last seen. Calls go to the group's leader
//! and follow its typed `not_leader` hints (spec/24-api-overview.md,
//! "Redirects and retries"): at most three hops after the first call, none
//! started later than 5 s after it, trying upstreams not tried yet when a
//! hint names none of them.
//!
//! Module map:
//! - `discovery`: finding the cluster, probing every upstream, readiness.
//! - `routing`: calls on a group's leader, following hints.
//! - `appends`: small appends to one voter, batched per call.
//! - `reads`: reads on connections of their own (one per serving thread),
//!   answers read without copies.
//! - `backend`: `GatewayBackend`, the HTTP layer's `Backend` over these calls.
//! - `health`: ejection windows of upstreams that do not answer.
//! - `watches`: one shared upstream watch per live stream.

pub mod appends;
#[cfg(test)]
mod appends_tests;
pub mod backend;
pub mod discovery;
pub mod health;
pub mod reads;
pub mod routing;
pub mod watches;

pub use discovery::UpstreamTimeouts;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use ursula_http::wire::{Refused, WireError, pb};
use ursula_http::{BackendError, Unavailable, UpstreamFailure};
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;
use ursula_stream::StreamKey;

/// Hops after the first call, and the window they must start in.
const MAX_HOPS: usize = 3;
const HOP_WINDOW: Duration = Duration::from_secs(5);

/// How often the gateway says it still finds no voter at startup.
const DISCOVERY_WARN_EVERY: Duration = Duration::from_secs(10);
/// How often every upstream is asked to `Describe` the cluster, which keeps
/// leaders fresh and brings an ejected upstream back once it answers.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The gateway is ready while some upstream answered within this: a few
/// probe rounds, so a cluster that went away shows within seconds.
const READY_WITHIN: Duration = Duration::from_secs(3);

/// A voter's `StreamService`; every call carries the request's trace context.
pub type Client = StreamServiceClient<InterceptedService<Channel, ursula_http::telemetry::TraceInterceptor>>;

pub struct Upstreams {
    urls: Vec<String>,
    clients: Vec<Client>,
    /// Per upstream, its connections for reads.
    reads: reads::ReadChannels,
    /// Per upstream, its append batcher.
    appends: Vec<appends::Appends>,
    pub cluster_id: String,
    pub group_count: u32,
    /// The voters' `Ursula-Max-Snapshot-Bytes`; 0: no cold backend.
    pub max_snapshot_bytes: u64,
    /// Per group: the index of the upstream that led it last.
    leaders: RwLock<Vec<Option<usize>>>,
    pub stats: Arc<RouteStats>,
    pub health: health::Health,
    pub watches: watches::Watches,
}

/// What `/__ursula/gateway/metrics` reports of routing.
#[derive(Default)]
pub struct RouteStats {
    pub calls: std::sync::atomic::AtomicU64,
    pub hops: std::sync::atomic::AtomicU64,
    pub upstream_errors: std::sync::atomic::AtomicU64,
    pub exhausted: std::sync::atomic::AtomicU64,
    /// The append batchers', over every upstream.
    pub batches: Arc<appends::BatchStats>,
}

/// Why a call to one upstream did not produce an answer.
#[derive(Debug)]
pub enum CallError {
    /// A typed refusal of the voter.
    Refused(Refused),
    /// The call never reached the voter (no connection): safe to resend.
    Unreached(tonic::Status),
    /// The call may have reached the voter: a write must not be resent.
    Broken(Broken),
    /// No answer's headers within `--response-header-timeout`: the voter
    /// may be slow in one group only, so it is not counted as failing.
    TimedOut,
}

/// How a call that may have reached a voter went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Broken {
    #[error("the call failed: {0}")]
    Status(tonic::Status),
    #[error("the answer does not decode: {0}")]
    Undecodable(#[from] WireError),
    #[error("the answer carries neither a value nor a failure")]
    Empty,
}

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        // tonic answers `Unavailable` when it could not connect at all.
        match status.code() {
            tonic::Code::Unavailable => CallError::Unreached(status),
            // What tonic's per-call timeout (`Endpoint::timeout`) answers.
            tonic::Code::Cancelled if status.message() == TIMEOUT_EXPIRED => CallError::TimedOut,
            _ => CallError::Broken(Broken::Status(status)),
        }
    }
}

/// The message of tonic's `TimeoutExpired`, as its `Status` carries it.
const TIMEOUT_EXPIRED: &str = "Timeout expired";

impl From<WireError> for CallError {
    fn from(e: WireError) -> Self {
        CallError::Broken(Broken::Undecodable(e))
    }
}

/// Routing ran out of hops: `NO_LEADER` when voters answered without a
/// leader, the gateway's own `UPSTREAM_UNREACHABLE` when none answered.
fn exhausted(any_answered: bool) -> BackendError {
    if any_answered {
        BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 }
    } else {
        BackendError::Upstream(UpstreamFailure::Unreachable)
    }
}

impl Upstreams {
    pub fn target(&self, key: &StreamKey) -> pb::Target {
        pb::Target {
            cluster_id: self.cluster_id.clone(),
            bucket: key.bucket.as_str().to_owned(),
            stream: key.stream.as_str().to_owned(),
        }
    }
}
