//! The gateway's request body budget and slow-body rules (0.8 release
//! notes, "The gateway bounds the request bodies it buffers"): before a
//! body is read it reserves its declared length from a process-wide budget
//! (bodies without a length reserve the small-body size and grow as they
//! arrive), with a headroom only small bodies may use, and holds it until
//! the body was forwarded. A request that finds the budget spent for the
//! wait answers `503 UPLOAD_BUDGET_EXHAUSTED`; a body that stalls or
//! trickles below the minimum rate over a window answers `408 BODY_TOO_SLOW`.
//! Either way nothing is forwarded.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::Notify;
use tokio::time::Instant;

use ursula_http::error::ApiError;
use ursula_http::{BodyPace, Upload};

pub const DEFAULT_BUDGET_BYTES: u64 = 256 * 1024 * 1024;
pub const DEFAULT_SMALL_BODY_MAX_BYTES: u64 = 1024 * 1024;
pub const DEFAULT_SMALL_BODY_HEADROOM_BYTES: u64 = 32 * 1024 * 1024;

/// The settings of `ursula gateway --body-*` and `--small-body-*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadLimits {
    pub budget_bytes: u64,
    pub small_body_max_bytes: u64,
    pub small_body_headroom_bytes: u64,
    pub budget_wait: Duration,
    pub stall_timeout: Duration,
    pub min_bytes_per_sec: u64,
}

/// Why a set of limits cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadLimitsError {
    #[error(
        "LimitAboveSharedBudget: --body-budget-bytes {budget} is below --max-request-body-bytes plus --small-body-headroom-bytes ({needed})"
    )]
    LimitAboveSharedBudget { budget: u64, needed: u64 },
    #[error("--body-stall-timeout must be non-zero")]
    ZeroStallTimeout,
}

impl UploadLimits {
    /// The limits for a gateway taking bodies up to `max_request_bytes`;
    /// an unset budget is 256 MiB or the limit plus the headroom, the larger.
    pub fn new(
        max_request_bytes: u64,
        budget_bytes: Option<u64>,
        small_body_max_bytes: u64,
        small_body_headroom_bytes: u64,
        budget_wait: Duration,
        stall_timeout: Duration,
        min_bytes_per_sec: u64,
    ) -> Result<UploadLimits, UploadLimitsError> {
        let needed = max_request_bytes.saturating_add(small_body_headroom_bytes);
        let budget_bytes = match budget_bytes {
            Some(budget) if budget < needed => {
                return Err(UploadLimitsError::LimitAboveSharedBudget { budget, needed });
            }
            Some(budget) => budget,
            None if needed > DEFAULT_BUDGET_BYTES => {
                // The release notes' rule: it keeps starting, and says so.
                tracing::warn!(
                    budget = needed,
                    "--body-budget-bytes is unset and the request limit plus the small-body headroom passes 256 MiB: the body budget grows to their sum"
                );
                needed
            }
            None => DEFAULT_BUDGET_BYTES,
        };
        if stall_timeout.is_zero() {
            return Err(UploadLimitsError::ZeroStallTimeout);
        }
        Ok(UploadLimits {
            budget_bytes,
            small_body_max_bytes,
            small_body_headroom_bytes,
            budget_wait,
            stall_timeout,
            min_bytes_per_sec,
        })
    }

    /// The slow-body rule these limits carry.
    pub fn pace(&self) -> BodyPace {
        BodyPace { stall_timeout: self.stall_timeout, min_bytes_per_sec: self.min_bytes_per_sec }
    }
}

#[derive(Default)]
struct Reserved {
    total: u64,
}

/// The budget in effect and its counters (`/__ursula/gateway/metrics`).
pub struct UploadBudget {
    pub limits: UploadLimits,
    reserved: Mutex<Reserved>,
    freed: Notify,
    pub refusals_budget: AtomicU64,
    pub refusals_too_slow: AtomicU64,
    pub bytes_buffered: AtomicU64,
    pub refusal_drain_bytes: AtomicU64,
}

/// A share of the budget, given back when dropped.
pub struct Reservation {
    budget: Arc<UploadBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

impl UploadBudget {
    pub fn new(limits: UploadLimits) -> UploadBudget {
        UploadBudget {
            limits,
            reserved: Mutex::default(),
            freed: Notify::new(),
            refusals_budget: AtomicU64::new(0),
            refusals_too_slow: AtomicU64::new(0),
            bytes_buffered: AtomicU64::new(0),
            refusal_drain_bytes: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reserved> {
        self.reserved.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The budget reserved now, in bytes.
    pub fn reserved_bytes(&self) -> u64 {
        self.lock().total
    }

    fn try_take(&self, bytes: u64, large: bool) -> bool {
        let mut r = self.lock();
        let budget = self.limits.budget_bytes;
        // Large bodies leave the headroom free for small ones.
        let ceiling = if large { budget.saturating_sub(self.limits.small_body_headroom_bytes) } else { budget };
        if r.total.saturating_add(bytes) > ceiling {
            return false;
        }
        r.total += bytes;
        true
    }

    fn release(&self, bytes: u64) {
        let mut r = self.lock();
        r.total = r.total.saturating_sub(bytes);
        drop(r);
        self.freed.notify_waiters();
    }

    /// Takes `bytes` of the budget, waiting for shares to come back until
    /// `deadline`.
    async fn take(&self, bytes: u64, large: bool, deadline: Instant) -> bool {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_take(bytes, large) {
                return true;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return false;
            }
        }
    }

    async fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let large = bytes > self.limits.small_body_max_bytes;
        let deadline = Instant::now() + self.limits.budget_wait;
        self.take(bytes, large, deadline).await.then(|| Reservation { budget: self.clone(), bytes })
    }

    /// Grows `held` to cover `needed` bytes, as a body without a declared
    /// length arrives.
    async fn grow(&self, held: &mut Reservation, needed: u64) -> bool {
        let step = self.limits.small_body_max_bytes.max(1);
        let target = needed.div_ceil(step).saturating_mul(step);
        let large = target > self.limits.small_body_max_bytes;
        let deadline = Instant::now() + self.limits.budget_wait;
        if !self.take(target, large, deadline).await {
            return false;
        }
        // The new share replaces the old one in one piece.
        self.release(held.bytes);
        held.bytes = target;
        true
    }
}

/// Reads a body under the budget and the slow-body rules.
pub async fn read_body<T>(
    budget: &Arc<UploadBudget>,
    body: T,
    declared: Option<u64>,
    limit: u64,
) -> Result<Upload, ApiError>
where
    T: http_body::Body<Data = Bytes> + Unpin,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut body = body;
    let first = declared.unwrap_or(budget.limits.small_body_max_bytes).min(limit);
    let Some(mut held) = budget.reserve(first).await else {
        budget.refusals_budget.fetch_add(1, Relaxed);
        drain(budget, &mut body).await;
        return Err(ApiError::UploadBudgetExhausted);
    };
    let mut buf = BytesMut::with_capacity(usize::try_from(first).unwrap_or(0));
    let mut reader = budget.limits.pace().reader();
    loop {
        let data = match reader.next(&mut body).await {
            Ok(Some(data)) => data,
            Ok(None) => break,
            Err(e) => {
                if e == ApiError::BodyTooSlow {
                    budget.refusals_too_slow.fetch_add(1, Relaxed);
                }
                return Err(e);
            }
        };
        let total = (buf.len() + data.len()) as u64;
        if total > limit {
            return Err(ApiError::RequestTooLarge { limit });
        }
        if total > held.bytes && !budget.grow(&mut held, total).await {
            budget.refusals_budget.fetch_add(1, Relaxed);
            drain(budget, &mut body).await;
            return Err(ApiError::UploadBudgetExhausted);
        }
        buf.extend_from_slice(&data);
    }
    budget.bytes_buffered.fetch_add(buf.len() as u64, Relaxed);
    Ok(Upload::holding(buf.freeze(), held))
}

/// Drains a refused body, counting what it drained.
async fn drain<T>(budget: &UploadBudget, body: &mut T)
where
    T: http_body::Body<Data = Bytes> + Unpin,
{
    let drained = ursula_http::front::drain_refused_body(body).await;
    budget.refusal_drain_bytes.fetch_add(drained, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    fn limits(budget: u64, headroom: u64) -> UploadLimits {
        UploadLimits::new(
            budget - headroom,
            Some(budget),
            1024,
            headroom,
            Duration::from_millis(10),
            Duration::from_secs(30),
            1024,
        )
        .expect("limits")
    }

    #[test]
    fn an_unset_budget_grows_to_the_limit_plus_headroom_and_a_set_one_may_not_be_below() {
        let d = Duration::from_secs(1);
        let grown = UploadLimits::new(32 * MIB, None, MIB, 300 * MIB, d, d, 1).expect("grown");
        assert_eq!(grown.budget_bytes, 332 * MIB);
        let default = UploadLimits::new(32 * MIB, None, MIB, 32 * MIB, d, d, 1).expect("default");
        assert_eq!(default.budget_bytes, DEFAULT_BUDGET_BYTES);
        let refused = UploadLimits::new(32 * MIB, Some(40 * MIB), MIB, 32 * MIB, d, d, 1);
        assert_eq!(refused, Err(UploadLimitsError::LimitAboveSharedBudget { budget: 40 * MIB, needed: 64 * MIB }));
    }

    #[tokio::test]
    async fn large_bodies_leave_the_headroom_to_small_ones() {
        let budget = Arc::new(UploadBudget::new(limits(10_000, 2_000)));
        let large = budget.reserve(8_000).await.expect("the large pool");
        assert!(budget.reserve(1_025).await.is_none(), "no large body past budget minus headroom");
        let small = budget.reserve(1_000).await.expect("headroom for a small body");
        assert_eq!(budget.reserved_bytes(), 9_000);
        drop(large);
        assert!(budget.reserve(7_000).await.is_some(), "the share came back");
        drop(small);
        assert_eq!(budget.reserved_bytes(), 0);
    }
}
