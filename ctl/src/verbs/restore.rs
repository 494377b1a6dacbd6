//! `restore` (spec/34 "Backup and restore", spec/35): a verified backup
//! into a fresh, empty cluster with the same group count. Everything is
//! checked before the first import (the backup, the target's backup format
//! and group count, every group's cold references and that no group holds
//! data), so a refused restore imports nothing. Each import is one
//! replicated write on the group's leader; a repeat of one that applied
//! answers `"already": true`, so an interrupted restore runs again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::client::{Answer, Cluster};
use crate::error::{CtlError, Result};
use crate::location::Location;
use crate::progress::Progress;
use crate::verbs::backup::{self, GroupEntry};

/// How long one group's import may keep meeting no leader.
const LEADER_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
struct ColdCheck {
    target: String,
    referenced: u64,
    missing: u64,
    #[serde(default)]
    missing_keys: Vec<String>,
}

pub async fn run(cluster: &Cluster, location: &str) -> Result<()> {
    let shown = location;
    let location = Location::open(location).await?;
    let verified =
        backup::check(&location).await?.map_err(|why| CtlError::Abort(format!("the backup does not verify: {why}")))?;
    let (manifest, objects) = (verified.manifest, verified.objects);
    let (info, nodes) = backup::cluster_info(cluster).await?;
    if info.group_count != manifest.group_count {
        return Err(CtlError::Abort(format!(
            "the target cluster has {} raft groups, the backup {}: restore into a cluster with the same group count",
            info.group_count, manifest.group_count
        )));
    }
    if info.cluster_id != manifest.cluster_id {
        eprintln!(
            "ursulactl: warning: the target's cluster id {:?} is not the source's {:?}: clients will see another \
             deployment (spec/35 \"Keep the cluster id\")",
            info.cluster_id, manifest.cluster_id
        );
    }
    let progress = Progress::new();
    let checker = nodes.first().copied().ok_or_else(|| CtlError::Transport("no node answered".into()))?;
    let (mut missing, mut first_missing, mut busy) = (0u64, Vec::new(), Vec::new());
    for (entry, body) in manifest.groups.iter().zip(&objects) {
        let path = format!("/__ursula/backup/group/{}/cold-check", entry.raft_group_id);
        let answer = send(cluster, checker, &path, entry, body).await?;
        let check: ColdCheck = parse(&answer, checker, &path)?;
        missing += check.missing;
        first_missing.extend(check.missing_keys);
        if check.target == "holds_data" {
            busy.push(entry.raft_group_id);
        }
        progress.say(&format!(
            "cold check: group {} of {}, {} references",
            entry.raft_group_id + 1,
            manifest.group_count,
            check.referenced
        ));
    }
    progress.done();
    if missing > 0 {
        first_missing.truncate(5);
        return Err(CtlError::Abort(format!(
            "{missing} cold objects this backup references are missing from the target cluster's cold store \
             (first: {}); nothing was imported: copy the source's cold objects and run restore again",
            first_missing.join(", ")
        )));
    }
    if !busy.is_empty() {
        return Err(CtlError::Abort(format!(
            "raft groups {busy:?} of the target already hold data; nothing was imported: restore into a fresh, empty cluster"
        )));
    }
    let (mut streams, mut already, mut bytes) = (0u64, 0u32, 0u64);
    let mut leaders = observe_leaders(cluster).await;
    for (entry, body) in manifest.groups.iter().zip(&objects) {
        let report = import_group(cluster, &mut leaders, entry, body).await?;
        streams += report["streams"].as_u64().unwrap_or(0);
        already += u32::from(report["already"] == serde_json::Value::Bool(true));
        bytes += entry.bytes;
        progress.say(&format!(
            "restore: {} of {} groups, {bytes} bytes",
            entry.raft_group_id + 1,
            manifest.group_count
        ));
    }
    progress.done();
    println!(
        "restored {} groups ({streams} streams, {bytes} bytes) from {shown}{}",
        manifest.group_count,
        if already > 0 { format!("; {already} had been imported by an earlier run") } else { String::new() }
    );
    Ok(())
}

async fn send(cluster: &Cluster, node: u64, path: &str, entry: &GroupEntry, body: &bytes::Bytes) -> Result<Answer> {
    let headers =
        [("x-ursula-backup-blake3", entry.blake3.clone()), ("content-type", "application/vnd.msgpack".into())];
    cluster.mutate_with(node, Method::POST, path, Some((body.clone(), &headers))).await
}

fn parse<T: serde::de::DeserializeOwned>(answer: &Answer, node: u64, path: &str) -> Result<T> {
    if answer.status != StatusCode::OK {
        return Err(CtlError::Refused(format!("POST {path} on node {node}: {} {}", answer.status, answer.code())));
    }
    serde_json::from_value(answer.body.clone())
        .map_err(|e| CtlError::Transport(format!("POST {path} on node {node}: unexpected answer: {e}")))
}

/// Imports one group on its leader, following leadership changes: the
/// cluster is observed again only when the leader it named did not take it.
async fn import_group(
    cluster: &Cluster,
    leaders: &mut BTreeMap<u32, u64>,
    entry: &GroupEntry,
    body: &bytes::Bytes,
) -> Result<serde_json::Value> {
    let g = entry.raft_group_id;
    let path = format!("/__ursula/backup/group/{g}/import");
    let deadline = Instant::now() + LEADER_WAIT;
    loop {
        let leader = leaders.get(&g).copied();
        let answer = match leader {
            Some(node) => Some((node, send(cluster, node, &path, entry, body).await?)),
            None => None,
        };
        match answer {
            Some((_, a)) if a.status == StatusCode::OK => return Ok(a.body),
            Some((node, a)) if a.status == StatusCode::CONFLICT && a.code() == "IMPORT_CONFLICT" => {
                return Err(CtlError::Abort(format!(
                    "raft group {g} on node {node} already holds data (409 IMPORT_CONFLICT): restore into a fresh, \
                     empty cluster"
                )));
            }
            // No leader yet, or the leadership moved: observe again.
            Some((_, a)) if a.status == StatusCode::SERVICE_UNAVAILABLE => {}
            None => {}
            Some((node, a)) => {
                return Err(CtlError::Refused(format!("POST {path} on node {node}: {} {}", a.status, a.code())));
            }
        }
        if Instant::now() >= deadline {
            return Err(CtlError::Abort(format!(
                "raft group {g} had no leader that took the import for {}s; run restore again",
                LEADER_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        *leaders = observe_leaders(cluster).await;
    }
}

/// Each group's leader as the nodes report it (the first that names one).
async fn observe_leaders(cluster: &Cluster) -> BTreeMap<u32, u64> {
    let mut leaders = BTreeMap::new();
    for metrics in cluster.observe_all().await.into_values().flatten() {
        for group in &metrics.raft_groups {
            if let Some(leader) = group.current_leader {
                leaders.entry(group.raft_group_id).or_insert(leader);
            }
        }
    }
    leaders
}
