//! A recovery plan on this replica (spec/35): taking it, and carrying it
//! out until the group's history event applied here.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver;
use openraft::raft::VoteRequest;
use serde_json::{Value, json};
use ursula_stream::{AcceptLoss, Command};

use super::boot::{SLOT_RECOVERY_PLANS, set_node_slot};
use super::engine::{RaftEngine, leads_live};
use super::recovery_gate::StallClock;
use super::recovery_plan::{HeldPlan, LIVE_LEADER, PlanRequest, Refusal, Replica, Step, check};
use super::types::{Proposal, Vote};
use crate::engine::AdminError;
use crate::engine::group_state;

/// How often the driver looks at the plans this node holds.
const TICK: Duration = Duration::from_millis(100);
/// How long the plan's leader waits for its history event to commit.
const EVENT_WAIT: Duration = Duration::from_secs(10);

fn refused(engine: &RaftEngine, group: u32, refusal: Refusal) -> AdminError {
    let mut detail = refusal.detail;
    if let Some(fields) = detail.as_object_mut() {
        fields.insert("reason".into(), refusal.reason.into());
    }
    tracing::warn!(group, reason = refusal.reason, message = %refusal.message, "a recovery plan was refused");
    AdminError::PlanRefused(Box::new(json!({
        "raft_group_id": group,
        "node_id": engine.node_id,
        "refusal": detail,
        "message": refusal.message,
    })))
}

impl RaftEngine {
    /// What this replica knows of itself in `group`, for the plan's checks.
    fn replica(&self, group: u32) -> Option<Replica> {
        let g = self.groups.get(group as usize)?;
        let m = g.raft.metrics().borrow_watched().clone();
        let plans = &self.recovery_gates.plans;
        let configs = |m: &super::types::StoredMembership| -> Vec<Vec<u64>> {
            m.membership().get_joint_config().iter().map(|c| c.iter().copied().collect()).collect()
        };
        let last_log_term = g.log.figures().last_log_term;
        Some(Replica {
            node_id: self.node_id,
            gate: self.recovery_gates.state(group),
            leads_live: leads_live(&m, self.node_id, g.raft.config().election_timeout_max),
            leads: m.current_leader == Some(self.node_id),
            live_leader: m
                .current_leader
                .filter(|l| *l != self.node_id && plans.leader_heard_within(group, LIVE_LEADER)),
            current_term: m.current_term,
            last_log: m.last_log_index.map(|i| (last_log_term.unwrap_or(0), i)),
            committed: m.local_committed.map(|c| (c.leader_id.term, c.leader_id.node_id, c.index)),
            applied: g.shared.applied_index.load(Ordering::Relaxed),
            voter_configs: configs(&m.membership_config),
            committed_voter_configs: configs(&m.committed_membership_config),
            campaigns: !self.recovery_gates.is_closed(group) || plans.held(group).is_some_and(|p| p.lead),
        })
    }

    /// `POST /__ursula/raft/{group}/recovery/accept-unsynced-loss`.
    pub(super) async fn take_plan(&self, group: u32, plan: PlanRequest) -> Result<Value, AdminError> {
        let g = self.groups.get(group as usize).ok_or(AdminError::UnknownGroup(group))?;
        let plans = &self.recovery_gates.plans;
        let Some(_taking) = plans.begin(group) else {
            let why = "this replica is taking another plan of the group: wait for its answer";
            return Err(refused(self, group, super::recovery_plan::refuse("plan_in_flight", why)));
        };
        if g.shared.apply_stopped.load(Ordering::SeqCst) {
            let why = "the group stopped on this replica (apply_stopped): plan without it";
            return Err(refused(self, group, super::recovery_plan::refuse("apply_stopped", why)));
        }
        let replica = self.replica(group).ok_or(AdminError::UnknownGroup(group))?;
        check(&plan, &replica).map_err(|r| refused(self, group, r))?;
        let vote_term = g.raft.metrics().borrow_watched().vote.leader_id.term;
        let (lead, leader_term) = match plan.step {
            Step::Lead { highest_term } => (true, highest_term.max(vote_term)),
            Step::Follow { leader_term } => (false, leader_term),
        };
        let held = HeldPlan { leader: plan.leader, point: plan.point, cut: plan.cut, leader_term, lead };
        plans.put(group, held);
        if let Err(e) = self.persist_plans().await {
            plans.drop_if(group, &held);
            return Err(AdminError::Failed(format!("recording the recovery plan: {e}")));
        }
        self.elect_group(group);
        // Stalled again only after 30 s in which it applied nothing under the plan.
        self.recovery_gates.restart_stall_clock(group);
        tracing::warn!(
            group,
            leader = plan.leader,
            point = plan.point,
            leader_term,
            "took a recovery plan: writes acknowledged after the point may be lost"
        );
        if lead {
            // Its vote moves up to the plan term, so that its first election
            // is above it (a vote for itself that it never asked for).
            let last_log_id = g.log.last_log_id();
            let raise =
                VoteRequest { vote: Vote::new(leader_term, self.node_id), last_log_id, leadership_transfer: true };
            if let Err(e) = g.raft.vote(raise).await {
                tracing::warn!(group, error = %e, "the plan's leader could not raise its vote; it campaigns from its own");
            }
            let _ = g.raft.trigger().elect(false).await;
        }
        let outcome = if lead { "leads" } else { "follows" };
        Ok(json!({ "raft_group_id": group, "node_id": self.node_id, "outcome": outcome, "leader_term": leader_term }))
    }

    /// Writes the plans this node holds to its metadata.
    async fn persist_plans(&self) -> anyhow::Result<()> {
        let plans = &self.recovery_gates.plans;
        let _one_at_a_time = plans.persisting.lock().await;
        set_node_slot(&self.wal, SLOT_RECOVERY_PLANS, plans.encode()).await
    }

    /// Whether `group` holds a plan here: it serves nothing until its
    /// history event applied.
    pub(super) fn holds_plan(&self, group: u32) -> bool {
        self.recovery_gates.plans.held(group).is_some()
    }

    /// One look at a held plan: the leader proposes the history event once
    /// elected above the plan term; every replica drops the plan once the
    /// event applied here.
    async fn carry_out(&self, group: u32, plan: HeldPlan) {
        let Some(g) = self.groups.get(group as usize) else { return };
        let applied = plan.done_by(group_state::lock(&g.shared.state).store.history_event());
        if !applied && plan.lead {
            let (leader, term) = {
                let m = g.raft.metrics();
                let m = m.borrow_watched();
                (m.current_leader, m.current_term)
            };
            if leader != Some(self.node_id) || term <= plan.leader_term {
                return;
            }
            // Proposed again after a lost answer, the same event applies once.
            let command = Command::AcceptLoss(AcceptLoss { history_id: plan.history_id(group), term });
            let write = g.raft.client_write(Proposal::new(self.clock.now_ms(), command));
            match tokio::time::timeout(EVENT_WAIT, write).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(group, error = %e, "the plan's history event did not commit; retrying");
                    return;
                }
                Err(_) => return,
            }
        } else if !applied {
            return;
        }
        let index = group_state::lock(&g.shared.state).store.history_event().map(|e| e.log_index);
        // The plan's leader holds the history every replica now follows: its
        // gate opens, and is recorded open, before the plan is forgotten, so
        // that a crash between the two never leaves it gated without a plan.
        if plan.lead && self.recovery_gates.is_closed(group) {
            super::recovery_gate::open(self, group).await;
        }
        if !self.recovery_gates.plans.drop_if(group, &plan) {
            return;
        }
        if let Err(e) = self.persist_plans().await {
            tracing::error!(group, error = %e, "the applied recovery plan could not be forgotten; it is again at a restart");
        }
        tracing::warn!(group, event_index = ?index, "the group's new history applied here: the recovery plan is done");
        self.elect_group(group);
    }
}

/// Carries out every plan this node holds, for as long as it runs. A
/// replica whose gate is open and whose plan applies nothing for 30 s
/// reports its group stalled, as a closed gate does (its gate's own loop
/// watches a closed one): the plan wedged (spec/35).
pub(super) async fn carry_out_plans(engine: Arc<RaftEngine>) {
    let gates = &engine.recovery_gates;
    let mut clocks: HashMap<u32, StallClock> = HashMap::new();
    loop {
        let plans = gates.plans.all();
        clocks.retain(|group, _| plans.contains_key(group));
        for (group, plan) in plans {
            engine.carry_out(group, plan).await;
            let Some(g) = engine.groups.get(group as usize) else { continue };
            if gates.is_closed(group) {
                continue;
            }
            let held = gates.plans.held(group).is_some();
            let (applied, resets, now) =
                (g.shared.applied_index.load(Ordering::Relaxed), gates.stall_resets(group), Instant::now());
            let clock = clocks.entry(group).or_insert(StallClock::new(applied, resets, now));
            gates.set_stalled(group, held && clock.observe(applied, resets, now));
        }
        tokio::time::sleep(TICK).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineError, GroupEngine};
    use ursula_stream::routing::GroupId;

    /// spec/35: a group that holds a plan serves nothing, `503
    /// HISTORY_PENDING`, and its metrics name the plan; a lone voter leads
    /// live, so it refuses a plan of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_that_holds_a_plan_serves_nothing_and_a_live_leader_refuses_one() {
        let (_dir, node) = super::super::lone_voter(2).await;
        let engine = node.engine.clone();
        let g = &engine.metrics()["raft_groups"][0];
        let body = json!({ "leader": 1, "point": g["last_log_index"], "cut": false,
            "step": { "lead": { "highest_term": g["current_term"] } },
            "expected": { "last_log_index": g["last_log_index"], "last_log_term": g["last_log_term"],
                          "current_term": g["current_term"] } });
        let plan: PlanRequest = serde_json::from_value(body).expect("a plan");
        let Err(AdminError::PlanRefused(refused)) = engine.take_plan(0, plan).await else { panic!("refused") };
        assert_eq!(refused["refusal"]["reason"], "not_stalled", "{refused}");
        assert_eq!((&refused["raft_group_id"], &refused["node_id"]), (&json!(0), &json!(1)), "{refused}");
        assert_eq!(engine.metrics()["raft_groups"][0]["recovery"], Value::Null);

        let held = HeldPlan { leader: 1, point: 1, cut: false, leader_term: 1, lead: true };
        engine.recovery_gates.plans.put(0, held);
        let read = engine.query(GroupId(0), |store, _| store.len());
        assert!(matches!(read, Err(EngineError::HistoryPending(GroupId(0)))), "{read:?}");
        assert_eq!(engine.query(GroupId(1), |store, _| store.len()), Ok(0), "the other group serves");
        assert_eq!(engine.metrics()["raft_groups"][0]["recovery"]["step"], "lead");
        node.shutdown().await.expect("a clean stop");
    }
}
