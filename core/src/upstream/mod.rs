//! The gateway's view of the voters: one lazily connected `StreamService`
//! channel per `--upstream`, the cluster id and group count they report,
//! and each group's leader as last seen. Calls go to the group's leader
//! and follow its typed `not_leader` hints (spec/24-api-overview.md,
//! "Redirects and retries"): at most three hops after the first call, none
//! started later than 5 s after it, trying upstreams not tried yet when a
//! hint names none of them.
//!
//! Module map:
//! - `backend`: `GatewayBackend`, the HTTP layer's `Backend` over these calls.
//! - `health`: ejection windows of upstreams that do not answer.
//! - `watches`: one shared upstream watch per live stream.

pub mod backend;
pub mod health;
pub mod watches;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};
use ursula_gateway::wire::{Refused, pb};
use ursula_gateway::{BackendError, Unavailable};
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;
use ursula_stream::StreamKey;

use crate::routing::group_of;

/// Hops after the first call, and the window they must start in.
const MAX_HOPS: usize = 3;
const HOP_WINDOW: Duration = Duration::from_secs(5);
/// Largest message either way (a 32 MiB append, an 8 MiB read).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// How long the gateway waits for the voters at startup.
const DISCOVERY_WAIT: Duration = Duration::from_secs(30);
/// How often every upstream is asked to `Describe` the cluster, which keeps
/// leaders fresh and brings an ejected upstream back once it answers.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The gateway is ready while some upstream answered within this.
const READY_WITHIN: Duration = Duration::from_secs(5);

pub type Client = StreamServiceClient<Channel>;

pub struct Upstreams {
    urls: Vec<String>,
    clients: Vec<Client>,
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
}

/// Why a call to one upstream did not produce an answer.
pub enum CallError {
    /// A typed refusal of the voter.
    Refused(Refused),
    /// The call never reached the voter (no connection): safe to resend.
    Unreached(String),
    /// The call may have reached the voter: a write must not be resent.
    Broken(String),
}

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        // tonic answers `Unavailable` when it could not connect at all.
        match status.code() {
            tonic::Code::Unavailable => CallError::Unreached(status.to_string()),
            _ => CallError::Broken(status.to_string()),
        }
    }
}

fn no_upstream() -> BackendError {
    BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 }
}

impl Upstreams {
    /// Connects to the voters and learns the cluster from the first one
    /// that answers `Describe`.
    pub async fn discover(urls: Vec<String>) -> anyhow::Result<Upstreams> {
        anyhow::ensure!(!urls.is_empty(), "at least one --upstream is needed");
        let mut clients = Vec::with_capacity(urls.len());
        for url in &urls {
            let endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| anyhow::anyhow!("--upstream {url}: {e}"))?
                .connect_timeout(Duration::from_secs(2))
                .tcp_nodelay(true);
            let client = StreamServiceClient::new(endpoint.connect_lazy())
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE);
            clients.push(client);
        }
        let deadline = Instant::now() + DISCOVERY_WAIT;
        loop {
            for (i, client) in clients.iter().enumerate() {
                let mut c = client.clone();
                let Ok(reply) = c.describe(pb::DescribeRequest::default()).await else { continue };
                let d = reply.into_inner();
                if d.failure.is_some() || d.group_count == 0 {
                    continue;
                }
                let stats = Arc::default();
                let up = Upstreams {
                    urls: urls.clone(),
                    clients: clients.clone(),
                    cluster_id: d.cluster_id.clone(),
                    group_count: d.group_count,
                    max_snapshot_bytes: d.max_snapshot_bytes,
                    leaders: RwLock::new(vec![None; d.group_count as usize]),
                    stats,
                    health: health::Health::new(urls.len()),
                    watches: watches::Watches::default(),
                };
                up.health.answered(i, Instant::now());
                up.learn(&d);
                tracing::info!(upstream = %urls[i], cluster_id = %d.cluster_id, groups = d.group_count, "found the cluster");
                return Ok(up);
            }
            anyhow::ensure!(Instant::now() < deadline, "no --upstream answered within {DISCOVERY_WAIT:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Asks every upstream to `Describe` the cluster, forever: an answer
    /// refreshes the leaders it names and the upstream's health.
    pub async fn probe_forever(self: Arc<Self>) {
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            let probes = self.clients.iter().enumerate().map(|(i, client)| {
                let mut c = client.clone();
                let up = self.clone();
                async move {
                    let asked = tokio::time::timeout(PROBE_TIMEOUT, c.describe(pb::DescribeRequest::default())).await;
                    match asked {
                        Ok(Ok(reply)) => {
                            up.health.answered(i, Instant::now());
                            let d = reply.into_inner();
                            if d.failure.is_none() && d.cluster_id == up.cluster_id {
                                up.learn(&d);
                            }
                        }
                        _ => up.health.failed(i, Instant::now()),
                    }
                }
            });
            futures_util::future::join_all(probes).await;
        }
    }

    /// `/__ursula/ready` of the gateway: some upstream answers, and every
    /// group has a known leader.
    pub fn readiness(&self) -> Result<(), &'static str> {
        if !self.health.any_answered(Instant::now(), READY_WITHIN) {
            return Err("upstreams_unreachable");
        }
        let leaders = self.leaders.read().unwrap_or_else(|p| p.into_inner());
        if leaders.iter().any(Option::is_none) {
            return Err("leader_unknown");
        }
        Ok(())
    }

    /// Records the leaders a `Describe` names.
    fn learn(&self, d: &pb::DescribeReply) {
        let mut leaders = self.leaders.write().unwrap_or_else(|p| p.into_inner());
        for g in &d.groups {
            let at = g.leader.as_ref().and_then(|h| self.index_of(&h.client_url));
            if let (Some(slot), Some(at)) = (leaders.get_mut(g.group as usize), at) {
                *slot = Some(at);
            }
        }
    }

    fn index_of(&self, client_url: &str) -> Option<usize> {
        let norm = |u: &str| u.trim_end_matches('/').to_string();
        self.urls.iter().position(|u| norm(u) == norm(client_url))
    }

    pub fn target(&self, key: &StreamKey) -> pb::Target {
        pb::Target {
            cluster_id: self.cluster_id.clone(),
            bucket: key.bucket.as_str().to_owned(),
            stream: key.stream.as_str().to_owned(),
        }
    }

    fn leader_of(&self, group: usize) -> Option<usize> {
        self.leaders.read().unwrap_or_else(|p| p.into_inner()).get(group).copied().flatten()
    }

    fn set_leader(&self, group: usize, at: Option<usize>) {
        if let Some(slot) = self.leaders.write().unwrap_or_else(|p| p.into_inner()).get_mut(group) {
            *slot = at;
        }
    }

    /// The first upstream after `from` (or `from` itself when `including`)
    /// not yet tried, preferring ones not ejected; `from` when all were tried.
    fn next_untried(&self, from: usize, tried: &[bool], including: bool) -> usize {
        let n = self.clients.len();
        let now = Instant::now();
        let start = if including { 0 } else { 1 };
        let order = || (start..start + n).map(|d| (from + d) % n).filter(|i| !tried[*i]);
        order().find(|i| !self.health.is_ejected(*i, now)).or_else(|| order().next()).unwrap_or(from)
    }

    /// Calls `f` on the leader of `key`'s group, following hints. `resend`
    /// says whether a call that may have reached a voter may go again
    /// (reads), or not (writes).
    pub async fn on_leader<T, F, Fut>(&self, key: &StreamKey, resend: bool, f: F) -> Result<T, BackendError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.calls.fetch_add(1, Relaxed);
        let group = group_of(key, self.group_count).0 as usize;
        let n = self.clients.len();
        let mut tried = vec![false; n];
        let mut at = self.leader_of(group).unwrap_or_else(|| self.next_untried(group % n, &vec![false; n], true));
        let started = Instant::now();
        for hop in 0..=MAX_HOPS {
            if hop > 0 {
                self.stats.hops.fetch_add(1, Relaxed);
                if started.elapsed() > HOP_WINDOW {
                    break;
                }
            }
            tried[at] = true;
            let next_untried = |from: usize, tried: &[bool]| {
                let next = self.next_untried(from, tried, false);
                (!tried[next]).then_some(next)
            };
            let outcome = f(self.clients[at].clone()).await;
            match &outcome {
                Err(CallError::Unreached(_) | CallError::Broken(_)) => self.health.failed(at, Instant::now()),
                _ => self.health.answered(at, Instant::now()),
            }
            match outcome {
                Ok(value) => {
                    self.set_leader(group, Some(at));
                    return Ok(value);
                }
                Err(CallError::Refused(Refused::NotLeader { leader, .. })) => {
                    let hinted = leader.as_ref().and_then(|h| self.index_of(&h.client_url));
                    self.set_leader(group, hinted);
                    match hinted.filter(|i| !tried[*i]).or_else(|| next_untried(at, &tried)) {
                        Some(next) => at = next,
                        None => break,
                    }
                }
                Err(CallError::Refused(Refused::Backend(BackendError::Unavailable {
                    reason: Unavailable::NoLeader,
                    ..
                }))) => match next_untried(at, &tried) {
                    Some(next) => at = next,
                    None => break,
                },
                Err(CallError::Refused(Refused::Backend(e))) => return Err(e),
                Err(CallError::Refused(other)) => {
                    self.stats.upstream_errors.fetch_add(1, Relaxed);
                    return Err(BackendError::Internal(format!("upstream refused: {other:?}")));
                }
                Err(CallError::Unreached(why)) => {
                    self.stats.upstream_errors.fetch_add(1, Relaxed);
                    tracing::debug!(upstream = %self.urls[at], %why, "upstream unreachable");
                    self.set_leader(group, None);
                    match next_untried(at, &tried) {
                        Some(next) => at = next,
                        None => break,
                    }
                }
                Err(CallError::Broken(why)) => {
                    self.stats.upstream_errors.fetch_add(1, Relaxed);
                    self.set_leader(group, None);
                    if !resend {
                        // It may have been proposed: the client repeats it with its key.
                        return Err(BackendError::OutcomeUnknown { retry_after_secs: 1 });
                    }
                    tracing::debug!(upstream = %self.urls[at], %why, "upstream call failed");
                    match next_untried(at, &tried) {
                        Some(next) => at = next,
                        None => break,
                    }
                }
            }
        }
        self.stats.exhausted.fetch_add(1, Relaxed);
        Err(no_upstream())
    }
}
