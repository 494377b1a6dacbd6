//! `ursula gateway`: the stateless HTTP front of a cluster. It serves the
//! shared HTTP surface (`ursula-http`) over `GatewayBackend`, which speaks
//! the voters' private `StreamService`, so clients never see a `307` and
//! the voters can stay on a private network. It holds no stream state and
//! links none of the voter's code.
//!
//! Module map:
//! - `flags`: the command line, checked into a `GatewayConfig`.
//! - `auth`: access control (tokens, the bucket policy, concealment).
//! - `upstream`: the voters as seen from here: discovery and probing,
//!   health and ejection, leader routing, shared watches, and
//!   `GatewayBackend`, the `Backend` over their `StreamService`.
//! - `front`: the gateway's `FrontDoor` hooks around the HTTP surface.
//! - `immutable_cache`: the bounded cache of immutable answers.
//! - `quotas`: per-bucket admission limits (rate, live reads, bodies, uploads).
//! - `target`: what the tenant edge reads of a request before routing.
//! - `uploads`: the request body budget and slow-body rules.
//! - `watched`: a settings file reloaded on `SIGHUP` and on change.
//! - `usage`: the per-tenant usage log.

pub mod auth;
pub mod flags;
pub mod front;
pub mod immutable_cache;
pub mod quotas;
pub mod target;
pub mod uploads;
pub mod upstream;
pub mod usage;
pub mod watched;

use std::future::Future;
use std::io::Write;
use std::sync::{Arc, OnceLock};

use tokio::net::TcpListener;
use ursula_http::{ConnectionLimits, Cors, HttpOptions, JsonReads, Surface};

use crate::front::{GatewayFront, TenantEdge};
use crate::immutable_cache::{CacheOptions, ImmutableCache};
use crate::uploads::{UploadBudget, UploadLimits};
use crate::upstream::Upstreams;
use crate::upstream::backend::GatewayBackend;

pub use flags::GatewayArgs;

#[derive(Clone)]
pub struct GatewayConfig {
    /// One URL per voter: its client plane (`[[raft.peers]].client_url`).
    pub upstreams: Vec<String>,
    /// `--connect-timeout`, `--response-header-timeout`, `--upstream-tcp-user-timeout`.
    pub upstream_timeouts: upstream::UpstreamTimeouts,
    /// Where clients connect (`--listen`).
    pub listen: String,
    pub json_reads: JsonReads,
    pub workers: usize,
    pub cache: CacheOptions,
    pub cors: Cors,
    /// At most the protocol's 32 MiB (checked by `validate`).
    pub max_request_bytes: u64,
    /// The body budget and slow-body rules, built for `max_request_bytes`.
    pub uploads: UploadLimits,
    /// Header-read and idle timeouts of client connections.
    pub connections: ConnectionLimits,
    /// Access control, when `--auth-issuer` and its companions are set.
    pub auth: Option<auth::AuthSettings>,
    /// `--quota-policy`.
    pub quota_policy: Option<std::path::PathBuf>,
    /// `--usage-log` and its window.
    pub usage: Option<UsageSettings>,
}

/// `--usage-log`, `--usage-flush-secs`, `--usage-chunk-bytes`.
#[derive(Debug, Clone)]
pub struct UsageSettings {
    pub path: std::path::PathBuf,
    pub flush: std::time::Duration,
    pub chunk_bytes: Option<u64>,
}

impl GatewayConfig {
    /// The effective settings, one per line, for `ursula gateway --check`.
    pub fn summary(&self) -> String {
        let on = |set: bool| if set { "on" } else { "off" };
        [
            format!("listen = {}", self.listen),
            format!("upstreams = {}", self.upstreams.join(", ")),
            format!("json_reads = {:?}", self.json_reads),
            format!("max_request_bytes = {}", self.max_request_bytes),
            format!("cors = {:?}", self.cors),
            format!("access_control = {}", on(self.auth.is_some())),
            format!("quota_policy = {}", self.quota_policy.as_ref().map_or("none".into(), |p| p.display().to_string())),
            format!("usage_log = {}", self.usage.as_ref().map_or("none".into(), |u| u.path.display().to_string())),
        ]
        .join("\n")
    }

    /// The startup refusals of the gateway's flags.
    pub fn validate(&self) -> anyhow::Result<()> {
        let protocol = ursula_http::limits::MAX_REQUEST_BYTES;
        if self.max_request_bytes > protocol || self.max_request_bytes == 0 {
            anyhow::bail!(
                "LimitAboveProtocol: --max-request-body-bytes {} must be between 1 and the protocol's {protocol}",
                self.max_request_bytes
            );
        }
        if self.connections.header_read_timeout.is_zero() || self.connections.idle_timeout.is_zero() {
            anyhow::bail!("--header-read-timeout and --idle-timeout must be non-zero");
        }
        if self.uploads.stall_timeout < std::time::Duration::from_secs(10) {
            tracing::warn!(
                stall_timeout = ?self.uploads.stall_timeout,
                "--body-stall-timeout is below the SQLite extension's 10 s commit timeout"
            );
        }
        Ok(())
    }
}

/// Serves on `listener` at once and finds the cluster meanwhile (answering
/// `503 NO_UPSTREAM` until a voter answers), until `shutdown` resolves.
pub async fn run(
    config: GatewayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let clients = Upstreams::connect(&config.upstreams, config.upstream_timeouts)?;
    let auth = match config.auth.clone() {
        Some(settings) => {
            for url in [Some(&settings.issuer), settings.jwks_url.as_ref()].into_iter().flatten() {
                if url.starts_with("http://") {
                    tracing::warn!(url = %url, "access control fetches keys over plain http: use https outside tests and private networks");
                }
            }
            println!("ursula gateway access control: issuer {}, audience {}", settings.issuer, settings.audience);
            Some(Arc::new(auth::Auth::start(settings)?))
        }
        None => None,
    };
    let found: Arc<OnceLock<Surface<GatewayBackend>>> = Arc::new(OnceLock::new());
    let quotas = match &config.quota_policy {
        Some(path) => Some(quotas::Quotas::start(path.clone(), config.uploads.small_body_max_bytes)?),
        None => None,
    };
    let usage = config.usage.as_ref().map(|u| {
        let usage = usage::Usage::new(u.path.clone(), u.chunk_bytes);
        usage.flush_every(u.flush);
        usage
    });
    let discovery = tokio::spawn(find_cluster(
        config.clone(),
        clients,
        found.clone(),
        TenantEdge { auth, quotas, usage: usage.clone() },
    ));
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        listen = %listener.local_addr()?,
        upstreams = %config.upstreams.join(","),
        "ursula gateway starting"
    );
    println!("ursula gateway in front of {}", config.upstreams.join(", "));
    // Tests and scripts read the bound address from this line.
    println!("ursula gateway listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let service = move |req: http::Request<hyper::body::Incoming>| {
        let found = found.clone();
        async move {
            match found.get() {
                Some(surface) => surface.handle(req).await,
                None => front::before_discovery(&req),
            }
        }
    };
    let served = ursula_http::serve(
        listener,
        ursula_http::Workers::unpinned(config.workers),
        config.connections,
        service,
        shutdown,
    )
    .await;
    discovery.abort();
    if let Some(usage) = usage {
        // A clean shutdown writes the last window.
        usage.flush();
    }
    Ok(served?)
}

/// Finds the cluster, then builds the surface over it.
async fn find_cluster(
    config: GatewayConfig,
    clients: Vec<upstream::Client>,
    found: Arc<OnceLock<Surface<GatewayBackend>>>,
    edge: TenantEdge,
) {
    let upstreams =
        Arc::new(Upstreams::discover(config.upstreams, config.upstream_timeouts, config.workers, clients).await);
    tokio::spawn(upstreams.clone().probe_forever());
    let options = HttpOptions {
        json_reads: config.json_reads,
        cluster_id: upstreams.cluster_id.clone(),
        workers: config.workers,
        cors: config.cors,
        max_request_bytes: config.max_request_bytes,
        connections: config.connections,
    };
    let front = GatewayFront {
        edge,
        cache: (config.cache.max_bytes > 0).then(|| ImmutableCache::new(&config.cache)),
        uploads: Arc::new(UploadBudget::new(config.uploads)),
    };
    let surface = Surface::new(Arc::new(GatewayBackend { upstreams }), options, Arc::new(front));
    surface.publish_metrics();
    let _ = found.set(surface);
}
