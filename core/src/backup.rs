//! The export side of backups (spec/35 "Backup and disaster recovery"):
//! `GET /__ursula/backup/info` and `GET /__ursula/backup/group/{group}`,
//! one group's applied state as a compact MessagePack object that
//! `ursulactl backup-create` keeps from the replica with the highest index.

use bytes::Bytes;
use serde::Serialize;
use ursula_stream::backup::{BACKUP_FORMAT, BackupError, GroupBackup};
use ursula_stream::routing::GroupId;

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
