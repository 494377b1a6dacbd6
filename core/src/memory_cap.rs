//! `runtime.node_memory_abort_cap_size` (spec/35): an emergency stop, not
//! admission control. Once the process's resident memory passes the cap it
//! aborts, without a graceful hand-off, as an OOM kill would; write
//! admission and backpressure are what keep a node below it.

use std::time::Duration;

/// How often resident memory is read.
const EVERY: Duration = Duration::from_millis(500);

/// The process's resident bytes (`VmRSS` of Linux `/proc/self/status`);
/// `None` where there is none.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// Whether `resident` is past `cap`.
pub fn over(resident: u64, cap: u64) -> bool {
    resident > cap
}

/// Reads resident memory every half second and aborts the process past `cap`.
pub async fn watch(cap: u64) {
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        if let Some(resident) = resident_bytes()
            && over(resident, cap)
        {
            eprintln!(
                "ursula: resident memory {resident} bytes is past runtime.node_memory_abort_cap_size ({cap}): aborting"
            );
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn resident_memory_is_read_and_compared() {
        let resident = super::resident_bytes().expect("Linux /proc/self/statm");
        assert!(resident > 1024 * 1024, "a test process holds more than a MiB: {resident}");
        assert!(super::over(resident, resident - 1));
        assert!(!super::over(resident, resident));
    }
}
