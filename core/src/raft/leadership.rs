//! Moving leaderships between voters: the admin transfer of one group, the
//! balancer that keeps every voter near its fair share, and the hand-off
//! of a voter that drains (maintenance or `SIGTERM`). openraft does the
//! transfer itself (`trigger().transfer_leader`): the leader stops taking
//! writes, tells every voter, and the target campaigns at once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver;

use super::engine::{RaftEngine, RaftGroup};
use super::fence::QUIESCE_WAIT;
use super::types::NodeId;
use crate::engine::{ShedState, TransferError, Transferred};

/// Whether this voter sheds its leaderships: drained for maintenance (an
/// operator's mark, kept in the WAL until undrain), stopping (`SIGTERM`),
/// or shedding for its unhealthy snapshot store (`store_health`). A
/// shedding voter neither campaigns nor accepts transfers.
#[derive(Default)]
pub struct Shed {
    maintenance: AtomicBool,
    stopping: AtomicBool,
    pub(super) store: AtomicBool,
}

impl Shed {
    /// Drained by an operator or a stop: the balancer moves everything away.
    pub fn draining(&self) -> bool {
        self.maintenance.load(Ordering::SeqCst) || self.stopping.load(Ordering::SeqCst)
    }

    /// Whether this voter may campaign and take leaderships now.
    pub fn may_lead(&self) -> bool {
        !self.draining() && !self.store.load(Ordering::SeqCst)
    }

    pub fn maintenance(&self) -> bool {
        self.maintenance.load(Ordering::SeqCst)
    }

    /// What `GET`/`POST`/`DELETE /__ursula/leadership-shed/maintenance` answer (spec/35).
    pub fn state(&self) -> ShedState {
        let maintenance = self.maintenance();
        let stopping = self.stopping.load(Ordering::SeqCst);
        let store = self.store.load(Ordering::SeqCst);
        let state = match (maintenance, stopping, store) {
            (true, _, _) => "maintenance-drain",
            (false, true, _) => "shutdown",
            (false, false, true) => "snapshot-store-unhealthy",
            (false, false, false) => "none",
        };
        ShedState {
            bits: u8::from(maintenance) | (u8::from(stopping) << 1) | (u8::from(store) << 2),
            state,
            should_accept_transfer: self.may_lead(),
            should_campaign: self.may_lead(),
            should_shed_current_leaders: !self.may_lead(),
        }
    }
}

/// Counters of what moved leaderships here.
#[derive(Default)]
pub struct TransferStats {
    pub triggered: AtomicU64,
}

impl RaftEngine {
    /// The configured voters: every `[[raft.peers]]` entry, or this node alone.
    pub fn voters(&self) -> Vec<NodeId> {
        if self.client_urls.is_empty() {
            return vec![self.node_id];
        }
        self.client_urls.keys().copied().collect()
    }

    pub fn shed(&self) -> &Shed {
        &self.shed
    }

    /// Hands `group`'s leadership to voter `to`.
    pub async fn transfer(&self, group: u32, to: NodeId) -> Result<Transferred, TransferError> {
        let g = self.groups.get(group as usize).ok_or(TransferError::UnknownGroup(group))?;
        let (leader, term, members, committed, matched) = {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            let members: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
            let matched = m.replication.as_ref().and_then(|r| r.get(&to).cloned()).flatten().map(|l| l.index);
            (m.current_leader, m.current_term, members, m.local_committed.map(|c| c.index), matched)
        };
        if leader != Some(self.node_id) {
            return Err(TransferError::NotLeader { group, leader });
        }
        if to == self.node_id {
            return Err(TransferError::InvalidTarget("the target is this node, which already leads the group"));
        }
        if !self.voters().contains(&to) || !members.contains(&to) {
            return Err(TransferError::InvalidTarget("the target is not a voter of the group"));
        }
        if matched < committed {
            return Err(TransferError::TargetNotReady(
                "the target does not hold every committed entry of the group yet",
            ));
        }
        if !self.accepts(group, to, self.peer_timeout).await {
            let why = "the target takes no leadership of the group now (draining, recovering, or silent)";
            return Err(TransferError::TargetNotReady(why));
        }
        self.trigger(group, g, to).await?;
        Ok(Transferred { group, from: self.node_id, to, term })
    }

    async fn trigger(&self, group: u32, g: &RaftGroup, to: NodeId) -> Result<(), TransferError> {
        // A plan's leader keeps the group until its history event applied:
        // the plan's other replicas vote for no one else (spec/35).
        if self.holds_plan(group) {
            return Err(TransferError::TargetNotReady(
                "this node leads a recovery plan whose history event is pending",
            ));
        }
        // New proposals wait until the trigger; those under way finish, and
        // the target gets every entry first (`fence`).
        let Some(_closed) = g.fence.close(QUIESCE_WAIT).await else {
            return Err(TransferError::TargetNotReady("writes of the group are still under way; try again"));
        };
        if !self.holds_every_entry(g, to, QUIESCE_WAIT).await {
            return Err(TransferError::TargetNotReady("the target does not hold every entry of the group yet"));
        }
        g.raft.trigger().transfer_leader(to).await.map_err(|e| TransferError::Stopped { group, why: e.to_string() })?;
        self.transfers.triggered.fetch_add(1, Ordering::Relaxed);
        tracing::info!(group, to, "leadership transfer triggered");
        Ok(())
    }

    /// Waits up to `wait` until peer `to` holds this leader's whole log.
    async fn holds_every_entry(&self, g: &RaftGroup, to: NodeId, wait: Duration) -> bool {
        let holds = |m: &openraft::RaftMetrics<super::types::TypeConfig>| {
            let matched = m.replication.as_ref().and_then(|r| r.get(&to).cloned()).flatten().map(|l| l.index);
            m.current_leader == Some(self.node_id) && matched >= m.last_log_index
        };
        g.raft.wait(Some(wait)).metrics(holds, "the target holds every entry").await.is_ok()
    }

    /// Every group's leader as this node sees it.
    pub(super) fn leaders(&self) -> Vec<Option<NodeId>> {
        self.groups.iter().map(|g| g.raft.metrics().borrow_watched().current_leader).collect()
    }

    /// The peers that may take `group` now: caught up with this leader's log.
    pub(super) fn caught_up(&self, g: &RaftGroup) -> Vec<NodeId> {
        let m = g.raft.metrics();
        let m = m.borrow_watched();
        let last = m.last_log_index;
        let Some(replication) = &m.replication else { return Vec::new() };
        replication
            .iter()
            .filter(|(id, matched)| **id != self.node_id && matched.as_ref().map(|l| l.index) >= last)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The peers that answer they may lead now, within `timeout`.
    pub(super) async fn willing_peers(&self, timeout: Duration) -> Vec<NodeId> {
        let Some(peers) = &self.peers else { return Vec::new() };
        let others: Vec<NodeId> = self.voters().into_iter().filter(|id| *id != self.node_id).collect();
        let answers =
            futures_util::future::join_all(others.iter().map(|id| peers.shed_state(*id, None, timeout))).await;
        others
            .into_iter()
            .zip(answers)
            .filter_map(|(id, answer)| answer.ok().filter(|s| s.should_accept_transfer).map(|_| id))
            .collect()
    }

    /// One balancer tick: moves up to `max` of this node's leaderships to
    /// willing, caught-up peers that lead fewer groups; all of them, a few
    /// per tick, while this node drains.
    pub async fn balance_once(&self, max: usize, peer_timeout: Duration) -> usize {
        let leaders = self.leaders();
        if !leaders.contains(&Some(self.node_id)) {
            return 0;
        }
        let willing = self.willing_peers(peer_timeout).await;
        let caught_up: Vec<Vec<NodeId>> = self.groups.iter().map(|g| self.caught_up(g)).collect();
        let moves = plan(&leaders, self.node_id, self.shed.draining(), &willing, &caught_up, max);
        self.trigger_all(moves).await
    }

    /// Whether peer `to` takes `group`'s leadership now (not draining, not
    /// at the group's recovery gate, holding no plan of it). A target that
    /// refused a transfer would leave this leader transferring, its
    /// heartbeats and writes stopped, until an election it may not get; one
    /// that does not answer in `timeout` is not asked to lead either.
    async fn accepts(&self, group: u32, to: NodeId, timeout: Duration) -> bool {
        let Some(peers) = &self.peers else { return true };
        peers.shed_state(to, Some(group), timeout).await.is_ok_and(|s| s.should_accept_transfer)
    }

    /// Triggers each planned move its target accepts (all asked at once);
    /// returns how many openraft took.
    pub(super) async fn trigger_all(&self, moves: Vec<(u32, NodeId)>) -> usize {
        let asked = moves.iter().map(|(group, to)| self.accepts(*group, *to, self.peer_timeout));
        let accepted = futures_util::future::join_all(asked).await;
        // Each transfer may wait for its group's writes: all at once.
        let triggered =
            moves.into_iter().zip(accepted).filter(|(_, accepted)| *accepted).map(|((group, to), _)| async move {
                match self.groups.get(group as usize) {
                    Some(g) => self.trigger(group, g, to).await.is_ok(),
                    None => false,
                }
            });
        futures_util::future::join_all(triggered).await.into_iter().filter(|moved| *moved).count()
    }

    /// Starts draining for a stop: no more campaigns here, and the
    /// balancer moves every leadership away.
    pub fn begin_drain(&self) {
        self.shed.stopping.store(true, Ordering::SeqCst);
        self.elect(false);
    }

    /// Lets every group campaign when `campaign`, but for those that wait
    /// at their recovery gate.
    pub(super) fn elect(&self, campaign: bool) {
        for (i, g) in self.groups.iter().enumerate() {
            g.raft.runtime_config().elect(campaign && self.recovery_gates.may_campaign(i as u32));
        }
    }

    /// Lets `group` campaign again after its recovery gate opened, or
    /// as a recovery plan says.
    pub(super) fn elect_group(&self, group: u32) {
        if let Some(g) = self.groups.get(group as usize) {
            g.raft.runtime_config().elect(self.shed.may_lead() && self.recovery_gates.may_campaign(group));
        }
    }

    /// Sets or lifts the maintenance mark (spec/35 "Maintenance drain"):
    /// kept in the WAL before it takes effect, so a restart keeps it.
    pub async fn set_maintenance(&self, on: bool) -> std::io::Result<ShedState> {
        super::boot::set_node_slot(&self.wal, super::boot::SLOT_MAINTENANCE, bytes::Bytes::from(vec![u8::from(on)]))
            .await
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        self.restore_maintenance(on);
        Ok(self.shed.state())
    }

    /// Applies a maintenance mark (read back from the WAL at start).
    pub(super) fn restore_maintenance(&self, on: bool) {
        self.shed.maintenance.store(on, Ordering::SeqCst);
        if on {
            tracing::info!("maintenance drain: this node sheds its leaderships and does not campaign");
        }
        self.elect(self.shed.may_lead());
    }

    /// Hands every leadership of this node to caught-up willing peers and
    /// waits (up to `deadline`) until another voter leads each group.
    pub async fn hand_off_all(&self, deadline: Instant, peer_timeout: Duration) -> usize {
        self.begin_drain();
        loop {
            let led = self.leaders().iter().filter(|l| **l == Some(self.node_id)).count();
            if led == 0 || Instant::now() >= deadline {
                return led;
            }
            self.balance_once(usize::MAX, peer_timeout).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Which of `me`'s leaderships go where: the groups led by `me` above its
/// fair share (all of them when it drains), each to the willing caught-up
/// peer that leads the fewest groups, at most `max` moves.
pub fn plan(
    leaders: &[Option<NodeId>],
    me: NodeId,
    draining: bool,
    willing: &[NodeId],
    caught_up: &[Vec<NodeId>],
    max: usize,
) -> Vec<(u32, NodeId)> {
    let order: Vec<usize> = (0..leaders.len()).collect();
    plan_in_order(&order, leaders, me, draining, willing, caught_up, max)
}

/// `plan`, considering the groups in `order` (e.g. the most unflushed first).
pub fn plan_in_order(
    order: &[usize],
    leaders: &[Option<NodeId>],
    me: NodeId,
    draining: bool,
    willing: &[NodeId],
    caught_up: &[Vec<NodeId>],
    max: usize,
) -> Vec<(u32, NodeId)> {
    if willing.is_empty() {
        return Vec::new();
    }
    let mut load: BTreeMap<NodeId, usize> = willing.iter().map(|id| (*id, 0)).collect();
    load.insert(me, 0);
    for id in leaders.iter().flatten() {
        if let Some(n) = load.get_mut(id) {
            *n += 1;
        }
    }
    // This node and the willing peers share the groups.
    let sharing = willing.len() + usize::from(!draining);
    let fair = leaders.len().div_ceil(sharing);
    let keep = if draining { 0 } else { fair };
    let mut moves = Vec::new();
    for (group, leader) in order.iter().filter_map(|g| leaders.get(*g).map(|l| (*g, l))) {
        let mine = load.get(&me).copied().unwrap_or(0);
        if moves.len() >= max || mine <= keep {
            break;
        }
        if *leader != Some(me) {
            continue;
        }
        let target = caught_up
            .get(group)
            .into_iter()
            .flatten()
            .filter_map(|id| load.get(id).map(|n| (*n, *id)))
            .filter(|(_, id)| *id != me)
            .min();
        // A move must help: the target ends up with no more than this node keeps.
        let Some((n, to)) = target.filter(|(n, _)| draining || n + 1 < mine) else { continue };
        load.insert(to, n + 1);
        load.insert(me, mine - 1);
        moves.push((group as u32, to));
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::plan;

    fn all_caught_up(groups: usize, peers: &[u64]) -> Vec<Vec<u64>> {
        vec![peers.to_vec(); groups]
    }

    #[test]
    fn a_node_leading_every_group_keeps_its_fair_share() {
        let leaders = vec![Some(1); 12];
        let moves = plan(&leaders, 1, false, &[2, 3], &all_caught_up(12, &[2, 3]), usize::MAX);
        assert_eq!(moves.len(), 8, "12 groups over 3 voters: 4 each");
        let to_2 = moves.iter().filter(|(_, to)| *to == 2).count();
        assert_eq!((to_2, moves.len() - to_2), (4, 4));
        assert_eq!(plan(&leaders, 1, false, &[2, 3], &all_caught_up(12, &[2, 3]), 3).len(), 3, "max per tick");
    }

    #[test]
    fn a_balanced_cluster_moves_nothing() {
        let leaders: Vec<Option<u64>> = (0..12).map(|g| Some(1 + g % 3)).collect();
        assert!(plan(&leaders, 1, false, &[2, 3], &all_caught_up(12, &[2, 3]), usize::MAX).is_empty());
        // 13 groups: one voter leads 5, within one of the others.
        let leaders: Vec<Option<u64>> = (0..13).map(|g| Some(1 + g % 3)).collect();
        assert!(plan(&leaders, 1, false, &[2, 3], &all_caught_up(13, &[2, 3]), usize::MAX).is_empty());
    }

    #[test]
    fn a_draining_node_hands_off_everything_to_willing_caught_up_peers() {
        let leaders = vec![Some(1), Some(1), Some(2), Some(1)];
        let caught_up = vec![vec![2, 3], vec![3], vec![1, 3], vec![]];
        let moves = plan(&leaders, 1, true, &[2, 3], &caught_up, usize::MAX);
        assert_eq!(moves, [(0, 3), (1, 3)], "group 3 has no caught-up peer yet; ties go to the lower load");
        assert!(plan(&leaders, 1, true, &[], &caught_up, usize::MAX).is_empty(), "no willing peer");
        let unwilling_3 = plan(&leaders, 1, true, &[2], &caught_up, usize::MAX);
        assert_eq!(unwilling_3, [(0, 2)], "a peer that may not lead gets nothing");
    }

    #[test]
    fn groups_without_a_leader_do_not_count() {
        let leaders = vec![Some(1), Some(1), None, None, Some(2), Some(3)];
        assert!(plan(&leaders, 1, false, &[2, 3], &all_caught_up(6, &[2, 3]), usize::MAX).is_empty());
    }
}
