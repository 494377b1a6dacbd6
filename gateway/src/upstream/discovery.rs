//! Finding the cluster at start (the first upstream that answers
//! `Describe`), then asking every upstream again every 500 ms: an answer
//! refreshes the leaders it names and the upstream's health, and decides
//! the gateway's readiness.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::HttpConnector;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use ursula_http::wire::pb;
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;

use super::{DISCOVERY_WARN_EVERY, PROBE_INTERVAL, PROBE_TIMEOUT, READY_WITHIN, Upstreams, health, watches};

impl Upstreams {
    /// One lazily connected client per `--upstream` (checked by `flags`).
    pub fn connect(urls: &[String], timeouts: UpstreamTimeouts) -> anyhow::Result<Vec<super::Client>> {
        anyhow::ensure!(!urls.is_empty(), "at least one --upstream is needed");
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            let client = StreamServiceClient::with_interceptor(channel(url, timeouts)?, TRACE)
                .max_decoding_message_size(ursula_proto::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(ursula_proto::MAX_MESSAGE_BYTES);
            clients.push(client);
        }
        Ok(clients)
    }

    /// An upstream's connection for reads (`reads`), beside its client's,
    /// made on the runtime that asks for it: the thread serving a client's
    /// read then also receives its bytes from the voter (see `ReadChannels`).
    /// `window` bounds what the connection buffers unread.
    pub(super) fn read_channel(url: &str, timeouts: UpstreamTimeouts, window: u32) -> super::reads::ReadChannel {
        // `connect` checked every URL already; one that failed now would
        // answer as an upstream that cannot be reached.
        let unreachable = || Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
        InterceptedService::new(channel_with(url, timeouts, window).unwrap_or_else(|_| unreachable()), TRACE)
    }

    /// Learns the cluster from the first upstream that answers `Describe`,
    /// however long that takes; meanwhile the gateway answers `503
    /// NO_UPSTREAM`. `lanes` is how many threads serve clients (and so
    /// read from each upstream on connections of their own).
    pub async fn discover(
        urls: Vec<String>,
        timeouts: UpstreamTimeouts,
        lanes: usize,
        clients: Vec<super::Client>,
    ) -> Upstreams {
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
                    reads: super::reads::ReadChannels::new(timeouts, lanes),
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

/// The gateway's limits on a voter's connections and answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTimeouts {
    /// `--connect-timeout`.
    pub connect: Duration,
    /// `--response-header-timeout`: a call whose answer's headers take
    /// longer fails with `UPSTREAM_TIMEOUT`.
    pub response_headers: Duration,
    /// `--upstream-tcp-user-timeout`.
    pub tcp_user: Duration,
}

impl UpstreamTimeouts {
    /// The flags' defaults.
    pub const DEFAULT: UpstreamTimeouts = UpstreamTimeouts {
        connect: Duration::from_secs(2),
        response_headers: Duration::from_secs(30),
        tcp_user: Duration::from_secs(5),
    };

    /// The TCP side of a voter's connection: `TCP_USER_TIMEOUT` on Linux,
    /// and keepalive probes after 2/5 of it and then every 1/5 (each at
    /// least 1 s), so a vanished host's connection closes within about the
    /// timeout while one lost probe does not close a healthy live read.
    pub fn connector(&self) -> HttpConnector {
        let fifth = (self.tcp_user / 5).max(Duration::from_secs(1));
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(self.connect));
        http.set_keepalive(Some((fifth * 2).max(Duration::from_secs(1))));
        http.set_keepalive_interval(Some(fifth));
        http.set_keepalive_retries(Some(3));
        #[cfg(target_os = "linux")]
        http.set_tcp_user_timeout(Some(self.tcp_user));
        http
    }
}

/// How the gateway reaches the voter at `url`.
fn channel(url: &str, timeouts: UpstreamTimeouts) -> anyhow::Result<Channel> {
    channel_with(url, timeouts, ursula_proto::H2_CONNECTION_WINDOW)
}

/// `channel` with a connection flow-control window of `window` bytes.
fn channel_with(url: &str, timeouts: UpstreamTimeouts, window: u32) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| anyhow::anyhow!("--upstream {url}: {e}"))?
        .connect_timeout(timeouts.connect)
        .timeout(timeouts.response_headers)
        .tcp_nodelay(true)
        .initial_stream_window_size(ursula_proto::H2_STREAM_WINDOW)
        .initial_connection_window_size(window)
        // Answers come in frames this large (the server's own limit is the same).
        .max_frame_size(ursula_proto::H2_MAX_FRAME);
    Ok(endpoint.connect_with_connector_lazy(timeouts.connector()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tower_service::Service;
    use ursula_http::wire::pb;
    use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;

    use super::{UpstreamTimeouts, channel};
    use crate::upstream::CallError;

    /// `--upstream-tcp-user-timeout` on the sockets the gateway opens to a
    /// voter: the timeout itself, keepalive after 2/5 and every 1/5.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_voters_connection_carries_the_tcp_user_timeout_and_its_keepalive() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let timeouts = UpstreamTimeouts { tcp_user: Duration::from_secs(10), ..UpstreamTimeouts::DEFAULT };
        let mut connector = timeouts.connector();
        let io = connector.call(url.parse().expect("uri")).await.expect("connected");
        let tcp = io.into_inner();
        let socket = socket2::SockRef::from(&tcp);
        assert_eq!(socket.tcp_user_timeout().expect("TCP_USER_TIMEOUT"), Some(Duration::from_secs(10)));
        assert!(socket.keepalive().expect("SO_KEEPALIVE"));
        assert_eq!(socket.tcp_keepalive_time().expect("TCP_KEEPIDLE"), Duration::from_secs(4));
        assert_eq!(socket.tcp_keepalive_interval().expect("TCP_KEEPINTVL"), Duration::from_secs(2));
        // The floor: every probe at least 1 s apart.
        let short = UpstreamTimeouts { tcp_user: Duration::from_secs(1), ..UpstreamTimeouts::DEFAULT };
        let io = short.connector().call(url.parse().expect("uri")).await.expect("connected");
        let tcp = io.into_inner();
        let socket = socket2::SockRef::from(&tcp);
        assert_eq!(socket.tcp_keepalive_interval().expect("TCP_KEEPINTVL"), Duration::from_secs(1));
    }

    /// `--response-header-timeout`: a voter that takes the call and never
    /// answers it is a timed-out call, not a failing voter.
    #[tokio::test]
    async fn a_call_without_an_answer_in_time_is_timed_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        // Takes connections and what they send; answers nothing.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((tcp, _)) = listener.accept().await {
                held.push(tcp);
            }
        });
        let timeouts = UpstreamTimeouts { response_headers: Duration::from_millis(300), ..UpstreamTimeouts::DEFAULT };
        let mut client = StreamServiceClient::new(channel(&url, timeouts).expect("channel"));
        let status = client.describe(pb::DescribeRequest::default()).await.expect_err("no answer");
        assert!(matches!(CallError::from(status), CallError::TimedOut));
    }
}
