//! openraft's storage conformance suite (`openraft::testing::Suite`) over a
//! group's log store and state machine, built as the node builds them
//! (`boot::open_wal`, `boot::snapshot_dir`, `boot::open_group`) on a fresh
//! WAL in a temporary directory per store.

use std::path::Path;

use openraft::testing::log::{StoreBuilder, Suite};
use openraft::{ErrorSubject, ErrorVerb};
use tempfile::TempDir;

use super::boot::{generate_cluster_id, open_group, open_wal, snapshot_dir};
use super::log_store::GroupLog;
use super::state_machine::GroupMachine;
use super::types::{Entry, LogId, TypeConfig};

type StorageError = openraft::StorageError<TypeConfig>;
use crate::config::{FsyncSetting, WalConfig};

/// Builds one group's store on a fresh WAL; the guard is the WAL's
/// directory, removed once the suite case drops it.
struct Builder {
    /// The log store's entry cache, in bytes.
    cache_budget: usize,
    segment_size: u64,
}

impl Builder {
    /// The `[raft.wal]` section of a node with this cache and these segments.
    fn wal_config(&self, dir: &Path) -> WalConfig {
        WalConfig {
            path: Some(dir.to_path_buf()),
            fsync: FsyncSetting::Never,
            segment_size: self.segment_size,
            cache_size: self.cache_budget as u64,
            min_available_size: 0,
            resume_available_size: 0,
        }
    }
}

fn setup_err(e: &anyhow::Error) -> StorageError {
    StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Read, std::io::Error::other(format!("{e:#}")))
}

impl StoreBuilder<TypeConfig, GroupLog, GroupMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, GroupLog, GroupMachine), StorageError> {
        let dir = tempfile::Builder::new()
            .prefix("ursula-suite-")
            .tempdir()
            .map_err(|e| setup_err(&anyhow::Error::new(e)))?;
        let (journal, recovered) =
            open_wal(dir.path(), &self.wal_config(dir.path()), false).map_err(|e| setup_err(&e))?;
        let snapshots = snapshot_dir(dir.path()).map_err(|e| setup_err(&e))?;
        let (log, machine) =
            open_group(0, &journal, &recovered, self.cache_budget, &snapshots, &generate_cluster_id(), None)
                .await
                .map_err(|e| setup_err(&e))?;
        Ok((dir, log, machine))
    }
}

async fn run(builder: Builder) {
    Suite::<TypeConfig, GroupLog, GroupMachine, Builder, TempDir>::test_all(builder).await.expect("the storage suite");
}

/// A log need not begin right after its purge point (openraft's suite
/// appends a first entry at index 1 or 2 to an empty log); after a reopen
/// it still begins where the WAL's entries do.
#[tokio::test]
async fn a_log_beginning_past_its_purge_point_recovers() {
    use openraft::RaftLogReader;
    use openraft::entry::RaftEntry;
    use openraft::storage::RaftLogStorage;
    use openraft::vote::RaftLeaderId;
    use openraft::vote::leader_id_adv::CommittedLeaderId;

    let builder = Builder { cache_budget: 0, segment_size: ursula_wal::MIN_SEGMENT_SIZE };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = builder.wal_config(dir.path());
    let log_id = |index| LogId { leader_id: CommittedLeaderId::new(1, 0), index };
    let frames =
        (1..=3).map(|i| (i, super::codec::encode_entry(&Entry::new_blank(log_id(i))).expect("an entry"))).collect();
    let (journal, _) = open_wal(dir.path(), &config, false).expect("a fresh WAL");
    let (tx, rx) = tokio::sync::oneshot::channel();
    journal.append(0, frames, true, Box::new(move |r| drop(tx.send(r))));
    rx.await.expect("the writer").expect("the append");
    journal.close().expect("closing the WAL");

    let (journal, recovered) = open_wal(dir.path(), &config, false).expect("the reopened WAL");
    let snapshots = snapshot_dir(dir.path()).expect("the snapshot directory");
    let (mut log, _machine) = open_group(0, &journal, &recovered, 0, &snapshots, &generate_cluster_id(), None)
        .await
        .expect("the recovered group");
    let read: Vec<u64> = log.try_get_log_entries(0..10).await.expect("a read").iter().map(|e| e.log_id.index).collect();
    assert_eq!(read, [1, 2, 3]);
    let state = log.get_log_state().await.expect("the log state");
    assert_eq!((state.last_purged_log_id, state.last_log_id), (None, Some(log_id(3))));
    log.truncate_after(None).await.expect("truncating the whole log");
    assert_eq!(log.get_log_state().await.expect("the log state").last_log_id, None);
    assert!(log.try_get_log_entries(0..10).await.expect("a read").is_empty());
}

/// The node's defaults: 64 MiB segments, a 256 MiB cache over 16 groups, so
/// every entry the suite writes stays cached.
#[tokio::test]
async fn suite_with_the_default_cache() {
    run(Builder { cache_budget: 16 << 20, segment_size: 64 << 20 }).await;
}

/// No cache to speak of and the smallest segments: entries are read back
/// from disk once written, and segments rotate and are reclaimed.
#[tokio::test]
async fn suite_reading_from_disk() {
    run(Builder { cache_budget: 0, segment_size: ursula_wal::MIN_SEGMENT_SIZE }).await;
}
