//! Which groups a snapshot driver pass starts (spec/07,
//! `raft.snapshot_log_budget`, `raft.snapshot_build_max_concurrency`,
//! `raft.snapshot_pressure_max_groups_per_tick`). Pure: the driver feeds it
//! each group's log and whether a build of it runs.

/// A group as one pass sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLog {
    pub group: usize,
    /// Log bytes since the group's last snapshot.
    pub log_bytes: u64,
    /// The bytes at which it is due (`driver::threshold`).
    pub threshold: u64,
    /// A build of it runs, or was just asked for.
    pub busy: bool,
    /// It applied a removal a quarter of `raft.deleted_data_max_age` ago
    /// that no snapshot covers: due whatever its log.
    pub owes_removal: bool,
    /// The journal reported it lagging: its live log is too large to copy
    /// out of the old segments it keeps, so its snapshot frees them. Due
    /// whatever its log, and first.
    pub wal_lagging: bool,
}

impl GroupLog {
    /// Its log reached its threshold, it owes a removal a snapshot, or it
    /// keeps old journal segments.
    pub fn due(&self) -> bool {
        self.log_bytes >= self.threshold || self.owes_removal || self.wal_lagging
    }
}

/// The node's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `raft.snapshot_log_budget`.
    pub budget: u64,
    /// `raft.snapshot_build_max_concurrency`.
    pub max_builds: usize,
    /// `raft.snapshot_pressure_max_groups_per_tick`.
    pub per_tick: usize,
}

/// Builds the node's log calls for: one below the budget; past it, two,
/// then more in even steps up to `max_builds` before twice the budget.
pub fn build_slots(log_bytes: u64, budget: u64, max_builds: usize) -> usize {
    let max = max_builds.max(1);
    let budget = budget.max(1);
    if log_bytes < budget {
        return 1;
    }
    if log_bytes >= budget.saturating_mul(2) {
        return max;
    }
    // Fraction of the way from the budget to twice it, in (max - 1) steps.
    let past = u128::from(log_bytes - budget);
    let steps = (past * (max as u128 - 1) / u128::from(budget)) as usize;
    (2 + steps).min(max)
}

/// The groups this pass starts, in order, while `in_flight` builds run.
/// Due groups go first by log size; from three quarters of the budget a
/// pressure pass also takes the groups holding the most log, until what
/// is left would be half the budget.
pub fn plan(groups: &[GroupLog], limits: Limits, in_flight: usize) -> Vec<usize> {
    let total: u64 = groups.iter().map(|g| g.log_bytes).sum();
    let slots = build_slots(total, limits.budget, limits.max_builds);
    let starts_cap = if total < limits.budget { limits.per_tick } else { limits.per_tick.saturating_mul(slots) };
    let room = slots.saturating_sub(in_flight).min(starts_cap);
    if room == 0 {
        return Vec::new();
    }
    let mut idle: Vec<&GroupLog> =
        groups.iter().filter(|g| !g.busy && (g.log_bytes > 0 || g.owes_removal || g.wal_lagging)).collect();
    idle.sort_by(|a, b| {
        b.wal_lagging.cmp(&a.wal_lagging).then(b.log_bytes.cmp(&a.log_bytes)).then(a.group.cmp(&b.group))
    });
    let pressure = total >= limits.budget / 4 * 3;
    let mut left = total;
    let mut chosen = Vec::new();
    for g in idle {
        let relieves = pressure && left > limits.budget / 2;
        if g.due() || relieves {
            chosen.push(g.group);
            left -= g.log_bytes;
            if chosen.len() == room {
                break;
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn slots_follow_the_spec_steps() {
        let b = 1024 * MIB;
        // Below the budget: one, whatever the maximum.
        for max in [1, 2, 4, 16] {
            assert_eq!(build_slots(b - 1, b, max), 1, "max {max}");
        }
        // The default of 2: two past the budget.
        assert_eq!(build_slots(b, b, 2), 2);
        assert_eq!(build_slots(b * 19 / 10, b, 2), 2);
        // 4: two past the budget, three past 1.33x, four past 1.67x.
        assert_eq!(build_slots(b, b, 4), 2);
        assert_eq!(build_slots(b * 13 / 10, b, 4), 2);
        assert_eq!(build_slots(b * 134 / 100, b, 4), 3);
        assert_eq!(build_slots(b * 166 / 100, b, 4), 3);
        assert_eq!(build_slots(b * 167 / 100, b, 4), 4);
        // 1 stays one; twice the budget and beyond: the maximum.
        assert_eq!(build_slots(b * 3, b, 1), 1);
        assert_eq!(build_slots(b * 2, b, 16), 16);
    }

    fn g(group: usize, log_bytes: u64, threshold: u64) -> GroupLog {
        GroupLog { group, log_bytes, threshold, busy: false, owes_removal: false, wal_lagging: false }
    }

    #[test]
    fn a_group_the_journal_reports_lagging_goes_first_below_its_threshold() {
        let limits = Limits { budget: 1024 * MIB, max_builds: 2, per_tick: 16 };
        let mut groups = [g(0, 20 * MIB, 16 * MIB), g(1, 3 * MIB, 16 * MIB)];
        assert_eq!(plan(&groups, limits, 0), vec![0]);
        groups[1].wal_lagging = true;
        assert_eq!(plan(&groups, limits, 0), vec![1], "the one slot goes to the lagging group");
    }

    #[test]
    fn a_group_that_owes_a_removal_is_due_below_its_threshold() {
        let limits = Limits { budget: 1024 * MIB, max_builds: 2, per_tick: 16 };
        let mut groups = [g(0, 20 * MIB, 16 * MIB), g(1, 1024, 16 * MIB), g(2, 0, 16 * MIB)];
        groups[2].owes_removal = true;
        // Due groups by log size: the one over its threshold first.
        assert_eq!(plan(&groups, limits, 0), vec![0]);
        groups[0].log_bytes = MIB;
        assert_eq!(plan(&groups, limits, 0), vec![2], "even with its log purged already");
    }

    #[test]
    fn below_the_budget_one_build_at_a_time_largest_due_first() {
        let limits = Limits { budget: 1024 * MIB, max_builds: 4, per_tick: 16 };
        let groups = [g(0, 20 * MIB, 16 * MIB), g(1, 30 * MIB, 16 * MIB), g(2, 10 * MIB, 16 * MIB)];
        assert_eq!(plan(&groups, limits, 0), vec![1]);
        assert_eq!(plan(&groups, limits, 1), Vec::<usize>::new(), "the one slot is taken");
        let mut busy = groups;
        busy[1].busy = true;
        assert_eq!(plan(&busy, limits, 0), vec![0], "a busy group is passed over");
    }

    #[test]
    fn past_the_budget_more_builds_and_the_pressure_order() {
        let limits = Limits { budget: 100 * MIB, max_builds: 4, per_tick: 16 };
        // 170 MiB: four slots; none is due by its threshold, the pressure
        // pass takes the largest until 50 MiB would be left.
        let groups =
            [g(0, 40 * MIB, 64 * MIB), g(1, 60 * MIB, 64 * MIB), g(2, 50 * MIB, 64 * MIB), g(3, 20 * MIB, 64 * MIB)];
        assert_eq!(plan(&groups, limits, 0), vec![1, 2, 0]);
        assert_eq!(plan(&groups, limits, 3), vec![1]);
        // Below three quarters, only due groups.
        let calm = [g(0, 30 * MIB, 64 * MIB), g(1, 40 * MIB, 32 * MIB)];
        assert_eq!(plan(&calm, limits, 0), vec![1]);
    }

    #[test]
    fn a_pass_starts_at_most_per_tick_groups() {
        let limits = Limits { budget: 100 * MIB, max_builds: 16, per_tick: 2 };
        let groups: Vec<GroupLog> = (0..10).map(|i| g(i, 30 * MIB, MIB)).collect();
        // 300 MiB: sixteen slots, and two starts per slot: 10 due, all taken.
        assert_eq!(plan(&groups, limits, 0).len(), 10);
        let calm: Vec<GroupLog> = (0..10).map(|i| g(i, MIB, MIB)).collect();
        let below = Limits { budget: 100 * MIB, max_builds: 16, per_tick: 2 };
        assert_eq!(plan(&calm, below, 0).len(), 1, "below the budget: one slot");
        let limits = Limits { budget: 10 * MIB, max_builds: 16, per_tick: 2 };
        let past: Vec<GroupLog> = (0..10).map(|i| g(i, 2 * MIB, MIB)).collect();
        // 20 MiB: twice the budget, sixteen slots, 2 x 16 starts allowed.
        assert_eq!(plan(&past, limits, 0).len(), 10);
        let limits = Limits { budget: 10 * MIB, max_builds: 2, per_tick: 1 };
        assert_eq!(plan(&past, limits, 0).len(), 2, "two slots past the budget, one start each");
    }
}
