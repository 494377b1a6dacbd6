//! Holds a group's new proposals back while its leadership is handed over.
//! openraft's transfer stops the leader's heartbeats and writes at once; an
//! entry proposed just before, not yet on the target, is then lost to the
//! election that follows (the client hears `OUTCOME_UNKNOWN`, spec/28). So
//! a transfer first lets the proposals under way finish and waits until the
//! target holds every entry, while new ones wait at the fence: released
//! after the trigger, openraft refuses them as a transfer in progress
//! (`NoLeader`, nothing proposed), which clients and gateways retry.

use std::time::Duration;

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// How long a transfer waits for the proposals under way, and then for its
/// target to hold every entry, before it gives up (nothing moved).
pub const QUIESCE_WAIT: Duration = Duration::from_secs(2);

/// Proposals share it; a transfer takes it alone. Tokio's lock queues new
/// readers behind a waiting writer, which is what closes the fence.
#[derive(Default)]
pub struct ProposalFence(RwLock<()>);

/// Held by a proposal until its answer.
pub type Proposing<'a> = RwLockReadGuard<'a, ()>;

/// Held by a transfer until it is triggered.
pub type Closed<'a> = RwLockWriteGuard<'a, ()>;

impl ProposalFence {
    /// Waits while a transfer holds the fence.
    pub async fn enter(&self) -> Proposing<'_> {
        self.0.read().await
    }

    /// Closes the fence once every proposal under way answered, within
    /// `wait`; `None` (and open again) when some did not.
    pub async fn close(&self, wait: Duration) -> Option<Closed<'_>> {
        tokio::time::timeout(wait, self.0.write()).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_transfer_waits_for_proposals_under_way_and_holds_new_ones_back() {
        let fence = std::sync::Arc::new(ProposalFence::default());
        let under_way = fence.enter().await;
        // A proposal still under way: the fence does not close in time.
        assert!(fence.close(QUIESCE_WAIT).await.is_none());
        // Open again: a new proposal enters.
        drop(fence.enter().await);

        let closing = {
            let fence = fence.clone();
            tokio::spawn(async move { fence.close(QUIESCE_WAIT).await.is_some() })
        };
        tokio::task::yield_now().await;
        // While the transfer waits, a new proposal waits behind it.
        let late = {
            let fence = fence.clone();
            tokio::spawn(async move { drop(fence.enter().await) })
        };
        tokio::task::yield_now().await;
        assert!(!late.is_finished());
        drop(under_way);
        assert!(closing.await.expect("closing"), "closed once the proposal answered");
        late.await.expect("the late proposal enters after the transfer");
    }
}
