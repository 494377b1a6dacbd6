//! Crash-recovery gates (spec/35 "Recovering after a host crash"). Under
//! `raft.wal.fsync = "never"` a voter acknowledges appends from the page
//! cache: a process crash loses nothing, a host crash may cost the
//! journal's unsynced tail. The run state file tells the two apart: it
//! names the host's boot and is marked clean after a clean stop. A voter
//! whose last run did not stop cleanly on an earlier boot of its host, or
//! whose run state is missing beside a non-empty journal, gates every
//! group it holds: it neither votes nor campaigns nor takes a transfer in
//! them until it has applied a fresh read barrier from the group's leader,
//! so it can never vote for an older history than the one it acknowledged.
//! A voter whose WAL cut a damaged frame from its newest segment at open
//! (a hole, zeros, a torn sector: not a frame cut short) gates the same
//! way, under `always` too. A lone voter gates the same way: with no
//! leader to take a barrier from, its groups stall, and only an operator's
//! recovery plan reopens them, under a new history. The gated groups are
//! kept in the WAL until they open.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use openraft::async_runtime::WatchReceiver;
use serde_json::{Value, json};

use super::engine::RaftEngine;

const RUN_STATE: &str = "run-state";
/// How long a gated group waits between attempts to reach its leader.
const RETRY: Duration = Duration::from_millis(200);
/// How long a gated replica waits to apply up to the barrier.
const APPLY_WAIT: Duration = Duration::from_secs(5);
/// A gated group that applied nothing for this long, and got no barrier,
/// reports itself stalled (spec/35): only an operator's plan opens it.
pub const STALL_AFTER: Duration = Duration::from_secs(30);

/// Whether a gated group stalls: it applied nothing for `STALL_AFTER`
/// since its clock last started (a plan taken bumps `resets`).
#[derive(Debug, Clone, Copy)]
pub struct StallClock {
    applied: u64,
    resets: u64,
    since: std::time::Instant,
}

impl StallClock {
    pub fn new(applied: u64, resets: u64, now: std::time::Instant) -> StallClock {
        StallClock { applied, resets, since: now }
    }

    /// Takes the group's applied index and reset count now; true while it
    /// is stalled.
    pub fn observe(&mut self, applied: u64, resets: u64, now: std::time::Instant) -> bool {
        if (applied, resets) != (self.applied, self.resets) {
            *self = StallClock::new(applied, resets, now);
        }
        now.saturating_duration_since(self.since) >= STALL_AFTER
    }
}

/// What the run state file said at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorRun {
    /// The last run stopped cleanly (its WAL closed and synced).
    Clean,
    /// The last run was still running on the host boot it names.
    Running {
        boot_id: String,
    },
    Missing,
}

impl PriorRun {
    fn name(&self) -> &'static str {
        match self {
            PriorRun::Clean => "clean",
            PriorRun::Running { .. } => "running",
            PriorRun::Missing => "missing",
        }
    }
}

/// The WAL cut a complete frame that failed verification in its newest
/// segment, which looks the same as media corruption of an acknowledged
/// write (spec/35, under either fsync policy).
pub const DAMAGED_TAIL: &str = "the WAL cut a damaged frame in its newest segment";

/// Why the journal may have lost acknowledged entries, or `None`.
pub fn lost_tail(
    prior: &PriorRun,
    boot_id: Option<&str>,
    fsync_always: bool,
    journal_holds_records: bool,
) -> Option<&'static str> {
    match prior {
        PriorRun::Clean => None,
        PriorRun::Missing if journal_holds_records => Some("the run state is missing beside a non-empty journal"),
        PriorRun::Missing => None,
        PriorRun::Running { .. } if fsync_always => None,
        // The same boot: only the process died, the page cache kept every write.
        PriorRun::Running { boot_id: was } if boot_id == Some(was.as_str()) => None,
        PriorRun::Running { .. } => Some("the host restarted since the last run, which did not stop cleanly"),
    }
}

/// The host's current boot, where the kernel names it.
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|s| s.trim().to_owned())
}

pub fn read_run_state(dir: &Path) -> PriorRun {
    match std::fs::read_to_string(dir.join(RUN_STATE)) {
        Ok(text) if text.trim() == "clean" => PriorRun::Clean,
        Ok(text) => match text.trim().strip_prefix("running ") {
            Some(boot) => PriorRun::Running { boot_id: boot.to_owned() },
            None => PriorRun::Running { boot_id: String::new() },
        },
        Err(_) => PriorRun::Missing,
    }
}

/// Writes the run state durably: `running <boot>` at start, `clean` after
/// a clean stop.
pub fn write_run_state(dir: &Path, clean: bool) -> std::io::Result<()> {
    let text = if clean { "clean\n".to_owned() } else { format!("running {}\n", boot_id().unwrap_or_default()) };
    ursula_wal::write_file_durably(dir, RUN_STATE, text.as_bytes())
}

/// The groups gated on this node, and why.
pub struct RecoveryGates {
    closed: Vec<AtomicBool>,
    /// Closed gates whose group applied nothing for `STALL_AFTER`.
    stalled: Vec<AtomicBool>,
    /// Closed gates that got their leader's barrier and apply up to it.
    catching_up: Vec<AtomicBool>,
    /// Bumped when a plan is taken: the stall clock starts again.
    stall_resets: Vec<std::sync::atomic::AtomicU64>,
    prior: PriorRun,
    reason: Option<&'static str>,
    /// The WAL's cut of a damaged frame at this start, described.
    damaged_tail: Option<String>,
    /// Held from reading the gated set to its WAL write, so that an older
    /// set never lands after a newer one.
    persisting: tokio::sync::Mutex<()>,
    /// The recovery plans this replica took (`recovery_plan`).
    pub plans: super::recovery_plan::RecoveryPlans,
}

impl RecoveryGates {
    pub fn new(groups: u32, prior: PriorRun, reason: Option<&'static str>, kept: &[u32]) -> RecoveryGates {
        let closed = (0..groups).map(|g| AtomicBool::new(reason.is_some() || kept.contains(&g))).collect();
        let stalled = (0..groups).map(|_| AtomicBool::new(false)).collect();
        let catching_up = (0..groups).map(|_| AtomicBool::new(false)).collect();
        let stall_resets = (0..groups).map(|_| Default::default()).collect();
        let persisting = tokio::sync::Mutex::new(());
        let plans = super::recovery_plan::RecoveryPlans::new(groups, Default::default());
        RecoveryGates {
            closed,
            stalled,
            catching_up,
            stall_resets,
            prior,
            reason,
            damaged_tail: None,
            persisting,
            plans,
        }
    }

    /// The plans recorded in the node's metadata, taken again at start.
    pub fn with_plans(mut self, plans: super::recovery_plan::RecoveryPlans) -> RecoveryGates {
        self.plans = plans;
        self
    }

    /// Whether `group` may campaign here: a plan's leader does, a plan's
    /// follower does not, and otherwise an open gate does.
    pub fn may_campaign(&self, group: u32) -> bool {
        match self.plans.held(group) {
            Some(plan) => plan.lead,
            None => !self.is_closed(group),
        }
    }

    /// Names the WAL's cut of a damaged frame in `wal_recovery`, whatever
    /// the reason reported beside it.
    pub fn with_damaged_tail(mut self, cut: Option<String>) -> RecoveryGates {
        self.damaged_tail = cut;
        self
    }

    /// `raft_groups[].recovery_gate` (spec/35): `open`, `awaiting_barrier`,
    /// `catching_up` (the barrier came, the replica applies up to it) or
    /// `stalled`.
    pub fn state(&self, group: u32) -> &'static str {
        let flag = |flags: &Vec<AtomicBool>| flags.get(group as usize).is_some_and(|f| f.load(Ordering::SeqCst));
        if !self.is_closed(group) {
            // An open replica that holds a plan which applies nothing stalls too.
            if flag(&self.stalled) && self.plans.held(group).is_some() { "stalled" } else { "open" }
        } else if flag(&self.stalled) {
            "stalled"
        } else if flag(&self.catching_up) {
            "catching_up"
        } else {
            "awaiting_barrier"
        }
    }

    /// A plan was taken: the group reports stalled again only after 30 s
    /// in which it applied nothing under it (spec/35, a wedged plan).
    pub fn restart_stall_clock(&self, group: u32) {
        if let Some(r) = self.stall_resets.get(group as usize) {
            r.fetch_add(1, Ordering::SeqCst);
        }
        self.set_stalled(group, false);
    }

    pub(super) fn stall_resets(&self, group: u32) -> u64 {
        self.stall_resets.get(group as usize).map_or(0, |r| r.load(Ordering::SeqCst))
    }

    pub fn stalled_groups(&self) -> Vec<u32> {
        let gated = |g: u32| self.is_closed(g) || self.plans.held(g).is_some();
        (0..self.stalled.len() as u32).filter(|g| gated(*g) && self.is_stalled(*g)).collect()
    }

    fn is_stalled(&self, group: u32) -> bool {
        self.stalled.get(group as usize).is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Marks a closed gate (or a held plan) stalled or not; says so once
    /// when it changes.
    pub(super) fn set_stalled(&self, group: u32, stalled: bool) {
        let Some(flag) = self.stalled.get(group as usize) else { return };
        if flag.swap(stalled, Ordering::SeqCst) != stalled {
            if stalled {
                tracing::error!(
                    group,
                    "recovery gate stalled: the replica applied nothing for {}s and got no leader barrier; \
                     writes its voters acknowledged after their last fsync may be lost, and only an operator's \
                     recovery plan (ursulactl recover-group) can accept that",
                    STALL_AFTER.as_secs()
                );
            } else {
                tracing::info!(group, "recovery gate no longer stalled: the replica applies again");
            }
        }
    }

    /// `recovery_gates` of `/__ursula/metrics`: the closed gates and, of
    /// those, the stalled ones.
    pub fn metrics(&self) -> Value {
        json!({ "closed": self.closed_groups(), "stalled": self.stalled_groups() })
    }

    pub fn is_closed(&self, group: u32) -> bool {
        self.closed.get(group as usize).is_some_and(|c| c.load(Ordering::SeqCst))
    }

    pub fn any_closed(&self) -> bool {
        self.closed.iter().any(|c| c.load(Ordering::SeqCst))
    }

    pub fn closed_groups(&self) -> Vec<u32> {
        (0..self.closed.len() as u32).filter(|g| self.is_closed(*g)).collect()
    }

    /// The gated set as the WAL keeps it: one byte per group.
    pub fn encode(&self) -> Bytes {
        self.closed.iter().map(|c| u8::from(c.load(Ordering::SeqCst))).collect::<Vec<u8>>().into()
    }

    pub fn decode(raw: &[u8]) -> Vec<u32> {
        raw.iter().enumerate().filter(|(_, b)| **b == 1).map(|(g, _)| g as u32).collect()
    }

    pub fn report(&self) -> Value {
        json!({
            "prior_run": self.prior.name(),
            "lost_tail_possible": self.reason.is_some(),
            "reason": self.reason,
            "damaged_tail": self.damaged_tail,
        })
    }
}

/// Opens `group`'s gate once this replica applied a fresh barrier from the
/// group's leader; then keeps the remaining set in the WAL.
pub async fn open_when_caught_up(engine: Arc<RaftEngine>, group: u32) {
    let gates = engine.recovery_gates.clone();
    let Some(g) = engine.groups().get(group as usize) else { return };
    let applied = || g.shared.applied_index.load(Ordering::Relaxed);
    let mut stall = StallClock::new(applied(), gates.stall_resets(group), std::time::Instant::now());
    while gates.is_closed(group) {
        gates.set_stalled(group, stall.observe(applied(), gates.stall_resets(group), std::time::Instant::now()));
        let leader = g.raft.metrics().borrow_watched().current_leader;
        let barrier = match (leader, &engine.peers) {
            (Some(id), Some(peers)) if id != engine.node_id => peers.read_barrier(id, group).await.ok(),
            _ => None,
        };
        if let Some(index) = barrier {
            let catching_up = gates.catching_up.get(group as usize);
            catching_up.inspect(|c| c.store(true, Ordering::SeqCst));
            let applied =
                g.raft.wait(Some(APPLY_WAIT)).applied_index_at_least(Some(index), "the leader's barrier").await;
            catching_up.inspect(|c| c.store(false, Ordering::SeqCst));
            if applied.is_ok() {
                open(&engine, group).await;
                return;
            }
        }
        tokio::time::sleep(RETRY).await;
    }
}

pub(super) async fn open(engine: &RaftEngine, group: u32) {
    let gates = &engine.recovery_gates;
    if let Some(c) = gates.closed.get(group as usize) {
        c.store(false, Ordering::SeqCst);
    }
    let _one_at_a_time = gates.persisting.lock().await;
    let encoded = gates.encode();
    if let Err(e) = super::boot::set_node_slot(&engine.wal, super::boot::SLOT_RECOVERY_GATES, encoded).await {
        tracing::warn!(group, error = %e, "the opened recovery gate could not be recorded; it closes again on a restart");
    }
    engine.elect_group(group);
    tracing::info!(group, "recovery gate opened");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_run_that_may_have_lost_its_tail_is_gated() {
        let running = |boot: &str| PriorRun::Running { boot_id: boot.into() };
        // (prior run, boot now, fsync always, journal holds records, gated)
        let table = [
            (PriorRun::Clean, Some("b1"), false, true, false),
            (running("b1"), Some("b1"), false, true, false),
            (running("b0"), Some("b1"), false, true, true),
            (running("b0"), None, false, true, true),
            (running("b0"), Some("b1"), true, true, false),
            (PriorRun::Missing, Some("b1"), false, true, true),
            (PriorRun::Missing, Some("b1"), false, false, false),
        ];
        for (prior, boot, always, records, gated) in table {
            assert_eq!(
                lost_tail(&prior, boot, always, records).is_some(),
                gated,
                "{prior:?} {boot:?} {always} {records}"
            );
        }
    }

    #[test]
    fn the_run_state_reads_back_what_was_written() {
        let dir = tempfile::tempdir().expect("a dir");
        assert_eq!(read_run_state(dir.path()), PriorRun::Missing);
        write_run_state(dir.path(), false).expect("running");
        let PriorRun::Running { boot_id: written } = read_run_state(dir.path()) else { panic!("running") };
        assert_eq!(Some(written), boot_id().or(Some(String::new())));
        write_run_state(dir.path(), true).expect("clean");
        assert_eq!(read_run_state(dir.path()), PriorRun::Clean);
    }

    #[test]
    fn a_gated_group_stalls_after_thirty_seconds_without_applying_and_recovers_when_it_applies() {
        let start = std::time::Instant::now();
        let mut clock = StallClock::new(7, 0, start);
        assert!(!clock.observe(7, 0, start + Duration::from_secs(29)));
        assert!(clock.observe(7, 0, start + STALL_AFTER), "nothing applied for 30 s");
        assert!(!clock.observe(8, 0, start + Duration::from_secs(31)), "it applied: the clock starts again");
        assert!(!clock.observe(8, 0, start + Duration::from_secs(60)));
        assert!(clock.observe(8, 0, start + Duration::from_secs(61)));
        assert!(!clock.observe(8, 1, start + Duration::from_secs(62)), "a plan taken: the clock starts again");
        assert!(clock.observe(8, 1, start + Duration::from_secs(92)));
        let gates = RecoveryGates::new(3, PriorRun::Missing, Some("why"), &[]);
        gates.set_stalled(1, true);
        assert_eq!(gates.metrics(), json!({ "closed": [0, 1, 2], "stalled": [1] }));
    }

    #[test]
    fn an_open_replica_that_holds_a_stalled_plan_reports_it_stalled() {
        let gates = RecoveryGates::new(2, PriorRun::Clean, None, &[]);
        gates.set_stalled(0, true);
        assert_eq!((gates.state(0), gates.stalled_groups()), ("open", vec![]), "no plan: an open gate");
        let plan =
            super::super::recovery_plan::HeldPlan { leader: 1, point: 3, cut: false, leader_term: 2, lead: true };
        gates.plans.put(0, plan);
        assert_eq!((gates.state(0), gates.stalled_groups()), ("stalled", vec![0]));
        gates.restart_stall_clock(0);
        assert_eq!(gates.state(0), "open", "a plan taken again starts its clock again");
        gates.set_stalled(0, true);
        assert!(gates.plans.drop_if(0, &plan));
        assert_eq!((gates.state(0), gates.stalled_groups()), ("open", vec![]), "the plan is done");
    }

    #[test]
    fn the_gated_set_round_trips_through_its_encoding() {
        let gates = RecoveryGates::new(5, PriorRun::Clean, None, &[1, 4]);
        assert_eq!(gates.closed_groups(), vec![1, 4]);
        assert_eq!(RecoveryGates::decode(&gates.encode()), vec![1, 4]);
        let all = RecoveryGates::new(3, PriorRun::Missing, Some("why"), &[]);
        assert_eq!(all.closed_groups(), vec![0, 1, 2]);
    }
}
