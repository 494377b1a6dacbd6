//! `ursula gateway`: the stateless HTTP front of a cluster. It serves the
//! same HTTP surface as a node over `GatewayBackend`, which speaks the
//! voters' private `StreamService`, so clients never see a `307` and the
//! voters can stay on a private network.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;

use tokio::net::TcpListener;
use ursula_gateway::{CacheOptions, Cors, HttpOptions, JsonReads};

use crate::upstream::Upstreams;
use crate::upstream::backend::GatewayBackend;

pub struct GatewayConfig {
    /// One URL per voter: its client plane (`[[raft.peers]].client_url`).
    pub upstreams: Vec<String>,
    pub json_reads: JsonReads,
    pub workers: usize,
    pub cache: CacheOptions,
    pub cors: Cors,
    /// At most the protocol's 32 MiB (checked by `validate`).
    pub max_request_bytes: u64,
    /// The body budget and slow-body rules, built for `max_request_bytes`.
    pub uploads: ursula_gateway::UploadLimits,
}

impl GatewayConfig {
    /// The startup refusals of the gateway's flags.
    pub fn validate(&self) -> anyhow::Result<()> {
        let protocol = ursula_gateway::limits::MAX_REQUEST_BYTES;
        if self.max_request_bytes > protocol || self.max_request_bytes == 0 {
            anyhow::bail!(
                "LimitAboveProtocol: --max-request-body-bytes {} must be between 1 and the protocol's {protocol}",
                self.max_request_bytes
            );
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

/// Finds the cluster, then serves on `listener` until `shutdown` resolves.
pub async fn run(
    config: GatewayConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let upstreams = Arc::new(Upstreams::discover(config.upstreams).await?);
    tokio::spawn(upstreams.clone().probe_forever());
    let options = HttpOptions {
        json_reads: config.json_reads,
        cluster_id: upstreams.cluster_id.clone(),
        workers: config.workers,
        immutable_cache: Some(config.cache),
        cors: config.cors,
        max_request_bytes: Some(config.max_request_bytes),
        uploads: Some(config.uploads),
    };
    let backend = Arc::new(GatewayBackend { upstreams });
    // Tests and scripts read the bound address from this line.
    println!("ursula gateway listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    Ok(ursula_gateway::serve(listener, backend, options, None, shutdown).await?)
}
