//! Raft snapshots on S3 (`storage.snapshot.backend`, spec/07 and spec/35
//! "Deleted data"). Each node writes its own objects under
//! `{prefix}/node-{id}/group-{gid}/{index}-{nonce}.snap`, never under a
//! name used before, and only it deletes them. Peers are sent a reference
//! instead of the bytes; a follower copies a peer's object into its own
//! directory before it installs it, so no node relies on another's object
//! for longer than one send. A GC pass deletes what the node no longer
//! holds: its current object, objects it is writing, and objects a send
//! named within one install timeout.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::cold::s3::S3ColdStore;
use crate::cold::{ColdError, ColdStore};
use crate::config::SnapshotStoreConfig;

const REF_MAGIC: &[u8; 4] = b"UREF";

/// A snapshot object: its key, length and BLAKE3 digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub key: String,
    pub len: u64,
    pub digest: [u8; 32],
}

/// What a group's snapshot file holds and a snapshot transfer carries:
/// the encoded snapshot itself, or a reference to its object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    Inline(Bytes),
    Object(ObjectRef),
}

impl Stored {
    /// The file's and a transfer's bytes; an inline body is shared, not copied.
    pub fn encode(&self) -> Bytes {
        match self {
            Stored::Inline(body) => body.clone(),
            Stored::Object(r) => {
                let mut out = Vec::with_capacity(4 + 8 + 32 + r.key.len());
                out.extend_from_slice(REF_MAGIC);
                out.extend_from_slice(&r.len.to_le_bytes());
                out.extend_from_slice(&r.digest);
                out.extend_from_slice(r.key.as_bytes());
                Bytes::from(out)
            }
        }
    }

    /// The same bytes as an owned vector (openraft's snapshot data): no
    /// copy when nothing else shares an inline body.
    pub fn into_raw(self) -> Vec<u8> {
        match self {
            Stored::Inline(body) => Vec::from(body),
            Stored::Object(_) => Vec::from(self.encode()),
        }
    }

    /// Encoded snapshots begin with their codec version, never with the magic.
    pub fn decode(raw: Vec<u8>) -> Result<Stored, SnapshotStoreError> {
        match ObjectRef::parse(&raw) {
            None => Ok(Stored::Inline(Bytes::from(raw))),
            Some(r) => r.map(Stored::Object),
        }
    }
}

impl ObjectRef {
    /// The reference `raw` holds; `None` when `raw` is an inline snapshot.
    pub fn parse(raw: &[u8]) -> Option<Result<ObjectRef, SnapshotStoreError>> {
        let rest = raw.strip_prefix(REF_MAGIC)?;
        let damaged = || SnapshotStoreError::Damaged("a snapshot reference is truncated".into());
        let parsed = (|| {
            let (len, rest) = rest.split_first_chunk::<8>()?;
            let (digest, key) = rest.split_first_chunk::<32>()?;
            let key = std::str::from_utf8(key).ok()?.to_string();
            Some(ObjectRef { key, len: u64::from_le_bytes(*len), digest: *digest })
        })();
        Some(parsed.ok_or_else(damaged))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotStoreError {
    #[error("the snapshot store failed: {0}")]
    Store(#[from] ColdError),
    #[error("snapshot object damaged: {0}")]
    Damaged(String),
    /// A node restores only objects of its own directory (spec/35).
    #[error("ForeignKey: the snapshot names {key}, outside this node's directory {dir}")]
    ForeignKey { key: String, dir: String },
}

/// What one group's snapshots still need of the node's directory.
#[derive(Default)]
struct Holds {
    current: Option<String>,
    writing: HashSet<String>,
    sent: HashMap<String, Instant>,
    /// A pass is due: something was replaced, a write failed, or the node restarted.
    owed: bool,
    /// The body of the last copy, so the install that follows need not fetch it again.
    copied: Option<(String, Bytes)>,
}

#[derive(Default)]
pub struct SnapshotStoreStats {
    pub uploads: AtomicU64,
    pub upload_failures: AtomicU64,
    pub copies: AtomicU64,
    pub gc_deleted: AtomicU64,
    pub gc_failed_passes: AtomicU64,
}

pub struct SnapshotStore {
    store: Arc<dyn ColdStore>,
    /// `{prefix}/node-{id}/`.
    dir: String,
    install_timeout: Duration,
    groups: Vec<Mutex<Holds>>,
    pub stats: SnapshotStoreStats,
}

impl SnapshotStore {
    pub async fn connect(
        config: &SnapshotStoreConfig,
        node_id: u64,
        groups: u32,
        install_timeout: Duration,
        io: Option<Arc<crate::cold::io::ColdIo>>,
    ) -> anyhow::Result<SnapshotStore> {
        let mut store: Arc<dyn ColdStore> = Arc::new(S3ColdStore::connect(&config.s3).await?);
        // Uploads of whole group states (their signing, hashing and socket
        // copies) and the downloads of installs stay off the Raft threads.
        if let Some(io) = io {
            store = Arc::new(crate::cold::io::OnColdIo::new(store, io));
        }
        Ok(SnapshotStore::new(store, &config.prefix, node_id, groups, install_timeout))
    }

    pub fn new(
        store: Arc<dyn ColdStore>,
        prefix: &str,
        node_id: u64,
        groups: u32,
        install_timeout: Duration,
    ) -> SnapshotStore {
        // Every group owes a pass at start: a write before a crash may have landed.
        let groups = (0..groups).map(|_| Mutex::new(Holds { owed: true, ..Holds::default() })).collect();
        let dir = format!("{}/node-{node_id}/", prefix.trim_matches('/'));
        SnapshotStore { store, dir, install_timeout, groups, stats: SnapshotStoreStats::default() }
    }

    fn holds(&self, group: u32) -> Option<MutexGuard<'_, Holds>> {
        self.groups.get(group as usize).map(|h| h.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn group_dir(&self, group: u32) -> String {
        format!("{}group-{group}/", self.dir)
    }

    /// The health gate's probe: a HEAD the store answers (a missing object
    /// is an answer) or fails.
    pub async fn probe(&self) -> Result<(), SnapshotStoreError> {
        match self.store.size(&format!("{}health-probe", self.dir)).await {
            Ok(_) | Err(crate::cold::ColdError::Missing(_)) => Ok(()),
            Err(e) => Err(SnapshotStoreError::from(e)),
        }
    }

    pub fn owns(&self, group: u32, key: &str) -> bool {
        key.starts_with(&self.group_dir(group))
    }

    /// Writes `body` as a new object of `group` and checks it with a HEAD.
    pub async fn write(&self, group: u32, index: u64, body: Bytes) -> Result<ObjectRef, SnapshotStoreError> {
        let key = format!("{}{index:020}-{:016x}.snap", self.group_dir(group), fastrand::u64(..));
        if let Some(mut h) = self.holds(group) {
            h.writing.insert(key.clone());
        }
        let written = async {
            self.store.put(&key, body.clone()).await?;
            let stored = self.store.size(&key).await?;
            if stored != body.len() as u64 {
                return Err(SnapshotStoreError::Damaged(format!("{key} holds {stored} bytes, not {}", body.len())));
            }
            Ok(())
        }
        .await;
        if let Some(mut h) = self.holds(group) {
            h.writing.remove(&key);
            // A failed write may still land: a later pass removes it.
            h.owed |= written.is_err();
        }
        match written {
            Ok(()) => {
                self.stats.uploads.fetch_add(1, Relaxed);
                Ok(ObjectRef { key, len: body.len() as u64, digest: *blake3::hash(&body).as_bytes() })
            }
            Err(e) => {
                self.stats.upload_failures.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    /// The object's bytes, checked against its length and digest.
    pub async fn read(&self, group: u32, r: &ObjectRef) -> Result<Bytes, SnapshotStoreError> {
        if let Some(body) =
            self.holds(group).and_then(|h| h.copied.as_ref().filter(|(k, _)| *k == r.key).map(|(_, b)| b.clone()))
        {
            return Ok(body);
        }
        let body = self.store.get(&r.key).await?;
        if body.len() as u64 != r.len || *blake3::hash(&body).as_bytes() != r.digest {
            return Err(SnapshotStoreError::Damaged(format!("{} does not match its reference", r.key)));
        }
        Ok(body)
    }

    /// A follower's copy of a peer's object into its own directory (a
    /// reference of its own is returned as it is).
    pub async fn copy(&self, group: u32, index: u64, r: ObjectRef) -> Result<ObjectRef, SnapshotStoreError> {
        if self.owns(group, &r.key) {
            return Ok(r);
        }
        let body = self.read(group, &r).await?;
        let copy = self.write(group, index, body.clone()).await?;
        self.stats.copies.fetch_add(1, Relaxed);
        if let Some(mut h) = self.holds(group) {
            h.copied = Some((copy.key.clone(), body));
            // Held until it is installed (or a pass after the install timeout).
            h.sent.insert(copy.key.clone(), Instant::now());
        }
        Ok(copy)
    }

    /// `key` is now the group's snapshot object (`None`: an inline one);
    /// the object it replaced goes at the next pass.
    pub fn adopt(&self, group: u32, key: Option<&str>) {
        if let Some(mut h) = self.holds(group) {
            h.current = key.map(str::to_string);
            h.copied = None;
            h.owed = true;
        }
    }

    /// A send of the group's snapshot names `key`: kept for one install timeout.
    pub fn sending(&self, group: u32, key: &str) {
        if let Some(mut h) = self.holds(group) {
            h.sent.insert(key.to_string(), Instant::now());
        }
    }

    pub fn owes(&self, group: u32) -> bool {
        self.holds(group).is_some_and(|h| h.owed)
    }

    /// Lists the group's directory and deletes every object no longer held.
    pub async fn gc(&self, group: u32) {
        let listed = match self.store.list(&self.group_dir(group)).await {
            Ok(keys) => keys,
            Err(e) => {
                self.stats.gc_failed_passes.fetch_add(1, Relaxed);
                tracing::warn!(group, error = %e, "snapshot GC could not list its directory");
                return;
            }
        };
        let (doomed, pinned) = {
            let Some(mut h) = self.holds(group) else { return };
            let timeout = self.install_timeout;
            h.sent.retain(|_, at| at.elapsed() < timeout);
            let held = |k: &String| h.current.as_ref() == Some(k) || h.writing.contains(k) || h.sent.contains_key(k);
            let doomed: Vec<String> = listed.into_iter().filter(|k| !held(k)).collect();
            (doomed, !h.sent.is_empty() || !h.writing.is_empty())
        };
        let mut failed = false;
        for key in doomed {
            match self.store.delete(&key).await {
                Ok(()) => {
                    self.stats.gc_deleted.fetch_add(1, Relaxed);
                }
                Err(e) => {
                    failed = true;
                    tracing::warn!(group, %key, error = %e, "snapshot GC could not delete an object");
                }
            }
        }
        if failed {
            self.stats.gc_failed_passes.fetch_add(1, Relaxed);
        }
        if let Some(mut h) = self.holds(group) {
            // Pinned objects need another pass once their sends time out.
            h.owed = failed || pinned;
        }
    }

    pub fn metrics(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        let s = &self.stats;
        m.insert("snapshot_store_uploads".into(), s.uploads.load(Relaxed).into());
        m.insert("snapshot_store_upload_failures".into(), s.upload_failures.load(Relaxed).into());
        m.insert("snapshot_store_copies".into(), s.copies.load(Relaxed).into());
        m.insert("snapshot_gc_deleted_objects".into(), s.gc_deleted.load(Relaxed).into());
        m.insert("snapshot_gc_failed_passes".into(), s.gc_failed_passes.load(Relaxed).into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cold::MemoryColdStore;

    fn store(node: u64, memory: &Arc<MemoryColdStore>) -> SnapshotStore {
        let shared: Arc<dyn ColdStore> = memory.clone();
        SnapshotStore::new(shared, "/it/snapshots/", node, 2, Duration::from_secs(60))
    }

    #[test]
    fn references_round_trip_and_inline_bodies_stay_inline() {
        let r = ObjectRef { key: "it/snapshots/node-1/group-0/a.snap".into(), len: 9, digest: [7; 32] };
        let back = Stored::decode(Stored::Object(r.clone()).into_raw()).expect("decodes");
        assert_eq!(back, Stored::Object(r));
        assert_eq!(Stored::decode(vec![1, 2, 3]).expect("inline"), Stored::Inline(Bytes::from_static(&[1, 2, 3])));
        assert!(Stored::decode(b"UREF\x01".to_vec()).is_err(), "a truncated reference is damaged");
    }

    #[tokio::test]
    async fn a_follower_copies_into_its_own_directory_and_gc_keeps_what_is_held() {
        let memory = Arc::new(MemoryColdStore::default());
        let (leader, follower) = (store(1, &memory), store(2, &memory));
        let first = leader.write(0, 10, Bytes::from_static(b"snapshot-10")).await.expect("write");
        leader.adopt(0, Some(&first.key));
        let second = leader.write(0, 20, Bytes::from_static(b"snapshot-20")).await.expect("write");
        leader.adopt(0, Some(&second.key));
        leader.sending(0, &second.key);
        leader.gc(0).await;
        assert_eq!(memory.list("it/snapshots/node-1/").await.expect("list"), vec![second.key.clone()]);
        assert!(leader.owes(0), "a pinned send keeps a pass owed");

        let copy = follower.copy(0, 20, second.clone()).await.expect("copy");
        assert!(copy.key.starts_with("it/snapshots/node-2/group-0/00000000000000000020-"), "{}", copy.key);
        assert_eq!(follower.read(0, &copy).await.expect("read"), Bytes::from_static(b"snapshot-20"));
        follower.adopt(0, Some(&copy.key));
        follower.gc(0).await;
        assert_eq!(memory.list("it/snapshots/node-2/").await.expect("list"), vec![copy.key.clone()]);
        // The leader's GC never touches the follower's directory.
        leader.gc(0).await;
        assert_eq!(memory.list("it/snapshots/node-2/").await.expect("list").len(), 1);

        let bad = ObjectRef { digest: [0; 32], ..second };
        assert!(matches!(follower.copy(1, 20, bad).await, Err(SnapshotStoreError::Damaged(_))));
    }
}
