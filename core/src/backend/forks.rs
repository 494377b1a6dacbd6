//! Forks across groups (`ursula_stream::fork`, docs/forks.md): the two
//! steps of a create, reads that stitch a fork's source part before its
//! own, and the releases that follow a fork's end.

use bytes::Bytes;
use ursula_http::backend::{BackendError, ForkStream, Unavailable};
use ursula_stream::{
    Body, Command, CreateFork, CreateOk, CreateStream, ForkBase, ForkStep, Outcome, ReadQuery, ReadView,
    ReferenceSource, ReleaseSource,
};

use super::{NodeBackend, internal, unexpected};

/// How long a read waits for this replica of a fork's source group to apply
/// the fork's reference.
const SOURCE_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
use crate::engine::GroupEngine;

impl<E: GroupEngine> NodeBackend<E> {
    /// `PUT` with `Stream-Forked-From`: the source's group takes a
    /// reference, then the fork's group creates the fork on it. A create
    /// that did not take the reference (`200`, `409`) releases it; one whose
    /// outcome is unknown keeps it, since the fork may exist.
    pub(crate) async fn fork_stream(&self, req: ForkStream) -> Result<CreateOk, BackendError> {
        let reference = ReferenceSource {
            source: req.source.clone(),
            fork: req.key.clone(),
            offset: req.offset,
            sub_offset: req.sub_offset,
            content_type: req.content_type.clone(),
        };
        // The source's group may be led by another voter: the step goes to its leader.
        let step = self.engine.fork_step(self.group(&req.source), Command::ReferenceSource(reference));
        let referenced = match step.await.map_err(internal)? {
            ForkStep::Referenced(result) => result.map_err(BackendError::Rejected)?,
            ForkStep::Released(_) => return Err(BackendError::Internal("a reference answered as a release".into())),
        };
        let content_type = referenced.content_type.clone();
        let body = Body::prepare(Some(&content_type), req.body);
        let create = CreateStream {
            key: req.key.clone(),
            lifetime: referenced.inherited_lifetime(req.lifetime),
            content_type,
            closed: req.closed,
            stream_seq: req.stream_seq,
            body,
            expect: req.expect,
        };
        let base = referenced.base.clone();
        let fork = CreateFork { create, base: base.clone(), offset_named: req.offset.is_some() };
        let _outstanding = self.admit_write(self.group(&req.key), fork.create.body.len())?;
        let created = match self.propose_in(self.group(&req.key), Command::CreateFork(fork)).await? {
            Outcome::Create(result) => result.map_err(|r| self.refused(&req.key, r)),
            other => Err(unexpected(&other)),
        };
        if !created.as_ref().is_ok_and(|ok| ok.created) {
            release_chain(&*self.engine, base).await;
        }
        created
    }

    /// Waits until this replica of the source's group applied the fork's
    /// reference, and so holds every byte below the fork point: a fork's
    /// leader may be another voter than its source's, and its replica of the
    /// source's group may lag for a moment after the fork was created.
    async fn applied_through(&self, prefix: &ursula_stream::ForkPrefix) -> Result<(), BackendError> {
        let group = self.group(&prefix.source);
        let deadline = tokio::time::Instant::now() + SOURCE_APPLY_WAIT;
        while self.engine.applied_index(group) < prefix.reference {
            if tokio::time::Instant::now() >= deadline {
                return Err(BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 });
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Ok(())
    }

    /// Puts the source parts of a fork's read before its own bytes, level
    /// by level down a chain of forks. A source part that ends before its
    /// fork point (the read's budget) ends the read there.
    pub(crate) async fn stitch_fork_read(
        &self,
        mut view: ReadView,
        query: ReadQuery,
    ) -> Result<ReadView, BackendError> {
        let mut levels: Vec<(Vec<Bytes>, bool)> = Vec::new();
        let mut next_prefix = view.prefix.take();
        let mut truncated_at = None;
        while let Some(prefix) = next_prefix {
            self.applied_through(&prefix).await?;
            let mut part = self.query(&prefix.source, |store, _| store.read_fork_prefix(&prefix, query))?;
            if let Some(cold) = &self.cold {
                cold.materialize(&mut part).await.map_err(Self::cold_failed)?;
            }
            next_prefix = part.prefix.take();
            let whole = part.next == prefix.to;
            if !whole {
                truncated_at = Some(part.next);
            }
            levels.push((std::mem::take(&mut part.chunks), whole));
        }
        // Deepest first; a level that stopped short hides the ones above it.
        let mut chunks = Vec::new();
        for (level, whole) in levels.into_iter().rev() {
            chunks.extend(level);
            if !whole {
                view.next = truncated_at.unwrap_or(view.next);
                view.up_to_date = false;
                view.closed_at_end = false;
                return Ok(ReadView { chunks, ..view });
            }
        }
        chunks.append(&mut view.chunks);
        Ok(ReadView { chunks, ..view })
    }
}

/// Releases `base` on its source, then each base a source collected so
/// hands back. A release that fails leaves the source kept (soft-deleted
/// and unread) rather than collected under a fork.
pub(crate) async fn release_chain<E: GroupEngine>(engine: &E, mut base: ForkBase) {
    loop {
        let group = ursula_stream::routing::group_of(&base.source, engine.group_count());
        let release = ReleaseSource { source: base.source.clone(), reference: base.reference };
        match engine.fork_step(group, Command::ReleaseSource(release)).await {
            Ok(ForkStep::Released(Some(next))) => base = next,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(source = %base.source, error = %e, "a fork's reference on its source was not released");
                return;
            }
        }
    }
}
