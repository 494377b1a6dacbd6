//! A group's state machine: the pure stream store behind openraft's
//! `RaftStateMachine`. The applied state is shared with the engine, which
//! queries it and waits on it directly; snapshots are the whole store.

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{AnyError, EntryPayload, ErrorSubject, ErrorVerb, RaftSnapshotBuilder, StorageIOError};
use ursula_stream::{ApplyCtx, Outcome, StreamStore};

use super::codec;
use super::snapshot_file;
use super::types::{Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::engine::group_state::{self, GroupState};

/// What a group's readers and its state machine share.
pub struct GroupShared {
    pub state: Mutex<GroupState>,
    /// Guarded together with `state`: taken only while `state` is held.
    applied: Mutex<Applied>,
    pub applied_index: AtomicU64,
    /// Size of the group's last snapshot, for the snapshot driver.
    pub snapshot_bytes: AtomicU64,
    pub snapshot_index: AtomicU64,
}

#[derive(Clone, Default)]
struct Applied {
    last: Option<LogId>,
    membership: StoredMembership,
}

impl GroupShared {
    fn applied(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Clone)]
pub struct GroupMachine {
    group: u32,
    shared: Arc<GroupShared>,
    snapshot_dir: PathBuf,
}

fn sm_err(verb: ErrorVerb, e: &(impl std::error::Error + 'static)) -> StorageError {
    StorageIOError::new(ErrorSubject::StateMachine, verb, AnyError::new(e)).into()
}

impl GroupMachine {
    /// Loads the group's snapshot file, if any; else an empty store whose
    /// history id is derived from the cluster id, the same on every start.
    pub fn open(group: u32, snapshot_dir: PathBuf, history_id: u64) -> Result<GroupMachine, StorageError> {
        let (store, applied, size) =
            match snapshot_file::read(&snapshot_dir, group).map_err(|e| sm_err(ErrorVerb::Read, &e))? {
                None => (StreamStore::new(history_id), Applied::default(), 0),
                Some(body) => {
                    let snap = codec::decode_snapshot(&body).map_err(|e| sm_err(ErrorVerb::Read, &e))?;
                    (snap.store, Applied { last: snap.last_log_id, membership: snap.membership }, body.len() as u64)
                }
            };
        let index = applied.last.map_or(0, |l| l.index);
        let shared = Arc::new(GroupShared {
            state: Mutex::new(GroupState::new(store)),
            applied: Mutex::new(applied),
            applied_index: AtomicU64::new(index),
            snapshot_bytes: AtomicU64::new(size),
            snapshot_index: AtomicU64::new(index),
        });
        Ok(GroupMachine { group, shared, snapshot_dir })
    }

    pub fn shared(&self) -> Arc<GroupShared> {
        self.shared.clone()
    }

    fn meta(applied: &Applied) -> SnapshotMeta {
        let id = applied.last.map_or_else(|| "empty".to_string(), |l| format!("{}-{}", l.leader_id.term, l.index));
        SnapshotMeta { last_log_id: applied.last, last_membership: applied.membership.clone(), snapshot_id: id }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for GroupMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Encoded under the lock, so the store and its log position agree;
        // the group's writes wait for the encoding, not for the disk.
        let (meta, body) = {
            let state = group_state::lock(&self.shared.state);
            let applied = self.shared.applied().clone();
            let meta = Self::meta(&applied);
            let body =
                codec::encode_snapshot(applied.last.as_ref(), &applied.membership, &meta.snapshot_id, &state.store)
                    .map_err(|e| sm_err(ErrorVerb::Write, &e))?;
            (meta, body)
        };
        let (dir, group) = (self.snapshot_dir.clone(), self.group);
        let written = body.clone();
        tokio::task::spawn_blocking(move || snapshot_file::write(&dir, group, &written))
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, &std::io::Error::other(e.to_string())))?
            .map_err(|e| sm_err(ErrorVerb::Write, &e))?;
        self.shared.snapshot_bytes.store(body.len() as u64, Ordering::Relaxed);
        self.shared.snapshot_index.store(meta.last_log_id.map_or(0, |l| l.index), Ordering::Relaxed);
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(body.to_vec())) })
    }
}

impl RaftStateMachine<TypeConfig> for GroupMachine {
    type SnapshotBuilder = GroupMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = self.shared.applied().clone();
        Ok((applied.last, applied.membership))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut state = group_state::lock(&self.shared.state);
        let mut applied = self.shared.applied();
        let mut out = Vec::new();
        for entry in entries {
            applied.last = Some(entry.log_id);
            // Blank and membership entries answer no client; `Renew` stands in.
            out.push(match entry.payload {
                EntryPayload::Normal(p) => {
                    state.apply(p.command, ApplyCtx { now_ms: p.now_ms, log_index: entry.log_id.index })
                }
                EntryPayload::Blank => Outcome::Renew,
                EntryPayload::Membership(m) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), m);
                    Outcome::Renew
                }
            });
        }
        self.shared.applied_index.store(applied.last.map_or(0, |l| l.index), Ordering::Relaxed);
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> GroupMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let body = snapshot.into_inner();
        let snap = codec::decode_snapshot(&body).map_err(|e| sm_err(ErrorVerb::Read, &e))?;
        let (dir, group) = (self.snapshot_dir.clone(), self.group);
        let size = body.len() as u64;
        tokio::task::spawn_blocking(move || snapshot_file::write(&dir, group, &body))
            .await
            .map_err(|e| sm_err(ErrorVerb::Write, &std::io::Error::other(e.to_string())))?
            .map_err(|e| sm_err(ErrorVerb::Write, &e))?;
        let mut state = group_state::lock(&self.shared.state);
        let mut applied = self.shared.applied();
        state.store = snap.store;
        state.wake_all();
        applied.last = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        let index = meta.last_log_id.map_or(0, |l| l.index);
        self.shared.applied_index.store(index, Ordering::Relaxed);
        self.shared.snapshot_index.store(index, Ordering::Relaxed);
        self.shared.snapshot_bytes.store(size, Ordering::Relaxed);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let (dir, group) = (self.snapshot_dir.clone(), self.group);
        let body = tokio::task::spawn_blocking(move || snapshot_file::read(&dir, group))
            .await
            .map_err(|e| sm_err(ErrorVerb::Read, &std::io::Error::other(e.to_string())))?
            .map_err(|e| sm_err(ErrorVerb::Read, &e))?;
        let Some(body) = body else { return Ok(None) };
        let snap = codec::decode_snapshot(&body).map_err(|e| sm_err(ErrorVerb::Read, &e))?;
        let meta = SnapshotMeta {
            last_log_id: snap.last_log_id,
            last_membership: snap.membership,
            snapshot_id: snap.snapshot_id,
        };
        Ok(Some(Snapshot { meta, snapshot: Box::new(Cursor::new(body)) }))
    }
}
