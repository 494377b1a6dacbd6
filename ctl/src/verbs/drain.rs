//! `drain` and `undrain` (spec/34, spec/35 "Maintenance drain"): mark the
//! node first so it stops taking leaderships back, then move each of its
//! leaderships to the peer the plan picks, re-observing and re-planning
//! when a leader changed under the plan, until the node leads nothing.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};

use crate::client::Cluster;
use crate::error::{CtlError, Result};
use crate::plan::{DrainPlan, Observation, drain_plan};
use crate::progress::Progress;

const MARK: &str = "/__ursula/leadership-shed/maintenance";
/// Between two observations while leaderships move.
const POLL: Duration = Duration::from_millis(250);
/// When a triggered transfer that has not landed is sent again.
const RESEND: Duration = Duration::from_secs(2);

/// The nodes that answered; node `node` itself must have.
async fn observe(cluster: &Cluster, node: u64) -> Result<Observation> {
    let mut obs = Observation::new();
    for (id, answer) in cluster.observe_all().await {
        match answer {
            Ok(m) => {
                obs.insert(id, m);
            }
            Err(e) if id == node => return Err(e),
            Err(CtlError::ProcessChanged(why)) => return Err(CtlError::ProcessChanged(why)),
            Err(_) => {}
        }
    }
    Ok(obs)
}

fn describe(plan: &DrainPlan) -> String {
    let moves: Vec<String> = plan.moves.iter().map(|(g, to)| format!("group {g} -> node {to}")).collect();
    let mut text = if moves.is_empty() { "nothing to move".to_string() } else { moves.join(", ") };
    if !plan.lagging.is_empty() {
        text.push_str(&format!("; groups {:?} wait for a peer to catch up", plan.lagging));
    }
    if !plan.stuck.is_empty() {
        text.push_str(&format!("; no safe target for groups {:?}", plan.stuck));
    }
    text
}

pub async fn drain(cluster: &Cluster, node: u64, dry_run: bool, tolerance: u64, timeout: Duration) -> Result<()> {
    cluster.manifest.node(node)?;
    let obs = observe(cluster, node).await?;
    let plan = drain_plan(&obs, node, tolerance);
    if dry_run {
        println!("drain plan for node {node}: {}", describe(&plan));
        return if plan.stuck.is_empty() { Ok(()) } else { Err(abort_stuck(node, &plan)) };
    }
    if !plan.stuck.is_empty() {
        return Err(abort_stuck(node, &plan));
    }
    set_mark(cluster, node, true).await?;
    let progress = Progress::new();
    let started = Instant::now();
    let total = plan.moves.len();
    let mut plan = plan;
    // A transfer takes a moment: one is sent again only if it did not land.
    let mut sent: std::collections::HashMap<u32, Instant> = Default::default();
    loop {
        for (group, to) in &plan.moves {
            if sent.get(group).is_some_and(|at| at.elapsed() < RESEND) {
                continue;
            }
            sent.insert(*group, Instant::now());
            let path = format!("/__ursula/raft/{group}/leader/transfer/{to}");
            let answer = cluster.mutate(node, Method::POST, &path).await?;
            match answer.status {
                // 409: the node no longer leads it (the balancer moved it, or an election): re-plan.
                StatusCode::OK | StatusCode::CONFLICT => {}
                status => {
                    return Err(CtlError::Refused(format!(
                        "node {node} refused the transfer of group {group} to node {to}: {status} {}",
                        answer.code()
                    )));
                }
            }
        }
        tokio::time::sleep(POLL).await;
        let obs = observe(cluster, node).await?;
        let left = obs.get(&node).map_or(0, |m| m.led_by(node).len());
        progress.say(&format!(
            "drain node {node}: {} of {total} leaderships moved, {left} left",
            total.saturating_sub(left)
        ));
        if left == 0 {
            progress.done();
            println!("node {node} drained: it leads no group ({} ms)", started.elapsed().as_millis());
            return Ok(());
        }
        if started.elapsed() >= timeout {
            progress.done();
            return Err(CtlError::Abort(format!(
                "node {node} still leads {left} groups after {}s (it stays marked drained; `undrain` lifts the mark)",
                timeout.as_secs()
            )));
        }
        plan = drain_plan(&obs, node, tolerance);
        // A peer that left meanwhile (drained, down) leaves a group cornered: stop.
        if !plan.stuck.is_empty() {
            progress.done();
            return Err(abort_stuck(node, &plan));
        }
    }
}

fn abort_stuck(node: u64, plan: &DrainPlan) -> CtlError {
    CtlError::Abort(format!(
        "no safe transfer target for node {node}'s groups {:?}: no other voter of them answers and takes leaderships",
        plan.stuck
    ))
}

pub async fn undrain(cluster: &Cluster, node: u64) -> Result<()> {
    set_mark(cluster, node, false).await?;
    println!("node {node} undrained: it may lead groups again");
    Ok(())
}

async fn set_mark(cluster: &Cluster, node: u64, on: bool) -> Result<()> {
    let method = if on { Method::POST } else { Method::DELETE };
    let answer = cluster.mutate(node, method.clone(), MARK).await?;
    let state = answer.body.get("state").and_then(|s| s.as_str()).unwrap_or("");
    let expected = if on { "maintenance-drain" } else { "none" };
    if answer.status != StatusCode::OK || (on && state != expected) || (!on && state == "maintenance-drain") {
        return Err(CtlError::Refused(format!(
            "{method} {MARK} on node {node}: {} {} (state {state:?})",
            answer.status,
            answer.code()
        )));
    }
    Ok(())
}
