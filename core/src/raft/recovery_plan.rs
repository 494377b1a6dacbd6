//! Recovery plans (spec/35 "Recovering after a host crash"): when a
//! majority of a group's voters may have lost acknowledged writes, their
//! gates stay closed and the group elects no one. An operator accepts the
//! loss with a plan, `POST /__ursula/raft/{group}/recovery/accept-unsynced-loss`:
//! one replica, the plan's leader, campaigns above the plan term and votes
//! for no one else; every other replica votes only for it, and only above
//! the plan term, and takes replication only from a leader above it. Once
//! elected, the leader's first entry is the group's history event
//! (`Command::AcceptLoss`): every stream gets a new `Stream-Incarnation`.
//! The leader serves nothing until the event applies, and each replica
//! keeps its plan, across restarts, until it applied the event.
//!
//! This module holds the request, the checks a replica makes before it
//! takes a plan (pure, table-tested), and the plans a node holds.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A leader whose replication reached a replica this recently is live:
/// the replica refuses a plan (spec/35).
pub const LIVE_LEADER: Duration = Duration::from_secs(3);
/// How far above this replica's term a plan term may be: a term near
/// `u64::MAX` would leave no room for the elections after it.
const MAX_TERM_STEP: u64 = 1 << 32;

/// The body of `accept-unsynced-loss`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct PlanRequest {
    pub leader: u64,
    pub point: u64,
    pub cut: bool,
    #[serde(default)]
    pub point_entry: Option<PointEntry>,
    pub step: Step,
    pub expected: Expected,
}

/// The committed entry a cutting plan keeps, as another replica reported it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct PointEntry {
    pub term: u64,
    pub node_id: u64,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// To the plan's leader: the highest `current_term` any replica reported.
    Lead { highest_term: u64 },
    /// To every other replica: the plan term the leader answered.
    Follow { leader_term: u64 },
}

/// The replica's log and term as the operator read them.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub struct Expected {
    pub last_log_index: Option<u64>,
    pub last_log_term: Option<u64>,
    pub current_term: u64,
}

/// What a replica knows of itself when a plan arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub node_id: u64,
    /// `recovery_gate` of the metrics.
    pub gate: &'static str,
    /// It leads with a quorum that acknowledged it lately.
    pub leads_live: bool,
    /// It names itself leader (with or without a live quorum).
    pub leads: bool,
    /// The leader whose replication reached it within `LIVE_LEADER`.
    pub live_leader: Option<u64>,
    pub current_term: u64,
    /// `(term, index)` of its last entry.
    pub last_log: Option<(u64, u64)>,
    /// `(term, node, index)` of its committed entry.
    pub committed: Option<(u64, u64, u64)>,
    pub applied: u64,
    pub voter_configs: Vec<Vec<u64>>,
    pub committed_voter_configs: Vec<Vec<u64>>,
    /// Its term moves by itself: its gate is open, or it leads a plan.
    pub campaigns: bool,
}

/// Why a replica did not take a plan: `409` with this as `refusal`.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: &'static str,
    /// More fields of `refusal`, beside `reason`.
    pub detail: Value,
    pub message: String,
}

pub fn refuse(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal { reason, detail: json!({}), message: message.into() }
}

fn names(configs: &[Vec<u64>], node: u64) -> bool {
    configs.iter().any(|c| c.contains(&node))
}

fn voters(configs: &[Vec<u64>]) -> usize {
    configs.iter().flatten().collect::<std::collections::BTreeSet<_>>().len()
}

/// The checks of spec/35, in its order, before a replica takes `plan`.
pub fn check(plan: &PlanRequest, r: &Replica) -> Result<(), Refusal> {
    if r.current_term == 0 && r.last_log.is_none() {
        let why = "this replica holds no vote: it cannot tell the current leader from a stale one";
        return Err(refuse("missing_vote_floor", why));
    }
    if r.leads_live {
        return Err(refuse("not_stalled", "this replica leads the group with a live quorum"));
    }
    if r.leads {
        // spec/35 demotes it by restarting its group in the process, which
        // this release does not do: a leader elected before the plan would
        // keep leading at or below the plan term.
        let why = "this replica names itself leader without a live quorum: restart it, then plan again";
        return Err(refuse("leads_without_quorum", why));
    }
    if let Some(leader) = r.live_leader {
        let mut refusal = refuse("follows_leader", format!("node {leader} replicated to this replica lately"));
        refusal.detail = json!({ "leader": leader });
        return Err(refusal);
    }
    if ["awaiting_barrier", "catching_up", "cutting"].contains(&r.gate) {
        let why = format!("the recovery gate is {}: it may still open through a leader's barrier", r.gate);
        return Err(refuse("not_stalled", why));
    }
    let lead = plan.leader == r.node_id;
    if lead != matches!(plan.step, Step::Lead { .. }) {
        let why = if lead { "the plan's leader takes step lead" } else { "only the plan's leader takes step lead" };
        return Err(refuse("step_mismatch", why));
    }
    if let Step::Follow { leader_term } = plan.step
        && leader_term < plan.expected.current_term
    {
        let why = format!("plan term {leader_term} is below the term {} read here", plan.expected.current_term);
        return Err(refuse("plan_term_below_vote", why));
    }
    let plan_term = match plan.step {
        Step::Lead { highest_term } => highest_term,
        Step::Follow { leader_term } => leader_term,
    };
    if plan_term > r.current_term.saturating_add(MAX_TERM_STEP) {
        let why = format!("plan term {plan_term} is far above this replica's term {}", r.current_term);
        return Err(refuse("plan_term_out_of_range", why));
    }
    let all_configs: Vec<Vec<u64>> = r.voter_configs.iter().chain(&r.committed_voter_configs).cloned().collect();
    if plan.cut && voters(&all_configs) == 1 {
        let why = "a single voter's log is kept whole: no other voter could have overwritten it";
        return Err(refuse("single_voter_cut", why));
    }
    let campaigns_under = if plan.cut { &r.committed_voter_configs } else { &r.voter_configs };
    if lead && !names(campaigns_under, r.node_id) {
        return Err(refuse(
            "leader_not_voter",
            "the plan's leader is no voter of the membership it would campaign under",
        ));
    }
    let log = (plan.expected.last_log_term, plan.expected.last_log_index);
    let moved = log != (r.last_log.map(|l| l.0), r.last_log.map(|l| l.1))
        || (!r.campaigns && plan.expected.current_term != r.current_term);
    if moved {
        let mut refusal = refuse("log_moved", "the replica no longer holds the log the plan expects");
        refusal.detail = json!({
            "last_log_term": r.last_log.map(|l| l.0),
            "last_log_index": r.last_log.map(|l| l.1),
            "current_term": r.current_term,
        });
        return Err(refusal);
    }
    let known = r.committed.map_or(0, |c| c.2).max(r.applied);
    if known > plan.point {
        let mut refusal = refuse("recovery_point_behind", format!("this replica knows entry {known} committed"));
        refusal.detail = json!({ "committed_index": r.committed.map(|c| c.2), "last_applied_index": r.applied });
        return Err(refusal);
    }
    if plan.cut {
        // Cutting a log back to its committed entry restarts the group in
        // the process; this release does not build it yet.
        let why = "this node cannot run a plan that cuts logs: plan without a cut or restore from a backup";
        return Err(refuse("cut_unsupported", why));
    }
    if lead && r.last_log.map(|l| l.1) != Some(plan.point) {
        let why = format!("the plan's point {} is not this replica's last entry", plan.point);
        return Err(refuse("point_mismatch", why));
    }
    Ok(())
}

/// A plan this replica took, kept in the node's metadata until the
/// group's history event applies here.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeldPlan {
    pub leader: u64,
    pub point: u64,
    pub cut: bool,
    /// Elections at or below it elect no one under the plan.
    pub leader_term: u64,
    /// This replica is the plan's leader.
    pub lead: bool,
}

impl HeldPlan {
    /// The history the plan's event starts in `group`: derived from the
    /// plan, so that every replica that holds it knows the event by it,
    /// and an older rewrite replayed after a restart is never taken for it.
    pub fn history_id(&self, group: u32) -> u64 {
        let parts = [u64::from(group), self.leader, self.point, self.leader_term].map(u64::to_le_bytes);
        crate::backup::derived_history_id(b"ursula accepted loss", &parts.each_ref().map(|p| p.as_slice()))
    }

    /// `raft_groups[].recovery` of the metrics.
    pub fn report(&self) -> Value {
        json!({
            "leader": self.leader,
            "point": self.point,
            "cut": self.cut,
            "leader_term": self.leader_term,
            "step": if self.lead { "lead" } else { "follow" },
        })
    }

    /// Whether this replica may vote for `candidate` at `term`, whose last
    /// entry is `last_log` (`(term, index)`).
    pub fn admits_vote(&self, candidate: u64, term: u64, last_log: Option<(u64, u64)>) -> Result<(), String> {
        if self.lead {
            return Err("this replica leads a recovery plan and votes for no other candidate".into());
        }
        if candidate != self.leader {
            return Err(format!("this replica holds a recovery plan and votes only for node {}", self.leader));
        }
        if term <= self.leader_term {
            return Err(format!("the plan's leader must campaign above plan term {}", self.leader_term));
        }
        // An entry past the point from a term the plan replaced is one the
        // plan's leader took from a stale leader.
        if let Some((log_term, index)) = last_log
            && index > self.point
            && log_term <= self.leader_term
        {
            return Err(format!("the candidate holds entry {index} of term {log_term}, past the plan's point"));
        }
        Ok(())
    }

    /// Whether `event`, the last accepted loss this replica applied, ends
    /// the plan: one proposed in a term above the plan term came from a
    /// leader elected under this plan or a later one; an older rewrite
    /// replayed after a restart is at or below it.
    pub fn done_by(&self, event: Option<ursula_stream::store::HistoryEvent>) -> bool {
        event.is_some_and(|e| e.term > self.leader_term)
    }

    /// Whether this replica takes replication from a leader of `term`.
    pub fn admits_leader(&self, term: u64) -> bool {
        term > self.leader_term
    }
}

/// The plans this node holds, one per group at most.
pub struct RecoveryPlans {
    held: Mutex<BTreeMap<u32, HeldPlan>>,
    /// How many plans `held` holds: every request of every group asks, and
    /// almost always none is held, so the answer needs no lock then.
    count: std::sync::atomic::AtomicUsize,
    /// A plan is being taken: another waits (`plan_in_flight`).
    taking: Vec<AtomicBool>,
    /// When a leader's replication last reached the replica: milliseconds
    /// after `epoch`, plus one (0: never).
    heard: Vec<AtomicU64>,
    epoch: Instant,
    /// Held from reading the plans to their WAL write, so that an older
    /// set never lands after a newer one.
    pub(super) persisting: tokio::sync::Mutex<()>,
}

impl RecoveryPlans {
    pub fn new(groups: u32, held: BTreeMap<u32, HeldPlan>) -> RecoveryPlans {
        RecoveryPlans {
            count: std::sync::atomic::AtomicUsize::new(held.len()),
            held: Mutex::new(held),
            taking: (0..groups).map(|_| AtomicBool::new(false)).collect(),
            heard: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
            persisting: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, HeldPlan>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn held(&self, group: u32) -> Option<HeldPlan> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.lock().get(&group).copied()
    }

    pub fn all(&self) -> BTreeMap<u32, HeldPlan> {
        self.lock().clone()
    }

    pub(super) fn put(&self, group: u32, plan: HeldPlan) {
        let mut held = self.lock();
        held.insert(group, plan);
        self.count.store(held.len(), Ordering::SeqCst);
    }

    /// Drops `group`'s plan if it is still `plan`.
    pub(super) fn drop_if(&self, group: u32, plan: &HeldPlan) -> bool {
        let mut held = self.lock();
        let same = held.get(&group) == Some(plan);
        if same {
            held.remove(&group);
            self.count.store(held.len(), Ordering::SeqCst);
        }
        same
    }

    /// The plans as the node's metadata keeps them.
    pub fn encode(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(&*self.lock()).unwrap_or_default())
    }

    /// What `encode` wrote. A record this release cannot read is an
    /// error: dropping it would let the replica vote freely again.
    pub fn decode(raw: &[u8]) -> Result<BTreeMap<u32, HeldPlan>, serde_json::Error> {
        serde_json::from_slice(raw)
    }

    /// Claims the group for one plan at a time; `None` while another runs.
    pub(super) fn begin(&self, group: u32) -> Option<Taking<'_>> {
        let flag = self.taking.get(group as usize)?;
        (!flag.swap(true, Ordering::SeqCst)).then_some(Taking(flag))
    }

    /// A leader's append reached this replica and was taken.
    pub fn heard_leader(&self, group: u32) {
        if let Some(at) = self.heard.get(group as usize) {
            let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
            at.store(ms + 1, Ordering::Relaxed);
        }
    }

    /// Whether a leader's append reached this replica within `window`.
    pub fn leader_heard_within(&self, group: u32, window: Duration) -> bool {
        let Some(at) = self.heard.get(group as usize).map(|a| a.load(Ordering::Relaxed)) else { return false };
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
        at != 0 && now.saturating_sub(at) < u64::try_from(window.as_millis()).unwrap_or(u64::MAX)
    }
}

/// A plan being taken; the group is free again when it drops.
pub(super) struct Taking<'a>(&'a AtomicBool);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stalled() -> Replica {
        Replica {
            node_id: 2,
            gate: "stalled",
            leads_live: false,
            leads: false,
            live_leader: None,
            current_term: 8,
            last_log: Some((7, 1230)),
            committed: Some((7, 1, 1200)),
            applied: 1200,
            voter_configs: vec![vec![1, 2, 3]],
            committed_voter_configs: vec![vec![1, 2, 3]],
            campaigns: false,
        }
    }

    fn lead() -> PlanRequest {
        PlanRequest {
            leader: 2,
            point: 1230,
            cut: false,
            point_entry: None,
            step: Step::Lead { highest_term: 9 },
            expected: Expected { last_log_index: Some(1230), last_log_term: Some(7), current_term: 8 },
        }
    }

    fn reason(plan: &PlanRequest, r: &Replica) -> Option<&'static str> {
        check(plan, r).err().map(|e| e.reason)
    }

    #[test]
    fn the_body_parses_as_spec35_writes_it_and_an_older_form_does_not() {
        let body = r#"{"leader": 2, "point": 1240, "cut": true, "point_entry": {"term": 7, "node_id": 3},
            "step": {"follow": {"leader_term": 9}},
            "expected": {"last_log_index": 1241, "last_log_term": 7, "current_term": 8}}"#;
        let plan: PlanRequest = serde_json::from_str(body).expect("parses");
        assert_eq!(plan.step, Step::Follow { leader_term: 9 });
        assert_eq!(plan.point_entry, Some(PointEntry { term: 7, node_id: 3 }));
        let empty_log = r#"{"leader": 1, "point": 0, "cut": false, "step": {"lead": {"highest_term": 1}},
            "expected": {"last_log_index": null, "last_log_term": null, "current_term": 1}}"#;
        assert!(serde_json::from_str::<PlanRequest>(empty_log).is_ok());
        let older = r#"{"leader": 2, "point": 1230}"#;
        assert!(serde_json::from_str::<PlanRequest>(older).is_err());
    }

    #[test]
    fn a_replica_refuses_a_plan_for_each_reason_of_spec35() {
        let follow = |term| PlanRequest { leader: 1, step: Step::Follow { leader_term: term }, ..lead() };
        let with = |f: &dyn Fn(&mut Replica)| {
            let mut r = stalled();
            f(&mut r);
            r
        };
        // (plan, replica, refusal)
        let table: Vec<(PlanRequest, Replica, Option<&str>)> = vec![
            (lead(), stalled(), None),
            (follow(9), stalled(), None),
            (follow(8), stalled(), None),
            (lead(), with(&|r| r.gate = "open"), None),
            (
                lead(),
                with(&|r| {
                    r.current_term = 0;
                    r.last_log = None;
                }),
                Some("missing_vote_floor"),
            ),
            (
                lead(),
                with(&|r| {
                    r.leads_live = true;
                    r.leads = true;
                }),
                Some("not_stalled"),
            ),
            (lead(), with(&|r| r.leads = true), Some("leads_without_quorum")),
            (lead(), with(&|r| r.live_leader = Some(3)), Some("follows_leader")),
            (lead(), with(&|r| r.gate = "awaiting_barrier"), Some("not_stalled")),
            (lead(), with(&|r| r.gate = "catching_up"), Some("not_stalled")),
            (follow(9), with(&|r| r.node_id = 1), Some("step_mismatch")),
            (lead(), with(&|r| r.node_id = 3), Some("step_mismatch")),
            (follow(7), stalled(), Some("plan_term_below_vote")),
            (
                PlanRequest { cut: true, ..lead() },
                with(&|r| {
                    r.voter_configs = vec![vec![2]];
                    r.committed_voter_configs = vec![vec![2]];
                }),
                Some("single_voter_cut"),
            ),
            (lead(), with(&|r| r.voter_configs = vec![vec![1, 3, 4]]), Some("leader_not_voter")),
            (follow(9), with(&|r| r.voter_configs = vec![vec![1, 3, 4]]), None),
            (lead(), with(&|r| r.last_log = Some((7, 1231))), Some("log_moved")),
            (lead(), with(&|r| r.current_term = 9), Some("log_moved")),
            // A replica that campaigns moves its term by itself: only its log is compared.
            (
                lead(),
                with(&|r| {
                    r.current_term = 12;
                    r.campaigns = true;
                }),
                None,
            ),
            (lead(), with(&|r| r.committed = Some((7, 1, 1231))), Some("recovery_point_behind")),
            (lead(), with(&|r| r.applied = 1231), Some("recovery_point_behind")),
            (PlanRequest { cut: true, point: 1200, ..lead() }, stalled(), Some("cut_unsupported")),
            (PlanRequest { point: 1229, ..lead() }, with(&|r| r.committed = None), Some("point_mismatch")),
            (
                PlanRequest { step: Step::Lead { highest_term: u64::MAX }, ..lead() },
                stalled(),
                Some("plan_term_out_of_range"),
            ),
            (follow(u64::MAX), stalled(), Some("plan_term_out_of_range")),
        ];
        for (i, (plan, replica, expected)) in table.iter().enumerate() {
            assert_eq!(reason(plan, replica), *expected, "row {i}: {plan:?} {replica:?}");
        }
    }

    #[test]
    fn a_held_plan_admits_only_its_leader_above_the_plan_term() {
        let follower = HeldPlan { leader: 2, point: 100, cut: false, leader_term: 9, lead: false };
        assert!(follower.admits_vote(2, 10, Some((7, 100))).is_ok());
        assert!(follower.admits_vote(2, 9, Some((7, 100))).is_err(), "at the plan term");
        assert!(follower.admits_vote(3, 10, Some((7, 100))).is_err(), "another candidate");
        assert!(follower.admits_vote(2, 11, Some((9, 101))).is_err(), "an entry past the point at the plan term");
        assert!(follower.admits_vote(2, 11, Some((10, 101))).is_ok(), "its own entry above the plan term");
        assert!(follower.admits_leader(10) && !follower.admits_leader(9));
        // Its own plan's event, or a later plan's, ends it; an older one replayed does not.
        let event = |term| Some(ursula_stream::store::HistoryEvent { log_index: 120, term });
        assert!(follower.done_by(event(10)) && follower.done_by(event(14)));
        assert!(!follower.done_by(event(9)) && !follower.done_by(event(3)) && !follower.done_by(None));
        let leader = HeldPlan { lead: true, ..follower };
        assert!(leader.admits_vote(3, 12, None).is_err(), "the plan's leader votes for no one");
    }

    #[test]
    fn plans_round_trip_through_the_metadata_and_one_is_taken_at_a_time() {
        let plans = RecoveryPlans::new(3, BTreeMap::new());
        let plan = HeldPlan { leader: 2, point: 100, cut: false, leader_term: 9, lead: true };
        plans.put(1, plan);
        assert_eq!(RecoveryPlans::decode(&plans.encode()).expect("decodes"), BTreeMap::from([(1, plan)]));
        assert!(RecoveryPlans::decode(b"not json").is_err());
        // Every holder of one plan knows its event; another plan starts another history.
        assert_eq!(plan.history_id(1), HeldPlan { lead: false, ..plan }.history_id(1));
        assert_ne!(plan.history_id(1), HeldPlan { leader_term: 10, ..plan }.history_id(1));
        assert_ne!(plan.history_id(1), plan.history_id(2));
        let first = plans.begin(1).expect("free");
        assert!(plans.begin(1).is_none(), "plan_in_flight");
        drop(first);
        assert!(plans.begin(1).is_some());
        assert!(!plans.drop_if(1, &HeldPlan { leader_term: 10, ..plan }), "another plan stays");
        assert!(plans.drop_if(1, &plan));
        assert_eq!(plans.held(1), None);
        assert!(!plans.leader_heard_within(0, LIVE_LEADER));
        plans.heard_leader(0);
        assert!(plans.leader_heard_within(0, LIVE_LEADER));
    }
}
