//! Snapshots in the cold tier (spec/30): a body of at least
//! `runtime.external_payload_min_size` (1 MiB) is stored as one object of
//! the stream's group and the log carries only its reference; a snapshot
//! above one request goes up in parts, staged as objects of the stream
//! incarnation, assembled at the commit and checked against its digest.
//! Part objects live apart from the group's objects, so the group's garbage
//! collection never touches a staged part.

use bytes::{Bytes, BytesMut};
use ursula_stream::{ColdBody, Incarnation, Snapshot, SnapshotDigest, StreamKey};

use super::{Cold, ColdError};

/// Snapshot bodies at least this large are stored in the cold tier.
pub const EXTERNAL_PAYLOAD_MIN_SIZE: usize = 1024 * 1024;
/// The largest snapshot taken in parts (`Ursula-Max-Snapshot-Bytes`).
pub const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024 * 1024;

/// Why a commit's parts did not assemble.
#[derive(Debug)]
pub enum PartsError {
    /// A part is not staged for this stream incarnation.
    Unknown,
    TooLarge,
    Store(ColdError),
}

fn unique_name() -> String {
    format!("{:016x}-{:016x}", crate::engine::now_ms(), fastrand::u64(..))
}

/// A part id as this node issues it: 16 hex digits, `-`, 16 hex digits, `.part`.
fn valid_part_id(id: &str) -> bool {
    let Some(stem) = id.strip_suffix(".part") else { return false };
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    matches!(stem.split_once('-'), Some((a, b)) if hex(a) && hex(b))
}

impl Cold {
    /// Stores a snapshot body of `group`; the log then carries the reference.
    pub async fn store_snapshot(&self, group: u32, body: Bytes) -> Result<ColdBody, ColdError> {
        let object = self.object_key(group, &format!("snap-{}.snap", unique_name()));
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

    fn parts_prefix(&self, key: &StreamKey, incarnation: Incarnation) -> String {
        let root = self.config.root.trim_matches('/');
        let dir = format!("parts/{}/{}/{}/", key.bucket.as_str(), key.stream.as_str(), incarnation.value());
        if root.is_empty() { dir } else { format!("{root}/{dir}") }
    }

    /// Stages one part; returns its id.
    pub async fn stage_part(
        &self,
        key: &StreamKey,
        incarnation: Incarnation,
        body: Bytes,
    ) -> Result<String, ColdError> {
        let id = format!("{}.part", unique_name());
        self.store.put(&format!("{}{id}", self.parts_prefix(key, incarnation)), body).await?;
        Ok(id)
    }

    /// The snapshot made of `ids`, in order.
    pub async fn assemble_parts(
        &self,
        key: &StreamKey,
        incarnation: Incarnation,
        ids: &[String],
    ) -> Result<Bytes, PartsError> {
        if !ids.iter().all(|id| valid_part_id(id)) {
            return Err(PartsError::Unknown);
        }
        let prefix = self.parts_prefix(key, incarnation);
        let mut out = BytesMut::new();
        for id in ids {
            let part = match self.store.get(&format!("{prefix}{id}")).await {
                Ok(part) => part,
                Err(ColdError::Missing(_)) => return Err(PartsError::Unknown),
                Err(e) => return Err(PartsError::Store(e)),
            };
            if (out.len() + part.len()) as u64 > MAX_SNAPSHOT_BYTES {
                return Err(PartsError::TooLarge);
            }
            out.extend_from_slice(&part);
        }
        Ok(out.freeze())
    }

    /// Deletes the parts `ids` (after a commit's final answer).
    pub async fn delete_parts(&self, key: &StreamKey, incarnation: Incarnation, ids: &[String]) {
        let prefix = self.parts_prefix(key, incarnation);
        for id in ids.iter().filter(|id| valid_part_id(id)) {
            if let Err(e) = self.store.delete(&format!("{prefix}{id}")).await {
                tracing::warn!(part = %id, error = %e, "deleting a spent snapshot part failed");
            }
        }
    }

    /// Deletes every staged part of the stream incarnation (a discard).
    pub async fn discard_parts(&self, key: &StreamKey, incarnation: Incarnation) -> Result<(), ColdError> {
        for object in self.store.list(&self.parts_prefix(key, incarnation)).await? {
            self.store.delete(&object).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ids_are_only_the_issued_form() {
        assert!(valid_part_id("0000000000000001-00000000000000ff.part"));
        for bad in
            ["../x.part", "1-2.part", "0000000000000001-00000000000000ff", "0000000000000001/00000000000000ff.part"]
        {
            assert!(!valid_part_id(bad), "{bad}");
        }
    }
}
