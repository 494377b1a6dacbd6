//! What operators read and ask of a voter's Raft groups: the
//! `raft_maintenance` report of `/__ursula/metrics` (who leads, which voter
//! sets, what keeps the node from being a full replica), and a snapshot on
//! demand (`POST /__ursula/raft/{group}/snapshot`) and a log purge
//! (`POST /__ursula/raft/{group}/purge?upto=N`).

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use serde_json::{Value, json};

use super::engine::RaftEngine;
use super::types::NodeId;
use crate::engine::{AdminError, PurgeAsked, QuorumProof, SnapshotTaken, VotersReplaced};

/// How long a snapshot on demand may take before the route answers `503`.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);

/// Why one group keeps this node from full redundancy (spec/37, spec/38).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupIssue {
    /// Not yet initialized: no membership at all.
    Uninitialized,
    LeaderUnknown,
    /// A joint configuration is in force (a membership change is under way).
    JointMembership,
    /// A configured voter is missing from the group's voters.
    IncompleteVoterSet,
    /// The membership names a node `raft.peers` does not list.
    UnconfiguredMember,
    LocalReplicaNotVoter,
}

impl GroupIssue {
    pub fn name(self) -> &'static str {
        match self {
            GroupIssue::Uninitialized => "uninitialized",
            GroupIssue::LeaderUnknown => "leader_unknown",
            GroupIssue::JointMembership => "joint_membership",
            GroupIssue::IncompleteVoterSet => "incomplete_voter_set",
            GroupIssue::UnconfiguredMember => "unconfigured_member",
            GroupIssue::LocalReplicaNotVoter => "local_replica_not_voter",
        }
    }
}

/// One group's membership as this replica sees it.
pub struct GroupView {
    pub leader: Option<NodeId>,
    /// One voter set, or two while a change is joint.
    pub voter_sets: Vec<BTreeSet<NodeId>>,
    pub learners: BTreeSet<NodeId>,
}

/// The issues of one group, against the configured voters.
pub fn group_issues(view: &GroupView, me: NodeId, configured: &BTreeSet<NodeId>) -> Vec<GroupIssue> {
    let mut issues = Vec::new();
    if view.voter_sets.iter().all(BTreeSet::is_empty) {
        return vec![GroupIssue::Uninitialized];
    }
    if view.leader.is_none() {
        issues.push(GroupIssue::LeaderUnknown);
    }
    if view.voter_sets.len() > 1 {
        issues.push(GroupIssue::JointMembership);
    }
    let voters: BTreeSet<NodeId> = view.voter_sets.iter().flatten().copied().collect();
    if !configured.is_subset(&voters) {
        issues.push(GroupIssue::IncompleteVoterSet);
    }
    if voters.iter().chain(&view.learners).any(|id| !configured.contains(id)) {
        issues.push(GroupIssue::UnconfiguredMember);
    }
    if !voters.contains(&me) {
        issues.push(GroupIssue::LocalReplicaNotVoter);
    }
    issues
}

impl RaftEngine {
    pub(super) fn group_view(&self, group: usize) -> Option<GroupView> {
        let g = self.groups.get(group)?;
        let m = g.raft.metrics().borrow_watched().clone();
        let membership = m.membership_config.membership();
        Some(GroupView {
            leader: m.current_leader,
            voter_sets: membership.get_joint_config().clone(),
            learners: membership.learner_ids().collect(),
        })
    }

    /// `raft_maintenance` of `/__ursula/metrics`: the configured voters,
    /// and every group's issues (empty when the node is a full replica).
    pub(super) fn maintenance_report(&self) -> Value {
        let configured: BTreeSet<NodeId> = self.voters().into_iter().collect();
        let mut issues = Vec::new();
        for group in 0..self.groups.len() {
            let Some(view) = self.group_view(group) else { continue };
            for issue in group_issues(&view, self.node_id, &configured) {
                issues.push(json!({ "raft_group_id": group, "issue": issue.name() }));
            }
        }
        for group in self.apply_stopped_groups() {
            issues.push(json!({ "raft_group_id": group, "issue": "apply_stopped" }));
        }
        let mut node_issues = Vec::new();
        if self.shed.maintenance() {
            node_issues.push(json!("maintenance_drain"));
        }
        if self.guard.under_pressure() {
            node_issues.push(json!("wal_disk_pressure"));
        }
        json!({
            "configured_voters": configured,
            "group_count": self.groups.len(),
            "node_issues": node_issues,
            "group_issues": issues,
        })
    }

    /// A fresh ReadIndex round on `group`, which this node must lead; the
    /// required index is the higher of the read index and the last log
    /// index, so a replica that applied it holds all the leader acknowledged.
    pub async fn quorum_proof(&self, group: u32) -> Result<QuorumProof, AdminError> {
        let g = self.groups.get(group as usize).ok_or(AdminError::UnknownGroup(group))?;
        let (leader, term, last) = {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            (m.current_leader, m.current_term, m.last_log_index)
        };
        if leader != Some(self.node_id) {
            return Err(AdminError::NotLeader(group));
        }
        let read = g
            .raft
            .ensure_linearizable(openraft::raft::ReadPolicy::ReadIndex)
            .await
            .map_err(|_| AdminError::NotLeader(group))?;
        let index = read.log_id().index.max(last.unwrap_or(0));
        let still = g.raft.metrics().borrow_watched().current_term;
        if still != term {
            return Err(AdminError::NotLeader(group));
        }
        Ok(QuorumProof { group, leader: self.node_id, term, required_applied_index: index })
    }

    /// Peer `id` as a group's membership names it: its `[[raft.peers]].url`.
    fn peer_node(&self, id: NodeId) -> openraft::BasicNode {
        let addr = self.peers.as_ref().and_then(|p| p.url_of(id)).unwrap_or_default().to_string();
        openraft::BasicNode { addr }
    }

    /// Replaces `group`'s voter set (spec/35, the membership route): each
    /// voter must be a configured peer; one that is no member node yet joins
    /// as a learner first; learners outside the new set are removed with it.
    pub async fn replace_voters_now(&self, group: u32, voters: BTreeSet<NodeId>) -> Result<VotersReplaced, AdminError> {
        let g = self.groups.get(group as usize).ok_or(AdminError::UnknownGroup(group))?;
        let configured: BTreeSet<NodeId> = self.voters().into_iter().collect();
        if let Some(stranger) = voters.iter().find(|v| !configured.contains(v)) {
            return Err(AdminError::Invalid(format!("node {stranger} is not in raft.peers")));
        }
        let (leader, nodes) = {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            let nodes: BTreeSet<NodeId> = m.membership_config.membership().nodes().map(|(id, _)| *id).collect();
            (m.current_leader, nodes)
        };
        if leader != Some(self.node_id) {
            return Err(AdminError::LedElsewhere { group, leader });
        }
        let failed = |e: &dyn std::fmt::Display| AdminError::Failed(format!("group {group}: {e}"));
        for id in voters.iter().filter(|v| !nodes.contains(v)) {
            g.raft.add_learner(*id, self.peer_node(*id), true).await.map_err(|e| failed(&e))?;
        }
        let replaced = g
            .raft
            .change_membership(openraft::ChangeMembers::ReplaceAllVoters(voters.clone()), false)
            .await
            .map_err(|e| failed(&e))?;
        let mut log_index = replaced.log_id.index;
        let learners: BTreeSet<NodeId> = {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            m.membership_config.membership().learner_ids().filter(|id| !voters.contains(id)).collect()
        };
        if !learners.is_empty() {
            let removed = g.raft.change_membership(openraft::ChangeMembers::RemoveNodes(learners), false).await;
            log_index = removed.map_err(|e| failed(&e))?.log_id.index;
        }
        Ok(VotersReplaced { group, voters: voters.into_iter().collect(), log_index })
    }

    /// One pass of the leader's voter upkeep (spec/35): in each group this
    /// node leads whose membership is settled, a configured peer missing
    /// from the voters joins as a learner, and once it holds every
    /// committed entry it is promoted. A voter `raft.peers` does not list is
    /// left to the operator (the membership route).
    pub async fn restore_configured_voters(&self) {
        let configured: BTreeSet<NodeId> = self.voters().into_iter().collect();
        for g in &self.groups {
            let (missing, learners, caught_up) = {
                let m = g.raft.metrics();
                let m = m.borrow_watched();
                let settled = m.membership_config.log_id() == m.committed_membership_config.log_id();
                let membership = m.membership_config.membership();
                let joint = membership.get_joint_config().len() > 1;
                if m.current_leader != Some(self.node_id) || !settled || joint {
                    continue;
                }
                let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
                let missing: BTreeSet<NodeId> = configured.difference(&voters).copied().collect();
                let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
                let committed = m.local_committed.map(|c| c.index);
                let caught_up: BTreeSet<NodeId> = missing
                    .iter()
                    .filter(|id| {
                        let matched = m.replication.as_ref().and_then(|r| r.get(id).cloned()).flatten();
                        learners.contains(id) && matched.map(|l| l.index) >= committed
                    })
                    .copied()
                    .collect();
                (missing, learners, caught_up)
            };
            if missing.is_empty() {
                continue;
            }
            let result = if !caught_up.is_empty() {
                tracing::info!(?caught_up, "promoting configured peers back to voters");
                g.raft.change_membership(openraft::ChangeMembers::AddVoterIds(caught_up), true).await.map(|_| ())
            } else if let Some(id) = missing.iter().find(|id| !learners.contains(id)) {
                tracing::info!(node = id, "adding a configured peer back to its group as a learner");
                g.raft.add_learner(*id, self.peer_node(*id), false).await.map(|_| ())
            } else {
                Ok(())
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "a configured peer could not rejoin its group yet");
            }
        }
    }

    /// Purges `group`'s log through `upto`, at most through its published
    /// snapshot (spec/35): refused as busy while a snapshot of the group
    /// builds, or an earlier purge of it has not landed.
    pub async fn purge_now(&self, group: u32, upto: u64) -> Result<PurgeAsked, AdminError> {
        let g = self.groups.get(group as usize).ok_or(AdminError::UnknownGroup(group))?;
        let (snapshot, purged) = {
            let m = g.raft.metrics();
            let m = m.borrow_watched();
            (m.snapshot.map(|s| s.index), m.purged.map(|p| p.index))
        };
        let pending = self.purges_asked.lock().unwrap_or_else(|p| p.into_inner()).get(&group).copied();
        if g.shared.building.load(std::sync::atomic::Ordering::Relaxed) || pending > purged {
            return Err(AdminError::PurgeBusy(group));
        }
        let purged_upto = snapshot.map_or(0, |s| s.min(upto));
        if snapshot.is_some() && Some(purged_upto) > purged {
            g.raft.trigger().purge_log(purged_upto).await.map_err(|e| AdminError::Failed(e.to_string()))?;
            self.purges_asked.lock().unwrap_or_else(|p| p.into_inner()).insert(group, purged_upto);
        }
        Ok(PurgeAsked { group, requested: upto, purged_upto: purged.map_or(purged_upto, |p| p.max(purged_upto)) })
    }

    /// Snapshots `group` and waits until its snapshot covers what it had
    /// applied when asked.
    pub async fn snapshot_now(&self, group: u32) -> Result<SnapshotTaken, AdminError> {
        let g = self.groups.get(group as usize).ok_or(AdminError::UnknownGroup(group))?;
        let applied = g.raft.metrics().borrow_watched().last_applied.map(|l| l.index);
        let covered = |m: &openraft::RaftMetrics<super::types::TypeConfig>| m.snapshot.map(|s| s.index) >= applied;
        if !covered(&g.raft.metrics().borrow_watched()) || applied.is_none() {
            g.raft.trigger().snapshot().await.map_err(|e| AdminError::Failed(e.to_string()))?;
        }
        let done = g.raft.wait(Some(SNAPSHOT_WAIT)).metrics(covered, "a snapshot covering what was applied").await;
        match done {
            Ok(m) => Ok(SnapshotTaken { group, snapshot_index: m.snapshot.map_or(0, |s| s.index) }),
            Err(openraft::metrics::WaitError::Timeout(..)) => Err(AdminError::Busy(group)),
            Err(e) => Err(AdminError::Failed(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(leader: Option<u64>, sets: &[&[u64]], learners: &[u64]) -> GroupView {
        GroupView {
            leader,
            voter_sets: sets.iter().map(|s| s.iter().copied().collect()).collect(),
            learners: learners.iter().copied().collect(),
        }
    }

    #[test]
    fn a_full_replica_of_a_led_group_has_no_issue() {
        let configured = BTreeSet::from([1, 2, 3]);
        assert!(group_issues(&view(Some(2), &[&[1, 2, 3]], &[]), 1, &configured).is_empty());
    }

    #[test]
    fn each_gap_is_named() {
        let configured = BTreeSet::from([1, 2, 3]);
        let names = |v: GroupView, me| group_issues(&v, me, &configured).iter().map(|i| i.name()).collect::<Vec<_>>();
        assert_eq!(names(view(None, &[&[1, 2, 3]], &[]), 1), ["leader_unknown"]);
        assert_eq!(names(view(Some(1), &[&[1, 2]], &[3]), 3), ["incomplete_voter_set", "local_replica_not_voter"]);
        assert_eq!(names(view(Some(1), &[&[1, 2, 3, 4]], &[]), 1), ["unconfigured_member"]);
        assert_eq!(names(view(Some(1), &[&[1, 2, 3], &[1, 2]], &[]), 1), ["joint_membership"]);
        assert_eq!(names(view(None, &[], &[]), 1), ["uninitialized"]);
    }
}
