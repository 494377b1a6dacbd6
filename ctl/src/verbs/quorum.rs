//! `verify-quorum`: every group's leader proves its leadership with a
//! fresh ReadIndex round (`GET /__ursula/raft/{group}/quorum` on the
//! leader's admin plane), then every replica must apply that prefix under
//! the same term before one deadline. Prints the observation as JSON.

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

pub async fn run(cluster: &Cluster, expected_groups: usize, timeout: Duration) -> Result<()> {
    let started_ms = now_ms();
    let deadline = Instant::now() + timeout;
    // Voters are compared sorted: a manifest may list its nodes in any order.
    let mut ids = cluster.manifest.ids();
    ids.sort_unstable();
    let late =
        |what: String| CtlError::Abort(format!("verify-quorum: {what} before the {}s deadline", timeout.as_secs()));
    // Every configured voter must answer and host every group.
    let mut proofs: BTreeMap<u32, Proof> = BTreeMap::new();
    while proofs.len() < expected_groups {
        if Instant::now() >= deadline {
            let missing: Vec<usize> = (0..expected_groups).filter(|g| !proofs.contains_key(&(*g as u32))).collect();
            return Err(late(format!("no quorum proof for groups {missing:?}")));
        }
        let mut leaders = BTreeMap::new();
        for id in &ids {
            let m = within(deadline, &late, cluster.metrics(*id)).await?;
            if m.raft_groups.len() != expected_groups {
                return Err(CtlError::Abort(format!(
                    "node {id} hosts {} groups, expected {expected_groups}",
                    m.raft_groups.len()
                )));
            }
            for g in &m.raft_groups {
                let mut voters = g.voters.clone();
                voters.sort_unstable();
                if voters != ids {
                    return Err(CtlError::Abort(format!(
                        "node {id}: group {} has voters {voters:?}, not the configured {ids:?}",
                        g.raft_group_id
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
        for id in &ids {
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
    let report = json!({
        "verified": true,
        "observation_started_unix_ms": started_ms,
        "observation_ended_unix_ms": now_ms(),
        "voters": ids,
        "processes": processes,
        "groups": groups,
    });
    println!("{report}");
    Ok(())
}
