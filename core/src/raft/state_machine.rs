//! A group's state machine: the pure stream store behind openraft's
//! `RaftStateMachine`. The applied state is shared with the engine, which
//! queries it and waits on it directly; snapshots are the whole store.

use std::io::{self, Cursor};

use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{AsyncRuntime, EntryPayload, RaftSnapshotBuilder};
use ursula_stream::{ApplyCtx, Outcome, StreamStore};

use super::codec;
use super::runtime::SeedableRuntime;
use super::snapshot_file;
use super::snapshot_store::{ObjectRef, SnapshotStore, SnapshotStoreError, Stored};
use super::types::{LogId, Snapshot, SnapshotData, SnapshotMeta, StoredMembership, TypeConfig};
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
    /// The meta of the snapshot the group's file holds: with S3 snapshots
    /// the file holds only a reference, so the meta is kept here.
    current: Mutex<Option<SnapshotMeta>>,
    /// Set when a committed command failed to apply: the group stops on
    /// this replica alone (spec/38, `APPLY_STOPPED`).
    pub apply_stopped: AtomicBool,
    /// A snapshot build of the group runs (the driver's build slots).
    pub building: AtomicBool,
    /// The oldest removal (a delete, a purge, an expiry) this replica
    /// applied that no snapshot of it covers yet (`raft.deleted_data_max_age`).
    removal: Mutex<Option<Removal>>,
}

/// A removal a snapshot still owes: its entry's index and when it applied.
#[derive(Debug, Clone, Copy)]
pub struct Removal {
    pub index: u64,
    pub at: std::time::Instant,
}

impl GroupShared {
    /// The oldest removal no snapshot covers yet.
    pub fn pending_removal(&self) -> Option<Removal> {
        *self.removal.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn removed_at(&self, index: u64) {
        let mut pending = self.removal.lock().unwrap_or_else(|p| p.into_inner());
        if pending.is_none() {
            *pending = Some(Removal { index, at: std::time::Instant::now() });
        }
    }

    /// A snapshot through `index` covers the removals up to it.
    fn covered_through(&self, index: u64) {
        let mut pending = self.removal.lock().unwrap_or_else(|p| p.into_inner());
        if pending.is_some_and(|r| r.index <= index) {
            *pending = None;
        }
    }
}

/// Whether an applied command removed a stream from the group's state.
fn removes(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Delete(Ok(_)) => true,
        Outcome::Sweep { removed, .. } | Outcome::PurgeBucket { removed } => *removed > 0,
        _ => false,
    }
}

/// Marks a group's build as running until dropped.
struct Building<'a>(&'a AtomicBool);

impl<'a> Building<'a> {
    fn start(flag: &'a AtomicBool) -> Building<'a> {
        flag.store(true, Ordering::Relaxed);
        Building(flag)
    }
}

impl Drop for Building<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
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

    fn current(&self) -> MutexGuard<'_, Option<SnapshotMeta>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Clone)]
pub struct GroupMachine {
    group: u32,
    shared: Arc<GroupShared>,
    snapshot_dir: PathBuf,
    /// `None`: snapshots inline.
    objects: Option<Arc<SnapshotStore>>,
}

/// Attempts to fetch a group's snapshot object at startup before the open fails.
const RESTORE_ATTEMPTS: u32 = 5;

/// Which way a state machine failure went, for its message.
#[derive(Clone, Copy)]
enum ErrorVerb {
    Read,
    Write,
}

fn sm_err(verb: ErrorVerb, e: &impl std::fmt::Display) -> io::Error {
    let doing = match verb {
        ErrorVerb::Read => "reading",
        ErrorVerb::Write => "writing",
    };
    io::Error::other(format!("{doing} the group's state: {e}"))
}

/// Runs `work` on a blocking thread, off the Raft runtime whose threads
/// every group of the node shares; its error as one of the group's state.
async fn off_runtime<T, E>(
    verb: ErrorVerb,
    work: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, io::Error>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    SeedableRuntime::spawn_blocking(work).await.map_err(|e| sm_err(verb, &e))?.map_err(|e| sm_err(verb, &e))
}

impl GroupMachine {
    /// Loads the group's snapshot (its file, and with S3 snapshots the
    /// object it names); else an empty store whose history id is derived
    /// from the cluster id, the same on every start.
    pub async fn open(
        group: u32,
        snapshot_dir: PathBuf,
        history_id: u64,
        objects: Option<Arc<SnapshotStore>>,
    ) -> Result<GroupMachine, io::Error> {
        let read = |e: &dyn std::error::Error| sm_err(ErrorVerb::Read, &std::io::Error::other(e.to_string()));
        let raw = snapshot_file::read(&snapshot_dir, group).map_err(|e| sm_err(ErrorVerb::Read, &e))?;
        let body = match raw.map(Stored::decode).transpose().map_err(|e| read(&e))? {
            None => None,
            Some(Stored::Inline(body)) => Some(body),
            Some(Stored::Object(r)) => {
                let Some(store) = &objects else {
                    return Err(read(&SnapshotStoreError::Damaged(format!(
                        "the snapshot names object {} but storage.snapshot is inline",
                        r.key
                    ))));
                };
                if !store.owns(group, &r.key) {
                    let dir = format!("group {group} of this node");
                    return Err(read(&SnapshotStoreError::ForeignKey { key: r.key, dir }));
                }
                let mut attempt = 0;
                let body = loop {
                    match store.read(group, &r).await {
                        Ok(body) => break body,
                        Err(e) if attempt + 1 >= RESTORE_ATTEMPTS => {
                            let e = SnapshotStoreError::Damaged(format!("StoreUnavailable: restoring {}: {e}", r.key));
                            return Err(read(&e));
                        }
                        Err(e) => {
                            tracing::warn!(group, key = %r.key, error = %e, "restoring the snapshot; retrying");
                            attempt += 1;
                            tokio::time::sleep(std::time::Duration::from_secs(1 << attempt)).await;
                        }
                    }
                };
                store.adopt(group, Some(&r.key));
                Some(body)
            }
        };
        let (store, applied, size, current) = match body {
            None => (StreamStore::new(history_id), Applied::default(), 0, None),
            Some(body) => {
                let snap = codec::decode_snapshot(&body).map_err(|e| sm_err(ErrorVerb::Read, &e))?;
                let applied = Applied { last: snap.last_log_id, membership: snap.membership };
                let meta = SnapshotMeta { last_log_id: applied.last, last_membership: applied.membership.clone() };
                (snap.store, applied, body.len() as u64, Some(meta))
            }
        };
        let index = applied.last.map_or(0, |l| l.index);
        let shared = Arc::new(GroupShared {
            state: Mutex::new(GroupState::new(store)),
            applied: Mutex::new(applied),
            applied_index: AtomicU64::new(index),
            snapshot_bytes: AtomicU64::new(size),
            snapshot_index: AtomicU64::new(index),
            current: Mutex::new(current),
            apply_stopped: AtomicBool::new(false),
            building: AtomicBool::new(false),
            removal: Mutex::new(None),
        });
        Ok(GroupMachine { group, shared, snapshot_dir, objects })
    }

    /// Where a snapshot body goes: an object of this node when the store
    /// takes it, else inline (a store that fails does not stop snapshots).
    async fn store_body(&self, index: u64, body: Bytes) -> Stored {
        if let Some(store) = &self.objects {
            match store.write(self.group, index, body.clone()).await {
                Ok(r) => return Stored::Object(r),
                Err(e) => tracing::warn!(group = self.group, error = %e, "snapshot upload failed; kept inline"),
            }
        }
        Stored::Inline(body)
    }

    /// Writes the group's snapshot file, then drops what it replaced.
    async fn keep(&self, stored: &Stored, meta: &SnapshotMeta, size: u64) -> Result<(), io::Error> {
        let (dir, group, raw) = (self.snapshot_dir.clone(), self.group, stored.encode());
        off_runtime(ErrorVerb::Write, move || snapshot_file::write(&dir, group, &raw)).await?;
        let object = match stored {
            Stored::Object(r) => Some(r.key.as_str()),
            Stored::Inline(_) => None,
        };
        self.kept(object, meta, size);
        Ok(())
    }

    /// Makes the snapshot just written the group's current one.
    fn kept(&self, object: Option<&str>, meta: &SnapshotMeta, size: u64) {
        *self.shared.current() = Some(meta.clone());
        self.shared.covered_through(meta.last_log_id.map_or(0, |l| l.index));
        self.shared.snapshot_bytes.store(size, Ordering::Relaxed);
        self.shared.snapshot_index.store(meta.last_log_id.map_or(0, |l| l.index), Ordering::Relaxed);
        if let Some(store) = self.objects.clone() {
            let group = self.group;
            store.adopt(group, object);
            tokio::spawn(async move { store.gc(group).await });
        }
    }

    pub fn shared(&self) -> Arc<GroupShared> {
        self.shared.clone()
    }

    fn meta(applied: &Applied) -> SnapshotMeta {
        SnapshotMeta { last_log_id: applied.last, last_membership: applied.membership.clone() }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for GroupMachine {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let shared = self.shared.clone();
        let _building = Building::start(&shared.building);
        // The store is copied under the lock, so it and its log position
        // agree (its bytes are shared chunks: the copy is the metadata),
        // then encoded off the Raft runtime, whose threads every group of
        // the node shares: a group holding a gigabyte took seconds to
        // encode, and every group's heartbeats waited (elections).
        let (meta, store) = {
            let state = group_state::lock(&self.shared.state);
            (Self::meta(&self.shared.applied()), state.store.clone())
        };
        let (last, membership) = (meta.last_log_id, meta.last_membership.clone());
        if self.objects.is_none() {
            // Streamed into the group's file, never whole in memory. openraft
            // takes only the meta of a built snapshot (its `sm::worker`); a
            // send reads the file (`get_current_snapshot`).
            let (dir, group) = (self.snapshot_dir.clone(), self.group);
            let size = off_runtime(ErrorVerb::Write, move || {
                snapshot_file::write_with(&dir, group, |out| {
                    let id = codec::snapshot_id(last.as_ref());
                    codec::write_snapshot(out, last.as_ref(), &membership, &id, &store).map_err(io::Error::other)
                })
            })
            .await?;
            self.kept(None, &meta, size);
            return Ok(Snapshot { meta, snapshot: Cursor::new(Vec::new()) });
        }
        let body = off_runtime(ErrorVerb::Write, move || {
            codec::encode_snapshot(last.as_ref(), &membership, &codec::snapshot_id(last.as_ref()), &store)
        })
        .await?;
        let size = body.len() as u64;
        let stored = self.store_body(meta.last_log_id.map_or(0, |l| l.index), body).await;
        self.keep(&stored, &meta, size).await?;
        Ok(Snapshot { meta, snapshot: Cursor::new(stored.into_raw()) })
    }
}

/// One committed command applied to the group's state.
fn apply_command(state: &mut GroupState, command: ursula_stream::Command, ctx: ApplyCtx) -> Outcome {
    #[cfg(test)]
    super::apply_fault::check(&command);
    state.apply(command, ctx)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_owned(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".to_owned(),
    }
}

impl RaftStateMachine<TypeConfig> for GroupMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = GroupMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let applied = self.shared.applied().clone();
        Ok((applied.last, applied.membership))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm:
            futures_util::Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + openraft::OptionalSend,
    {
        // What openraft has ready comes at once: applied under one lock,
        // answered after it is released.
        let mut answers = Vec::new();
        while let Some(first) = entries.next().await {
            let mut batch = vec![first?];
            while let Some(Some(more)) = entries.next().now_or_never() {
                batch.push(more?);
            }
            let mut failed = None;
            {
                let mut state = group_state::lock(&self.shared.state);
                let mut applied = self.shared.applied();
                for (entry, responder) in batch {
                    // Blank and membership entries answer no client; `Renew` stands in.
                    let outcome = match entry.payload {
                        EntryPayload::Normal(p) => {
                            let ctx = ApplyCtx { now_ms: p.now_ms, log_index: entry.log_id.index };
                            match std::panic::catch_unwind(AssertUnwindSafe(|| {
                                apply_command(&mut state, p.command, ctx)
                            })) {
                                Ok(outcome) => {
                                    if removes(&outcome) {
                                        self.shared.removed_at(entry.log_id.index);
                                    }
                                    outcome
                                }
                                Err(panic) => {
                                    failed = Some((entry.log_id.index, panic_message(panic.as_ref())));
                                    break;
                                }
                            }
                        }
                        EntryPayload::Blank => Outcome::Renew,
                        EntryPayload::Membership(m) => {
                            applied.membership = StoredMembership::new(Some(entry.log_id), m);
                            Outcome::Renew
                        }
                    };
                    applied.last = Some(entry.log_id);
                    if let Some(r) = responder {
                        answers.push((r, outcome));
                    }
                }
                self.shared.applied_index.store(applied.last.map_or(0, |l| l.index), Ordering::Relaxed);
            }
            for (responder, outcome) in answers.drain(..) {
                responder.send(outcome);
            }
            if let Some((index, why)) = failed {
                // What this replica holds past the entry is unknown: the
                // group stops here, and never skips the entry (spec/38).
                self.shared.apply_stopped.store(true, Ordering::SeqCst);
                tracing::error!(
                    group = self.group,
                    index,
                    why,
                    "a committed command failed to apply: the group stops on this replica (APPLY_STOPPED)"
                );
                return Err(io::Error::other(format!(
                    "log entry {index} of group {} failed to apply: {why}",
                    self.group
                )));
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> GroupMachine {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotData) -> Result<(), io::Error> {
        let io = |e: SnapshotStoreError| sm_err(ErrorVerb::Read, &std::io::Error::other(e.to_string()));
        let index = meta.last_log_id.map_or(0, |l| l.index);
        // The cluster plane copied a peer's object already (`grpc`); this
        // copy is for a reference that reached the machine another way.
        let (stored, body) = match Stored::decode(snapshot.into_inner()).map_err(io)? {
            Stored::Inline(body) => (Stored::Inline(body.clone()), body),
            Stored::Object(r) => {
                let Some(store) = &self.objects else {
                    return Err(io(SnapshotStoreError::Damaged(format!("a reference to {} without a store", r.key))));
                };
                let own = store.copy(self.group, index, r).await.map_err(io)?;
                let body = store.read(self.group, &own).await.map_err(io)?;
                (Stored::Object(own), body)
            }
        };
        // Decoded off the Raft runtime, as a build is encoded.
        let size = body.len() as u64;
        let snap = off_runtime(ErrorVerb::Read, move || codec::decode_snapshot(&body)).await?;
        self.keep(&stored, meta, size).await?;
        let mut state = group_state::lock(&self.shared.state);
        let mut applied = self.shared.applied();
        state.store = snap.store;
        state.wake_all();
        applied.last = meta.last_log_id;
        applied.membership = meta.last_membership.clone();
        self.shared.applied_index.store(index, Ordering::Relaxed);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        let Some(meta) = self.shared.current().clone() else { return Ok(None) };
        let (dir, group) = (self.snapshot_dir.clone(), self.group);
        let raw = off_runtime(ErrorVerb::Read, move || snapshot_file::read(&dir, group)).await?;
        let Some(raw) = raw else { return Ok(None) };
        // A send names the object: it stays until the send can have ended.
        if let (Some(store), Some(Ok(r))) = (&self.objects, ObjectRef::parse(&raw)) {
            store.sending(group, &r.key);
        }
        Ok(Some(Snapshot { meta, snapshot: Cursor::new(raw) }))
    }
}
