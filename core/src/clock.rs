//! The one `now` of a node: the time a proposal is stamped with, which the
//! state machine reads for TTLs, expiry and renewals. Behind a trait so a
//! test can hold time still and move it on (`ManualClock`) instead of
//! sleeping through a TTL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        wall_ms()
    }
}

/// Wall-clock milliseconds, for what is not protocol time (object names,
/// grace periods of the cold tier).
pub fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A clock that stands still until it is moved on.
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    /// Stopped at the wall clock's time now.
    pub fn stopped_now() -> ManualClock {
        ManualClock { ms: AtomicU64::new(wall_ms()) }
    }

    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.ms.fetch_add(by, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::stopped_now();
        let start = clock.now_ms();
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(clock.now_ms(), start);
        clock.advance(Duration::from_millis(2500));
        assert_eq!(clock.now_ms(), start + 2500);
    }
}
