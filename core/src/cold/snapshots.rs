//! Snapshots in the cold tier (spec/30): a body of at least
//! `runtime.external_payload_min_size` (1 MiB) is stored as one object of
//! the stream's group and the log carries only its reference (`parts`
//! takes a snapshot above one request).

use bytes::Bytes;
use ursula_stream::{BucketId, ColdBody, Snapshot, SnapshotDigest};

use super::{Cold, ColdError};

/// Snapshot bodies at least this large are stored in the cold tier.
/// `runtime.external_payload_min_size`'s default.
pub const EXTERNAL_PAYLOAD_MIN_SIZE: usize = 1024 * 1024;

pub(super) fn unique_name() -> String {
    format!("{:016x}-{:016x}", crate::clock::wall_ms(), fastrand::u64(..))
}

impl Cold {
    /// Stores a snapshot body of a stream of `bucket` in `group`; the log
    /// then carries the reference.
    pub async fn store_snapshot(&self, bucket: &BucketId, group: u32, body: Bytes) -> Result<ColdBody, ColdError> {
        let object = self.object_key(bucket, group, &format!("snap-{}.snap", unique_name()));
        let len = body.len() as u64;
        self.store.put(&object, body).await?;
        Ok(ColdBody { object, len })
    }

    /// Fetches a cold snapshot body into `snapshot`, checked against its digest.
    pub async fn load_snapshot(&self, snapshot: &mut Snapshot) -> Result<(), ColdError> {
        let Some(cold) = &snapshot.cold else { return Ok(()) };
        let body = self.store.get_range(&cold.object, 0, cold.len).await?;
        if SnapshotDigest::of(&snapshot.content_type, &body) != snapshot.digest {
            return Err(ColdError::Corrupt(cold.object.clone()));
        }
        snapshot.body = body;
        Ok(())
    }
}
