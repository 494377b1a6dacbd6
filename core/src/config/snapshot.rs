//! `[storage.snapshot]` resolved into where a node keeps its Raft
//! snapshots, with the startup refusals of spec/07 ("Cold storage"):
//! `auto` is S3 on a cluster whose cold backend is S3, inline otherwise; a
//! single node is always inline.

use std::time::Duration;

use super::ConfigError;
use super::cold::duration;
use super::file::SnapshotSection;
use crate::cold::s3::S3Config;
use crate::cold::{ColdBackend, ColdConfig};

/// Where a cluster node keeps its Raft snapshots when they live on S3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotStoreConfig {
    /// The cold tier's bucket and client, with the snapshot store's own timeout and retries.
    pub s3: S3Config,
    /// Key prefix of every node's directory (the cold root included).
    pub prefix: String,
}

const DEFAULT_PREFIX: &str = "snapshots";
/// Requests of a follower's install copy: GET, PUT, a second PUT, HEAD.
const COPY_REQUESTS: u32 = 4;

/// The longest one snapshot-store request can take: every attempt to its
/// timeout and every backoff before a retry (2 s, 4 s, ... up to 120 s).
pub fn request_bound(timeout: Duration, retries: u32) -> Duration {
    let backoffs: u64 = (0..retries).map(|r| 2u64.saturating_pow(r + 1).min(120)).sum();
    timeout.saturating_mul(retries.saturating_add(1)) + Duration::from_secs(backoffs)
}

/// Trims `/`s and checks each component (ASCII letters, digits, `-`, `_`, `.`; not `.` or `..`).
fn prefix(text: Option<String>) -> Result<String, ConfigError> {
    let raw = text.unwrap_or_else(|| DEFAULT_PREFIX.to_string());
    let trimmed = raw.trim_matches('/');
    let valid = !trimmed.is_empty()
        && trimmed.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        });
    if !valid {
        return Err(ConfigError::Value {
            key: "storage.snapshot.s3_prefix",
            value: raw,
            expected: "components of A-Z a-z 0-9 - _ . separated by single /",
        });
    }
    Ok(trimmed.to_string())
}

/// The snapshot driver's tick: `5s` with S3 snapshots, `1s` inline; never `0s`.
pub fn drive_interval(text: Option<String>, s3: bool) -> Result<Duration, ConfigError> {
    let default = Duration::from_secs(if s3 { 5 } else { 1 });
    let every = duration("storage.snapshot.drive_interval", text, default)?;
    if every.is_zero() {
        return Err(ConfigError::Refused {
            key: "storage.snapshot.drive_interval",
            message: "must be non-zero".into(),
        });
    }
    Ok(every)
}

/// `None`: inline snapshots (the node's own disk only).
pub fn resolve(
    section: SnapshotSection,
    cold: Option<&ColdConfig>,
    clustered: bool,
    install_timeout: Duration,
) -> Result<Option<Box<SnapshotStoreConfig>>, ConfigError> {
    let refuse = |key, message: String| Err(ConfigError::Refused { key, message });
    let prefix = prefix(section.s3_prefix)?;
    let timeout = duration("storage.snapshot.s3_timeout", section.s3_timeout, Duration::from_secs(10))?;
    if timeout.is_zero() {
        return refuse("storage.snapshot.s3_timeout", "must be non-zero".into());
    }
    let retries = section.s3_max_retries.unwrap_or(1);
    let cold_s3 = cold.and_then(|c| match &c.backend {
        ColdBackend::S3(s3) => Some((c, s3)),
        ColdBackend::Memory => None,
    });
    let wanted = match section.backend.as_deref() {
        None | Some("auto") => cold_s3.is_some(),
        Some("inline") => false,
        Some("s3") if cold_s3.is_none() => {
            return refuse("storage.snapshot.backend", "\"s3\" needs storage.cold.backend = \"s3\"".into());
        }
        Some("s3") => true,
        Some(other) => {
            return Err(ConfigError::Value {
                key: "storage.snapshot.backend",
                value: other.to_string(),
                expected: "auto, inline or s3",
            });
        }
    };
    // A single node keeps its snapshots inline whatever the backend says.
    let Some((cold, s3)) = cold_s3.filter(|_| wanted && clustered) else { return Ok(None) };
    let copy = request_bound(timeout, retries).saturating_mul(COPY_REQUESTS);
    if copy > install_timeout {
        return refuse(
            "raft.install_snapshot_timeout",
            format!(
                "SnapshotCopyOutlastsInstall: a follower's snapshot copy can take {}s with storage.snapshot.s3_timeout \
                 and s3_max_retries, longer than raft.install_snapshot_timeout ({}s)",
                copy.as_secs(),
                install_timeout.as_secs()
            ),
        );
    }
    let root = cold.root.trim_matches('/');
    let prefix = if root.is_empty() { prefix } else { format!("{root}/{prefix}") };
    let mut s3 = s3.clone();
    s3.timeout = timeout;
    s3.max_retries = retries;
    Ok(Some(Box::new(SnapshotStoreConfig { s3: *s3, prefix })))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_default_copy_bound_is_88_seconds() {
        assert_eq!(super::request_bound(Duration::from_secs(10), 1), Duration::from_secs(22));
        assert_eq!(super::request_bound(Duration::from_secs(10), 1) * 4, Duration::from_secs(88));
        assert_eq!(super::request_bound(Duration::from_secs(1), 3), Duration::from_secs(4 + 14));
    }

    #[test]
    fn prefixes_are_trimmed_and_checked() {
        assert_eq!(super::prefix(Some("/a/b/".into())).expect("valid"), "a/b");
        for bad in ["", "/", "a//b", "a/../b", "a b", "a/./b"] {
            assert!(super::prefix(Some(bad.into())).is_err(), "{bad:?} must be refused");
        }
    }
}
