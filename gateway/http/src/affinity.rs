//! Pinning the worker threads that serve connections to CPUs
//! (`runtime.cpu_affinity`, spec/07): one worker per core, each kept on
//! its own CPU, when the process may use exactly as many CPUs as it has
//! workers and they do all its work, or always when asked.

/// Whether a process's HTTP workers are its only busy threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Neighbours {
    /// The in-memory node: the workers apply every request themselves.
    Alone,
    /// A Raft node: its log, replication and WAL threads run beside the
    /// workers, and pinned workers keep the scheduler from moving them out
    /// of those threads' way (0.85× the appends at 8 writers, same run,
    /// BENCHMARKS "Issue 24"), so automatic pinning leaves them free.
    BusyThreads,
}

/// The CPU each of `workers` worker threads is pinned to; empty for none.
/// `setting` is `runtime.cpu_affinity` (`None`: automatic), `allowed` the
/// CPUs this process may run on.
pub fn plan(setting: Option<bool>, workers: usize, allowed: &[usize], neighbours: Neighbours) -> Vec<usize> {
    let pin = match setting {
        Some(pin) => pin,
        None => allowed.len() == workers && neighbours == Neighbours::Alone,
    };
    if !pin || allowed.is_empty() {
        return Vec::new();
    }
    (0..workers).filter_map(|i| allowed.get(i % allowed.len()).copied()).collect()
}

/// The CPUs this process may run on (its affinity mask); empty when it
/// cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU).filter(|&cpu| set.is_set(cpu)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Keeps the calling thread on `cpu`; a failure is logged, not fatal (a
/// container may forbid it).
pub fn pin_current_thread(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!(cpu, error = %e, "cannot pin a worker thread to its CPU");
    }
}

#[cfg(test)]
mod tests {
    use super::{Neighbours, plan};

    #[test]
    fn workers_are_pinned_automatically_only_when_the_cpus_match_them() {
        use Neighbours::{Alone, BusyThreads};
        // (runtime.cpu_affinity, workers, allowed CPUs, other busy threads, pinned to)
        type Case = (Option<bool>, usize, &'static [usize], Neighbours, &'static [usize]);
        let cases: &[Case] = &[
            // Automatic: as many allowed CPUs as workers, and nothing else busy.
            (None, 2, &[0, 1], Alone, &[0, 1]),
            (None, 2, &[4, 6], Alone, &[4, 6]),
            (None, 2, &[0, 1, 2, 3], Alone, &[]),
            (None, 4, &[0, 1], Alone, &[]),
            (None, 2, &[0, 1], BusyThreads, &[]),
            // Forced: round robin over the allowed CPUs.
            (Some(true), 4, &[0, 1], Alone, &[0, 1, 0, 1]),
            (Some(true), 2, &[0, 1], BusyThreads, &[0, 1]),
            (Some(true), 1, &[2, 3], Alone, &[2]),
            (Some(true), 2, &[], Alone, &[]),
            // Off.
            (Some(false), 2, &[0, 1], Alone, &[]),
        ];
        for &(setting, workers, allowed, neighbours, pinned) in cases {
            assert_eq!(
                plan(setting, workers, allowed, neighbours),
                pinned,
                "{setting:?} {workers} {allowed:?} {neighbours:?}"
            );
        }
    }
}
