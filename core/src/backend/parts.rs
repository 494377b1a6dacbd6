//! `SnapshotParts` of a node with a cold store (spec/30 "Upload in parts"):
//! the staged-parts bounds checked before a body is read, staging, the
//! commit (key check first, copy and digest check in a task the node owns,
//! publish, parts spent on a final answer) and discards. Every refusal
//! here is the shell's (`PartsRefusal`), not the state machine's.

use ursula_http::{
    BackendError, PartAdmission, PartStaged, PartsCommit, PartsDiscard, PartsRefusal, SnapshotParts, StagedPart,
};
use ursula_stream::{Incarnation, PublishSnapshot, SnapshotOk, StreamInfo};

use super::NodeBackend;
use crate::cold::Cold;
use crate::cold::parts::{
    CommitRefusal, MAX_SNAPSHOT_BYTES, MAX_STAGED_BYTES, MAX_STAGED_PARTS, PartsError, StagedBound,
};
use crate::engine::GroupEngine;

fn commit_refused(r: CommitRefusal) -> BackendError {
    BackendError::Parts(match r {
        CommitRefusal::InProgress => PartsRefusal::CommitInProgress,
        CommitRefusal::Busy => PartsRefusal::CommitsBusy,
    })
}

impl<E: GroupEngine> NodeBackend<E> {
    /// The cold store; `parts()` offers this capability only with one.
    fn parts_store(&self) -> Result<&Cold, BackendError> {
        self.cold().map(|c| &**c).ok_or(BackendError::NoColdStore)
    }

    /// A commit's copy, check and publish (`commit_parts` runs it in a
    /// task of its own); parts are deleted once the answer is final.
    async fn run_commit(&self, c: PartsCommit, incarnation: Incarnation) -> Result<SnapshotOk, BackendError> {
        let cold = self.parts_store()?;
        let _slot = cold.claim_commit(&c.key, incarnation, true).map_err(commit_refused)?;
        let body = match cold.assemble_parts(&c.key, incarnation, &c.parts).await {
            Ok(body) => body,
            Err(PartsError::Unknown) => return Err(PartsRefusal::UnknownPart.into()),
            Err(PartsError::TooLarge) => return Err(PartsRefusal::TooLarge { limit: MAX_SNAPSHOT_BYTES }.into()),
            Err(PartsError::Store(e)) => return Err(Self::cold_failed(e)),
        };
        if ursula_stream::SnapshotDigest::of(&c.content_type, &body) != c.digest {
            // The copy that found the mismatch used the parts up.
            cold.delete_parts(&c.key, incarnation, &c.parts).await;
            return Err(PartsRefusal::DigestMismatch.into());
        }
        let group = self.group(&c.key);
        let stored = cold.store_snapshot(&c.key.bucket, group.0, body).await.map_err(Self::cold_failed)?;
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
}

impl<E: GroupEngine> SnapshotParts for NodeBackend<E> {
    fn max_snapshot_bytes(&self) -> u64 {
        MAX_SNAPSHOT_BYTES
    }

    async fn admit_part(&self, req: PartAdmission) -> Result<(), BackendError> {
        let cold = self.parts_store()?;
        let incarnation = self.current(&req.key, req.expect)?.incarnation;
        match cold.admit_part(&req.key, incarnation, req.declared).await.map_err(Self::cold_failed)? {
            Ok(()) => Ok(()),
            Err(bound) => {
                let (bytes, limit) = match bound {
                    StagedBound::Parts => (false, MAX_STAGED_PARTS),
                    StagedBound::Bytes => (true, MAX_STAGED_BYTES),
                };
                Err(PartsRefusal::StagedLimit { incarnation, bytes, limit }.into())
            }
        }
    }

    async fn stage_part(&self, part: StagedPart) -> Result<PartStaged, BackendError> {
        let cold = self.parts_store()?;
        let info = self.current(&part.key, part.expect)?;
        let id = cold.stage_part(&part.key, info.incarnation, part.body).await.map_err(Self::cold_failed)?;
        Ok(PartStaged { id, info })
    }

    async fn commit_parts(&self, c: PartsCommit) -> Result<SnapshotOk, BackendError> {
        self.parts_store()?;
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
        tokio::spawn(async move { backend.run_commit(c, incarnation).await })
            .await
            .map_err(|e| BackendError::Internal(format!("the commit task failed: {e}")))?
    }

    async fn discard_parts(&self, req: PartsDiscard) -> Result<StreamInfo, BackendError> {
        let cold = self.parts_store()?;
        let info = self.current(&req.key, req.expect)?;
        let _slot = cold.claim_commit(&req.key, info.incarnation, false).map_err(commit_refused)?;
        cold.discard_parts(&req.key, info.incarnation).await.map_err(Self::cold_failed)?;
        Ok(info)
    }
}
