//! Garbage collection of cold objects: the leader of a group lists the
//! group's objects and deletes those no stream of the group references
//! (deleted, expired, replaced or retention-trimmed streams, uploads whose
//! commit went stale) once they stayed unreferenced for `gc_grace`. The
//! grace covers reads that planned a span before it went away, on any
//! replica, and uploads whose commit has not applied yet; a recreated
//! stream's objects are new keys, so they are never the old one's.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use super::Cold;
use crate::engine::{GroupEngine, Leadership};
use ursula_stream::routing::GroupId;

/// One pass over `group`; returns how many objects it deleted.
pub async fn collect_group<E: GroupEngine>(engine: &Arc<E>, cold: &Arc<Cold>, group: GroupId) -> usize {
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return 0;
    }
    // Every bucket the group ever held a stream of has a prefix to list.
    let Ok(buckets) = engine.query(group, |store, _| store.buckets().cloned().collect::<Vec<_>>()) else { return 0 };
    let mut listed = Vec::new();
    for bucket in &buckets {
        let Ok(mut objects) = cold.store.list(&cold.group_prefix(bucket, group.0)).await else { return 0 };
        listed.append(&mut objects);
    }
    // Referenced as of after the listing: an object listed and committed
    // meanwhile is seen as referenced.
    let Ok(referenced) = engine.query(group, |store, _| store.cold_objects()) else { return 0 };
    let now = Instant::now();
    let doomed: Vec<String> = {
        let mut since = cold.unreferenced_since();
        let listed_set: HashSet<&String> = listed.iter().collect();
        since.retain(|k, _| listed_set.contains(k) && !referenced.contains(k));
        listed
            .iter()
            .filter(|k| !referenced.contains(*k))
            .filter(|k| now.duration_since(*since.entry((*k).clone()).or_insert(now)) >= cold.config.gc_grace)
            .cloned()
            .collect()
    };
    let mut deleted = 0;
    for key in doomed {
        match cold.store.delete(&key).await {
            Ok(()) => {
                cold.unreferenced_since().remove(&key);
                cold.stats.gc_deleted.fetch_add(1, Relaxed);
                deleted += 1;
            }
            Err(e) => tracing::warn!(object = %key, error = %e, "deleting an unreferenced cold object failed"),
        }
    }
    deleted
}
