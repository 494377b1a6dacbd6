//! `raft.append_transport_budget_bytes` (spec/07): the append bytes a node
//! holds for Raft transport, in each direction across all its peers. A
//! batch of AppendEntries is charged before it is sent and until its reply
//! comes; a batch received is charged while its groups take it. A charge
//! that does not fit waits, so a slow peer or a burst of large appends
//! holds senders back instead of queueing without bound. A batch larger
//! than the whole budget is charged the whole budget (it goes alone).
//! Tonic's and the sockets' own buffers are not counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is kept in units of this many bytes (a semaphore's permits).
const UNIT: u64 = 1024;

/// One direction's budget.
pub struct Direction {
    capacity: u64,
    units: Arc<Semaphore>,
    held: AtomicU64,
    waits: AtomicU64,
}

/// Bytes charged until dropped.
pub struct Charge {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
    direction: Arc<Direction>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.direction.held.fetch_sub(self.bytes, Relaxed);
    }
}

impl Direction {
    fn new(capacity: u64) -> Arc<Direction> {
        let units = capacity.div_ceil(UNIT).clamp(1, u64::from(u32::MAX));
        Arc::new(Direction {
            capacity,
            units: Arc::new(Semaphore::new(units as usize)),
            held: AtomicU64::new(0),
            waits: AtomicU64::new(0),
        })
    }

    /// Charges `bytes` (at most the whole budget), waiting while the
    /// batches charged before leave too little.
    pub async fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        let bytes = (bytes as u64).min(self.capacity);
        let units = bytes.div_ceil(UNIT).clamp(1, self.capacity.div_ceil(UNIT).clamp(1, u64::from(u32::MAX)));
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        let permit = match self.units.clone().try_acquire_many_owned(units) {
            Ok(p) => Some(p),
            Err(_) => {
                self.waits.fetch_add(1, Relaxed);
                // The semaphore is never closed.
                self.units.clone().acquire_many_owned(units).await.ok()
            }
        };
        self.held.fetch_add(bytes, Relaxed);
        Charge { _permit: permit, bytes, direction: self.clone() }
    }

    /// Bytes charged now.
    pub fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }

    /// Charges that had to wait for room.
    pub fn waits(&self) -> u64 {
        self.waits.load(Relaxed)
    }
}

/// Both directions of a node.
pub struct TransportBudget {
    pub capacity: u64,
    pub outbound: Arc<Direction>,
    pub inbound: Arc<Direction>,
}

impl TransportBudget {
    pub fn new(capacity: u64) -> Arc<TransportBudget> {
        Arc::new(TransportBudget { capacity, outbound: Direction::new(capacity), inbound: Direction::new(capacity) })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_charge_waits_until_earlier_ones_leave_room() {
        let budget = TransportBudget::new(10 * UNIT);
        let first = budget.outbound.charge(6 * 1024).await;
        assert_eq!(budget.outbound.held(), 6 * 1024);
        let later = {
            let out = budget.outbound.clone();
            tokio::spawn(async move { out.charge(5 * 1024).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!later.is_finished(), "6 + 5 KiB do not fit in 10");
        assert_eq!(budget.outbound.waits(), 1);
        // The other direction has its own budget.
        let _inbound = budget.inbound.charge(10 * 1024).await;
        drop(first);
        let second = later.await.expect("charged once the first left");
        assert_eq!(budget.outbound.held(), 5 * 1024);
        drop(second);
        assert_eq!(budget.outbound.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_larger_than_the_budget_takes_all_of_it_and_goes_alone() {
        let budget = TransportBudget::new(4 * UNIT);
        let big = budget.outbound.charge(1 << 20).await;
        assert_eq!(budget.outbound.held(), 4 * UNIT, "charged the whole budget");
        let small = {
            let out = budget.outbound.clone();
            tokio::spawn(async move { out.charge(1).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!small.is_finished());
        drop(big);
        drop(small.await.expect("charged"));
        assert_eq!(budget.outbound.held(), 0);
    }
}
