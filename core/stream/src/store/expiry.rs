//! Expired streams leave their group through `ExpireStreams` entries that
//! the group's leader writes in the background (spec/35 "Deleted data"):
//! each removes a bounded number, earliest expiry first, once the
//! proposer's clock is a second past their expiry. A request that names
//! an expired stream answers as if it were gone before that.

use super::{Outcome, StreamStore};
use crate::command::ApplyCtx;
use crate::ids::{BucketId, StreamId};

/// A stream leaves once the proposer's clock is this far past its expiry,
/// so replicas whose clocks run a little behind agree it expired.
pub const EXPIRY_GRACE_MS: u64 = 1000;

impl StreamStore {
    /// The streams an `ExpireStreams` proposed at `now_ms` would remove,
    /// earliest expiry first: expired a second or more before, and not
    /// kept for forks that read through them.
    fn expired(&self, now_ms: u64) -> Vec<(u64, BucketId, StreamId)> {
        let cutoff = now_ms.saturating_sub(EXPIRY_GRACE_MS);
        let mut due: Vec<(u64, BucketId, StreamId)> = self
            .streams
            .iter()
            .flat_map(|(bucket, streams)| {
                streams.iter().filter_map(move |(id, s)| {
                    let at = s.clock.deadline_ms?;
                    (s.clock.expired(cutoff) && !s.referenced()).then(|| (at, bucket.clone(), id.clone()))
                })
            })
            .collect();
        due.sort_unstable();
        due
    }

    /// How many streams a sweep at `now_ms` would remove (the leader's
    /// look before it writes an entry).
    pub fn expired_count(&self, now_ms: u64) -> usize {
        self.expired(now_ms).len()
    }

    pub(super) fn expire(&mut self, max: u32, ctx: ApplyCtx) -> Outcome {
        let mut released = Vec::new();
        let mut removed = 0;
        for (_, bucket, id) in self.expired(ctx.now_ms).into_iter().take(max as usize) {
            let Some(streams) = self.streams.get_mut(&bucket) else { continue };
            if let Some(s) = streams.remove(&id) {
                released.extend(s.fork.as_ref().and_then(|f| f.base.clone()));
                removed += 1;
            }
        }
        self.forget_stale_rewrites();
        Outcome::Sweep { removed, released }
    }
}
