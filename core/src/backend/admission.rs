//! The node's backpressure before a proposal or a wait (spec/07,
//! spec/38 "Write path"): a group's write bytes proposed and not yet
//! applied stay under `raft.max_uncommitted_size_per_group`
//! (`503 RAFT_UNCOMMITTED_BACKPRESSURE`), and the node's live-read waiters
//! under `runtime.live_read_max_waiters_per_core` times the cores
//! (`503 LIVE_READ_BACKPRESSURE`). Both refuse at once and hold nothing, so
//! a slow quorum or a crowd of tailers costs the node a refusal, not memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ursula_http::ops::Metrics;
use ursula_http::{BackendError, Unavailable};
use ursula_stream::routing::GroupId;

use crate::config;

pub(crate) struct Admission {
    /// Per group: write bytes proposed and not yet answered.
    uncommitted: Vec<AtomicU64>,
    uncommitted_limit: u64,
    live_read_limit: Option<u64>,
    refused_uncommitted: AtomicU64,
    refused_live_reads: AtomicU64,
}

impl Admission {
    pub fn new(groups: u32, limits: &config::Admission) -> Arc<Admission> {
        Arc::new(Admission {
            uncommitted: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            uncommitted_limit: limits.uncommitted_bytes_per_group,
            live_read_limit: limits.live_read_waiters,
            refused_uncommitted: AtomicU64::new(0),
            refused_live_reads: AtomicU64::new(0),
        })
    }

    /// Counts `bytes` of `group` as proposed until the guard drops (the
    /// proposal answered or failed). A write into a group with nothing
    /// outstanding is always taken, so a limit below one body still lets
    /// bodies through one at a time.
    pub fn propose(self: &Arc<Self>, group: GroupId, bytes: u64) -> Result<Uncommitted, BackendError> {
        let Some(slot) = self.uncommitted.get(group.0 as usize) else {
            return Ok(Uncommitted { admission: self.clone(), group: 0, bytes: 0 });
        };
        let limit = self.uncommitted_limit;
        let taken = slot.fetch_update(Relaxed, Relaxed, |held| {
            let total = held.saturating_add(bytes);
            (held == 0 || total <= limit).then_some(total)
        });
        if taken.is_err() {
            self.refused_uncommitted.fetch_add(1, Relaxed);
            return Err(BackendError::Unavailable { reason: Unavailable::RaftUncommitted, retry_after_secs: 1 });
        }
        Ok(Uncommitted { admission: self.clone(), group: group.0 as usize, bytes })
    }

    /// Whether one more reader may wait, beside the `waiting` ones.
    pub fn live_read(&self, waiting: u64) -> Result<(), BackendError> {
        match self.live_read_limit {
            Some(limit) if waiting >= limit => {
                self.refused_live_reads.fetch_add(1, Relaxed);
                Err(BackendError::Unavailable { reason: Unavailable::LiveReads, retry_after_secs: 1 })
            }
            _ => Ok(()),
        }
    }

    pub fn metrics(&self, m: &mut Metrics) {
        let held: u64 = self.uncommitted.iter().map(|g| g.load(Relaxed)).sum();
        m.count("raft_uncommitted_bytes", held);
        m.count("raft_uncommitted_backpressure_events", self.refused_uncommitted.load(Relaxed));
        m.count("live_read_backpressure_events", self.refused_live_reads.load(Relaxed));
        m.count("live_read_max_waiters", self.live_read_limit.unwrap_or(0));
    }
}

/// One proposal's bytes, counted while it is outstanding.
pub(crate) struct Uncommitted {
    admission: Arc<Admission>,
    group: usize,
    bytes: u64,
}

impl Drop for Uncommitted {
    fn drop(&mut self) {
        if let Some(slot) = self.admission.uncommitted.get(self.group) {
            slot.fetch_sub(self.bytes, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(uncommitted: u64, live: Option<u64>) -> config::Admission {
        config::Admission {
            inflight_body_bytes: 1 << 30,
            uncommitted_bytes_per_group: uncommitted,
            live_read_waiters: live,
        }
    }

    fn refused_with(r: Result<impl Sized, BackendError>, why: Unavailable) -> bool {
        matches!(r, Err(BackendError::Unavailable { reason, .. }) if reason == why)
    }

    #[test]
    fn a_group_takes_writes_until_its_outstanding_bytes_would_pass_the_limit() {
        let a = Admission::new(2, &limits(100, None));
        let first = a.propose(GroupId(0), 70).expect("70");
        assert!(refused_with(a.propose(GroupId(0), 31), Unavailable::RaftUncommitted));
        let other_group = a.propose(GroupId(1), 100).expect("another group has its own budget");
        let second = a.propose(GroupId(0), 30).expect("70 + 30");
        drop(first);
        let third = a.propose(GroupId(0), 70).expect("30 + 70 once the first answered");
        drop((second, third, other_group));
        let lone = a.propose(GroupId(0), 500).expect("a lone write larger than the limit");
        assert!(refused_with(a.propose(GroupId(0), 1), Unavailable::RaftUncommitted));
        drop(lone);
        let mut m = Metrics::default();
        a.metrics(&mut m);
        assert_eq!(m.get("raft_uncommitted_bytes").and_then(serde_json::Value::as_u64), Some(0));
        assert_eq!(m.get("raft_uncommitted_backpressure_events").and_then(serde_json::Value::as_u64), Some(2));
    }

    #[test]
    fn live_reads_stop_at_the_limit_and_none_means_no_limit() {
        let a = Admission::new(1, &limits(1, Some(2)));
        assert!(a.live_read(1).is_ok());
        assert!(refused_with(a.live_read(2), Unavailable::LiveReads));
        let unlimited = Admission::new(1, &limits(1, None));
        assert!(unlimited.live_read(u64::MAX).is_ok());
    }
}
