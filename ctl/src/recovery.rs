//! The recovery plan of one stalled group (spec/35 "Recovering after a
//! host crash", step 2), from the replicas' metrics alone (no I/O): who
//! leads the new history, the point it keeps, whether logs are cut, and
//! what each replica is expected to hold. Tested without a cluster.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::metrics::GroupMetrics;

/// A replica's group, by node id.
pub type Replicas = BTreeMap<u64, GroupMetrics>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub leader: u64,
    pub point: u64,
    pub cut: bool,
    /// `(term, node_id)` of the committed entry a cut keeps, reported by another replica.
    pub point_entry: Option<(u64, u64)>,
    pub floor: u64,
    pub highest_term: u64,
    pub why: String,
}

/// Why no plan may be sent now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    /// The replica leads the group with a live quorum: nothing to recover.
    LeadsLive(u64),
    /// The replica's gate may still open through a leader's barrier (or runs a cut).
    MayOpen { node: u64, gate: String },
    /// A voter set some replica reports has no majority of its voters answering.
    NoMajority(Vec<u64>),
    /// No replica the plan may elect is a voter of the membership it would campaign under.
    NoLeader,
    /// A replica knows a later committed entry than the plan would keep.
    KnowsLater { node: u64, index: u64 },
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::LeadsLive(n) => write!(f, "node {n} leads the group with a live quorum"),
            Blocked::MayOpen { node, gate } => {
                write!(f, "node {node}'s gate is {gate}: it may still open through a leader's barrier")
            }
            Blocked::NoMajority(set) => write!(f, "voter set {set:?} has no majority of its voters answering"),
            Blocked::NoLeader => {
                write!(f, "no replica the plan may elect is a voter of the membership it would campaign under")
            }
            Blocked::KnowsLater { node, index } => {
                write!(f, "node {node} knows entry {index} committed, later than the plan would keep")
            }
        }
    }
}

fn names(configs: &[Vec<u64>], node: u64) -> bool {
    configs.iter().any(|c| c.contains(&node))
}

/// Whether `node`'s own membership (its committed one when `cut`) names it.
fn votes(node: u64, g: &GroupMetrics, cut: bool) -> bool {
    names(if cut { &g.committed_voter_configs } else { &g.voter_configs }, node)
}

/// Plans the group from the replicas that answered; `exclude` are members
/// that refused a plan for a reason no plan fixes.
pub fn plan(replicas: &Replicas, exclude: &BTreeSet<u64>) -> Result<Plan, Blocked> {
    let running: BTreeMap<u64, &GroupMetrics> =
        replicas.iter().filter(|(_, g)| g.running()).map(|(n, g)| (*n, g)).collect();
    let sets: BTreeSet<Vec<u64>> = running
        .values()
        .flat_map(|g| g.voter_configs.iter().chain(&g.committed_voter_configs))
        .filter(|set| !set.is_empty())
        .cloned()
        .collect();
    if let Some(set) = sets.iter().find(|set| set.iter().filter(|n| running.contains_key(n)).count() * 2 <= set.len()) {
        return Err(Blocked::NoMajority(set.clone()));
    }
    for (node, g) in &running {
        let gate = g.recovery_gate.as_deref().unwrap_or("open");
        if ["awaiting_barrier", "catching_up", "cutting"].contains(&gate) {
            return Err(Blocked::MayOpen { node: *node, gate: gate.into() });
        }
        if g.leads_live {
            return Err(Blocked::LeadsLive(*node));
        }
    }
    let floor = running
        .values()
        .filter(|g| g.recovery_gate.as_deref().unwrap_or("open") != "open" || g.recovery.is_some())
        .map(|g| g.current_term)
        .max()
        .unwrap_or(0);
    let voters: BTreeSet<u64> = sets.iter().flatten().copied().collect();
    let candidates: Vec<(u64, &GroupMetrics)> =
        running.iter().filter(|(n, _)| voters.contains(n) && !exclude.contains(n)).map(|(n, g)| (*n, *g)).collect();
    let rank = |(n, g): &(u64, &GroupMetrics)| {
        (g.last_log_term.map_or(-1, |t| t as i128), g.last_log_index.map_or(-1, |i| i as i128), votes(*n, g, false), *n)
    };
    let (longest_id, longest) = *candidates.iter().max_by_key(|c| rank(c)).ok_or(Blocked::NoLeader)?;
    let kept: BTreeSet<u64> =
        longest.voter_configs.iter().chain(&longest.committed_voter_configs).flatten().copied().collect();
    let single = kept.len() == 1;
    let behind = longest.last_log_term.unwrap_or(0) < floor;
    let cut = !single && (behind || !votes(longest_id, longest, false));
    let mut plan = Plan {
        leader: longest_id,
        point: longest.last_log_index.unwrap_or(0),
        cut,
        point_entry: None,
        floor,
        highest_term: replicas.values().map(|g| g.current_term).max().unwrap_or(0),
        why: "the longest log keeps every entry it holds".into(),
    };
    if cut {
        plan.why = if behind {
            format!(
                "the longest log ends in term {} below the floor {floor}: a lost leader may have overwritten it",
                longest.last_log_term.unwrap_or(0)
            )
        } else {
            "the longest log's replica is no voter of its membership".into()
        };
        let committed = |g: &GroupMetrics| g.committed_index.map_or(-1, |i| i as i128);
        let (leader, g) = *candidates
            .iter()
            .filter(|(n, g)| votes(*n, g, true))
            .max_by_key(|(n, g)| (committed(g), *n))
            .ok_or(Blocked::NoLeader)?;
        plan.leader = leader;
        plan.point = g.committed_index.unwrap_or(0);
        // A later entry some replica reported committed, that a voter's log still holds.
        let known = replicas
            .iter()
            .filter(|(_, g)| g.committed_index.is_some() && g.committed_term.is_some())
            .max_by_key(|(n, g)| (g.committed_index, **n));
        if let Some((_, k)) = known
            && let Some(index) = k.committed_index.filter(|i| *i > plan.point)
        {
            let reaches = candidates
                .iter()
                .filter(|(n, g)| {
                    votes(*n, g, true) && votes(*n, g, false) && g.last_log_index.is_some_and(|l| l >= index)
                })
                .max_by_key(|(n, g)| (committed(g), *n));
            if let Some((leader, _)) = reaches {
                plan.leader = *leader;
                plan.point = index;
                plan.point_entry = Some((k.committed_term.unwrap_or(0), k.committed_node.unwrap_or(0)));
            }
        }
    }
    if let Some((node, index)) = replicas
        .iter()
        .map(|(n, g)| (*n, g.committed_index.unwrap_or(0).max(g.last_applied_index)))
        .find(|(_, index)| *index > plan.point)
    {
        return Err(Blocked::KnowsLater { node, index });
    }
    Ok(plan)
}

/// What replica `g` is expected to hold, as the plan names it.
pub fn expected(g: &GroupMetrics) -> Value {
    json!({ "last_log_index": g.last_log_index, "last_log_term": g.last_log_term, "current_term": g.current_term })
}

/// The request body for replica `g`: `lead` to the plan's leader, else
/// `follow` with the leader's plan term.
pub fn body(plan: &Plan, g: &GroupMetrics, leader_term: Option<u64>) -> Value {
    let step = match leader_term {
        None => json!({ "lead": { "highest_term": plan.highest_term } }),
        Some(term) => json!({ "follow": { "leader_term": term } }),
    };
    let mut body =
        json!({ "leader": plan.leader, "point": plan.point, "cut": plan.cut, "step": step, "expected": expected(g) });
    if let Some((term, node_id)) = plan.point_entry {
        body["point_entry"] = json!({ "term": term, "node_id": node_id });
    }
    body
}

/// Whether the plan is satisfied: every replica in the leader's membership
/// answered, applied the history event (`history.event_index` above the
/// point) and holds no plan.
pub fn satisfied(plan: &Plan, replicas: &Replicas) -> bool {
    let Some(leader) = replicas.get(&plan.leader) else { return false };
    let members: BTreeSet<u64> = leader.voter_configs.iter().flatten().copied().collect();
    !members.is_empty()
        && members.iter().all(|n| {
            replicas.get(n).is_some_and(|g| {
                g.recovery.is_none() && g.history.as_ref().and_then(|h| h.event_index).is_some_and(|i| i > plan.point)
            })
        })
}

/// Whether the plan wedged in this observation: a replica holding it
/// reports its group stalled, or a longer log than the plan's leader.
pub fn wedged(plan: &Plan, replicas: &Replicas) -> bool {
    // A leader that did not answer is no evidence either way.
    let Some(leader) = replicas.get(&plan.leader) else { return false };
    let leader_log = leader.last_log_index;
    replicas.values().any(|g| {
        g.recovery.is_some() && (g.recovery_gate.as_deref() == Some("stalled") || g.last_log_index > leader_log)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gated, stalled replica of voters 1..=3: `(last log term, last log index, current term, committed)`.
    fn replica(log: (u64, u64), term: u64, committed: Option<u64>) -> GroupMetrics {
        GroupMetrics {
            current_term: term,
            last_log_term: Some(log.0),
            last_log_index: Some(log.1),
            committed_index: committed,
            committed_term: committed.map(|_| log.0),
            committed_node: committed.map(|_| 1),
            recovery_gate: Some("stalled".into()),
            voter_configs: vec![vec![1, 2, 3]],
            committed_voter_configs: vec![vec![1, 2, 3]],
            ..Default::default()
        }
    }

    #[test]
    fn the_longest_log_leads_a_plan_without_a_cut() {
        // Node 3's gate is open: it campaigned, its term counts for the plan term, not the floor.
        let mut open = replica((3, 41), 4, None);
        open.recovery_gate = Some("open".into());
        let replicas = Replicas::from([(1, replica((3, 40), 3, None)), (2, replica((3, 42), 3, None)), (3, open)]);
        let plan = plan(&replicas, &BTreeSet::new()).expect("a plan");
        assert_eq!((plan.leader, plan.point, plan.cut, plan.floor, plan.highest_term), (2, 42, false, 3, 4));
        let lead = body(&plan, &replicas[&2], None);
        assert_eq!(lead["step"], json!({ "lead": { "highest_term": 4 } }));
        assert_eq!(lead["expected"], json!({ "last_log_index": 42, "last_log_term": 3, "current_term": 3 }));
        assert_eq!(body(&plan, &replicas[&1], Some(7))["step"], json!({ "follow": { "leader_term": 7 } }));
        // A refusal that no plan fixes leaves the member out of the next plan.
        assert_eq!(super::plan(&replicas, &BTreeSet::from([2])).map(|p| p.leader), Ok(3));
    }

    #[test]
    fn a_log_that_ends_below_the_floor_is_cut_to_the_greatest_committed_entry() {
        let replicas = Replicas::from([
            (1, replica((3, 40), 5, Some(30))),
            (2, replica((3, 42), 5, Some(35))),
            (3, replica((2, 41), 4, None)),
        ]);
        let plan = plan(&replicas, &BTreeSet::new()).expect("a plan");
        assert_eq!((plan.leader, plan.point, plan.cut, plan.point_entry), (2, 35, true, None));
        // A learner that knows a later committed entry: the voter whose log reaches it leads.
        let mut more = replicas.clone();
        let mut learner = replica((3, 42), 5, Some(38));
        learner.voter_configs = vec![vec![1, 2, 3]];
        more.insert(4, learner);
        let plan = super::plan(&more, &BTreeSet::new()).expect("a plan");
        assert_eq!((plan.leader, plan.point, plan.point_entry), (2, 38, Some((3, 1))));
        // A single voter's log is never cut.
        let mut single = replica((3, 42), 5, Some(10));
        single.voter_configs = vec![vec![1]];
        single.committed_voter_configs = vec![vec![1]];
        let plan = super::plan(&Replicas::from([(1, single)]), &BTreeSet::new()).expect("a plan");
        assert_eq!((plan.point, plan.cut), (42, false));
    }

    #[test]
    fn nothing_is_planned_while_a_gate_may_open_a_leader_is_live_or_a_majority_is_missing() {
        let stalled = || {
            Replicas::from([
                (1, replica((3, 40), 3, None)),
                (2, replica((3, 42), 3, None)),
                (3, replica((3, 41), 3, None)),
            ])
        };
        let mut waiting = stalled();
        waiting.get_mut(&3).expect("3").recovery_gate = Some("awaiting_barrier".into());
        assert_eq!(
            plan(&waiting, &BTreeSet::new()),
            Err(Blocked::MayOpen { node: 3, gate: "awaiting_barrier".into() })
        );
        let mut live = stalled();
        live.get_mut(&1).expect("1").leads_live = true;
        assert_eq!(plan(&live, &BTreeSet::new()), Err(Blocked::LeadsLive(1)));
        let mut few = stalled();
        few.remove(&2);
        few.remove(&3);
        assert_eq!(plan(&few, &BTreeSet::new()), Err(Blocked::NoMajority(vec![1, 2, 3])));
        let mut applied = stalled();
        applied.get_mut(&1).expect("1").last_applied_index = 43;
        assert_eq!(plan(&applied, &BTreeSet::new()), Err(Blocked::KnowsLater { node: 1, index: 43 }));
    }

    #[test]
    fn a_plan_is_satisfied_once_every_member_applied_its_event_and_wedges_on_a_stalled_holder() {
        let mut replicas = Replicas::from([
            (1, replica((3, 40), 3, None)),
            (2, replica((3, 42), 3, None)),
            (3, replica((3, 41), 3, None)),
        ]);
        let plan = plan(&replicas, &BTreeSet::new()).expect("a plan");
        assert!(!satisfied(&plan, &replicas));
        for g in replicas.values_mut() {
            g.recovery = Some(json!({ "leader": 2 }));
        }
        assert!(wedged(&plan, &replicas), "holders report stalled");
        for g in replicas.values_mut() {
            g.recovery_gate = Some("open".into());
        }
        assert!(!wedged(&plan, &replicas));
        for g in replicas.values_mut() {
            g.recovery = None;
            g.history = Some(crate::metrics::History { event_index: Some(43) });
        }
        assert!(satisfied(&plan, &replicas));
        replicas.remove(&3);
        assert!(!satisfied(&plan, &replicas), "a member that did not answer is not known to have applied it");
    }
}
