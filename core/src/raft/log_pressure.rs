//! `RAFT_LOG_PRESSURE` (spec/38, "Write path"): a cluster node whose
//! unsnapshotted Raft log is over twice `raft.snapshot_log_budget` refuses
//! writes that carry a body until snapshots bring it below 1.5 times the
//! budget. The gap between the two keeps the gate from flapping around one
//! value. A single node never refuses for its log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use serde_json::{Map, Value};

pub struct LogPressure {
    budget: u64,
    /// Only a node with peers refuses (spec/38).
    enabled: bool,
    refusing: AtomicBool,
    log_bytes: AtomicU64,
    high_watermark: AtomicU64,
    refusals: AtomicU64,
}

/// Whether the gate is closed after a measure of `log_bytes`.
pub fn refuses_after(refusing: bool, log_bytes: u64, budget: u64) -> bool {
    let close_at = budget.saturating_mul(2);
    let open_below = budget.saturating_add(budget / 2);
    if refusing { log_bytes >= open_below } else { log_bytes > close_at }
}

impl LogPressure {
    pub fn new(budget: u64, clustered: bool) -> LogPressure {
        LogPressure {
            budget,
            enabled: clustered,
            refusing: AtomicBool::new(false),
            log_bytes: AtomicU64::new(0),
            high_watermark: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    /// Takes a measure of the node's log bytes since the groups' snapshots.
    pub fn observe(&self, log_bytes: u64) {
        self.log_bytes.store(log_bytes, Relaxed);
        self.high_watermark.fetch_max(log_bytes, Relaxed);
        let was = self.refusing.load(Relaxed);
        let now = self.enabled && refuses_after(was, log_bytes, self.budget);
        if now != was {
            self.refusing.store(now, Relaxed);
            if now {
                tracing::warn!(
                    log_bytes,
                    budget = self.budget,
                    "the Raft log is over twice its budget: writes with a body are refused until snapshots shrink it"
                );
            } else {
                tracing::info!(
                    log_bytes,
                    budget = self.budget,
                    "the Raft log is back below 1.5 times its budget: writes resume"
                );
            }
        }
    }

    pub fn refusing(&self) -> bool {
        self.refusing.load(Relaxed)
    }

    /// Whether a write with a body is refused now (counted when it is).
    pub fn refuse_write(&self) -> bool {
        let refusing = self.refusing.load(Relaxed);
        if refusing {
            self.refusals.fetch_add(1, Relaxed);
        }
        refusing
    }

    pub fn metrics(&self, m: &mut Map<String, Value>) {
        m.insert("raft_log_bytes".into(), self.log_bytes.load(Relaxed).into());
        m.insert("raft_log_bytes_high_watermark".into(), self.high_watermark.load(Relaxed).into());
        m.insert("raft_log_pressure".into(), self.refusing.load(Relaxed).into());
        m.insert("raft_log_pressure_refusals".into(), self.refusals.load(Relaxed).into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_closes_past_twice_the_budget_and_opens_below_one_and_a_half() {
        // (refusing before, log bytes, refusing after) with a budget of 100.
        let table = [
            (false, 150, false),
            (false, 200, false),
            (false, 201, true),
            (true, 180, true),
            (true, 150, true),
            (true, 149, false),
            (false, 180, false),
        ];
        for (before, bytes, after) in table {
            assert_eq!(refuses_after(before, bytes, 100), after, "{before} at {bytes}");
        }
    }

    #[test]
    fn a_single_node_never_refuses_but_still_reports_its_log() {
        let single = LogPressure::new(100, false);
        single.observe(1_000);
        assert!(!single.refuse_write());
        let cluster = LogPressure::new(100, true);
        cluster.observe(1_000);
        assert!(cluster.refuse_write());
        cluster.observe(120);
        assert!(!cluster.refuse_write());
        let mut m = Map::new();
        cluster.metrics(&mut m);
        assert_eq!(m["raft_log_bytes_high_watermark"], 1_000);
        assert_eq!(m["raft_log_pressure_refusals"], 1);
        assert_eq!(m["raft_log_bytes"], 120);
    }
}
