//! `ursula`: the server binary.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ursula_core::config::{self, CliOverrides};

#[derive(Parser)]
#[command(name = "ursula", version, about = "Durable, replayable streams over HTTP and SSE")]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a node. With no config file: the zero-config development node,
    /// in memory, on 127.0.0.1:4437; nothing survives a restart.
    Server {
        /// Config file (else ./ursula.toml, else /etc/ursula/ursula.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Client listener (`server.listen`); port 0 picks a free port.
        #[arg(long)]
        listen: Option<String>,
        /// How JSON streams are read back: ndjson (the spec) or array (older clients).
        #[arg(long, value_name = "ndjson|array")]
        json_reads: Option<String>,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("URSULA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let Commands::Server { config, listen, json_reads } = Cli::parse().command;
    let config = config::load(&CliOverrides { config, listen, json_reads })?;
    // The main runtime accepts and runs housekeeping; requests are served on
    // the HTTP layer's worker threads.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(config.listen).await.with_context(|| format!("binding {}", config.listen))?;
        let bound = listener.local_addr()?;
        // Tests and scripts read the bound address from this line.
        println!("ursula listening on http://{bound}");
        std::io::stdout().flush()?;
        ursula_core::node::run(&config, listener, shutdown_signal()).await?;
        Ok(())
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
