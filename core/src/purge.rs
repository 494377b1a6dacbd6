//! Tenant offboarding (spec/35 "Tenant offboarding (bucket purge)"): one
//! replicated `PurgeBucket` per group, each through its leader, removes the
//! bucket's streams and installs its permanent fence; then the bucket's
//! erasure domain in the cold store (`{root}/buckets/{bucket}/`: cold
//! spans, snapshot bodies, staged parts) is deleted and listed again to
//! prove it empty. Every step is idempotent, so a purge that stopped part
//! way converges when it runs again.

use std::sync::Arc;

use serde::Serialize;
use ursula_stream::BucketId;
use ursula_stream::routing::GroupId;

use crate::cold::Cold;
use crate::engine::{EngineError, GroupEngine};

/// S3's limit of keys in one `DeleteObjects`.
const DELETE_BATCH: usize = 1000;

/// The completion report an operator attests to (spec/35).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeReport {
    pub bucket: String,
    pub removed_streams: u64,
    pub groups_with_streams: Vec<u32>,
    /// Diagnostic: the objects this run deleted.
    pub cold_gc_entries_reclaimed: u64,
    /// Objects still listed under the bucket's prefix after the deletes.
    pub cold_gc_pending_entries: u64,
    pub cold_gc_complete: bool,
    pub cold_gc_error: Option<String>,
    pub bucket_prefix_absent: bool,
}

/// Purges `bucket` from every group, then from the cold store. A group
/// without a reachable leader stops the purge with its error (`503`); the
/// groups purged so far stay purged.
pub async fn purge_bucket<E: GroupEngine>(
    engine: &Arc<E>,
    cold: Option<&Arc<Cold>>,
    bucket: &BucketId,
) -> Result<PurgeReport, EngineError> {
    let mut report = PurgeReport {
        bucket: bucket.as_str().to_string(),
        removed_streams: 0,
        groups_with_streams: Vec::new(),
        cold_gc_entries_reclaimed: 0,
        cold_gc_pending_entries: 0,
        cold_gc_complete: true,
        cold_gc_error: None,
        bucket_prefix_absent: true,
    };
    for g in 0..engine.group_count() {
        let command = ursula_stream::Command::PurgeBucket(ursula_stream::PurgeBucket { bucket: bucket.clone() });
        let removed = engine.forward_to_leader(GroupId(g), command).await?;
        if removed > 0 {
            report.removed_streams += removed;
            report.groups_with_streams.push(g);
        }
    }
    // Every group is fenced now: no new object of the bucket is referenced.
    if let Some(cold) = cold {
        erase_prefix(cold, &cold.bucket_prefix(bucket), &mut report).await;
    }
    Ok(report)
}

/// Deletes everything under `prefix` and lists it again.
async fn erase_prefix(cold: &Cold, prefix: &str, report: &mut PurgeReport) {
    let listed = match cold.store.list(prefix).await {
        Ok(listed) => listed,
        Err(e) => return incomplete(report, None, e.to_string()),
    };
    for batch in listed.chunks(DELETE_BATCH) {
        match cold.store.delete_batch(batch).await {
            Ok(failed) => report.cold_gc_entries_reclaimed += (batch.len() - failed.len()) as u64,
            Err(e) => {
                let pending = listed.len() as u64 - report.cold_gc_entries_reclaimed;
                return incomplete(report, Some(pending), e.to_string());
            }
        }
    }
    match cold.store.list(prefix).await {
        Ok(left) if left.is_empty() => {}
        Ok(left) => {
            let first = left.first().cloned().unwrap_or_default();
            incomplete(report, Some(left.len() as u64), format!("{} objects still listed, first {first}", left.len()))
        }
        Err(e) => incomplete(report, None, e.to_string()),
    }
}

fn incomplete(report: &mut PurgeReport, pending: Option<u64>, why: String) {
    tracing::warn!(bucket = %report.bucket, error = %why, "a bucket purge left cold objects; repeat it");
    report.cold_gc_pending_entries = pending.unwrap_or(0);
    report.cold_gc_complete = false;
    report.cold_gc_error = Some(why);
    report.bucket_prefix_absent = false;
}
