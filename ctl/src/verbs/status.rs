//! `status`: each node's groups and leadership distribution as it reports
//! them; a node whose metrics fail is reported, not fatal.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::client::Cluster;
use crate::error::Result;

/// spec/34's line: `node 1 (10.0.0.1): groups=4 leaders={1: 2, 2: 2}`,
/// leaders by node id in number order (groups without one last, as
/// `none`). Shed state, apply lag and readiness are in `--json`.
fn line(id: &Value, host: &str, row: &Value) -> String {
    let mut leaders: Vec<(Option<u64>, &Value)> =
        row["leaders"].as_object().map(|m| m.iter().map(|(k, v)| (k.parse().ok(), v)).collect()).unwrap_or_default();
    leaders.sort_by_key(|(k, _)| (k.is_none(), *k));
    let shown: Vec<String> = leaders
        .iter()
        .map(|(k, v)| format!("{}: {v}", k.map_or_else(|| "none".to_string(), |k| k.to_string())))
        .collect();
    format!("node {id} ({host}): groups={} leaders={{{}}}", row["groups"], shown.join(", "))
}

pub async fn run(cluster: &Cluster, as_json: bool) -> Result<()> {
    let observed = cluster.observe_all().await;
    let mut rows = Vec::new();
    for (id, metrics) in &observed {
        let host = cluster.manifest.node(*id)?.host();
        let row = match metrics {
            Err(e) => json!({ "id": id, "host": host, "error": e.to_string() }),
            Ok(m) => {
                let mut leaders: BTreeMap<String, usize> = BTreeMap::new();
                for g in &m.raft_groups {
                    let who = g.current_leader.map_or("none".to_string(), |l| l.to_string());
                    *leaders.entry(who).or_default() += 1;
                }
                let lag = m
                    .raft_groups
                    .iter()
                    .map(|g| g.committed_index.unwrap_or(0).saturating_sub(g.last_applied_index))
                    .max()
                    .unwrap_or(0);
                let (ready, _) = cluster.ready(*id).await.unwrap_or((false, Value::Null));
                json!({
                    "id": id,
                    "host": host,
                    "process_incarnation": m.process_incarnation,
                    "groups": m.raft_groups.len(),
                    "leaders": leaders,
                    "leaderships": m.led_by(*id).len(),
                    "applied_index_sum": m.raft_groups.iter().map(|g| g.last_applied_index).sum::<u64>(),
                    "committed_index_sum": m.raft_groups.iter().filter_map(|g| g.committed_index).sum::<u64>(),
                    "max_apply_lag": lag,
                    "leadership_shed": m.leadership_shed,
                    "ready": ready,
                })
            }
        };
        rows.push(row);
    }
    if as_json {
        println!("{}", json!({ "nodes": rows }));
        return Ok(());
    }
    for row in rows {
        let (id, host) = (&row["id"], row["host"].as_str().unwrap_or("?"));
        if let Some(error) = row["error"].as_str() {
            println!("node {id} ({host}): metrics unavailable — {error}");
            continue;
        }
        println!("{}", line(id, host, &row));
    }
    Ok(())
}
