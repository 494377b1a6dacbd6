//! Housekeeping a node runs beside its requests: the background removal of
//! expired streams (spec/35 "Deleted data") and the look for fork
//! references whose fork is gone.
//!
//! Each group's leader looks at its expired streams every minute, or every
//! quarter of `raft.deleted_data_max_age` when that is shorter, and writes
//! `ExpireStreams` entries only when some expired a second or more ago: up
//! to 16 per group, each removing up to 256 streams earliest expiry first,
//! and none started after 250 ms in the group. A group left with expired
//! streams is looked at again a second later, 50 ms per group, until its
//! backlog is gone. A request that names an expired stream answers as if
//! it were gone before any of this.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;
use ursula_stream::routing::GroupId;
use ursula_stream::{Command, ExpireStreams, Outcome};

use crate::engine::{GroupEngine, Leadership};

/// Streams one entry removes at most.
const STREAMS_PER_ENTRY: u32 = 256;
/// Entries one pass writes per group at most.
const ENTRIES_PER_PASS: usize = 16;
/// No entry starts after this much of a pass's time in one group.
const PASS_TIME: Duration = Duration::from_millis(250);
/// A backlog pass: a second later, and this much time per group.
const BACKLOG_DELAY: Duration = Duration::from_secs(1);
const BACKLOG_TIME: Duration = Duration::from_millis(50);
/// Full passes between two looks for orphaned fork references.
const REFERENCE_CHECK_EVERY: u64 = 10;

/// `ttl_expiry_*` of `/__ursula/metrics`.
#[derive(Default)]
pub struct ExpiryStats {
    /// `ExpireStreams` entries this node's leaders wrote.
    pub sweeps: AtomicU64,
    /// Streams those entries removed.
    pub swept_streams: AtomicU64,
    /// Groups the latest pass left with expired streams.
    pub due_groups: AtomicU64,
}

impl ExpiryStats {
    pub fn metrics(&self, m: &mut ursula_http::Metrics) {
        m.count("ttl_expiry_sweeps", self.sweeps.load(Relaxed));
        m.count("ttl_expiry_swept_streams", self.swept_streams.load(Relaxed));
        m.count("ttl_expiry_sweep_due_groups", self.due_groups.load(Relaxed));
    }
}

/// How often a full pass runs: every minute, or every quarter of
/// `raft.deleted_data_max_age` when that is shorter.
pub fn sweep_interval(deleted_data_max_age: Duration) -> Duration {
    (deleted_data_max_age / 4).min(Duration::from_secs(60)).max(Duration::from_millis(100))
}

pub async fn sweep_forever<E: GroupEngine>(engine: Arc<E>, every: Duration, stats: Arc<ExpiryStats>) {
    let all: BTreeSet<u32> = (0..engine.group_count()).collect();
    let mut backlog = BTreeSet::new();
    let mut next_full = Instant::now() + every;
    for round in 0u64.. {
        let full = backlog.is_empty() || Instant::now() >= next_full;
        let (groups, time) = if full { (&all, PASS_TIME) } else { (&backlog, BACKLOG_TIME) };
        let mut left = BTreeSet::new();
        for &g in groups {
            if sweep_group(&*engine, GroupId(g), time, &stats).await {
                left.insert(g);
            }
        }
        if full {
            next_full = Instant::now() + every;
            // References are judged an hour after they were taken: a look
            // every tenth pass is soon enough.
            if round % REFERENCE_CHECK_EVERY == 0 {
                for g in 0..engine.group_count() {
                    crate::backend::forks::release_orphaned_references(&*engine, GroupId(g)).await;
                }
            }
        } else {
            // The groups a backlog pass did not look at keep their backlog.
            left.extend(all.iter().filter(|g| backlog.contains(g) && !groups.contains(g)));
        }
        backlog = left;
        stats.due_groups.store(backlog.len() as u64, Relaxed);
        let wake = if backlog.is_empty() { next_full } else { (Instant::now() + BACKLOG_DELAY).min(next_full) };
        tokio::time::sleep_until(wake).await;
    }
}

/// One group's turn, when this node leads it; returns whether it still
/// holds expired streams (a backlog). A failed write ends the turn and
/// leaves the group to the next full pass.
async fn sweep_group<E: GroupEngine>(engine: &E, group: GroupId, time: Duration, stats: &ExpiryStats) -> bool {
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return false;
    }
    let expired = || engine.query(group, |store, now| store.expired_count(now)).unwrap_or(0);
    let ends = Instant::now() + time;
    for _ in 0..ENTRIES_PER_PASS {
        if expired() == 0 {
            return false;
        }
        if Instant::now() >= ends {
            return true;
        }
        let command = Command::ExpireStreams(ExpireStreams { max: STREAMS_PER_ENTRY });
        let Ok(Outcome::Sweep { removed, released }) = engine.propose(group, command).await else { return false };
        stats.sweeps.fetch_add(1, Relaxed);
        stats.swept_streams.fetch_add(removed as u64, Relaxed);
        for base in released {
            crate::backend::forks::release_chain(engine, &base).await;
        }
    }
    expired() > 0
}
