//! The decisions of the verbs, from metrics snapshots alone (no I/O): where
//! a drained node's leaderships go, how far a node is behind its peers,
//! and what keeps a cluster from being whole. Tested without a cluster.

use std::collections::{BTreeMap, BTreeSet};

use crate::metrics::NodeMetrics;

/// The nodes that answered, by id.
pub type Observation = BTreeMap<u64, NodeMetrics>;

/// Where node `from`'s leaderships go.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DrainPlan {
    /// `(group, target)`, in group order.
    pub moves: Vec<(u32, u64)>,
    /// Groups it leads that no peer may take at all: none is a voter of the
    /// group that answered and takes leaderships. A drain stops here.
    pub stuck: Vec<u32>,
    /// Groups whose eligible peers are all further behind than the
    /// tolerance: planned again once one catches up.
    pub lagging: Vec<u32>,
}

/// Plans the hand-off of every group `from` leads: each to a peer that is
/// a voter of the group, takes leaderships, and has applied what the group
/// committed (within `tolerance` entries), the least loaded first
/// (leaderships it holds plus those planned for it), ties to the lower id.
pub fn drain_plan(obs: &Observation, from: u64, tolerance: u64) -> DrainPlan {
    let mut plan = DrainPlan::default();
    let Some(me) = obs.get(&from) else { return plan };
    let mut load: BTreeMap<u64, usize> = obs
        .iter()
        .filter(|(id, m)| **id != from && m.accepts_leadership())
        .map(|(id, m)| (*id, m.led_by(*id).len()))
        .collect();
    for group in me.led_by(from) {
        let Some(mine) = me.group(group) else { continue };
        let committed = mine.committed_index.unwrap_or(0);
        let applied_by = |id: &u64| obs.get(id).and_then(|m| m.group(group)).map(|g| g.last_applied_index);
        let eligible: Vec<(u64, usize)> = load
            .iter()
            .filter(|(id, _)| mine.voters.contains(id) && applied_by(id).is_some())
            .map(|(id, n)| (*id, *n))
            .collect();
        let target = eligible
            .iter()
            .filter(|(id, _)| applied_by(id).is_some_and(|a| a.saturating_add(tolerance) >= committed))
            .min_by_key(|(id, n)| (*n, *id))
            .map(|(id, _)| *id);
        match target {
            Some(to) => {
                *load.entry(to).or_default() += 1;
                plan.moves.push((group, to));
            }
            None if eligible.is_empty() => plan.stuck.push(group),
            None => plan.lagging.push(group),
        }
    }
    plan
}

/// How far `node` is behind: per group, the highest index a peer reports
/// committed less what `node` applied; and the groups where it is no voter
/// or that it does not report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CatchUp {
    pub lag: BTreeMap<u32, u64>,
    pub not_voter: Vec<u32>,
    pub missing: Vec<u32>,
    /// Groups still behind the node's recovery gate: it caught up only once
    /// it opened them (spec/35).
    pub gated: Vec<u32>,
}

impl CatchUp {
    pub fn total_lag(&self) -> u64 {
        self.lag.values().sum()
    }

    pub fn done(&self, tolerance: u64) -> bool {
        self.not_voter.is_empty()
            && self.missing.is_empty()
            && self.gated.is_empty()
            && self.lag.values().all(|l| *l <= tolerance)
    }
}

pub fn catch_up(obs: &Observation, node: u64) -> CatchUp {
    let mut out = CatchUp::default();
    let Some(me) = obs.get(&node) else { return out };
    out.gated = me.recovery_gates.clone();
    let groups: BTreeSet<u32> = obs.values().flat_map(|m| m.raft_groups.iter().map(|g| g.raft_group_id)).collect();
    for group in groups {
        let Some(mine) = me.group(group) else {
            out.missing.push(group);
            continue;
        };
        if !mine.voters.contains(&node) {
            out.not_voter.push(group);
        }
        let peers_committed = obs
            .iter()
            .filter(|(id, _)| **id != node)
            .filter_map(|(_, m)| m.group(group).and_then(|g| g.committed_index))
            .max()
            .unwrap_or(0);
        out.lag.insert(group, peers_committed.saturating_sub(mine.last_applied_index));
    }
    out
}

/// What keeps the cluster from being whole: every node of `expected`
/// answered, reports the same groups, agrees on one leader per group, is a
/// voter of every group whose voters are exactly `expected`, and applied
/// the leader's commit within `tolerance`. Empty when whole.
pub fn cluster_issues(obs: &Observation, expected: &[u64], tolerance: u64) -> Vec<String> {
    let mut issues = Vec::new();
    let configured: BTreeSet<u64> = expected.iter().copied().collect();
    for id in expected {
        match obs.get(id) {
            None => issues.push(format!("node {id}: no metrics")),
            Some(m) if !m.recovery_gates.is_empty() => {
                issues.push(format!("node {id}: groups {:?} wait at its recovery gate", m.recovery_gates));
            }
            Some(_) => {}
        }
    }
    let groups: BTreeSet<u32> = obs.values().flat_map(|m| m.raft_groups.iter().map(|g| g.raft_group_id)).collect();
    for group in groups {
        let views: Vec<(u64, Option<&crate::metrics::GroupMetrics>)> =
            obs.iter().map(|(id, m)| (*id, m.group(group))).collect();
        let leaders: BTreeSet<Option<u64>> = views.iter().map(|(_, g)| g.and_then(|g| g.current_leader)).collect();
        let leader = match leaders.iter().collect::<Vec<_>>().as_slice() {
            [Some(l)] => *l,
            _ => {
                issues.push(format!("group {group}: no agreed leader ({leaders:?})"));
                continue;
            }
        };
        let committed = obs.get(&leader).and_then(|m| m.group(group)).and_then(|g| g.committed_index).unwrap_or(0);
        for (id, view) in views {
            let Some(g) = view else {
                issues.push(format!("node {id}: does not report group {group}"));
                continue;
            };
            let voters: BTreeSet<u64> = g.voters.iter().copied().collect();
            if voters != configured {
                issues.push(format!("node {id}: group {group} has voters {voters:?}, not {configured:?}"));
            }
            let behind = committed.saturating_sub(g.last_applied_index);
            if behind > tolerance {
                issues.push(format!("node {id}: group {group} applied {behind} entries behind its leader"));
            }
        }
    }
    issues
}

/// What keeps node `id` from the `wait-ready` gate: the expected group
/// count, a leader for every group, and a clean `raft_maintenance` report.
pub fn readiness_issues(id: u64, m: &NodeMetrics, expected_groups: Option<usize>) -> Vec<String> {
    let mut issues = Vec::new();
    if let Some(n) = expected_groups
        && m.raft_groups.len() != n
    {
        issues.push(format!("node {id}: {} groups, expected {n}", m.raft_groups.len()));
    }
    let leaderless: Vec<u32> =
        m.raft_groups.iter().filter(|g| g.current_leader.is_none()).map(|g| g.raft_group_id).collect();
    if !leaderless.is_empty() {
        issues.push(format!("node {id}: groups without a leader: {leaderless:?}"));
    }
    match &m.raft_maintenance {
        None => issues.push(format!("node {id}: no raft_maintenance report")),
        Some(report) => {
            for issue in &report.node_issues {
                issues.push(format!("node {id}: {issue}"));
            }
            for issue in &report.group_issues {
                issues.push(format!("node {id}: group {}: {}", issue.raft_group_id, issue.issue));
            }
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{GroupMetrics, Maintenance};

    /// A node's metrics: `(leader, committed, applied)` per group, all voters 1..=3.
    fn node(groups: &[(u64, u64, u64)], shed: &str) -> NodeMetrics {
        NodeMetrics {
            raft_groups: groups
                .iter()
                .enumerate()
                .map(|(g, (leader, committed, applied))| GroupMetrics {
                    raft_group_id: g as u32,
                    current_leader: Some(*leader),
                    current_term: 2,
                    committed_index: Some(*committed),
                    last_applied_index: *applied,
                    voters: vec![1, 2, 3],
                    learners: vec![],
                    ..Default::default()
                })
                .collect(),
            leadership_shed: Some(shed.into()),
            raft_maintenance: Some(Maintenance::default()),
            ..Default::default()
        }
    }

    #[test]
    fn a_drain_spreads_the_leaderships_over_caught_up_peers() {
        // Node 1 leads groups 0, 1, 2 and 3; node 2 leads group 4 already.
        let leaders = [1, 1, 1, 1, 2];
        let state =
            |applied: &[u64]| node(&leaders.iter().zip(applied).map(|(l, a)| (*l, 10, *a)).collect::<Vec<_>>(), "none");
        let obs: Observation = [(1, state(&[10; 5])), (2, state(&[10; 5])), (3, state(&[10, 10, 9, 10, 10]))].into();
        let plan = drain_plan(&obs, 1, 0);
        assert_eq!(plan.moves, [(0, 3), (1, 2), (2, 2), (3, 3)], "group 2: node 3 is behind; balance the rest");
        assert!(plan.stuck.is_empty() && plan.lagging.is_empty());
        let tolerant = drain_plan(&obs, 1, 1);
        assert_eq!(tolerant.moves, [(0, 3), (1, 2), (2, 3), (3, 2)], "one entry behind is within the tolerance");
    }

    #[test]
    fn a_drain_never_picks_a_drained_or_lagging_peer_and_tells_lagging_from_stuck() {
        let obs: Observation = [
            (1, node(&[(1, 10, 10), (1, 10, 10)], "none")),
            (2, node(&[(1, 10, 10), (1, 10, 10)], "maintenance-drain")),
            (3, node(&[(1, 10, 10), (1, 10, 7)], "none")),
        ]
        .into();
        let plan = drain_plan(&obs, 1, 0);
        assert_eq!((plan.moves, plan.stuck, plan.lagging), (vec![(0, 3)], vec![], vec![1]), "node 3 may catch up");
        let alone: Observation = [(1, node(&[(1, 10, 10)], "none"))].into();
        assert_eq!(drain_plan(&alone, 1, 0).stuck, [0], "no peer answered: nothing is safe");
        let mut drained = obs.clone();
        drained.get_mut(&3).expect("3").leadership_shed = Some("maintenance-drain".into());
        assert_eq!(drain_plan(&drained, 1, 0).stuck, [0, 1], "every other voter is drained");
    }

    #[test]
    fn catch_up_is_measured_against_the_peers_commit() {
        let obs: Observation = [
            (1, node(&[(2, 10, 10), (2, 20, 20)], "none")),
            (2, node(&[(2, 12, 12), (2, 25, 25)], "none")),
            (3, node(&[(2, 4, 4), (2, 25, 24)], "none")),
        ]
        .into();
        let c = catch_up(&obs, 3);
        assert_eq!(c.lag, [(0, 8), (1, 1)].into());
        assert!(!c.done(0) && !c.done(7) && c.done(8));
        let mut not_voter = obs.clone();
        not_voter.get_mut(&3).expect("3").raft_groups[1].voters = vec![1, 2];
        assert_eq!(catch_up(&not_voter, 3).not_voter, [1]);
        // A node still behind its recovery gate has not caught up, lag or no lag.
        let mut gated = obs.clone();
        gated.get_mut(&3).expect("3").recovery_gates = vec![0];
        assert!(!catch_up(&gated, 3).done(u64::MAX));
        let issues = cluster_issues(&gated, &[1, 2, 3], u64::MAX);
        assert!(issues.iter().any(|i| i == "node 3: groups [0] wait at its recovery gate"), "{issues:?}");
    }

    #[test]
    fn a_whole_cluster_has_no_issue_and_each_gap_is_named() {
        let whole: Observation = (1..=3).map(|id| (id, node(&[(1, 10, 10), (2, 5, 5)], "none"))).collect();
        assert!(cluster_issues(&whole, &[1, 2, 3], 0).is_empty());
        let mut gaps = whole.clone();
        gaps.remove(&3);
        gaps.get_mut(&2).expect("2").raft_groups[0].last_applied_index = 4;
        gaps.get_mut(&1).expect("1").raft_groups[1].current_leader = None;
        let issues = cluster_issues(&gaps, &[1, 2, 3], 2);
        assert_eq!(issues.len(), 3, "{issues:?}");
        assert!(issues[0].contains("node 3: no metrics"));
        assert!(issues[1].contains("node 2: group 0 applied 6 entries behind"));
        assert!(issues[2].contains("group 1: no agreed leader"));
    }
}
