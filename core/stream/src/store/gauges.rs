//! What one group's replicated state holds: `group_state_gauges` of
//! `/__ursula/metrics` (spec/35 "Memory"), so an operator sees which group
//! grows and by what.

use std::collections::BTreeMap;

use super::StreamStore;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StateGauges {
    /// Streams, live or kept for their forks.
    pub streams: u64,
    /// Buckets with at least one stream.
    pub buckets: u64,
    /// Of those streams, the deleted ones kept for forks that read through them.
    pub soft_deleted_streams: u64,
    /// Producer receipts kept (one per producer and stream).
    pub producers: u64,
    /// Payload held in memory, not yet in the cold tier.
    pub hot_bytes: u64,
}

impl StreamStore {
    pub fn gauges(&self) -> StateGauges {
        let mut g = StateGauges { buckets: self.bucket_count() as u64, ..StateGauges::default() };
        for s in self.streams.values().flat_map(BTreeMap::values) {
            g.streams += 1;
            g.soft_deleted_streams += u64::from(s.soft_deleted());
            g.producers += s.producers().len() as u64;
            g.hot_bytes += s.data.hot_bytes();
        }
        g
    }
}
