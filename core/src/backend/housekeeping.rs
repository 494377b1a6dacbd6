//! Housekeeping a node runs beside its requests.

use std::sync::Arc;
use std::time::Duration;

use ursula_stream::Command;
use ursula_stream::routing::GroupId;

use crate::engine::GroupEngine;

/// Sweeps between two looks for orphaned fork references.
const REFERENCE_CHECK_EVERY: u64 = 10;

/// Removes expired streams now and then, so a stream nobody touches again
/// does not hold memory forever (expiry itself is checked on every request).
pub async fn sweep_forever<E: GroupEngine>(engine: Arc<E>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    for round in 0u64.. {
        tick.tick().await;
        // References are judged an hour after they were taken: a look at
        // every tenth sweep (5 min by default) is soon enough.
        let check_references = round % REFERENCE_CHECK_EVERY == 0;
        for g in 0..engine.group_count() {
            if let Ok(ursula_stream::Outcome::Sweep { released, .. }) = engine.propose(GroupId(g), Command::Sweep).await
            {
                for base in released {
                    crate::backend::forks::release_chain(&*engine, &base).await;
                }
            }
            if check_references {
                crate::backend::forks::release_orphaned_references(&*engine, GroupId(g)).await;
            }
        }
    }
}
