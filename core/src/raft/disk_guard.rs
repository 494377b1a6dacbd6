//! The WAL disk guard (`raft.wal.min_available_size` and
//! `resume_available_size`): below the minimum the node refuses writes with
//! `503 WAL_DISK_PRESSURE` and reports itself unready; it admits them again
//! only once free space is back above the resume level, so a probe near the
//! line does not flap.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct DiskGuard {
    min_available: u64,
    resume_available: u64,
    pressure: AtomicBool,
    available: AtomicU64,
    /// Free-space checks that failed (`wal_disk_stat_errors`).
    stat_errors: AtomicU64,
}

/// Free bytes an unprivileged writer may use on the filesystem of `path`.
pub fn available_bytes(path: &Path) -> std::io::Result<u64> {
    let st = rustix::fs::statvfs(path).map_err(std::io::Error::from)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

impl DiskGuard {
    pub fn new(min_available: u64, resume_available: u64) -> DiskGuard {
        DiskGuard {
            min_available,
            resume_available,
            pressure: AtomicBool::new(false),
            available: AtomicU64::new(u64::MAX),
            stat_errors: AtomicU64::new(0),
        }
    }

    pub fn enabled(&self) -> bool {
        self.min_available > 0
    }

    /// Folds in a new reading; a failed check counts as pressure (spec/38).
    pub fn observe(&self, reading: std::io::Result<u64>) {
        if !self.enabled() {
            return;
        }
        let now = match reading {
            Ok(bytes) => {
                self.available.store(bytes, Ordering::Relaxed);
                let was = self.pressure.load(Ordering::Relaxed);
                if was { bytes < self.resume_available } else { bytes < self.min_available }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot check free space of the WAL filesystem");
                self.stat_errors.fetch_add(1, Ordering::Relaxed);
                true
            }
        };
        if now != self.pressure.swap(now, Ordering::Relaxed) {
            if now {
                tracing::error!(available = self.available(), "WAL disk pressure: refusing writes");
            } else {
                tracing::warn!(available = self.available(), "WAL disk pressure cleared: admitting writes");
            }
        }
    }

    pub fn under_pressure(&self) -> bool {
        self.pressure.load(Ordering::Relaxed)
    }

    pub fn available(&self) -> u64 {
        self.available.load(Ordering::Relaxed)
    }

    pub fn min_available(&self) -> u64 {
        self.min_available
    }

    pub fn resume_available(&self) -> u64 {
        self.resume_available
    }

    pub fn stat_errors(&self) -> u64 {
        self.stat_errors.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::DiskGuard;

    #[test]
    fn hysteresis_between_minimum_and_resume() {
        let g = DiskGuard::new(100, 200);
        g.observe(Ok(150));
        assert!(!g.under_pressure());
        g.observe(Ok(99));
        assert!(g.under_pressure());
        g.observe(Ok(150));
        assert!(g.under_pressure(), "stays refused until the resume level");
        g.observe(Ok(200));
        assert!(!g.under_pressure());
        g.observe(Err(std::io::Error::other("statvfs failed")));
        assert!(g.under_pressure(), "a failed check is pressure");
        assert_eq!(g.stat_errors(), 1);
        let off = DiskGuard::new(0, 1);
        off.observe(Ok(0));
        assert!(!off.under_pressure(), "0 disables the guard");
    }

    #[test]
    fn reads_a_real_filesystem() {
        let free = super::available_bytes(&std::env::temp_dir()).expect("statvfs");
        assert!(free > 0);
    }
}
