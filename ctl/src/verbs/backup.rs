//! `backup-create` and `backup-verify` (spec/34 "Backup and restore",
//! spec/35): a backup is a directory of one MessagePack object per Raft
//! group and `manifest.json`, written last, so a backup without its
//! manifest is visibly incomplete. Each group comes from the replica that
//! applied the most; verification reads only the backup.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use ursula_stream::backup::{BACKUP_FORMAT, GroupBackup};

use crate::client::Cluster;
use crate::error::{CtlError, Result};
use crate::location::Location;
use crate::progress::Progress;

const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupManifest {
    pub format_version: u32,
    pub created_unix_ms: u64,
    pub cluster_id: String,
    pub group_count: u32,
    pub groups: Vec<GroupEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupEntry {
    pub raft_group_id: u32,
    pub object: String,
    pub bytes: u64,
    pub blake3: String,
    pub commit_index: u64,
    pub buckets: u64,
    pub streams: u64,
    /// The voter the object came from.
    pub node_id: u64,
}

#[derive(Debug, Deserialize)]
pub struct Info {
    pub format_version: u32,
    pub group_count: u32,
    pub cluster_id: String,
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// The cluster's backup info, the same on every node that answers.
pub async fn cluster_info(cluster: &Cluster) -> Result<(Info, Vec<u64>)> {
    let (mut agreed, mut answering): (Option<Info>, Vec<u64>) = (None, Vec::new());
    for id in cluster.manifest.ids() {
        let Ok((StatusCode::OK, _, body)) = cluster.admin_get(id, "/__ursula/backup/info").await else { continue };
        let info: Info = serde_json::from_slice(&body)
            .map_err(|e| CtlError::Transport(format!("node {id}: /__ursula/backup/info: {e}")))?;
        if info.format_version != BACKUP_FORMAT {
            return Err(CtlError::Abort(format!(
                "target cluster speaks backup format {} (node {id}); this ursulactl reads and writes {BACKUP_FORMAT}",
                info.format_version
            )));
        }
        if let Some(first) = &agreed
            && (first.group_count, &first.cluster_id) != (info.group_count, &info.cluster_id)
        {
            return Err(CtlError::Abort(format!("node {id} reports another cluster or group count than its peers")));
        }
        agreed.get_or_insert(info);
        answering.push(id);
    }
    let info = agreed.ok_or_else(|| CtlError::Transport("no node answered /__ursula/backup/info".into()))?;
    Ok((info, answering))
}

pub async fn create(cluster: &Cluster, location: &str, created_unix_ms: Option<u64>) -> Result<()> {
    let shown = location;
    let location = Location::open(location).await?;
    location.prepare().await?;
    let (info, nodes) = cluster_info(cluster).await?;
    let progress = Progress::new();
    let mut groups = Vec::new();
    let mut copied = 0u64;
    for g in 0..info.group_count {
        // Every node's export of the group; the highest applied index wins.
        let mut best: Option<(u64, u64, reqwest::header::HeaderMap, bytes::Bytes)> = None;
        for id in &nodes {
            let Ok((StatusCode::OK, headers, body)) =
                cluster.admin_get(*id, &format!("/__ursula/backup/group/{g}")).await
            else {
                continue;
            };
            let index = header(&headers, "x-ursula-backup-commit-index").and_then(|v| v.parse().ok()).unwrap_or(0);
            if best.as_ref().is_none_or(|(i, ..)| index > *i) {
                best = Some((index, *id, headers, body));
            }
        }
        let (commit_index, node_id, headers, body) =
            best.ok_or_else(|| CtlError::Abort(format!("no node exported group {g}")))?;
        let digest = blake3::hash(&body).to_hex().to_string();
        if header(&headers, "x-ursula-backup-blake3").as_deref() != Some(digest.as_str()) {
            return Err(CtlError::Transport(format!(
                "group {g} from node {node_id}: the object does not match its digest"
            )));
        }
        let count = |name: &str| header(&headers, name).and_then(|v| v.parse().ok()).unwrap_or(0);
        let object = format!("group-{g:05}.msgpack");
        location.put(&object, body.clone()).await?;
        copied += body.len() as u64;
        progress.say(&format!("backup: {} of {} groups, {copied} bytes", g + 1, info.group_count));
        groups.push(GroupEntry {
            raft_group_id: g,
            object,
            bytes: body.len() as u64,
            blake3: digest,
            commit_index,
            buckets: count("x-ursula-backup-buckets"),
            streams: count("x-ursula-backup-streams"),
            node_id,
        });
    }
    progress.done();
    let created_unix_ms = created_unix_ms
        .unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64));
    let manifest = BackupManifest {
        format_version: BACKUP_FORMAT,
        created_unix_ms,
        cluster_id: info.cluster_id,
        group_count: info.group_count,
        groups,
    };
    // Written last, whole: a backup without it is an incomplete one.
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| CtlError::Config(e.to_string()))?;
    location.put(MANIFEST, Bytes::from(text)).await?;
    let streams: u64 = manifest.groups.iter().map(|g| g.streams).sum();
    println!("backup of {} groups ({streams} streams, {copied} bytes) in {shown}", manifest.group_count);
    Ok(())
}

/// A verified backup: its manifest and each group's object, in group order.
pub struct Verified {
    pub manifest: BackupManifest,
    pub objects: Vec<Bytes>,
}

/// Every check `backup-verify` makes, in order; the first failure names
/// itself. A location that cannot be read is a transport error.
pub async fn check(location: &Location) -> Result<std::result::Result<Verified, String>> {
    let Some(text) = location.get(MANIFEST).await? else {
        return Ok(Err(format!("{}: missing (an incomplete backup?)", location.show(MANIFEST))));
    };
    let manifest: BackupManifest = match serde_json::from_slice(&text) {
        Ok(manifest) => manifest,
        Err(e) => return Ok(Err(format!("{MANIFEST}: {e}"))),
    };
    if manifest.format_version != BACKUP_FORMAT {
        return Ok(Err(format!(
            "backup manifest format_version {}: this ursulactl reads {BACKUP_FORMAT}",
            manifest.format_version
        )));
    }
    let listed: Vec<u32> = manifest.groups.iter().map(|g| g.raft_group_id).collect();
    if listed != (0..manifest.group_count).collect::<Vec<_>>() {
        return Ok(Err(format!("{MANIFEST} lists groups {listed:?}, not each of 0..{} once", manifest.group_count)));
    }
    let mut objects = Vec::with_capacity(manifest.groups.len());
    for entry in &manifest.groups {
        let g = entry.raft_group_id;
        if entry.object.contains('/') || entry.object.contains("..") {
            return Ok(Err(format!("group {g}: object name {:?} leaves the backup", entry.object)));
        }
        let Some(bytes) = location.get(&entry.object).await? else {
            return Ok(Err(format!("group {g}: {} is missing", location.show(&entry.object))));
        };
        if let Err(why) = check_object(&manifest, entry, &bytes) {
            return Ok(Err(why));
        }
        objects.push(bytes);
    }
    Ok(Ok(Verified { manifest, objects }))
}

/// One group's object against its manifest entry.
fn check_object(manifest: &BackupManifest, entry: &GroupEntry, bytes: &[u8]) -> std::result::Result<(), String> {
    let g = entry.raft_group_id;
    if bytes.len() as u64 != entry.bytes {
        return Err(format!("group {g}: {} bytes, the manifest says {}", bytes.len(), entry.bytes));
    }
    if blake3::hash(bytes).to_hex().as_str() != entry.blake3 {
        return Err(format!("group {g}: BLAKE3 mismatch"));
    }
    let backup = GroupBackup::decode(bytes).map_err(|e| format!("group {g}: {e}"))?;
    let (buckets, streams) = backup.counts();
    let found = (backup.group, backup.group_count, backup.commit_index, buckets as u64, streams as u64);
    let expected = (g, manifest.group_count, entry.commit_index, entry.buckets, entry.streams);
    if found != expected {
        return Err(format!(
            "group {g}: the object holds (group, group count, index, buckets, streams) {found:?}, the manifest {expected:?}"
        ));
    }
    Ok(())
}

pub async fn verify(location: &str) -> Result<()> {
    let location = Location::open(location).await?;
    let verified = check(&location).await?.map_err(|why| CtlError::Abort(format!("backup-verify: {why}")))?;
    let manifest = verified.manifest;
    let streams: u64 = manifest.groups.iter().map(|g| g.streams).sum();
    println!("backup verified: format {}, {} groups, {streams} streams", manifest.format_version, manifest.group_count);
    Ok(())
}
