//! Background drivers of a Raft node: the snapshot driver (byte budget of
//! `raft.snapshot_log_budget`; openraft's own policy holds the entry
//! backstop), the S3 snapshot store's GC passes, and the disk guard's
//! free-space probe.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::disk_guard::{DiskGuard, available_bytes};
use super::engine::RaftEngine;
use super::snapshot_store::SnapshotStore;

const TICK: Duration = Duration::from_secs(1);
/// A group's byte threshold never exceeds this (spec/07, `raft.snapshot_log_budget`).
const MAX_GROUP_THRESHOLD: u64 = 16 * 1024 * 1024;

/// The log bytes after which a group snapshots: the larger of the budget
/// over twice the group count (at most 16 MiB) and twice its last snapshot.
pub fn threshold(budget: u64, groups: u32, last_snapshot: u64) -> u64 {
    (budget / (2 * u64::from(groups.max(1)))).min(MAX_GROUP_THRESHOLD).max(last_snapshot.saturating_mul(2)).max(1)
}

/// Ticks every `storage.snapshot.drive_interval`.
pub async fn snapshots(engine: Arc<RaftEngine>, budget: u64, every: Duration) {
    let count = engine.groups().len() as u32;
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        // While the snapshot store is unhealthy routine snapshots wait; a
        // log past its pressure limit still gets them.
        if engine.store_health.as_ref().is_some_and(|h| h.holds_snapshots()) && !engine.log_pressure.refusing() {
            continue;
        }
        for g in engine.groups() {
            let last = g.shared.snapshot_bytes.load(Ordering::Relaxed);
            if g.log.bytes_since_purge() >= threshold(budget, count, last) {
                let _ = g.raft.trigger().snapshot().await;
            }
        }
    }
}

/// The leadership balancer (`governance.leadership_balance`): each tick
/// moves up to `max_per_tick` of this node's leaderships to peers below
/// their fair share.
pub async fn balance(engine: Arc<RaftEngine>, config: crate::config::LeadershipBalance) {
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        engine.balance_once(config.max_per_tick, config.peer_timeout).await;
    }
}

/// Runs, every drive interval, the snapshot GC passes groups still owe:
/// after a replacement whose old object a send still pinned, after a
/// failed write, after a restart.
pub async fn snapshot_gc(objects: Arc<SnapshotStore>, groups: u32, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        for g in (0..groups).filter(|g| objects.owes(*g)) {
            objects.gc(g).await;
        }
    }
}

/// How often the node's log bytes are summed for the log pressure gate.
const LOG_PRESSURE_TICK: Duration = Duration::from_millis(200);

/// Measures the node's unsnapshotted log for the `RAFT_LOG_PRESSURE` gate.
pub async fn log_pressure(engine: Arc<RaftEngine>) {
    let mut tick = tokio::time::interval(LOG_PRESSURE_TICK);
    loop {
        tick.tick().await;
        let bytes = engine.groups().iter().map(|g| g.log.bytes_since_purge()).sum();
        engine.log_pressure.observe(bytes);
    }
}

pub async fn disk(guard: Arc<DiskGuard>, dir: PathBuf) {
    if !guard.enabled() {
        return;
    }
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let probe = dir.clone();
        let reading = tokio::task::spawn_blocking(move || available_bytes(&probe))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())));
        guard.observe(reading);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn threshold_follows_the_budget_rule() {
        // 1 GiB over 2 x 32 groups = 16 MiB, the cap.
        assert_eq!(super::threshold(1 << 30, 32, 0), 16 << 20);
        assert_eq!(super::threshold(1 << 30, 512, 0), 1 << 20);
        assert_eq!(super::threshold(1 << 30, 512, 3 << 20), 6 << 20, "twice the last snapshot");
    }
}
