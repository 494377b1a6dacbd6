//! Forks across groups (`ursula_stream::fork`, docs/forks.md): the two
//! steps of a create, reads that stitch a fork's source part before its
//! own, and the releases that follow a fork's end.

use bytes::Bytes;
use ursula_http::backend::{BackendError, ForkStream};
use ursula_stream::{
    Body, BootstrapView, Command, CreateFork, CreateOk, CreateStream, ForkBase, ForkStep, Outcome, ReadQuery, ReadView,
    ReferenceSource, ReleaseSource,
};

use super::{NodeBackend, internal, unexpected};
use crate::engine::{GroupEngine, Leadership};
use ursula_stream::routing::{GroupId, group_of};

impl<E: GroupEngine> NodeBackend<E> {
    /// `PUT` with `Stream-Forked-From`: the source's group takes a
    /// reference, then the fork's group creates the fork on it. A create
    /// that did not take the reference (`200`, `409`) releases it; one whose
    /// outcome is unknown keeps it, since the fork may exist.
    pub(crate) async fn fork_stream(&self, req: ForkStream) -> Result<CreateOk, BackendError> {
        // Admitted before the reference is taken, so a refusal leaves none.
        let _outstanding = self.admit_write(self.group(&req.key), req.body.len())?;
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
        let created = match self.propose_in(self.group(&req.key), Command::CreateFork(fork)).await? {
            Outcome::Create(result) => result.map_err(|r| self.refused(&req.key, r)),
            other => Err(unexpected(&other)),
        };
        if !created.as_ref().is_ok_and(|ok| ok.created) {
            release_chain(&*self.engine, &base).await;
        }
        created
    }

    /// A fork's bootstrap from below its fork point: its updates stitched as
    /// a read's bytes are.
    pub(crate) async fn stitch_fork_bootstrap(&self, mut view: BootstrapView) -> Result<BootstrapView, BackendError> {
        let Some((prefix, query)) = view.prefix.take() else { return Ok(view) };
        let read = ReadView {
            info: view.info.clone(),
            start: view.start,
            next: view.next,
            chunks: std::mem::take(&mut view.updates),
            cold: Vec::new(),
            cold_cut: None,
            cold_ahead: Vec::new(),
            up_to_date: false,
            closed_at_end: false,
            wants_renewal: false,
            prefix: Some(prefix),
        };
        let stitched = self.stitch_fork_read(read, query).await?;
        Ok(BootstrapView { next: stitched.next, updates: stitched.chunks, ..view })
    }

    /// Puts the source parts of a fork's read before its own bytes, level
    /// by level down a chain of forks. A source part that ends before its
    /// fork point (the read's budget) ends the read there.
    pub(crate) async fn stitch_fork_read(
        &self,
        mut view: ReadView,
        query: ReadQuery,
    ) -> Result<ReadView, BackendError> {
        // Each source part, with where it stopped when short of its fork point.
        let mut levels: Vec<(Vec<Bytes>, Option<ursula_stream::Offset>)> = Vec::new();
        let mut next_prefix = view.prefix.take();
        while let Some(prefix) = next_prefix {
            // The fork's leader may be another voter than its source's: its
            // replica of the source's group holds every byte below the fork
            // point once it applied the reference.
            self.engine.wait_applied(self.group(&prefix.source), prefix.reference).await.map_err(internal)?;
            let mut part = self.query(&prefix.source, |store, _| store.read_fork_prefix(&prefix, query))?;
            if let Some(cold) = &self.cold {
                cold.materialize(&mut part).await.map_err(Self::cold_failed)?;
            }
            next_prefix = part.prefix.take();
            let short = (part.next != prefix.to).then_some(part.next);
            levels.push((std::mem::take(&mut part.chunks), short));
        }
        // Deepest first; a level that stopped short hides the ones above it.
        let mut chunks = Vec::new();
        for (level, short) in levels.into_iter().rev() {
            chunks.extend(level);
            if let Some(stopped) = short {
                view.next = stopped;
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
/// and unread) rather than collected under a fork, until the housekeeping
/// finds the reference orphaned (`release_orphaned_references`).
pub(crate) async fn release_chain<E: GroupEngine>(engine: &E, base: &ForkBase) {
    release_one(engine, ReleaseSource { source: base.source.clone(), reference: base.reference }).await;
}

/// Releases one reference, then each base a source collected so hands back.
async fn release_one<E: GroupEngine>(engine: &E, release: ReleaseSource) {
    let mut next = Some(release);
    while let Some(release) = next.take() {
        let group = group_of(&release.source, engine.group_count());
        let source = release.source.clone();
        match engine.fork_step(group, Command::ReleaseSource(release)).await {
            Ok(ForkStep::Released(Some(base))) => {
                next = Some(ReleaseSource { source: base.source, reference: base.reference });
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(%source, error = %e, "a fork's reference on its source was not released"),
        }
    }
}

/// How old a reference must be before the housekeeping checks it against
/// its fork: far longer than a create takes to take one and create its fork.
pub const REFERENCE_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Releases the references of `group`'s streams whose fork does not hold
/// them: left by a create whose outcome was unknown, or by a release that
/// failed. Only the group's leader looks, and only at references older
/// than `REFERENCE_GRACE`, each checked on a replica of the fork's group
/// brought up to its leader's commit first. Returns how many it released.
pub async fn release_orphaned_references<E: GroupEngine>(engine: &E, group: GroupId) -> usize {
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return 0;
    }
    let grace_ms = u64::try_from(REFERENCE_GRACE.as_millis()).unwrap_or(u64::MAX);
    let before = engine.clock().now_ms().saturating_sub(grace_ms);
    let Ok(references) = engine.query(group, |store, _| store.fork_references(before)) else { return 0 };
    let mut released = 0;
    for (source, reference, fork) in references {
        let fork_group = group_of(&fork, engine.group_count());
        if engine.confirm(fork_group).await.is_err() {
            continue;
        }
        let held = engine.query(fork_group, |store, _| store.holds_reference(&fork, &source, reference));
        if held.unwrap_or(true) {
            continue;
        }
        tracing::info!(%source, %fork, reference, "releasing a fork reference its fork does not hold");
        release_one(engine, ReleaseSource { source, reference }).await;
        released += 1;
    }
    released
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use ursula_stream::{ContentType, DeleteStream, Lifetime, StreamKey};

    use super::*;
    use crate::clock::ManualClock;
    use crate::engine::MemoryEngine;

    fn key(name: &str) -> StreamKey {
        StreamKey::parse("demo", name).expect("a key")
    }

    fn create(name: &str, content_type: &ContentType) -> CreateStream {
        CreateStream {
            key: key(name),
            content_type: content_type.clone(),
            lifetime: Lifetime::Forever,
            closed: false,
            stream_seq: None,
            body: Body::Bytes(Bytes::from_static(b"data")),
            expect: None,
        }
    }

    async fn reference(engine: &MemoryEngine, fork: &str) -> ForkBase {
        let step =
            ReferenceSource { source: key("src"), fork: key(fork), offset: None, sub_offset: 0, content_type: None };
        match engine.fork_step(group_of(&key("src"), 4), Command::ReferenceSource(step)).await {
            Ok(ForkStep::Referenced(Ok(referenced))) => referenced.base,
            other => panic!("no reference: {other:?}"),
        }
    }

    async fn orphans_released(engine: &MemoryEngine) -> usize {
        let mut released = 0;
        for g in 0..4 {
            released += release_orphaned_references(engine, GroupId(g)).await;
        }
        released
    }

    /// A reference whose fork never took it (a create whose outcome was
    /// unknown) is released once older than the grace; the one a fork
    /// holds stays, and its source goes with it.
    #[tokio::test]
    async fn an_orphaned_reference_is_released_after_the_grace_and_a_held_one_is_kept() {
        let clock = Arc::new(ManualClock::stopped_now());
        let engine = MemoryEngine::new(4, clock.clone());
        let text = ContentType::parse("text/plain").expect("a content type");
        engine.propose(group_of(&key("src"), 4), Command::Create(create("src", &text))).await.expect("source");
        let held = reference(&engine, "fork").await;
        let fork = CreateFork { create: create("fork", &text), base: held.clone(), offset_named: false };
        engine.propose(group_of(&key("fork"), 4), Command::CreateFork(fork)).await.expect("fork");
        reference(&engine, "ghost").await;
        let delete = Command::Delete(DeleteStream { key: key("src"), expect: None });
        engine.propose(group_of(&key("src"), 4), delete).await.expect("soft delete");
        assert_eq!(orphans_released(&engine).await, 0, "within the grace nothing is judged");
        clock.advance(REFERENCE_GRACE + std::time::Duration::from_secs(1));
        assert_eq!(orphans_released(&engine).await, 1, "the ghost's reference");
        assert_eq!(orphans_released(&engine).await, 0, "once");
        let stored = |name: &str| {
            engine.query(group_of(&key(name), 4), |store, _| store.stored(&key(name)).is_some()).expect("a query")
        };
        assert!(stored("src"), "the fork's reference keeps its source");
        release_chain(&engine, &held).await;
        assert!(!stored("src"), "collected with its last reference");
    }
}
