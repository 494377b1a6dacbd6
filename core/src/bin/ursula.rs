//! `ursula`: the server binary.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use ursula_core::config::{self, CliOverrides};

#[derive(Parser)]
#[command(name = "ursula", version, about = "Durable, replayable streams over HTTP and SSE")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Commands>,
    /// `ursula --config FILE` is `ursula server --config FILE`.
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a node. With no config file: the zero-config development node,
    /// in memory, on 127.0.0.1:4437; nothing survives a restart.
    Server(ServerArgs),
    /// Run a gateway: the HTTP surface in front of a cluster's voters,
    /// over their private gRPC plane (StreamService).
    Gateway(GatewayArgs),
}

#[derive(Args)]
struct GatewayArgs {
    /// A voter's client plane, e.g. `http://10.0.0.1:4437`; one per voter.
    #[arg(long = "upstream", required = true)]
    upstreams: Vec<String>,
    /// Where clients connect; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:4437")]
    listen: String,
    /// How JSON streams are read back: ndjson (the spec) or array (older clients).
    #[arg(long, value_name = "ndjson|array", default_value = "ndjson")]
    json_reads: String,
    /// Bytes of immutable answers (full chunks, closed tails, snapshots)
    /// kept and served without asking a voter; 0 turns the cache off.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    immutable_cache_bytes: u64,
    /// `Cache-Control` for marked immutable answers, for a CDN in front
    /// (e.g. "public, max-age=31536000, immutable"); else `no-store`.
    #[arg(long)]
    immutable_cache_control: Option<String>,
    /// Sent as `Stream-Read-Origin` on HEAD answers (extensions §4.4).
    #[arg(long)]
    read_origin: Option<String>,
    /// An origin browsers may read from (repeatable), or `*`; none: no CORS headers.
    #[arg(long = "cors-allowed-origin")]
    cors_allowed_origins: Vec<String>,
    /// The largest request body taken, at most the protocol's 32 MiB.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    max_request_body_bytes: u64,
    /// Request body bytes buffered at once across requests; unset: 256 MiB
    /// or the request limit plus the small-body headroom, the larger.
    #[arg(long)]
    body_budget_bytes: Option<u64>,
    /// Bodies up to this size may use the headroom; a body without a
    /// length reserves this much at first.
    #[arg(long, default_value_t = ursula_gateway::uploads::DEFAULT_SMALL_BODY_MAX_BYTES)]
    small_body_max_bytes: u64,
    /// Budget kept for small bodies, so they never wait behind large uploads.
    #[arg(long, default_value_t = ursula_gateway::uploads::DEFAULT_SMALL_BODY_HEADROOM_BYTES)]
    small_body_headroom_bytes: u64,
    /// How long a body waits for budget before `503 UPLOAD_BUDGET_EXHAUSTED`.
    #[arg(long, default_value_t = 1000)]
    body_budget_wait_ms: u64,
    /// A body with no byte for this long (or below the minimum rate over
    /// one such window) is cut with `408 BODY_TOO_SLOW`, e.g. `30s`.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    body_stall_timeout: std::time::Duration,
    /// The slowest body rate taken over one stall window.
    #[arg(long, default_value_t = 1024)]
    body_min_bytes_per_sec: u64,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    ursula_gateway::uploads::parse_duration(text).ok_or_else(|| format!("{text:?} is not a duration like 30s or 500ms"))
}

#[derive(Args, Default)]
struct ServerArgs {
    /// Config file (else ./ursula.toml, else /etc/ursula/ursula.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Resource preset: default, dev, tiny, small, standard or large.
    #[arg(long)]
    preset: Option<String>,
    /// Overrides `raft.node_id`.
    #[arg(long)]
    node_id: Option<u64>,
    /// Client listener (`server.listen`); port 0 picks a free port.
    #[arg(long)]
    listen: Option<String>,
    /// How JSON streams are read back: ndjson (the spec) or array (older clients).
    #[arg(long, value_name = "ndjson|array")]
    json_reads: Option<String>,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("URSULA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Commands::Server(args)) => args,
        Some(Commands::Gateway(args)) => return gateway(args),
        None => cli.server,
    };
    let overrides = CliOverrides {
        config: args.config,
        preset: args.preset,
        node_id: args.node_id,
        listen: args.listen,
        json_reads: args.json_reads,
    };
    let config = match config::load(&overrides) {
        Ok(c) => c,
        Err(e) => {
            // One line an operator reads; exit code 2 like a usage error.
            eprintln!("ursula: {e}");
            std::process::exit(2);
        }
    };
    // The main runtime accepts and runs housekeeping; requests are served on
    // the HTTP layer's worker threads.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
        ursula_core::node::run(&config, listener, shutdown_signal()).await
    })
}

fn gateway(args: GatewayArgs) -> anyhow::Result<()> {
    let Some(json_reads) = ursula_gateway::JsonReads::parse(&args.json_reads) else {
        eprintln!("ursula: --json-reads must be ndjson or array, not {:?}", args.json_reads);
        std::process::exit(2);
    };
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cache = ursula_gateway::CacheOptions {
        max_bytes: args.immutable_cache_bytes,
        cache_control: args.immutable_cache_control,
        read_origin: args.read_origin,
    };
    let uploads = ursula_gateway::UploadLimits::new(
        args.max_request_body_bytes,
        args.body_budget_bytes,
        args.small_body_max_bytes,
        args.small_body_headroom_bytes,
        std::time::Duration::from_millis(args.body_budget_wait_ms),
        args.body_stall_timeout,
        args.body_min_bytes_per_sec,
    );
    let uploads = match uploads {
        Ok(uploads) => uploads,
        Err(e) => {
            eprintln!("ursula: {e}");
            std::process::exit(2);
        }
    };
    let config = ursula_core::gateway::GatewayConfig {
        upstreams: args.upstreams,
        json_reads,
        workers,
        cache,
        cors: ursula_gateway::Cors::from_flags(&args.cors_allowed_origins),
        max_request_bytes: args.max_request_body_bytes,
        uploads,
    };
    if let Err(e) = config.validate() {
        eprintln!("ursula: {e}");
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("binding {}", args.listen))?;
        ursula_core::gateway::run(config, listener, shutdown_signal()).await
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
