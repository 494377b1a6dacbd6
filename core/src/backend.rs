//! The in-process backend of a node: the HTTP layer's `Backend` over a
//! group engine. It routes each stream to its group and turns engine
//! outcomes into the HTTP layer's results.

use std::sync::Arc;
use std::time::Duration;

use ursula_gateway::{Backend, BackendError, WaitOutcome};
use ursula_stream::{
    AppendOk, AppendStream, Command, CreateOk, CreateStream, DeleteStream, Offset, Outcome, ReadQuery, ReadView,
    RenewStream, StreamInfo, StreamKey,
};

use crate::engine::{EngineError, GroupEngine, Waited};
use crate::routing::group_of;

pub struct NodeBackend<E> {
    engine: Arc<E>,
}

impl<E: GroupEngine> NodeBackend<E> {
    pub fn new(engine: Arc<E>) -> NodeBackend<E> {
        NodeBackend { engine }
    }

    async fn propose(&self, key: &StreamKey, command: Command) -> Result<Outcome, BackendError> {
        let group = group_of(key, self.engine.group_count());
        self.engine.propose(group, command).await.map_err(internal)
    }
}

fn internal(e: EngineError) -> BackendError {
    BackendError::Internal(e.to_string())
}

fn unexpected(outcome: &Outcome) -> BackendError {
    BackendError::Internal(format!("unexpected outcome {outcome:?}"))
}

impl<E: GroupEngine> Backend for NodeBackend<E> {
    async fn create(&self, cmd: CreateStream) -> Result<CreateOk, BackendError> {
        let key = cmd.key.clone();
        match self.propose(&key, Command::Create(cmd)).await? {
            Outcome::Create(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn append(&self, cmd: AppendStream) -> Result<AppendOk, BackendError> {
        let key = cmd.key.clone();
        match self.propose(&key, Command::Append(cmd)).await? {
            Outcome::Append(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete(&self, key: StreamKey) -> Result<(), BackendError> {
        match self.propose(&key, Command::Delete(DeleteStream { key: key.clone() })).await? {
            Outcome::Delete(result) => result.map_err(BackendError::Rejected),
            other => Err(unexpected(&other)),
        }
    }

    async fn head(&self, key: StreamKey) -> Result<StreamInfo, BackendError> {
        let group = group_of(&key, self.engine.group_count());
        self.engine.query(group, |store, now| store.head(&key, now)).map_err(internal)?.map_err(BackendError::Rejected)
    }

    async fn read(&self, key: StreamKey, query: ReadQuery) -> Result<ReadView, BackendError> {
        let group = group_of(&key, self.engine.group_count());
        let view = self.engine.query(group, |store, now| store.read(&key, query, now)).map_err(internal)?;
        let view = view.map_err(BackendError::Rejected)?;
        if view.wants_renewal {
            let renew = RenewStream { key: key.clone(), incarnation: view.info.incarnation };
            self.propose(&key, Command::Renew(renew)).await?;
        }
        Ok(view)
    }

    async fn wait(
        &self,
        key: StreamKey,
        incarnation: u64,
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
            let _ = engine.propose(crate::routing::GroupId(g), Command::Sweep).await;
        }
    }
}
