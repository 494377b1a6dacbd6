//! `ursulactl`: the logical operations of a running Ursula cluster over
//! its admin and metrics HTTP APIs (spec/34). It runs nothing on hosts.

mod cli;
mod client;
mod error;
mod location;
mod manifest;
mod metrics;
mod plan;
mod progress;
mod recovery;
mod verbs;

use std::time::Duration;

use clap::Parser;

use cli::{Cli, Verb};
use client::Cluster;
use error::{CtlError, Result};
use manifest::Manifest;

async fn run(cli: Cli) -> Result<()> {
    // The one verb that touches no cluster.
    if let Verb::BackupVerify { location } = &cli.verb {
        return verbs::backup::verify(location).await;
    }
    let path = cli.config.as_deref().ok_or_else(|| CtlError::Config("--config MANIFEST is required".into()))?;
    let manifest = Manifest::load(path)?;
    let cluster = Cluster::new(manifest, Duration::from_secs(cli.http_timeout_secs.max(1)))?;
    let secs = Duration::from_secs;
    match cli.verb {
        Verb::Status { json } => verbs::status::run(&cluster, json).await,
        Verb::WaitReady { expected_groups, timeout_secs } => {
            verbs::wait::wait_ready(&cluster, expected_groups, secs(timeout_secs)).await
        }
        Verb::Drain { node, dry_run, lag_tolerance, timeout_secs } => {
            verbs::drain::drain(&cluster, node, dry_run, lag_tolerance, secs(timeout_secs)).await
        }
        Verb::Undrain { node } => verbs::drain::undrain(&cluster, node).await,
        Verb::Wait { node, lag_tolerance, stall_timeout_secs } => {
            verbs::wait::wait(&cluster, node, lag_tolerance, secs(stall_timeout_secs)).await
        }
        Verb::VerifyCluster { lag_tolerance, timeout_secs } => {
            verbs::wait::verify_cluster(&cluster, lag_tolerance, secs(timeout_secs)).await
        }
        Verb::VerifyQuorum { expected_groups, timeout_secs } => {
            verbs::quorum::run(&cluster, expected_groups, secs(timeout_secs)).await
        }
        Verb::VerifySurvivors { excluded_node_id, expected_groups, timeout_secs } => {
            verbs::quorum::survivors(&cluster, excluded_node_id, expected_groups, secs(timeout_secs)).await
        }
        Verb::PinIncarnations { replace_node } => verbs::pin::run(&cluster, replace_node).await,
        Verb::RecoverGroup { group, accept_loss, max_plans, accept_timeout_secs, timeout_secs } => {
            let options = verbs::recover::Options {
                group,
                accept_loss,
                max_plans,
                accept_timeout: secs(accept_timeout_secs.max(1)),
                timeout: secs(timeout_secs),
            };
            verbs::recover::run(&cluster, options).await
        }
        Verb::BackupCreate { location, created_unix_ms } => {
            verbs::backup::create(&cluster, &location, created_unix_ms).await
        }
        Verb::BackupVerify { location } => verbs::backup::verify(&location).await,
        Verb::Restore { location } => verbs::restore::run(&cluster, &location).await,
        Verb::PurgeBucket { bucket, node, timeout_secs } => {
            verbs::purge::run(&cluster, &bucket, node, secs(timeout_secs)).await
        }
    }
}

/// clap's usage error as one machine-greppable line (spec/34): its
/// message without the usage text and the help hint after it.
fn usage_line(rendered: &str) -> String {
    let message = rendered.split("\nUsage:").next().unwrap_or(rendered);
    let words: Vec<&str> = message.split_whitespace().collect();
    words.join(" ").trim_start_matches("error: ").to_string()
}

fn main() {
    // A usage error is a configuration error: exit 1 (clap's own code, 2, means an abort here).
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("ursulactl: config: {}", usage_line(&e.to_string()));
            std::process::exit(1);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("ursulactl: config: starting the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(cli)) {
        eprintln!("{}", e.line());
        std::process::exit(e.exit_code());
    }
}
