//! Finding the cluster at start (the first upstream that answers
//! `Describe`), then asking every upstream again every 500 ms: an answer
//! refreshes the leaders it names and the upstream's health, and decides
//! the gateway's readiness.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;
use ursula_http::wire::pb;
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;

use super::{DISCOVERY_WARN_EVERY, PROBE_INTERVAL, PROBE_TIMEOUT, READY_WITHIN, Upstreams, health, watches};

impl Upstreams {
    /// One lazily connected client per `--upstream` (checked by `flags`).
    pub fn connect(urls: &[String]) -> anyhow::Result<Vec<super::Client>> {
        anyhow::ensure!(!urls.is_empty(), "at least one --upstream is needed");
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            let client = StreamServiceClient::with_interceptor(endpoint(url)?.connect_lazy(), TRACE)
                .max_decoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(ursula_proto::MAX_MESSAGE_BYTES);
            clients.push(client);
        }
        Ok(clients)
    }

    /// Each upstream's connection for reads (`reads`), beside its client's.
    fn read_channels(urls: &[String]) -> Vec<super::reads::ReadChannel> {
        // `connect` checked every URL already; one that failed now would
        // answer as an upstream that cannot be reached.
        let unreachable = || Endpoint::from_static("http://127.0.0.1:1");
        let channel = |url| endpoint(url).unwrap_or_else(|_| unreachable()).connect_lazy();
        urls.iter().map(|url| InterceptedService::new(channel(url), TRACE)).collect()
    }

    /// Learns the cluster from the first upstream that answers `Describe`,
    /// however long that takes; meanwhile the gateway answers `503
    /// NO_UPSTREAM`.
    pub async fn discover(urls: Vec<String>, clients: Vec<super::Client>) -> Upstreams {
        let started = Instant::now();
        let mut warned = Instant::now();
        loop {
            for (i, client) in clients.iter().enumerate() {
                let mut c = client.clone();
                let asked = tokio::time::timeout(PROBE_TIMEOUT, c.describe(pb::DescribeRequest::default())).await;
                let Ok(Ok(reply)) = asked else { continue };
                let d = reply.into_inner();
                if d.failure.is_some() || d.group_count == 0 {
                    continue;
                }
                let stats: Arc<super::RouteStats> = Arc::default();
                let up = Upstreams {
                    urls: urls.clone(),
                    clients: clients.clone(),
                    reads: Self::read_channels(&urls),
                    appends: clients
                        .iter()
                        .map(|c| {
                            super::appends::Appends::start(
                                c.clone(),
                                stats.batches.clone(),
                                super::appends::STREAM_STALL,
                            )
                        })
                        .collect(),
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
                return up;
            }
            if warned.elapsed() >= DISCOVERY_WARN_EVERY {
                warned = Instant::now();
                tracing::warn!(waited = ?started.elapsed(), upstreams = ?urls, "no --upstream answers yet");
            }
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
    pub(super) fn learn(&self, d: &pb::DescribeReply) {
        let mut leaders = self.leaders.write().unwrap_or_else(|p| p.into_inner());
        for g in &d.groups {
            let at = g.leader.as_ref().and_then(|h| self.index_of(&h.client_url));
            if let (Some(slot), Some(at)) = (leaders.get_mut(g.group as usize), at) {
                *slot = Some(at);
            }
        }
    }

    pub(super) fn index_of(&self, client_url: &str) -> Option<usize> {
        let norm = |u: &str| u.trim_end_matches('/').to_string();
        self.urls.iter().position(|u| norm(u) == norm(client_url))
    }
}

const TRACE: ursula_http::telemetry::TraceInterceptor = ursula_http::telemetry::carry_trace_context;

/// How the gateway reaches the voter at `url`.
fn endpoint(url: &String) -> anyhow::Result<Endpoint> {
    Ok(Endpoint::from_shared(url.clone())
        .map_err(|e| anyhow::anyhow!("--upstream {url}: {e}"))?
        .connect_timeout(Duration::from_secs(2))
        .tcp_nodelay(true)
        .initial_stream_window_size(ursula_proto::H2_STREAM_WINDOW)
        .initial_connection_window_size(ursula_proto::H2_CONNECTION_WINDOW)
        // Answers come in frames this large (the server's own limit is the same).
        .max_frame_size(ursula_proto::H2_MAX_FRAME))
}
