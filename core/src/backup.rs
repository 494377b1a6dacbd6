//! Backups on a voter (spec/35 "Backup and disaster recovery"): the export
//! (`GET /__ursula/backup/info`, `GET /__ursula/backup/group/{group}`, one
//! group's applied state as a compact MessagePack object that `ursulactl
//! backup-create` keeps from the replica with the highest index), and the
//! restore side: the cold check of an object's references and its import
//! as one replicated write that starts a new history.

use bytes::Bytes;
use serde::Serialize;
use ursula_stream::backup::{BACKUP_FORMAT, BackupError, GroupBackup};
use ursula_stream::routing::GroupId;

use crate::cold::Cold;
use crate::engine::{EngineError, GroupEngine};

/// `GET /__ursula/backup/info`.
#[derive(Debug, Clone, Serialize)]
pub struct BackupInfo {
    pub format_version: u32,
    pub group_count: u32,
    pub cluster_id: String,
    pub node_id: u64,
}

/// One exported group object and what the manifest records of it.
pub struct Exported {
    pub bytes: Bytes,
    pub commit_index: u64,
    pub blake3: String,
    pub buckets: usize,
    pub streams: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Backup(#[from] BackupError),
    #[error(transparent)]
    Cold(crate::cold::store::ColdError),
}

pub fn info<E: GroupEngine>(engine: &E, cluster_id: &str) -> BackupInfo {
    BackupInfo {
        format_version: BACKUP_FORMAT,
        group_count: engine.group_count(),
        cluster_id: cluster_id.to_string(),
        node_id: engine.node_id(),
    }
}

/// Group `group`'s applied state, encoded under the group's lock so the
/// object and its index agree.
pub fn export<E: GroupEngine>(engine: &E, group: u32) -> Result<Exported, ExportError> {
    let id = GroupId(group);
    let state = engine.state(id)?;
    let guard = crate::engine::group_state::lock(state);
    let commit_index = engine.applied_index(id);
    let backup = GroupBackup {
        format_version: BACKUP_FORMAT,
        group,
        group_count: engine.group_count(),
        commit_index,
        store: guard.store.clone(),
    };
    drop(guard);
    let (buckets, streams) = backup.counts();
    let bytes = Bytes::from(backup.encode()?);
    let blake3 = blake3::hash(&bytes).to_hex().to_string();
    Ok(Exported { bytes, commit_index, blake3, buckets, streams })
}

/// The largest group object an import takes: it becomes one Raft entry,
/// which must fit a replication message with room to spare.
pub const MAX_IMPORT_BYTES: usize = 48 * 1024 * 1024;

/// Cold objects looked up at once by a cold check.
const COLD_CHECK_PARALLELISM: usize = 32;
/// Missing keys a cold check names.
const MISSING_KEYS_SHOWN: usize = 10;

/// Why a group object was refused before anything was proposed (`400`).
#[derive(Debug, thiserror::Error)]
pub enum ImportRefusal {
    #[error("x-ursula-backup-blake3 is required: the BLAKE3 digest of the group object")]
    DigestMissing,
    #[error("the group object does not match x-ursula-backup-blake3")]
    DigestMismatch,
    #[error(transparent)]
    Backup(#[from] BackupError),
    #[error("the object is group {found} of {found_count}, not group {group} of {count}")]
    WrongGroup { found: u32, found_count: u32, group: u32, count: u32 },
    #[error("the object's usage counters are in another write unit")]
    WriteUnit,
}

/// A group object checked against the route's group and its digest.
pub struct Checked {
    pub backup: GroupBackup,
    pub digest: [u8; 32],
}

/// Decodes `bytes` as group `group` of this cluster; `claimed` is the hex
/// digest the request named (required for an import, optional for a check).
pub fn check_object<E: GroupEngine>(
    engine: &E,
    group: u32,
    bytes: &[u8],
    claimed: Option<&str>,
    digest_required: bool,
) -> Result<Checked, ImportRefusal> {
    let digest = blake3::hash(bytes);
    match claimed {
        None if digest_required => return Err(ImportRefusal::DigestMissing),
        Some(hex) if !digest.to_hex().as_str().eq_ignore_ascii_case(hex.trim()) => {
            return Err(ImportRefusal::DigestMismatch);
        }
        _ => {}
    }
    let backup = GroupBackup::decode(bytes)?;
    if (backup.group, backup.group_count) != (group, engine.group_count()) {
        return Err(ImportRefusal::WrongGroup {
            found: backup.group,
            found_count: backup.group_count,
            group,
            count: engine.group_count(),
        });
    }
    if backup.store.write_unit_bytes() != ursula_stream::usage::WRITE_UNIT_BYTES {
        return Err(ImportRefusal::WriteUnit);
    }
    Ok(Checked { backup, digest: *digest.as_bytes() })
}

/// The group's history after a restore: derived from the object's digest
/// and the group, so every attempt at one restore starts the same history.
pub fn restored_history_id(digest: &[u8; 32], group: u32) -> u64 {
    derived_history_id(b"ursula restore history", &[digest, &group.to_le_bytes()])
}

/// A history id derived from what starts it (a restore, an accepted loss),
/// so that every replica and every repeat derives the same one.
pub fn derived_history_id(tag: &[u8], parts: &[&[u8]]) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(tag);
    for part in parts {
        h.update(part);
    }
    let mut first = [0u8; 8];
    first.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(first)
}

/// The answer of `POST /__ursula/backup/group/{group}/import`.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub raft_group_id: u32,
    pub already: bool,
    pub buckets: u64,
    pub streams: u64,
}

/// Proposes the import of a checked object as one replicated write.
pub async fn import<E: GroupEngine>(
    engine: &E,
    group: u32,
    checked: Checked,
) -> Result<Result<ImportReport, ursula_stream::Rejection>, EngineError> {
    let Checked { backup, digest } = checked;
    let command = ursula_stream::Command::Import(ursula_stream::ImportGroup {
        store: Box::new(backup.store),
        digest,
        history_id: restored_history_id(&digest, group),
    });
    match engine.propose(GroupId(group), command).await? {
        ursula_stream::Outcome::Import(result) => Ok(result.map(|i| ImportReport {
            raft_group_id: group,
            already: i.already,
            buckets: i.buckets,
            streams: i.streams,
        })),
        other => Err(EngineError::Fatal(format!("an import applied as {other:?}"))),
    }
}

/// The answer of `POST /__ursula/backup/group/{group}/cold-check`.
#[derive(Debug, Clone, Serialize)]
pub struct ColdCheck {
    pub raft_group_id: u32,
    /// What this replica's group would make of the object's import.
    pub target: ursula_stream::store::ImportTarget,
    pub referenced: u64,
    pub missing: u64,
    /// The first missing keys, sorted.
    pub missing_keys: Vec<String>,
}

/// Looks up every cold object the group object references in this node's
/// cold store. A node without one holds none of them.
pub async fn cold_check<E: GroupEngine>(
    engine: &E,
    cold: Option<&Cold>,
    group: u32,
    checked: &Checked,
) -> Result<ColdCheck, ExportError> {
    let target = engine.query(GroupId(group), |store, _| store.import_target(&checked.digest))?;
    let backup = &checked.backup;
    let mut keys: Vec<String> = backup.store.cold_objects().into_iter().collect();
    keys.sort();
    let mut missing = match cold {
        None => keys.clone(),
        Some(cold) => {
            // In rounds of `COLD_CHECK_PARALLELISM` lookups at once.
            let mut missing = Vec::new();
            for round in keys.chunks(COLD_CHECK_PARALLELISM) {
                let mut lookups = Vec::with_capacity(round.len());
                for key in round {
                    lookups.push(cold.store.size(key));
                }
                for (key, found) in round.iter().zip(futures_util::future::join_all(lookups).await) {
                    match found {
                        Ok(_) => {}
                        Err(crate::cold::store::ColdError::Missing(_)) => missing.push(key.clone()),
                        Err(e) => return Err(ExportError::Cold(e)),
                    }
                }
            }
            missing
        }
    };
    missing.sort();
    let count = missing.len() as u64;
    missing.truncate(MISSING_KEYS_SHOWN);
    Ok(ColdCheck { raft_group_id: group, target, referenced: keys.len() as u64, missing: count, missing_keys: missing })
}
