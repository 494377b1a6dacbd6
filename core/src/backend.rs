//! The in-process backend of a node: the HTTP layer's `Backend` over a
//! group engine. It routes each stream to its group and turns engine
//! outcomes into the HTTP layer's results.

use std::sync::Arc;
use std::time::Duration;

use ursula_gateway::{Backend, BackendError, LeaderHint, PartsCommit, Readiness, Unavailable, WaitOutcome, WriteRoute};
use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, Command, CreateOk, CreateStream, DeleteStream,
    Incarnation, Offset, Outcome, PublishSnapshot, ReadQuery, ReadView, Rejection, RenewStream, SnapshotOk,
    SnapshotView, StreamInfo, StreamKey, StreamStore,
};

use crate::cold::Cold;
use crate::engine::{EngineError, GroupEngine, Leadership, Waited};
use crate::routing::{GroupId, group_of};

pub struct NodeBackend<E> {
    engine: Arc<E>,
    /// The cold tier, when `storage.cold.backend` names one.
    cold: Option<Arc<Cold>>,
}

impl<E> Clone for NodeBackend<E> {
    fn clone(&self) -> Self {
        NodeBackend { engine: self.engine.clone(), cold: self.cold.clone() }
    }
}

impl<E: GroupEngine> NodeBackend<E> {
    pub fn new(engine: Arc<E>, cold: Option<Arc<Cold>>) -> NodeBackend<E> {
        NodeBackend { engine, cold }
    }

    /// Refuses a write to a group whose hot ring is over its ceiling
    /// (`503 COLD_BACKPRESSURE`) before anything is proposed.
    fn admit_write(&self, group: GroupId, bytes: usize) -> Result<(), BackendError> {
        let Some(cold) = &self.cold else { return Ok(()) };
        if bytes > 0 && cold.backpressure(group.0) {
            return Err(BackendError::Unavailable { reason: Unavailable::ColdBackpressure, retry_after_secs: 1 });
        }
        cold.appended(group.0, bytes as u64);
        Ok(())
    }

    async fn publish(&self, group: GroupId, cmd: PublishSnapshot) -> Result<SnapshotOk, BackendError> {
        match self.propose_in(group, Command::PublishSnapshot(cmd)).await? {
            Outcome::PublishSnapshot(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    /// The stream's state now, with the `Stream-Incarnation` precondition applied.
    fn current(&self, key: &StreamKey, expect: Option<Incarnation>) -> Result<StreamInfo, BackendError> {
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

    /// A commit's copy, check and publish (`publish_parts` runs it in a
    /// task of its own); parts are deleted once the answer is final.
    async fn commit_parts(&self, c: PartsCommit, incarnation: Incarnation) -> Result<SnapshotOk, BackendError> {
        use crate::cold::parts::{MAX_SNAPSHOT_BYTES, PartsError};
        let cold = self.cold.as_ref().ok_or(BackendError::NoColdStore)?;
        let _slot = cold.claim_commit(&c.key, incarnation, true).map_err(commit_refused)?;
        let body = match cold.assemble_parts(&c.key, incarnation, &c.parts).await {
            Ok(body) => body,
            Err(PartsError::Unknown) => return Err(BackendError::Rejected(Rejection::UnknownPart)),
            Err(PartsError::TooLarge) => {
                return Err(BackendError::Rejected(Rejection::SnapshotTooLarge { limit: MAX_SNAPSHOT_BYTES }));
            }
            Err(PartsError::Store(e)) => return Err(Self::cold_failed(e)),
        };
        if ursula_stream::SnapshotDigest::of(&c.content_type, &body) != c.digest {
            // The copy that found the mismatch used the parts up.
            cold.delete_parts(&c.key, incarnation, &c.parts).await;
            return Err(BackendError::Rejected(Rejection::SnapshotDigestMismatch));
        }
        let group = self.group(&c.key);
        let stored = cold.store_snapshot(group.0, body).await.map_err(Self::cold_failed)?;
        let cmd = PublishSnapshot {
            key: c.key.clone(),
            offset: c.offset,
            content_type: c.content_type,
            body: bytes::Bytes::new(),
            digest: c.digest,
            expect: c.expect,
            cold: Some(stored),
        };
        let published = self.publish(group, cmd).await;
        // A final answer for the key spends the parts; a retryable one keeps them.
        if matches!(published, Ok(_) | Err(BackendError::Rejected(_))) {
            cold.delete_parts(&c.key, incarnation, &c.parts).await;
        }
        published
    }

    fn cold_failed(e: crate::cold::ColdError) -> BackendError {
        tracing::warn!(error = %e, "the cold store failed a request");
        BackendError::ColdStoreFailed(e.to_string())
    }

    /// A query of the group that holds `key`.
    fn query<R: Send>(
        &self,
        key: &StreamKey,
        f: impl FnOnce(&StreamStore, u64) -> Result<R, ursula_stream::Rejection> + Send,
    ) -> Result<R, BackendError> {
        let group = group_of(key, self.engine.group_count());
        self.engine.query(group, f).map_err(internal)?.map_err(BackendError::Rejected)
    }

    /// Reads renew a sliding TTL at most once per quarter window (spec/13).
    async fn renew_if_due(&self, key: &StreamKey) -> Result<(), BackendError> {
        let due = self.query(key, |store, now| {
            Ok(store.live(key, now).filter(|s| s.clock.read_wants_renewal(now)).map(|s| s.incarnation))
        })?;
        if let Some(incarnation) = due {
            self.propose(key, Command::Renew(RenewStream { key: key.clone(), incarnation })).await?;
        }
        Ok(())
    }

    async fn propose(&self, key: &StreamKey, command: Command) -> Result<Outcome, BackendError> {
        self.propose_in(group_of(key, self.engine.group_count()), command).await
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

    pub fn engine(&self) -> &Arc<E> {
        &self.engine
    }

    fn group(&self, key: &StreamKey) -> GroupId {
        group_of(key, self.engine.group_count())
    }
}

fn commit_refused(r: crate::cold::parts::CommitRefusal) -> BackendError {
    use crate::cold::parts::CommitRefusal;
    BackendError::Rejected(match r {
        CommitRefusal::InProgress => Rejection::SnapshotCommitInProgress,
        CommitRefusal::Busy => Rejection::SnapshotCommitsBusy,
    })
}

fn internal(e: EngineError) -> BackendError {
    match e {
        EngineError::NoLeader(_) => BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 },
        EngineError::DiskPressure => {
            BackendError::Unavailable { reason: Unavailable::WalDiskPressure, retry_after_secs: 5 }
        }
        EngineError::OutcomeUnknown(_) => BackendError::OutcomeUnknown { retry_after_secs: 1 },
        e @ (EngineError::UnknownGroup(_) | EngineError::Fatal(_)) => BackendError::Internal(e.to_string()),
    }
}

fn unexpected(outcome: &Outcome) -> BackendError {
    BackendError::Internal(format!("unexpected outcome {outcome:?}"))
}

impl<E: GroupEngine> Backend for NodeBackend<E> {
    async fn create(&self, cmd: CreateStream) -> Result<CreateOk, BackendError> {
        let group = self.group(&cmd.key);
        self.admit_write(group, cmd.body.len())?;
        match self.propose_in(group, Command::Create(cmd)).await? {
            Outcome::Create(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn append(&self, cmd: AppendStream) -> Result<AppendOk, BackendError> {
        let group = self.group(&cmd.key);
        self.admit_write(group, cmd.body.len())?;
        match self.propose_in(group, Command::Append(cmd)).await? {
            Outcome::Append(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete(&self, cmd: DeleteStream) -> Result<(), BackendError> {
        let group = self.group(&cmd.key);
        let key = cmd.key.clone();
        let deleted = self.current(&key, None).ok().map(|info| info.incarnation);
        match self.propose_in(group, Command::Delete(cmd)).await? {
            Outcome::Delete(result) => result.map_err(BackendError::Rejected)?,
            other => return Err(unexpected(&other)),
        }
        // The stream's staged parts go after the delete answered, in a task the node owns.
        if let (Some(cold), Some(deleted)) = (self.cold.clone(), deleted) {
            tokio::spawn(async move { cold.delete_stream_parts(&key, deleted).await });
        }
        Ok(())
    }

    fn max_snapshot_bytes(&self) -> Option<u64> {
        self.cold.as_ref().map(|_| crate::cold::parts::MAX_SNAPSHOT_BYTES)
    }

    async fn admit_part(
        &self,
        key: &StreamKey,
        expect: Option<Incarnation>,
        declared: u64,
    ) -> Result<(), BackendError> {
        use crate::cold::parts::{MAX_STAGED_BYTES, MAX_STAGED_PARTS, StagedBound};
        let cold = self.cold.as_ref().ok_or(BackendError::NoColdStore)?;
        let incarnation = self.current(key, expect)?.incarnation;
        match cold.admit_part(key, incarnation, declared).await.map_err(Self::cold_failed)? {
            Ok(()) => Ok(()),
            Err(bound) => {
                let (bytes, limit) = match bound {
                    StagedBound::Parts => (false, MAX_STAGED_PARTS),
                    StagedBound::Bytes => (true, MAX_STAGED_BYTES),
                };
                Err(Rejection::StagedPartsLimit { incarnation, bytes, limit }.into())
            }
        }
    }

    async fn stage_part(
        &self,
        key: StreamKey,
        expect: Option<Incarnation>,
        body: bytes::Bytes,
    ) -> Result<(String, StreamInfo), BackendError> {
        let cold = self.cold.as_ref().ok_or(BackendError::NoColdStore)?;
        let info = self.current(&key, expect)?;
        let id = cold.stage_part(&key, info.incarnation, body).await.map_err(Self::cold_failed)?;
        Ok((id, info))
    }

    async fn publish_parts(&self, c: PartsCommit) -> Result<SnapshotOk, BackendError> {
        self.cold.as_ref().ok_or(BackendError::NoColdStore)?;
        // The key first: a repeat or a conflict answers even after the parts are gone.
        let checked =
            self.query(&c.key, |store, now| store.check_parts_commit(&c.key, c.offset, c.digest, c.expect, now))?;
        if let Some(repeat) = checked {
            return Ok(repeat);
        }
        let incarnation = self.current(&c.key, c.expect)?.incarnation;
        // The node owns the commit from here: a client that goes away
        // cancels none of the copy, the publish or the deletion of the parts.
        let backend = self.clone();
        tokio::spawn(async move { backend.commit_parts(c, incarnation).await })
            .await
            .map_err(|e| BackendError::Internal(format!("the commit task failed: {e}")))?
    }

    async fn discard_parts(&self, key: StreamKey, expect: Option<Incarnation>) -> Result<StreamInfo, BackendError> {
        let cold = self.cold.as_ref().ok_or(BackendError::NoColdStore)?;
        let info = self.current(&key, expect)?;
        let _slot = cold.claim_commit(&key, info.incarnation, false).map_err(commit_refused)?;
        cold.discard_parts(&key, info.incarnation).await.map_err(Self::cold_failed)?;
        Ok(info)
    }

    async fn publish_snapshot(&self, cmd: PublishSnapshot) -> Result<SnapshotOk, BackendError> {
        let mut cmd = cmd;
        let group = self.group(&cmd.key);
        if let Some(cold) = &self.cold
            && cmd.cold.is_none()
            && cmd.body.len() >= crate::cold::snapshots::EXTERNAL_PAYLOAD_MIN_SIZE
        {
            let body = std::mem::take(&mut cmd.body);
            cmd.cold = Some(cold.store_snapshot(group.0, body).await.map_err(Self::cold_failed)?);
        }
        self.publish(group, cmd).await
    }

    async fn advance_retention(&self, cmd: AdvanceRetention) -> Result<StreamInfo, BackendError> {
        let group = self.group(&cmd.key);
        match self.propose_in(group, Command::AdvanceRetention(cmd)).await? {
            Outcome::AdvanceRetention(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn snapshot(&self, key: StreamKey, offset: Offset) -> Result<SnapshotView, BackendError> {
        let mut view = self.query(&key, |store, now| store.snapshot(&key, offset, now))?;
        self.load_snapshot(&mut view.snapshot).await?;
        self.renew_if_due(&key).await?;
        Ok(view)
    }

    async fn bootstrap(&self, key: StreamKey, max_bytes: u64) -> Result<BootstrapView, BackendError> {
        let mut view = self.query(&key, |store, now| store.bootstrap(&key, max_bytes, now))?;
        if let Some(snapshot) = view.snapshot.as_mut() {
            self.load_snapshot(snapshot).await?;
        }
        if let Some(cold) = &self.cold {
            cold.materialize_bootstrap(&mut view).await.map_err(Self::cold_failed)?;
        }
        self.renew_if_due(&key).await?;
        Ok(view)
    }

    async fn metrics(&self) -> serde_json::Map<String, serde_json::Value> {
        let groups = self.engine.group_count();
        let streams: u64 =
            (0..groups).filter_map(|g| self.engine.query(GroupId(g), |store, _| store.len() as u64).ok()).sum();
        let mut m = self.engine.metrics();
        m.insert("engine".into(), self.engine.name().into());
        m.insert("group_count".into(), groups.into());
        m.insert("streams".into(), streams.into());
        m.insert("process_incarnation".into(), crate::admin::process_incarnation().into());
        if let Some(cold) = &self.cold {
            cold.metrics(&mut m);
        }
        m
    }

    fn readiness(&self) -> Readiness {
        self.engine.readiness()
    }

    fn readiness_details(&self) -> serde_json::Map<String, serde_json::Value> {
        self.engine.readiness_details()
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

    async fn head(&self, key: StreamKey) -> Result<StreamInfo, BackendError> {
        self.query(&key, |store, now| store.head(&key, now))
    }

    async fn read(&self, key: StreamKey, query: ReadQuery) -> Result<ReadView, BackendError> {
        let mut view = self.query(&key, |store, now| store.read(&key, query, now))?;
        // The plan was made under the group's state; the cold part is
        // fetched outside it.
        if let Some(cold) = &self.cold {
            cold.materialize(&mut view).await.map_err(Self::cold_failed)?;
        } else if !view.cold.is_empty() {
            return Err(BackendError::Internal("cold references without a cold store".into()));
        }
        if view.wants_renewal {
            let renew = RenewStream { key: key.clone(), incarnation: view.info.incarnation };
            self.propose(&key, Command::Renew(renew)).await?;
        }
        Ok(view)
    }

    async fn wait(
        &self,
        key: StreamKey,
        incarnation: Incarnation,
        offset: Offset,
        timeout: Duration,
    ) -> Result<WaitOutcome, BackendError> {
        let group = group_of(&key, self.engine.group_count());
        match self.engine.wait(group, &key, incarnation, offset, timeout).await.map_err(internal)? {
            Waited::Changed => Ok(WaitOutcome::Changed),
            Waited::TimedOut => Ok(WaitOutcome::TimedOut),
        }
    }
}

/// Removes expired streams now and then, so a stream nobody touches again
/// does not hold memory forever (expiry itself is checked on every request).
pub async fn sweep_forever<E: GroupEngine>(engine: Arc<E>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for g in 0..engine.group_count() {
            let _ = engine.propose(GroupId(g), Command::Sweep).await;
        }
    }
}
