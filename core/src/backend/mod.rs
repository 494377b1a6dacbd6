//! The in-process backend of a node: the HTTP layer's `Backend` over a
//! group engine. It routes each stream to its group, admits writes past
//! the cold tier's backpressure, and turns engine outcomes into the seam's
//! results.
//!
//! Module map:
//! - this file: `NodeBackend` and `Streams` (data and consistency).
//! - `parts`: `SnapshotParts`, the orchestration of uploads in parts.
//! - `ops`: `Operations`, metrics and readiness.
//! - `housekeeping`: the sweep of expired streams.

mod admission;
mod forks;
mod housekeeping;
mod ops;
mod parts;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ursula_http::{
    Backend, BackendError, LeaderHint, ReadBootstrap, ReadSnapshot, ReadStream, Streams, Unavailable, WaitOutcome,
    WaitStream, WriteRoute,
};
use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, Command, CreateOk, CreateStream, DeleteStream,
    Incarnation, Outcome, PublishSnapshot, ReadView, Rejection, RenewStream, SnapshotOk, SnapshotView, StreamInfo,
    StreamKey, StreamStore,
};

pub use housekeeping::{sweep_forever, sweep_interval};

use crate::cold::Cold;
use crate::engine::{EngineError, GroupEngine, Leadership, Waited};
use ursula_stream::routing::{GroupId, group_of};

pub struct NodeBackend<E> {
    engine: Arc<E>,
    /// The cold tier, when `storage.cold.backend` names one.
    cold: Option<Arc<Cold>>,
    /// Long-polls and SSE sessions waiting for news now (`live_readers`).
    live_readers: Arc<AtomicU64>,
    /// Appends and reads served, whichever plane they came by.
    served: Arc<Served>,
    admission: Arc<admission::Admission>,
    /// What the background removal of expired streams did.
    pub(crate) expiry: Arc<housekeeping::ExpiryStats>,
}

/// `appends_accepted` and `reads` of `/__ursula/metrics`.
#[derive(Default)]
pub(crate) struct Served {
    pub appends: AtomicU64,
    pub reads: AtomicU64,
}

impl<E> Clone for NodeBackend<E> {
    fn clone(&self) -> Self {
        NodeBackend {
            engine: self.engine.clone(),
            cold: self.cold.clone(),
            live_readers: self.live_readers.clone(),
            served: self.served.clone(),
            admission: self.admission.clone(),
            expiry: self.expiry.clone(),
        }
    }
}

/// Counts one waiting reader while it lives.
struct Waiting(Arc<AtomicU64>);

impl Waiting {
    fn new(count: &Arc<AtomicU64>) -> Waiting {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<E: GroupEngine> NodeBackend<E> {
    pub fn new(engine: Arc<E>, cold: Option<Arc<Cold>>, limits: &crate::config::Admission) -> NodeBackend<E> {
        let admission = admission::Admission::new(engine.group_count(), limits);
        let (live_readers, served, expiry) = (Arc::default(), Arc::default(), Arc::default());
        NodeBackend { engine, cold, live_readers, served, admission, expiry }
    }

    /// What the sweep of expired streams (`sweep_forever`) reports into.
    pub fn expiry_stats(&self) -> Arc<housekeeping::ExpiryStats> {
        self.expiry.clone()
    }

    /// Refuses a write before anything is proposed when its group's
    /// proposed bytes would pass their ceiling (`503
    /// RAFT_UNCOMMITTED_BACKPRESSURE`) or its hot ring is over its own
    /// (`503 COLD_BACKPRESSURE`); the guard counts the write's bytes as
    /// outstanding until it is dropped, after the proposal answered.
    fn admit_write(&self, group: GroupId, bytes: usize) -> Result<admission::Uncommitted, BackendError> {
        let outstanding = self.admission.propose(group, bytes as u64)?;
        let Some(cold) = &self.cold else { return Ok(outstanding) };
        if bytes > 0 && cold.backpressure(group.0) {
            return Err(BackendError::Unavailable { reason: Unavailable::ColdBackpressure, retry_after_secs: 1 });
        }
        cold.appended(group.0, bytes as u64);
        Ok(outstanding)
    }

    pub(crate) async fn publish(&self, group: GroupId, cmd: PublishSnapshot) -> Result<SnapshotOk, BackendError> {
        let key = cmd.key.clone();
        let published = match self.propose_in(group, Command::PublishSnapshot(cmd)).await? {
            Outcome::PublishSnapshot(result) => result.map_err(|r| self.refused(&key, r)),
            other => Err(unexpected(&other)),
        };
        self.settled(&key, published).await
    }

    /// The stream's state now, with the `Stream-Incarnation` precondition applied.
    pub(crate) fn current(&self, key: &StreamKey, expect: Option<Incarnation>) -> Result<StreamInfo, BackendError> {
        let info = self.query(key, |store, now| store.head(key, now))?;
        match expect {
            Some(e) if e != info.incarnation => {
                Err(BackendError::Rejected(Rejection::IncarnationMismatch { current: Some(info.incarnation) }))
            }
            _ => Ok(info),
        }
    }

    /// Fetches a snapshot body kept in the cold tier.
    async fn load_snapshot(&self, snapshot: &mut ursula_stream::Snapshot) -> Result<(), BackendError> {
        if snapshot.cold.is_none() {
            return Ok(());
        }
        let cold =
            self.cold.as_ref().ok_or_else(|| BackendError::Internal("a cold snapshot without a cold store".into()))?;
        cold.load_snapshot(snapshot).await.map_err(Self::cold_failed)
    }

    pub(crate) fn cold_failed(e: crate::cold::ColdError) -> BackendError {
        tracing::warn!(error = %e, "the cold store failed a request");
        BackendError::ColdStoreFailed(e.to_string())
    }

    /// A query of the group that holds `key`.
    pub(crate) fn query<R: Send>(
        &self,
        key: &StreamKey,
        f: impl FnOnce(&StreamStore, u64) -> Result<R, ursula_stream::Rejection> + Send,
    ) -> Result<R, BackendError> {
        let group = group_of(key, self.engine.group_count());
        self.engine.query(group, f).map_err(internal)?.map_err(|r| self.refused(key, r))
    }

    /// A refusal as the client sees it: a stream missing from a bucket that
    /// no group ever created a stream in is a bucket that does not exist
    /// (extensions §11, `BUCKET_NOT_FOUND`). Every group has a replica here,
    /// so the answer is local; a group it cannot ask counts as knowing it.
    pub(crate) fn refused(&self, key: &StreamKey, r: Rejection) -> BackendError {
        let bucket_exists = || {
            (0..self.engine.group_count())
                .any(|g| self.engine.query(GroupId(g), |store, _| store.knows_bucket(&key.bucket)).unwrap_or(true))
        };
        if matches!(r, Rejection::StreamNotFound) && !bucket_exists() {
            return BackendError::Rejected(Rejection::BucketNotFound);
        }
        BackendError::Rejected(r)
    }

    /// A `BUCKET_NOT_FOUND` decided on this node's replicas is confirmed
    /// before it is answered: a replica of another group may not have
    /// applied the create a client already saw acknowledged. Every group is
    /// brought up to its leader's commit, then asked again.
    async fn settled<T>(&self, key: &StreamKey, result: Result<T, BackendError>) -> Result<T, BackendError> {
        if !unsettled(&result) {
            return result;
        }
        for g in 0..self.engine.group_count() {
            // A group that cannot be confirmed counts as knowing the bucket, as in `refused`.
            if self.engine.confirm(GroupId(g)).await.is_err() {
                return Err(BackendError::Rejected(Rejection::StreamNotFound));
            }
        }
        match self.refused(key, Rejection::StreamNotFound) {
            BackendError::Rejected(Rejection::BucketNotFound) => result,
            _ => Err(BackendError::Rejected(Rejection::StreamNotFound)),
        }
    }

    /// Reads renew a sliding TTL at most once per quarter window (spec/13).
    async fn renew_if_due(&self, key: &StreamKey) -> Result<(), BackendError> {
        let due = self.query(key, |store, now| {
            Ok(store.live(key, now).filter(|s| s.clock.read_wants_renewal(now)).map(|s| s.incarnation))
        })?;
        match due {
            Some(incarnation) => self.renew(key, incarnation).await,
            None => Ok(()),
        }
    }

    /// Renews `key`'s sliding TTL; a follower serving the read has its
    /// leader propose the renewal (spec/13: any read renews).
    async fn renew(&self, key: &StreamKey, incarnation: Incarnation) -> Result<(), BackendError> {
        let renew = Command::Renew(RenewStream { key: key.clone(), incarnation });
        self.engine.forward_to_leader(self.group(key), renew).await.map_err(internal)?;
        Ok(())
    }

    async fn propose_in(&self, group: GroupId, command: Command) -> Result<Outcome, BackendError> {
        self.engine.propose(group, command).await.map_err(internal)
    }

    /// Where writes of `group` go now.
    pub fn group_route(&self, group: GroupId) -> WriteRoute {
        match self.engine.leadership(group) {
            Leadership::Local { .. } => WriteRoute::Local,
            Leadership::Peer { id, term, client_url } => {
                WriteRoute::Leader(LeaderHint { client_url, leader_id: id, group: group.0, term })
            }
            Leadership::Unknown => WriteRoute::NoLeader { group: group.0 },
        }
    }

    pub fn cold(&self) -> Option<&Arc<Cold>> {
        self.cold.as_ref()
    }

    /// Readers waiting for news now.
    pub fn live_readers(&self) -> u64 {
        self.live_readers.load(Ordering::Relaxed)
    }

    pub fn engine(&self) -> &Arc<E> {
        &self.engine
    }

    pub(crate) fn group(&self, key: &StreamKey) -> GroupId {
        group_of(key, self.engine.group_count())
    }
}

/// Whether a result is a `BUCKET_NOT_FOUND` that `settled` must confirm.
fn unsettled<T>(result: &Result<T, BackendError>) -> bool {
    matches!(result, Err(BackendError::Rejected(Rejection::BucketNotFound)))
}

pub(crate) fn internal(e: EngineError) -> BackendError {
    match e {
        EngineError::NoLeader(_) => BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 },
        EngineError::DiskPressure => {
            BackendError::Unavailable { reason: Unavailable::WalDiskPressure, retry_after_secs: 5 }
        }
        EngineError::ApplyStopped(_) => {
            BackendError::Unavailable { reason: Unavailable::ApplyStopped, retry_after_secs: 5 }
        }
        EngineError::HistoryPending(_) => {
            BackendError::Unavailable { reason: Unavailable::HistoryPending, retry_after_secs: 1 }
        }
        EngineError::LogPressure => {
            BackendError::Unavailable { reason: Unavailable::RaftLogPressure, retry_after_secs: 5 }
        }
        EngineError::OutcomeUnknown(_) => BackendError::OutcomeUnknown { retry_after_secs: 1 },
        e @ (EngineError::UnknownGroup(_) | EngineError::Fatal(_)) => BackendError::Internal(e.to_string()),
    }
}

fn unexpected(outcome: &Outcome) -> BackendError {
    BackendError::Internal(format!("unexpected outcome {outcome:?}"))
}

impl<E: GroupEngine> Backend for NodeBackend<E> {
    type Parts = Self;

    fn parts(&self) -> Option<&Self> {
        self.cold.is_some().then_some(self)
    }
}

impl<E: GroupEngine> Streams for NodeBackend<E> {
    #[tracing::instrument(name = "core.create", level = "debug", skip_all)]
    async fn create(&self, cmd: CreateStream) -> Result<CreateOk, BackendError> {
        let group = self.group(&cmd.key);
        let _outstanding = self.admit_write(group, cmd.body.len())?;
        match self.propose_in(group, Command::Create(cmd)).await? {
            Outcome::Create(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn fork(&self, req: ursula_http::backend::ForkStream) -> Result<CreateOk, BackendError> {
        self.fork_stream(req).await
    }

    #[tracing::instrument(name = "core.append", level = "debug", skip_all)]
    async fn append(&self, cmd: AppendStream) -> Result<AppendOk, BackendError> {
        let group = self.group(&cmd.key);
        let key = cmd.key.clone();
        let outstanding = self.admit_write(group, cmd.body.len())?;
        let appended = match self.propose_in(group, Command::Append(cmd)).await? {
            Outcome::Append(result) => result.map_err(|r| self.refused(&key, r)),
            other => Err(unexpected(&other)),
        };
        drop(outstanding);
        // Settled only when it must be: the append's answer is not moved
        // through a future it does not need.
        let appended = if unsettled(&appended) { self.settled(&key, appended).await? } else { appended? };
        self.served.appends.fetch_add(1, Ordering::Relaxed);
        Ok(appended)
    }

    async fn delete(&self, cmd: DeleteStream) -> Result<(), BackendError> {
        let group = self.group(&cmd.key);
        let key = cmd.key.clone();
        let deleted = self.current(&key, None).ok().map(|info| info.incarnation);
        let deleted_now = match self.propose_in(group, Command::Delete(cmd)).await? {
            Outcome::Delete(result) => result.map_err(|r| self.refused(&key, r)),
            other => Err(unexpected(&other)),
        };
        // A fork that went releases its source (and a source collected so, its own).
        if let Some(base) = self.settled(&key, deleted_now).await? {
            let engine = self.engine.clone();
            tokio::spawn(async move { forks::release_chain(&*engine, &base).await });
        }
        // The stream's staged parts go after the delete answered, in a task the node owns.
        if let (Some(cold), Some(deleted)) = (self.cold.clone(), deleted) {
            tokio::spawn(async move { cold.delete_stream_parts(&key, deleted).await });
        }
        Ok(())
    }

    async fn publish_snapshot(&self, cmd: PublishSnapshot) -> Result<SnapshotOk, BackendError> {
        let mut cmd = cmd;
        let group = self.group(&cmd.key);
        if let Some(cold) = &self.cold
            && cmd.cold.is_none()
            && cmd.body.len() as u64 >= cold.config.external_payload_min_size
        {
            let body = std::mem::take(&mut cmd.body);
            cmd.cold = Some(cold.store_snapshot(&cmd.key.bucket, group.0, body).await.map_err(Self::cold_failed)?);
        }
        self.publish(group, cmd).await
    }

    async fn advance_retention(&self, cmd: AdvanceRetention) -> Result<StreamInfo, BackendError> {
        let group = self.group(&cmd.key);
        let key = cmd.key.clone();
        let advanced = match self.propose_in(group, Command::AdvanceRetention(cmd)).await? {
            Outcome::AdvanceRetention(result) => result.map_err(|r| self.refused(&key, r)),
            other => Err(unexpected(&other)),
        };
        self.settled(&key, advanced).await
    }

    async fn snapshot(&self, req: ReadSnapshot) -> Result<SnapshotView, BackendError> {
        let ReadSnapshot { key, offset } = req;
        let mut view = self.settled(&key, self.query(&key, |store, now| store.snapshot(&key, offset, now))).await?;
        self.load_snapshot(&mut view.snapshot).await?;
        self.renew_if_due(&key).await?;
        Ok(view)
    }

    async fn bootstrap(&self, req: ReadBootstrap) -> Result<BootstrapView, BackendError> {
        let ReadBootstrap { key, max_bytes } = req;
        let view = self.query(&key, |store, now| store.bootstrap(&key, max_bytes, now));
        let mut view = self.settled(&key, view).await?;
        if let Some(snapshot) = view.snapshot.as_mut() {
            self.load_snapshot(snapshot).await?;
        }
        if let Some(cold) = &self.cold {
            cold.materialize_bootstrap(&mut view).await.map_err(Self::cold_failed)?;
        }
        if view.prefix.is_some() {
            view = self.stitch_fork_bootstrap(view).await?;
        }
        self.renew_if_due(&key).await?;
        Ok(view)
    }

    async fn linearize(&self, key: &StreamKey) -> Result<(), BackendError> {
        self.engine.linearize(self.group(key)).await.map_err(internal)
    }

    async fn confirm_tail(&self, key: &StreamKey) -> Result<(), BackendError> {
        self.engine.confirm(self.group(key)).await.map_err(internal)
    }

    fn leader_route(&self, key: &StreamKey) -> WriteRoute {
        self.group_route(self.group(key))
    }

    #[tracing::instrument(name = "core.head", level = "debug", skip_all)]
    async fn head(&self, key: StreamKey) -> Result<StreamInfo, BackendError> {
        self.settled(&key, self.query(&key, |store, now| store.head(&key, now))).await
    }

    #[tracing::instrument(name = "core.read", level = "debug", skip_all)]
    async fn read(&self, req: ReadStream) -> Result<ReadView, BackendError> {
        let ReadStream { key, query } = req;
        let mut view = self.settled(&key, self.query(&key, |store, now| store.read(&key, query, now))).await?;
        // The plan was made under the group's state; the cold part is
        // fetched outside it.
        if let Some(cold) = &self.cold {
            cold.materialize(&mut view).await.map_err(Self::cold_failed)?;
        } else if !view.cold.is_empty() {
            return Err(BackendError::Internal("cold references without a cold store".into()));
        }
        if view.prefix.is_some() {
            view = self.stitch_fork_read(view, query).await?;
        }
        if view.wants_renewal {
            self.renew(&key, view.info.incarnation).await?;
        }
        self.served.reads.fetch_add(1, Ordering::Relaxed);
        Ok(view)
    }

    async fn wait(&self, req: WaitStream) -> Result<WaitOutcome, BackendError> {
        let WaitStream { key, incarnation, offset, timeout } = req;
        self.admission.live_read(self.live_readers())?;
        let _waiting = Waiting::new(&self.live_readers);
        let group = group_of(&key, self.engine.group_count());
        match self.engine.wait(group, &key, incarnation, offset, timeout).await.map_err(internal)? {
            Waited::Changed => Ok(WaitOutcome::Changed),
            Waited::TimedOut => Ok(WaitOutcome::TimedOut),
        }
    }
}
