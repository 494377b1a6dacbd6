//! `recover-group --group G [--accept-loss]` (spec/34, spec/35
//! "Recovering after a host crash"): explains the recovery plan of one
//! stalled group and sends nothing; with `--accept-loss` sends it, to the
//! plan's leader first and then to every other replica that answered with
//! the leader's plan term, and waits until every replica in the leader's
//! membership applied the group's history event.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::{Answer, Cluster};
use crate::error::{CtlError, Result};
use crate::recovery::{self, Blocked, Plan, Replicas};

/// How often the replicas are read while waiting.
const POLL: Duration = Duration::from_secs(1);

pub struct Options {
    pub group: u32,
    pub accept_loss: bool,
    pub max_plans: u32,
    pub accept_timeout: Duration,
    pub timeout: Duration,
}

/// The group's replicas that answered, and the nodes that did not.
async fn observe(cluster: &Cluster, group: u32) -> (Replicas, Vec<u64>) {
    let mut replicas = Replicas::new();
    let mut unanswered = Vec::new();
    for (id, metrics) in cluster.observe_all().await {
        match metrics.ok().and_then(|m| m.group(group).cloned()) {
            Some(g) => {
                replicas.insert(id, g);
            }
            None => unanswered.push(id),
        }
    }
    (replicas, unanswered)
}

fn explain(group: u32, plan: &Plan, replicas: &Replicas, unanswered: &[u64]) -> Value {
    let expected: serde_json::Map<String, Value> = replicas
        .iter()
        .map(|(n, g)| {
            let sets =
                json!({ "voter_configs": g.voter_configs, "committed_voter_configs": g.committed_voter_configs });
            (n.to_string(), json!({ "expected": recovery::expected(g), "voter_sets": sets }))
        })
        .collect();
    json!({
        "raft_group_id": group,
        "floor": plan.floor,
        "leader": plan.leader,
        "point": plan.point,
        "cut": plan.cut,
        "point_entry": plan.point_entry.map(|(term, node_id)| json!({ "term": term, "node_id": node_id })),
        "why": plan.why,
        "highest_term": plan.highest_term,
        "replicas": expected,
        "unanswered": unanswered,
    })
}

async fn send(cluster: &Cluster, node: u64, group: u32, body: &Value, timeout: Duration) -> Result<Answer> {
    let path = format!("/__ursula/raft/{group}/recovery/accept-unsynced-loss");
    let headers = [("content-type", "application/json".to_string())];
    let bytes = bytes::Bytes::from(body.to_string());
    let call = cluster.mutate_with(node, Method::POST, &path, Some((bytes, &headers)));
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| CtlError::Transport(format!("node {node} did not answer the plan within {timeout:?}")))?
}

/// The plan term the plan's leader recorded for `plan`, if it took it.
async fn recorded_term(cluster: &Cluster, group: u32, plan: &Plan) -> Option<u64> {
    let metrics = cluster.metrics(plan.leader).await.ok()?;
    let held = metrics.group(group)?.recovery.clone()?;
    let same = held["leader"] == json!(plan.leader) && held["point"] == json!(plan.point) && held["step"] == "lead";
    same.then(|| held["leader_term"].as_u64()).flatten()
}

fn reason(answer: &Answer) -> String {
    answer.body.pointer("/refusal/reason").and_then(Value::as_str).unwrap_or("").to_string()
}

pub async fn run(cluster: &Cluster, o: Options) -> Result<()> {
    let (replicas, unanswered) = observe(cluster, o.group).await;
    if replicas.is_empty() {
        return Err(CtlError::Transport(format!("no node reports group {}", o.group)));
    }
    if !o.accept_loss {
        let plan = recovery::plan(&replicas, &BTreeSet::new()).map_err(|b| CtlError::Abort(b.to_string()))?;
        println!(
            "{}",
            serde_json::to_string_pretty(&explain(o.group, &plan, &replicas, &unanswered)).unwrap_or_default()
        );
        return Ok(());
    }
    let deadline = Instant::now() + o.timeout;
    let mut excluded = BTreeSet::new();
    let mut sent: Option<Plan> = None;
    let mut plans = 0;
    let mut wedges = 0;
    loop {
        if Instant::now() > deadline {
            return Err(CtlError::Abort(format!("group {} did not recover within {:?}", o.group, o.timeout)));
        }
        let (replicas, unanswered) = observe(cluster, o.group).await;
        if let Some(plan) = &sent {
            if recovery::satisfied(plan, &replicas) {
                let members: BTreeSet<u64> = replicas
                    .get(&plan.leader)
                    .map(|g| g.voter_configs.iter().flatten().copied().collect())
                    .unwrap_or_default();
                let outside: Vec<u64> = replicas.keys().filter(|n| !members.contains(n)).copied().collect();
                let done = json!({ "raft_group_id": o.group, "recovered": true, "leader": plan.leader,
                    "point": plan.point, "plans": plans, "outside_membership": outside });
                println!("{done}");
                return Ok(());
            }
            wedges = if recovery::wedged(plan, &replicas) { wedges + 1 } else { 0 };
            if wedges < 2 {
                tokio::time::sleep(POLL).await;
                continue;
            }
            eprintln!("ursulactl: the plan led by node {} wedged; planning again", plan.leader);
        }
        let plan = match recovery::plan(&replicas, &excluded) {
            Ok(plan) => plan,
            Err(Blocked::LeadsLive(node)) if sent.is_none() => {
                return Err(CtlError::Abort(format!(
                    "node {node} leads group {} with a live quorum: no plan is needed",
                    o.group
                )));
            }
            Err(Blocked::LeadsLive(_) | Blocked::MayOpen { .. }) => {
                tokio::time::sleep(POLL).await;
                continue;
            }
            Err(b) => return Err(CtlError::Abort(b.to_string())),
        };
        if plans >= o.max_plans {
            return Err(CtlError::Abort(format!(
                "group {} did not recover after {plans} plans (--max-plans)",
                o.group
            )));
        }
        plans += 1;
        wedges = 0;
        eprintln!("ursulactl: plan {plans}: {}", explain(o.group, &plan, &replicas, &unanswered));
        let leader = &replicas[&plan.leader];
        let led =
            match send(cluster, plan.leader, o.group, &recovery::body(&plan, leader, None), o.accept_timeout).await {
                Ok(led) => led,
                // The answer was lost: the plan the leader recorded names its term.
                Err(e) => match recorded_term(cluster, o.group, &plan).await {
                    Some(term) => Answer { status: StatusCode::OK, body: json!({ "leader_term": term }) },
                    None => return Err(e),
                },
            };
        let term = match led.status {
            StatusCode::OK => led.body["leader_term"].as_u64().ok_or_else(|| {
                CtlError::Transport(format!(
                    "node {} took the plan but named no leader_term: {}",
                    plan.leader, led.body
                ))
            })?,
            StatusCode::CONFLICT
                if ["missing_vote_floor", "step_mismatch", "cut_unsupported", "leads_without_quorum"]
                    .contains(&reason(&led).as_str()) =>
            {
                return Err(CtlError::Refused(format!("node {} refused the plan: {}", plan.leader, led.body)));
            }
            StatusCode::CONFLICT => {
                eprintln!(
                    "ursulactl: node {} refused the plan ({}); reading the replicas again",
                    plan.leader,
                    reason(&led)
                );
                tokio::time::sleep(POLL).await;
                continue;
            }
            status => return Err(CtlError::Refused(format!("node {}: {status} {}", plan.leader, led.body))),
        };
        let members: BTreeSet<u64> = leader.voter_configs.iter().flatten().copied().collect();
        let mut took = 1;
        for (node, g) in replicas.iter().filter(|(n, _)| **n != plan.leader) {
            match send(cluster, *node, o.group, &recovery::body(&plan, g, Some(term)), o.accept_timeout).await {
                Ok(a) if a.status == StatusCode::OK => took += usize::from(members.contains(node)),
                Ok(a) => {
                    eprintln!("ursulactl: node {node} refused the plan: {}", a.body);
                    if ["missing_vote_floor", "step_mismatch"].contains(&reason(&a).as_str()) {
                        excluded.insert(*node);
                    }
                }
                Err(e) => eprintln!("ursulactl: node {node}: {e}"),
            }
        }
        if took * 2 <= members.len() {
            eprintln!("ursulactl: only {took} of {} members took the plan; planning again", members.len());
            tokio::time::sleep(POLL).await;
            continue;
        }
        sent = Some(plan);
    }
}
