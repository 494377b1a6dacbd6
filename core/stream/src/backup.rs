//! A backup's group object (spec/35 "Backup and disaster recovery"): one
//! group's applied state as compact MessagePack (structs as arrays of
//! their fields), the backup format first. The voters that export it and
//! `ursulactl`, which verifies it without a cluster, share this type.

use serde::{Deserialize, Serialize};

use crate::store::StreamStore;

/// The backup format of Ursula 0.9; it changes only when what a backup holds changes.
pub const BACKUP_FORMAT: u32 = 6;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct GroupBackup {
    pub format_version: u32,
    pub group: u32,
    pub group_count: u32,
    /// The exporting replica's applied index: the object holds every write up to it.
    pub commit_index: u64,
    pub store: StreamStore,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupError {
    #[error("backup format {0}; this build reads and writes format {BACKUP_FORMAT}")]
    Format(u64),
    #[error("the group object does not decode: {0}")]
    Decode(String),
    #[error("the group object does not encode: {0}")]
    Encode(String),
}

impl GroupBackup {
    pub fn encode(&self) -> Result<Vec<u8>, BackupError> {
        rmp_serde::to_vec(self).map_err(|e| BackupError::Encode(e.to_string()))
    }

    /// Decodes an object, refusing another format before reading the rest.
    pub fn decode(bytes: &[u8]) -> Result<GroupBackup, BackupError> {
        let mut head = bytes;
        let bad = |e: &dyn std::fmt::Display| BackupError::Decode(e.to_string());
        rmp::decode::read_array_len(&mut head).map_err(|e| bad(&e))?;
        let format: u64 = rmp::decode::read_int(&mut head).map_err(|e| bad(&e))?;
        if format != u64::from(BACKUP_FORMAT) {
            return Err(BackupError::Format(format));
        }
        rmp_serde::from_slice(bytes).map_err(|e| bad(&e))
    }

    /// Buckets that hold streams, and streams, for the manifest.
    pub fn counts(&self) -> (usize, usize) {
        (self.store.bucket_count(), self.store.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_round_trips_and_another_format_is_refused_first() {
        let backup = GroupBackup {
            format_version: BACKUP_FORMAT,
            group: 3,
            group_count: 8,
            commit_index: 41,
            store: StreamStore::new(9),
        };
        let bytes = backup.encode().expect("encodes");
        assert_eq!(&bytes[..2], &[0x95, 0x06], "an array of five fields, the format first");
        assert_eq!(GroupBackup::decode(&bytes), Ok(backup.clone()));
        let mut old = bytes.clone();
        old[1] = 0x05;
        assert_eq!(GroupBackup::decode(&old), Err(BackupError::Format(5)));
        assert!(matches!(GroupBackup::decode(&bytes[..bytes.len() - 1]), Err(BackupError::Decode(_))));
        assert!(matches!(GroupBackup::decode(b""), Err(BackupError::Decode(_))));
    }
}
