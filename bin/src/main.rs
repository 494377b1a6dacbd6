//! `ursula`: the server binary. `ursula server` runs a voter node (or the
//! zero-config development node), `ursula gateway` a gateway. Built
//! without the `voter` feature it is a gateway-only build that compiles
//! none of the voter's code, and `ursula server` refuses.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use ursula_gateway::GatewayArgs;

mod telemetry;
use telemetry::{Identity, LogFormat};

/// Our version, and the Ursula release whose protocol, API and config it
/// implements (`ursula_core::node::URSULA_RELEASE`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (implements the Ursula 0.9 protocol and API)");

#[derive(Parser)]
#[command(name = "ursula", version = VERSION, about = "Durable, replayable streams over HTTP and SSE")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Commands>,
    /// `ursula --config FILE` is `ursula server --config FILE`.
    #[command(flatten)]
    server: ServerArgs,
    /// Log lines on stderr as text or as JSON objects (filter: `RUST_LOG`, default `info`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a node. With no config file: the zero-config development node,
    /// in memory, on 127.0.0.1:4437; nothing survives a restart.
    Server(ServerArgs),
    /// Run a gateway: the HTTP surface in front of a cluster's voters,
    /// over their private gRPC plane (StreamService).
    Gateway(Box<GatewayArgs>),
    /// Check configuration without starting anything.
    #[command(subcommand)]
    Config(ConfigAction),
}

#[derive(Subcommand)]
enum ConfigAction {
    /// Parse, merge and validate a node's config file as a start would and
    /// print the effective settings; exit 2 with the one-line refusal a
    /// start would give. (A gateway's flags: `ursula gateway --check ...`.)
    Check {
        /// The config file.
        file: PathBuf,
        /// Resource preset under the file: default, dev, tiny, small, standard or large.
        #[arg(long)]
        preset: Option<String>,
        /// Overrides `raft.node_id`, as at a start (a file shared by every node leaves it out).
        #[arg(long)]
        node_id: Option<u64>,
    },
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
    let cli = Cli::parse();
    let format = cli.log_format;
    match cli.command {
        Some(Commands::Server(args)) => server(args, format),
        Some(Commands::Gateway(args)) => gateway(*args, format),
        Some(Commands::Config(ConfigAction::Check { file, preset, node_id })) => {
            let _logs = telemetry::init(&Identity { service: "ursula", instance: None }, format)?;
            let args = ServerArgs { config: Some(file), preset, node_id, ..ServerArgs::default() };
            check_config(args)
        }
        None => server(cli.server, format),
    }
}

#[cfg(not(feature = "voter"))]
fn server(_args: ServerArgs, _format: LogFormat) -> anyhow::Result<()> {
    eprintln!("ursula: this is a gateway-only build (without the `voter` feature): it runs `ursula gateway` only");
    std::process::exit(2);
}

#[cfg(not(feature = "voter"))]
fn check_config(args: ServerArgs) -> anyhow::Result<()> {
    server(args, LogFormat::Text)
}

/// The settings a start with `args` would run with, or the one line it
/// would refuse with (exit 2, like a usage error).
#[cfg(feature = "voter")]
fn load_config(args: ServerArgs) -> ursula_core::config::NodeConfig {
    use ursula_core::config::{self, CliOverrides};
    let overrides = CliOverrides {
        config: args.config,
        preset: args.preset,
        node_id: args.node_id,
        listen: args.listen,
        json_reads: args.json_reads,
    };
    match config::load(&overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ursula: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(feature = "voter")]
fn check_config(args: ServerArgs) -> anyhow::Result<()> {
    let config = load_config(args);
    println!("{config:#?}");
    Ok(())
}

#[cfg(feature = "voter")]
fn server(args: ServerArgs, format: LogFormat) -> anyhow::Result<()> {
    let config = load_config(args);
    let instance = match &config.engine {
        ursula_core::config::EngineConfig::Raft(raft) => Some(raft.node_id),
        ursula_core::config::EngineConfig::Memory => None,
    };
    let _telemetry = telemetry::init(&Identity { service: "ursula", instance }, format)?;
    // The main runtime accepts and runs housekeeping; requests are served on
    // the HTTP layer's worker threads.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
        ursula_core::node::run(&config, listener, shutdown_signal()).await
    })
}

fn gateway(args: GatewayArgs, format: LogFormat) -> anyhow::Result<()> {
    let _telemetry = telemetry::init(&Identity { service: "ursula-gateway", instance: None }, format)?;
    let check = args.check;
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ursula: {e:#}");
            std::process::exit(2);
        }
    };
    if check {
        println!("{}", config.summary());
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        ursula_gateway::run(config, listener, shutdown_signal()).await
    })
}

/// How long a stop may take from the first signal (spec/35): past it, or
/// on a second signal, the process exits at once.
const STOP_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Resolves on the first `SIGTERM` or Ctrl-C, and arms the stop's deadline.
async fn shutdown_signal() {
    first_signal().await;
    std::thread::spawn(|| {
        std::thread::sleep(STOP_DEADLINE);
        eprintln!("ursula: the shutdown did not finish within {}s; exiting", STOP_DEADLINE.as_secs());
        std::process::exit(1);
    });
    tokio::spawn(async {
        first_signal().await;
        eprintln!("ursula: a second signal; exiting at once");
        std::process::exit(1);
    });
}

async fn first_signal() {
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
