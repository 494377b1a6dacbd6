//! The gates: `wait` (one node caught up, progress-gated), `wait-ready`
//! (every node serving with a clean maintenance report) and
//! `verify-cluster` (the whole cluster, twice in a row).

use std::time::{Duration, Instant};

use crate::client::Cluster;
use crate::error::{CtlError, Result};
use crate::plan::{Observation, catch_up, cluster_issues, readiness_issues};
use crate::progress::Progress;

const POLL: Duration = Duration::from_millis(500);

/// The nodes that answered; a node that restarted since this invocation
/// pinned it stops the gate.
async fn observe(cluster: &Cluster) -> Result<Observation> {
    let mut obs = Observation::new();
    for (id, answer) in cluster.observe_all().await {
        match answer {
            Ok(m) => {
                obs.insert(id, m);
            }
            Err(e @ CtlError::ProcessChanged(_)) => return Err(e),
            Err(_) => {}
        }
    }
    Ok(obs)
}

/// `wait --node N`: returns once the node is a voter of every group and
/// within `tolerance` entries of what its peers committed. It only gives
/// up when the node stopped advancing for `stall`.
pub async fn wait(cluster: &Cluster, node: u64, tolerance: u64, stall: Duration) -> Result<()> {
    cluster.manifest.node(node)?;
    // The node is expected to restart around this verb: observe whichever process answers.
    cluster.unpin(node);
    let progress = Progress::new();
    let started = Instant::now();
    let mut last_progress = Instant::now();
    // Progress: more applied, or less lag, than ever seen in this wait.
    let (mut best_applied, mut best_lag, mut best_gated) = (0u64, u64::MAX, usize::MAX);
    loop {
        let obs = observe(cluster).await?;
        if obs.contains_key(&node) {
            let c = catch_up(&obs, node);
            let applied: u64 = obs[&node].raft_groups.iter().map(|g| g.last_applied_index).sum();
            if c.done(tolerance) {
                progress.done();
                let took = started.elapsed().as_millis();
                println!("node {node} caught up: voter of every group, lag {} ({took} ms)", c.total_lag());
                return Ok(());
            }
            if applied > best_applied || c.total_lag() < best_lag || c.gated.len() < best_gated {
                last_progress = Instant::now();
            }
            best_applied = best_applied.max(applied);
            best_lag = best_lag.min(c.total_lag());
            best_gated = best_gated.min(c.gated.len());
            progress.say(&format!(
                "wait node {node}: lag {} entries over {} groups, not a voter in {}, gated in {}",
                c.total_lag(),
                c.lag.values().filter(|l| **l > tolerance).count(),
                c.not_voter.len(),
                c.gated.len()
            ));
        } else {
            progress.say(&format!("wait node {node}: no metrics yet"));
        }
        cluster.unpin(node);
        if last_progress.elapsed() >= stall {
            progress.done();
            return Err(CtlError::Abort(format!(
                "node {node} made no catch-up progress for {}s (--stall-timeout-secs)",
                stall.as_secs()
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `wait-ready`: every node reports its groups led and a clean
/// `raft_maintenance`, and answers 200 on `/__ursula/ready`.
pub async fn wait_ready(cluster: &Cluster, expected_groups: Option<usize>, timeout: Duration) -> Result<()> {
    let progress = Progress::new();
    let deadline = Instant::now() + timeout;
    loop {
        let mut issues = Vec::new();
        cluster.repin_from_manifest();
        let obs = observe(cluster).await?;
        for id in cluster.manifest.ids() {
            let Some(m) = obs.get(&id) else {
                issues.push(format!("node {id}: no metrics"));
                continue;
            };
            issues.extend(readiness_issues(id, m, expected_groups));
            match cluster.ready(id).await {
                Ok((true, _)) => {}
                Ok((false, body)) => {
                    let reason = body.get("reason").and_then(|r| r.as_str()).unwrap_or("unready").to_string();
                    issues.push(format!("node {id}: not ready: {reason}"));
                }
                Err(e) => issues.push(format!("node {id}: {e}")),
            }
        }
        if issues.is_empty() {
            progress.done();
            println!("ready: {} nodes", cluster.manifest.nodes.len());
            return Ok(());
        }
        progress.say(&format!("wait-ready: {}", issues[0]));
        if Instant::now() >= deadline {
            progress.done();
            return Err(CtlError::Abort(format!("not ready after {}s: {}", timeout.as_secs(), issues.join("; "))));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `verify-cluster`: the cluster is whole in two consecutive samples.
pub async fn verify_cluster(cluster: &Cluster, tolerance: u64, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let expected = cluster.manifest.ids();
    let mut whole_in_a_row = 0;
    loop {
        let issues = cluster_issues(&observe(cluster).await?, &expected, tolerance);
        if issues.is_empty() {
            whole_in_a_row += 1;
            if whole_in_a_row == 2 {
                println!("cluster verified: {} voters present and caught up in two samples", expected.len());
                return Ok(());
            }
        } else {
            whole_in_a_row = 0;
            if Instant::now() >= deadline {
                return Err(CtlError::Abort(format!(
                    "cluster not whole after {}s: {}",
                    timeout.as_secs(),
                    issues.join("; ")
                )));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
