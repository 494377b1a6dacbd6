//! Format epoch 5 (spec/35 "Upgrading", spec/38 "Startup failures"): the
//! WAL directory and the object-storage namespace carry a marker naming the
//! epoch of the release that wrote them. A node refuses data of another
//! epoch, or data without a marker (an older release's, or another
//! application's), before it writes anything, also when the object store
//! does not answer. It marks a WAL directory without journal bytes at once
//! (nothing there to protect) and the object namespace once the engine
//! started, before it serves.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::cold::s3::S3ColdStore;
use crate::cold::{ColdBackend, ColdConfig, ColdError, ColdStore};

/// The epoch this release reads and writes.
pub const FORMAT_EPOCH: u32 = 5;
/// `{raft.wal.path}/raft-log/FORMAT_EPOCH`.
pub const WAL_MARKER: &str = "FORMAT_EPOCH";
/// `URSULA_FORMAT_EPOCH` at `storage.cold.root`.
pub const OBJECT_MARKER: &str = "URSULA_FORMAT_EPOCH";

#[derive(Debug, thiserror::Error)]
pub enum EpochError {
    #[error(
        "raft WAL directory {0} holds data without a format marker: this release reads format epoch {FORMAT_EPOCH} only; \
         start on an empty raft.wal.path, or run the release that wrote it"
    )]
    WalUnmarked(PathBuf),
    #[error(
        "raft WAL directory {dir} is format epoch {found}: this release reads format epoch {FORMAT_EPOCH} only; \
         run the release that wrote it, or start on an empty directory"
    )]
    WalEpoch { dir: PathBuf, found: String },
    #[error(
        "object storage {0} is not empty and has no {OBJECT_MARKER} marker: point storage.cold.root at an empty \
         prefix used only by this cluster"
    )]
    ObjectsUnmarked(String),
    #[error(
        "object storage {location} is format epoch {found}: this release reads format epoch {FORMAT_EPOCH} only; \
         use a new prefix"
    )]
    ObjectsEpoch { location: String, found: String },
    #[error("the format marker {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("checking the WAL directory for a journal: {0}")]
    Wal(ursula_wal::WalError),
    #[error(
        "object storage {location} did not answer the format check ({source}): a node checks it before it writes anything; start again once the store answers"
    )]
    Store { location: String, source: ColdError },
}

/// What a marker's text names: the epoch, or the text itself when it is no
/// number (shown as found).
fn epoch_of(text: &str) -> Result<(), String> {
    match text.trim().parse::<u32>() {
        Ok(FORMAT_EPOCH) => Ok(()),
        _ => Err(text.trim().chars().take(32).collect()),
    }
}

fn marker_text() -> String {
    format!("{FORMAT_EPOCH}\n")
}

/// Checks the WAL directory (`raft-log`); true when its marker must still be
/// written. A directory holds data when a journal segment holds bytes.
pub fn check_wal_dir(log_dir: &Path) -> Result<bool, EpochError> {
    let path = log_dir.join(WAL_MARKER);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            epoch_of(&text).map(|()| false).map_err(|found| EpochError::WalEpoch { dir: log_dir.into(), found })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match ursula_wal::journal_bytes(log_dir) {
            Ok(0) => Ok(true),
            Ok(_) => Err(EpochError::WalUnmarked(log_dir.into())),
            Err(e) => Err(EpochError::Wal(e)),
        },
        Err(source) => Err(EpochError::Io { path, source }),
    }
}

/// Writes the WAL directory's marker durably.
pub fn mark_wal_dir(log_dir: &Path) -> Result<(), EpochError> {
    std::fs::create_dir_all(log_dir)
        .and_then(|()| ursula_wal::write_file_durably(log_dir, WAL_MARKER, marker_text().as_bytes()))
        .map_err(|source| EpochError::Io { path: log_dir.join(WAL_MARKER), source })
}

/// The namespace `root` of an object store, where its marker lives.
pub struct ObjectNamespace {
    pub store: Arc<dyn ColdStore>,
    /// `storage.cold.root`, without surrounding slashes.
    pub root: String,
    /// How an operator names it, `s3://bucket/root`.
    pub location: String,
}

impl ObjectNamespace {
    /// The namespace of the cold tier when it lives on S3 (snapshots on S3
    /// live under its root too); `None` for a memory store.
    pub async fn of(cold: &ColdConfig) -> anyhow::Result<Option<ObjectNamespace>> {
        let ColdBackend::S3(s3) = &cold.backend else { return Ok(None) };
        let root = cold.root.trim_matches('/').to_string();
        let location =
            if root.is_empty() { format!("s3://{}", s3.bucket) } else { format!("s3://{}/{root}", s3.bucket) };
        let store: Arc<dyn ColdStore> = Arc::new(S3ColdStore::connect(s3).await?);
        Ok(Some(ObjectNamespace { store, root, location }))
    }

    fn marker_key(&self) -> String {
        if self.root.is_empty() { OBJECT_MARKER.to_string() } else { format!("{}/{OBJECT_MARKER}", self.root) }
    }

    fn prefix(&self) -> String {
        if self.root.is_empty() { String::new() } else { format!("{}/", self.root) }
    }

    fn store_error(&self, source: ColdError) -> EpochError {
        EpochError::Store { location: self.location.clone(), source }
    }

    /// Checks the namespace; true when its marker must still be written.
    /// At startup it runs before the node writes anything, and `Err`
    /// refuses the start, also when the store does not answer (a node that
    /// could not check would write, and its snapshot GC delete, in a
    /// namespace it does not know).
    pub async fn check(&self) -> Result<bool, EpochError> {
        match self.store.get(&self.marker_key()).await {
            Ok(text) => self.epoch_found(&text),
            Err(ColdError::Missing(_)) => match self.store.any_under(&self.prefix()).await {
                // A voter starting beside this one may have marked it since.
                Ok(true) => match self.store.get(&self.marker_key()).await {
                    Ok(text) => self.epoch_found(&text),
                    Err(ColdError::Missing(_)) => Err(EpochError::ObjectsUnmarked(self.location.clone())),
                    Err(e) => Err(self.store_error(e)),
                },
                Ok(false) => Ok(true),
                Err(e) => Err(self.store_error(e)),
            },
            Err(e) => Err(self.store_error(e)),
        }
    }

    fn epoch_found(&self, text: &[u8]) -> Result<bool, EpochError> {
        epoch_of(&String::from_utf8_lossy(text))
            .map(|()| false)
            .map_err(|found| EpochError::ObjectsEpoch { location: self.location.clone(), found })
    }

    pub async fn mark(&self) -> Result<(), EpochError> {
        let key = self.marker_key();
        self.store.put(&key, Bytes::from(marker_text())).await.map_err(|e| self.store_error(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cold::MemoryColdStore;

    #[test]
    fn a_wal_directory_is_checked_before_its_marker_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("raft-log");
        // Missing, then empty, then with an empty segment: nothing to refuse.
        assert!(check_wal_dir(&log).expect("missing"));
        std::fs::create_dir_all(&log).expect("dir");
        std::fs::write(log.join("segment-00000000000000000001.wal"), b"").expect("segment");
        std::fs::write(log.join("wal.lock"), b"").expect("lock");
        assert!(check_wal_dir(&log).expect("empty"));
        // Journal bytes without a marker: an older release's directory.
        std::fs::write(log.join("segment-00000000000000000001.wal"), b"data").expect("segment");
        let refused = check_wal_dir(&log).expect_err("unmarked");
        assert!(matches!(refused, EpochError::WalUnmarked(_)), "{refused}");
        assert!(refused.to_string().contains("holds data without a format marker"), "{refused}");
        mark_wal_dir(&log).expect("marks");
        assert_eq!(std::fs::read_to_string(log.join(WAL_MARKER)).expect("marker"), "5\n");
        assert!(!check_wal_dir(&log).expect("marked"));
        for (text, found) in [("4\n", "4"), ("3", "3"), ("five", "five")] {
            std::fs::write(log.join(WAL_MARKER), text).expect("marker");
            let refused = check_wal_dir(&log).expect_err("another epoch");
            assert!(refused.to_string().contains(&format!("is format epoch {found}:")), "{refused}");
        }
    }

    #[tokio::test]
    async fn an_object_namespace_is_checked_before_its_marker_is_written() {
        let memory = Arc::new(MemoryColdStore::default());
        let store = memory.clone();
        let ns = ObjectNamespace { store: memory.clone(), root: "prod".into(), location: "s3://b/prod".into() };
        assert!(ns.check().await.expect("empty"));
        // Another prefix's objects do not count.
        store.put("production/x", Bytes::from_static(b"x")).await.expect("put");
        store.put("URSULA_FORMAT_EPOCH", Bytes::from_static(b"4")).await.expect("put");
        assert!(ns.check().await.expect("still empty"));
        ns.mark().await.expect("marks");
        assert_eq!(store.get("prod/URSULA_FORMAT_EPOCH").await.expect("marker"), Bytes::from_static(b"5\n"));
        store.put("prod/buckets/a/cold/g0/1", Bytes::from_static(b"x")).await.expect("put");
        assert!(!ns.check().await.expect("marked"));
        store.put("prod/URSULA_FORMAT_EPOCH", Bytes::from_static(b"4\n")).await.expect("put");
        let refused = ns.check().await.expect_err("epoch 4");
        assert!(refused.to_string().starts_with("object storage s3://b/prod is format epoch 4: "), "{refused}");
        store.delete("prod/URSULA_FORMAT_EPOCH").await.expect("delete");
        let refused = ns.check().await.expect_err("unmarked");
        assert!(
            refused
                .to_string()
                .starts_with("object storage s3://b/prod is not empty and has no URSULA_FORMAT_EPOCH marker")
        );
        // At the bucket's root, the marker is the bucket's first key.
        let root = ObjectNamespace { store: memory, root: String::new(), location: "s3://b".into() };
        assert!(matches!(root.check().await, Err(EpochError::ObjectsEpoch { .. })), "the 4 written above");
    }
}
