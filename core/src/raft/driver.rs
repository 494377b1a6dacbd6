//! Background drivers of a Raft node: the snapshot driver (byte budget of
//! `raft.snapshot_log_budget`; openraft's own policy holds the entry
//! backstop), the S3 snapshot store's GC passes, and the disk guard's
//! free-space probe.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::disk_guard::{DiskGuard, available_bytes};
use super::engine::RaftEngine;
use super::snapshot_plan::{GroupLog, Limits, plan};
use super::snapshot_store::SnapshotStore;

const TICK: Duration = Duration::from_secs(1);
/// A group's byte threshold never exceeds this (spec/07, `raft.snapshot_log_budget`).
const MAX_GROUP_THRESHOLD: u64 = 16 * 1024 * 1024;

/// The log bytes after which a group snapshots: the larger of the budget
/// over twice the group count (at most 16 MiB) and twice its last snapshot.
pub fn threshold(budget: u64, groups: u32, last_snapshot: u64) -> u64 {
    (budget / (2 * u64::from(groups.max(1)))).min(MAX_GROUP_THRESHOLD).max(last_snapshot.saturating_mul(2)).max(1)
}

/// How long a group the driver asked to snapshot counts as building before
/// its build shows (openraft starts it on the group's state-machine task).
const CLAIM_WAIT: Duration = Duration::from_secs(5);
/// How often a pass whose build slots are taken looks for a free one.
const SLOT_POLL: Duration = Duration::from_millis(20);

/// Ticks every `storage.snapshot.drive_interval`. Each pass starts the
/// builds `snapshot_plan::plan` names, and while due groups wait for a slot
/// it keeps starting them as builds end, until the next tick.
pub async fn snapshots(engine: Arc<RaftEngine>, limits: Limits, every: Duration, deleted_data_max_age: Duration) {
    let removal_due = deleted_data_max_age / 4;
    let count = engine.groups().len() as u32;
    let mut asked: HashMap<usize, (Instant, u64)> = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // While the snapshot store is unhealthy routine snapshots wait; a
        // log past its pressure limit still gets them.
        if engine.store_health.as_ref().is_some_and(|h| h.holds_snapshots()) && !engine.log_pressure.refusing() {
            continue;
        }
        let pass_ends = Instant::now() + every;
        let mut started = 0;
        let lagging = journal_lagging(&engine).await;
        loop {
            let groups: Vec<GroupLog> = engine
                .groups()
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let index = g.shared.snapshot_index.load(Ordering::Relaxed);
                    let claimed =
                        asked.get(&i).is_some_and(|(at, before)| index <= *before && at.elapsed() < CLAIM_WAIT);
                    GroupLog {
                        group: i,
                        log_bytes: g.log.bytes_since_purge(),
                        threshold: threshold(limits.budget, count, g.shared.snapshot_bytes.load(Ordering::Relaxed)),
                        busy: claimed || g.shared.building.load(Ordering::Relaxed),
                        owes_removal: g.shared.pending_removal().is_some_and(|r| r.at.elapsed() >= removal_due),
                        wal_lagging: lagging.contains(&i),
                    }
                })
                .collect();
            let in_flight = groups.iter().filter(|g| g.busy).count();
            // The peak counts builds running, not the ones only asked for.
            let building = engine.groups().iter().filter(|g| g.shared.building.load(Ordering::Relaxed)).count();
            engine.snapshot_builds_peak.fetch_max(building, Ordering::Relaxed);
            let due = groups.iter().any(|g| !g.busy && g.due());
            let chosen = plan(&groups, limits, in_flight);
            let cap = limits.per_tick.saturating_mul(limits.max_builds);
            for i in &chosen {
                let g = &engine.groups()[*i];
                asked.insert(*i, (Instant::now(), g.shared.snapshot_index.load(Ordering::Relaxed)));
                let _ = g.raft.trigger().snapshot().await;
                started += 1;
            }
            if (chosen.is_empty() && !due) || started >= cap || Instant::now() >= pass_ends {
                break;
            }
            tokio::time::sleep(SLOT_POLL).await;
        }
        asked.retain(|_, (at, _)| at.elapsed() < CLAIM_WAIT);
    }
}

/// The groups the journal reports lagging (too much live log to copy out
/// of the old segments they keep) that a snapshot would free. One that
/// applied nothing since its snapshot gains nothing from another: its log
/// is purged through the snapshot it has instead (spec/35 "Deleted data").
async fn journal_lagging(engine: &RaftEngine) -> std::collections::HashSet<usize> {
    let mut lagging = std::collections::HashSet::new();
    for group in engine.wal.lagging_groups() {
        let Some(g) = engine.groups().get(group as usize) else { continue };
        let snapshot = g.shared.snapshot_index.load(Ordering::Relaxed);
        if snapshot > 0 && g.shared.applied_index.load(Ordering::Relaxed) <= snapshot {
            let _ = g.raft.trigger().purge_log(snapshot).await;
        } else {
            lagging.insert(group as usize);
        }
    }
    lagging
}

/// Journal compaction (spec/35 "Deleted data"): every drive interval one
/// pass frees the segments that held dead entries for a quarter of
/// `raft.deleted_data_max_age`, copying quiet groups' few live entries
/// forward, an eighth of a segment at most.
pub async fn journal(engine: Arc<RaftEngine>, limits: ursula_wal::CompactLimits, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let wal = engine.wal.clone();
        match tokio::task::spawn_blocking(move || wal.compact(limits)).await {
            Ok(Ok(())) => {}
            Ok(Err(ursula_wal::WalError::Closed)) | Err(_) => return,
            Ok(Err(e)) => tracing::warn!(error = %e, "WAL: a compaction pass failed; the next tick tries again"),
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

/// The leader's voter upkeep, every second: configured peers dropped from
/// a group's voters rejoin it (`restore_configured_voters`).
pub async fn keep_voters(engine: Arc<RaftEngine>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        engine.restore_configured_voters().await;
    }
}

/// Runs, every drive interval, the snapshot GC passes groups still owe
/// (after a replacement whose old object a send still pinned, after a
/// failed write, after a restart), at most `per_tick` of them, taking up
/// where the last tick stopped.
pub async fn snapshot_gc(objects: Arc<SnapshotStore>, groups: u32, every: Duration, per_tick: usize) {
    let mut tick = tokio::time::interval(every);
    let mut next = 0;
    loop {
        tick.tick().await;
        let owing: Vec<u32> = (0..groups).map(|i| (next + i) % groups.max(1)).filter(|g| objects.owes(*g)).collect();
        for g in owing.into_iter().take(per_tick.max(1)) {
            objects.gc(g).await;
            next = (g + 1) % groups.max(1);
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
