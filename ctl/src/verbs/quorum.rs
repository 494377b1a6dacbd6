//! `verify-quorum`: every group's leader proves its leadership with a
//! fresh ReadIndex round (`GET /__ursula/raft/{group}/quorum` on the
//! leader's admin plane), then every replica must apply that prefix under
//! the same term before one deadline. Prints the observation as JSON.
//!
//! `verify-survivors` makes the same observation of the voters left after
//! one known voter is gone: the membership must still be the configured
//! one (nothing shrinks it to fit), and the report says it proves a
//! surviving quorum, never full redundancy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::Cluster;
use crate::error::{CtlError, Result};

const POLL: Duration = Duration::from_millis(250);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One group's proof: its leader, term and the prefix every replica must apply.
struct Proof {
    leader: u64,
    term: u64,
    index: u64,
}

/// `call`, cut off at `deadline` (spec/34: one absolute deadline covers the
/// metrics requests, the RPCs and the waits).
async fn within<T>(
    deadline: Instant,
    late: &impl Fn(String) -> CtlError,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let left = deadline.saturating_duration_since(Instant::now());
    tokio::time::timeout(left, call).await.unwrap_or_else(|_| Err(late("a request did not answer".into())))
}

/// Which voters an observation asks, out of the configured ones.
struct Scope {
    verb: &'static str,
    /// Every voter of the manifest, sorted: each group's voter set.
    configured: Vec<u64>,
    /// The voters asked: all of them, or all but the excluded one.
    observed: Vec<u64>,
    excluded: Option<u64>,
}

pub async fn run(cluster: &Cluster, expected_groups: usize, timeout: Duration) -> Result<()> {
    // Voters are compared sorted: a manifest may list its nodes in any order.
    let mut configured = cluster.manifest.ids();
    configured.sort_unstable();
    let scope = Scope { verb: "verify-quorum", observed: configured.clone(), configured, excluded: None };
    observe(cluster, &scope, expected_groups, timeout).await
}

/// `verify-survivors --excluded-node-id N`: the observation without node N.
pub async fn survivors(cluster: &Cluster, excluded: u64, expected_groups: usize, timeout: Duration) -> Result<()> {
    let mut configured = cluster.manifest.ids();
    configured.sort_unstable();
    if !configured.contains(&excluded) {
        return Err(CtlError::Config(format!("--excluded-node-id {excluded} is not a voter of the manifest")));
    }
    let observed: Vec<u64> = configured.iter().copied().filter(|id| *id != excluded).collect();
    if observed.len() * 2 <= configured.len() {
        return Err(CtlError::Config(format!(
            "{} survivors of {} voters are no quorum",
            observed.len(),
            configured.len()
        )));
    }
    let scope = Scope { verb: "verify-survivors", configured, observed, excluded: Some(excluded) };
    observe(cluster, &scope, expected_groups, timeout).await
}

async fn observe(cluster: &Cluster, scope: &Scope, expected_groups: usize, timeout: Duration) -> Result<()> {
    let started_ms = now_ms();
    let deadline = Instant::now() + timeout;
    let (ids, configured) = (&scope.observed, &scope.configured);
    let verb = scope.verb;
    let late = |what: String| CtlError::Abort(format!("{verb}: {what} before the {}s deadline", timeout.as_secs()));
    // Every observed voter must answer, host every group at the configured
    // voter set without learners, and have no group behind its recovery gate.
    let mut proofs: BTreeMap<u32, Proof> = BTreeMap::new();
    while proofs.len() < expected_groups {
        if Instant::now() >= deadline {
            let missing: Vec<usize> = (0..expected_groups).filter(|g| !proofs.contains_key(&(*g as u32))).collect();
            return Err(late(format!("no quorum proof for groups {missing:?}")));
        }
        let mut leaders = BTreeMap::new();
        for id in ids {
            let m = within(deadline, &late, cluster.metrics(*id)).await?;
            if !m.recovery_gates.is_empty() {
                return Err(CtlError::Abort(format!(
                    "node {id}: groups {:?} wait at their recovery gate",
                    m.recovery_gates
                )));
            }
            if m.raft_groups.len() != expected_groups {
                return Err(CtlError::Abort(format!(
                    "node {id} hosts {} groups, expected {expected_groups}",
                    m.raft_groups.len()
                )));
            }
            for g in &m.raft_groups {
                let mut voters = g.voters.clone();
                voters.sort_unstable();
                if &voters != configured || !g.learners.is_empty() {
                    return Err(CtlError::Abort(format!(
                        "node {id}: group {} has voters {voters:?} and learners {:?}, not the configured {configured:?}",
                        g.raft_group_id, g.learners
                    )));
                }
                if g.current_leader == Some(*id) {
                    leaders.insert(g.raft_group_id, *id);
                }
            }
        }
        for (group, leader) in leaders {
            if proofs.contains_key(&group) {
                continue;
            }
            let path = format!("/__ursula/raft/{group}/quorum");
            let answer = within(deadline, &late, cluster.mutate(leader, Method::GET, &path)).await?;
            if answer.status == StatusCode::OK {
                let field = |k: &str| answer.body.get(k).and_then(Value::as_u64);
                if let (Some(term), Some(index)) = (field("term"), field("required_applied_index")) {
                    proofs.insert(group, Proof { leader, term, index });
                }
            }
        }
        if proofs.len() < expected_groups {
            tokio::time::sleep(POLL).await;
        }
    }
    // Every replica applies each group's proven prefix under the same term.
    let mut applied: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    loop {
        let mut behind = Vec::new();
        for id in ids {
            let m = within(deadline, &late, cluster.metrics(*id)).await?;
            for (group, proof) in &proofs {
                let g = m.group(*group).ok_or_else(|| CtlError::Abort(format!("node {id} lost group {group}")))?;
                if g.current_term != proof.term {
                    return Err(CtlError::Abort(format!(
                        "group {group}: node {id} is in term {}, the proof in term {}: the leadership changed",
                        g.current_term, proof.term
                    )));
                }
                applied.entry(*group).or_default().insert(*id, g.last_applied_index);
                if g.last_applied_index < proof.index {
                    behind.push(format!("node {id} group {group}"));
                }
            }
        }
        if behind.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(late(format!("replicas did not apply their proven prefix: {}", behind.join(", "))));
        }
        tokio::time::sleep(POLL).await;
    }
    let groups: Vec<Value> = proofs
        .iter()
        .map(|(group, p)| {
            json!({ "raft_group_id": group, "leader": p.leader, "term": p.term,
                    "required_applied_index": p.index, "applied": applied.get(group) })
        })
        .collect();
    let processes: BTreeMap<u64, Option<String>> = ids.iter().map(|id| (*id, cluster.pinned(*id))).collect();
    let mut report = json!({
        "verified": true,
        "observation_started_unix_ms": started_ms,
        "observation_ended_unix_ms": now_ms(),
        "voters": ids,
        "processes": processes,
        "groups": groups,
    });
    if let Some(excluded) = scope.excluded {
        // spec/34: a surviving quorum, never a claim of full redundancy, and
        // no proof that the excluded node's process or host is stopped.
        report["scope"] = "surviving_quorum".into();
        report["configured_voters"] = json!(configured);
        report["observed_voters"] = json!(ids);
        report["excluded_node_id"] = excluded.into();
        report["full_redundancy_restored"] = false.into();
    }
    println!("{report}");
    Ok(())
}
