//! Committed usage (spec/35 "Usage export"): per bucket, monotonic counters
//! of what the group committed, kept in replicated state so every voter
//! agrees and they survive snapshots, restarts and stream deletion.

/// The unit of `committed_write_units`, part of the contract (spec/35):
/// persisted in snapshots, never a configuration setting.
pub const WRITE_UNIT_BYTES: u64 = 10240;

/// What one bucket committed in one group.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommittedUsage {
    pub append_bytes: u64,
    pub records: u64,
    pub write_units: u64,
}

impl CommittedUsage {
    /// One committed, non-deduplicated create or append of `bytes` holding
    /// `records` messages: at least one write unit.
    pub fn record(&mut self, bytes: u64, records: u64) {
        self.append_bytes = self.append_bytes.saturating_add(bytes);
        self.records = self.records.saturating_add(records);
        self.write_units = self.write_units.saturating_add(bytes.div_ceil(WRITE_UNIT_BYTES).max(1));
    }

    pub fn add(&mut self, other: &CommittedUsage) {
        self.append_bytes = self.append_bytes.saturating_add(other.append_bytes);
        self.records = self.records.saturating_add(other.records);
        self.write_units = self.write_units.saturating_add(other.write_units);
    }
}

/// A bucket's line of `/__ursula/usage`: the counters and current gauges.
#[derive(serde::Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketUsage {
    pub committed_append_bytes: u64,
    pub committed_records: u64,
    pub committed_write_units: u64,
    /// Bytes from each live stream's retained offset to its tail.
    pub retained_bytes: u64,
    pub stream_count: u64,
}

impl BucketUsage {
    pub fn add(&mut self, other: &BucketUsage) {
        self.committed_append_bytes += other.committed_append_bytes;
        self.committed_records += other.committed_records;
        self.committed_write_units += other.committed_write_units;
        self.retained_bytes += other.retained_bytes;
        self.stream_count += other.stream_count;
    }
}
