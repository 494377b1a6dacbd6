//! Cold compaction (spec/07 `storage.cold.compaction_enabled`): small
//! flushes pack slices of many streams into shared objects, so a stream read
//! back from the cold tier touches one object per flush, and a pack stays
//! stored while any stream of it lives. Once a stream holds `DEBT_SPANS`
//! spans in packs (its compaction debt, counted from the group's state: no
//! bucket listing), the group's leader rewrites the oldest of them into one
//! object of the stream's own and commits the moves (`CompactCold`). The
//! bytes, edges and digests of the spans stay as they were; the packs they
//! leave go to garbage collection once nothing references them. A span that
//! changed meanwhile (trimmed, its stream replaced) stays where it was, and
//! an object no span moved into is deleted at once.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use ursula_stream::routing::GroupId;
use ursula_stream::{ColdMove, ColdSpan, Command, CompactCold, Incarnation, Outcome, StreamKey};

use super::Cold;
use super::flush::{PACK_BELOW, object_body, object_name};
use crate::engine::{GroupEngine, Leadership};

/// Flush ticks between compaction passes.
pub const EVERY_TICKS: u64 = 10;
/// Spans in packs a stream holds before they are rewritten.
pub const DEBT_SPANS: usize = 64;
/// What one rewrite takes of a stream at most (it is fetched whole first).
const MAX_REWRITE_BYTES: u64 = 16 * 1024 * 1024;
/// Streams rewritten per group and pass, so a pass stays short.
const STREAMS_PER_PASS: usize = 4;
/// Ends the names of the objects compaction writes: their spans are no debt.
const COMPACTED: &str = "-c.seg";

/// A span packed by a small flush, not yet rewritten.
fn is_debt(span: &ColdSpan) -> bool {
    span.len < PACK_BELOW && !span.object.ends_with(COMPACTED)
}

/// The spans of a stream to rewrite now: once `DEBT_SPANS` of them are
/// debt, the oldest of those up to `MAX_REWRITE_BYTES`.
pub fn due(spans: &[ColdSpan]) -> Vec<ColdSpan> {
    let debt: Vec<&ColdSpan> = spans.iter().filter(|s| is_debt(s)).collect();
    if debt.len() < DEBT_SPANS {
        return Vec::new();
    }
    let mut taken = 0;
    debt.into_iter()
        .take_while(|s| {
            taken += s.len;
            taken <= MAX_REWRITE_BYTES
        })
        .cloned()
        .collect()
}

/// One stream's spans to rewrite, oldest first.
struct Debt {
    key: StreamKey,
    incarnation: Incarnation,
    spans: Vec<ColdSpan>,
}

/// One pass over `group` (its leader only): rewrites the debt of a few
/// streams; returns the spans moved.
pub async fn compact_group<E: GroupEngine>(engine: &Arc<E>, cold: &Arc<Cold>, group: GroupId, node_id: u64) -> usize {
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return 0;
    }
    let picked = engine.query(group, |store, now| {
        store
            .streams_where(now, |s| s.data.cold_spans().len() >= DEBT_SPANS)
            .filter_map(|(key, s)| {
                let spans = due(s.data.cold_spans());
                (!spans.is_empty()).then_some(Debt { key, incarnation: s.incarnation, spans })
            })
            .take(STREAMS_PER_PASS)
            .collect::<Vec<_>>()
    });
    let Ok(debts) = picked else { return 0 };
    let mut moved = 0;
    for debt in debts {
        moved += rewrite(engine, cold, group, node_id, debt).await;
    }
    moved
}

/// Fetches `debt`'s spans (checked against their digests), writes them
/// into one object and commits the moves; returns the spans moved.
async fn rewrite<E: GroupEngine>(engine: &Arc<E>, cold: &Arc<Cold>, group: GroupId, node_id: u64, debt: Debt) -> usize {
    let mut fetched = Vec::with_capacity(debt.spans.len());
    for span in &debt.spans {
        match cold.fetch_span_pieces(span).await {
            Ok(pieces) => fetched.push(pieces),
            Err(e) => {
                tracing::warn!(stream = %debt.key, error = %e, "cold compaction could not read a span; tried again later");
                return 0;
            }
        }
    }
    let (body, placed) = object_body(fetched.iter().map(Vec::as_slice));
    let moves: Vec<ColdMove> = debt
        .spans
        .iter()
        .zip(&placed)
        .map(|(span, p)| ColdMove {
            start: span.start,
            len: span.len,
            digest: span.digest,
            from: span.object.clone(),
            object_offset: p.object_offset,
        })
        .collect();
    // The bytes were checked on the fetch, so their digest is the span's; a
    // difference would be a digest of another form, which a read would refuse.
    if debt.spans.iter().zip(&placed).any(|(span, p)| span.digest != p.digest || span.len != p.len) {
        tracing::warn!(stream = %debt.key, "cold compaction: a span's digest is of another form; left as it is");
        return 0;
    }
    let object = cold.object_key(&debt.key.bucket, group.0, &object_name(node_id, "-c"));
    if let Err(e) = cold.store.put(&object, body).await {
        cold.uploaded(false);
        tracing::warn!(%object, error = %e, "cold compaction upload failed; tried again later");
        return 0;
    }
    cold.uploaded(true);
    let command = CompactCold { key: debt.key, incarnation: debt.incarnation, object: object.clone(), moves };
    match engine.propose(group, Command::CompactCold(command)).await {
        Ok(Outcome::CompactCold { moved }) if moved > 0 => {
            cold.stats.compactions.fetch_add(1, Relaxed);
            cold.stats.compacted_spans.fetch_add(moved as u64, Relaxed);
            moved
        }
        Ok(_) => {
            // Applied, and no span references the object: it goes now.
            cold.stats.compactions_stale.fetch_add(1, Relaxed);
            if let Err(e) = cold.store.delete(&object).await {
                tracing::warn!(%object, error = %e, "deleting a stale compaction's object failed; the GC takes it");
            }
            0
        }
        // The entry may still commit: the object stays for the GC to judge.
        Err(e) => {
            tracing::warn!(%object, error = %e, "committing a cold compaction failed");
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, len: u64, object: &str) -> ColdSpan {
        ColdSpan { start, len, object: object.into(), object_offset: 0, digest: [0; 32] }
    }

    #[test]
    fn a_stream_is_due_once_it_holds_enough_packed_spans() {
        let packed = |n: u64, len: u64| (0..n).map(|i| span(i * len, len, "p.seg")).collect::<Vec<_>>();
        assert!(due(&packed(DEBT_SPANS as u64 - 1, 100)).is_empty());
        assert_eq!(due(&packed(DEBT_SPANS as u64, 100)).len(), DEBT_SPANS);
        // Large spans and rewritten ones are no debt.
        let mut spans = packed(DEBT_SPANS as u64 - 1, 100);
        spans.push(span(1 << 30, PACK_BELOW, "own.seg"));
        spans.push(span(2 << 30, 100, "n1-5-7-c.seg"));
        assert!(due(&spans).is_empty());
        // One rewrite takes the oldest, up to its byte bound.
        let big = packed(DEBT_SPANS as u64 + 10, 600 * 1024);
        let taken = due(&big);
        assert_eq!(taken.len(), (MAX_REWRITE_BYTES / (600 * 1024)) as usize);
        assert_eq!(taken[0].start, 0);
    }
}
