//! `server.http_inflight_body_size`: the write body bytes a node holds at
//! once. A body reserves its declared length before it is read (a body of
//! no declared length grows its share as it arrives) and keeps the share
//! until its request is answered. A body that would take the node past the
//! budget answers `503 INGRESS_BODY_BYTES_LIMIT_REACHED` at once: nothing
//! of it is proposed, and the node's memory stays bounded under a burst of
//! large writes instead of queueing them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::backend::{BackendError, Unavailable};

/// How long a refused writer is asked to wait: bodies in flight are
/// answered within moments.
const RETRY_AFTER_SECS: u64 = 1;

pub struct InflightBodies {
    capacity: u64,
    held: AtomicU64,
    refused: AtomicU64,
}

impl InflightBodies {
    pub fn new(capacity: u64) -> Arc<InflightBodies> {
        Arc::new(InflightBodies { capacity, held: AtomicU64::new(0), refused: AtomicU64::new(0) })
    }

    /// A share of `bytes`, or the refusal when it does not fit beside the
    /// bodies held now.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Result<BodyShare, BackendError> {
        let mut share = BodyShare { budget: self.clone(), bytes: 0 };
        share.grow_to(bytes)?;
        Ok(share)
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bodies refused since the start.
    pub fn refusals(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    fn take(&self, bytes: u64) -> bool {
        let fits = self
            .held
            .fetch_update(Relaxed, Relaxed, |held| held.checked_add(bytes).filter(|total| *total <= self.capacity));
        if fits.is_err() {
            self.refused.fetch_add(1, Relaxed);
        }
        fits.is_ok()
    }
}

/// One body's part of the budget, given back when dropped.
pub struct BodyShare {
    budget: Arc<InflightBodies>,
    bytes: u64,
}

impl BodyShare {
    /// Grows the share to `bytes` (a body without a declared length, as it
    /// arrives); a share never shrinks while its body is held.
    pub fn grow_to(&mut self, bytes: u64) -> Result<(), BackendError> {
        let more = bytes.saturating_sub(self.bytes);
        if more == 0 {
            return Ok(());
        }
        if !self.budget.take(more) {
            return Err(BackendError::Unavailable {
                reason: Unavailable::IngressBodyBytes,
                retry_after_secs: RETRY_AFTER_SECS,
            });
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for BodyShare {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(r: Result<(), BackendError>) -> bool {
        matches!(r, Err(BackendError::Unavailable { reason: Unavailable::IngressBodyBytes, .. }))
    }

    #[test]
    fn shares_fit_the_budget_and_come_back_when_dropped() {
        let budget = InflightBodies::new(100);
        let a = budget.reserve(60).expect("fits");
        assert!(refused(budget.reserve(41).map(drop)), "60 + 41 > 100");
        let b = budget.reserve(40).expect("60 + 40 fits exactly");
        assert_eq!(budget.held(), 100);
        drop(a);
        assert_eq!(budget.held(), 40);
        drop(b);
        assert_eq!(budget.held(), 0);
        assert_eq!(budget.refusals(), 1);
    }

    #[test]
    fn a_share_grows_as_its_body_arrives_and_a_refused_growth_keeps_what_it_had() {
        let budget = InflightBodies::new(100);
        let mut share = budget.reserve(0).expect("an empty share");
        share.grow_to(30).expect("30");
        share.grow_to(20).expect("never shrinks");
        assert_eq!(budget.held(), 30);
        let other = budget.reserve(50).expect("50 more");
        assert!(refused(share.grow_to(51)), "30 + 21 more would pass 100");
        assert_eq!(budget.held(), 80);
        drop((share, other));
        assert_eq!(budget.held(), 0);
    }
}
