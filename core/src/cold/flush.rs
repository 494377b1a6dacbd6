//! The flush worker: every `flush_interval`, each group this node leads
//! uploads the whole hot tail of every stream older than
//! `flush_max_hot_age`, and, once its hot bytes reached `flush_min_hot_size`
//! (`flush_size` unless split), its largest streams' oldest hot appends
//! (about `flush_max_size` in all, the same by default), small slices of several
//! streams of one bucket packed into one object and large ones as objects of their own,
//! then commits the references through the group's log (`CommitCold`),
//! which drops those bytes from every replica's memory. An upload that
//! fails commits nothing and is tried again on a later tick, so no byte is
//! lost or doubled; a commit that went stale (stream deleted, replaced or
//! trimmed meanwhile) freezes nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use ursula_stream::store::StreamState;
use ursula_stream::{BucketId, ColdPiece, Command, CommitCold, Incarnation, Offset, Outcome, StreamKey};

use super::Cold;
use crate::engine::{GroupEngine, Leadership};
use ursula_stream::routing::GroupId;

/// Slices below this are packed with others into one object.
pub(super) const PACK_BELOW: u64 = 1024 * 1024;
/// Spans are cut at append edges near this size, so a read inside one
/// fetches a bounded object range.
const SPAN_BYTES: u64 = 4 * 1024 * 1024;

/// One stream's oldest hot appends, to become one span.
struct Slice {
    key: StreamKey,
    incarnation: Incarnation,
    start: u64,
    chunks: Vec<Bytes>,
}

impl Slice {
    fn len(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }
}

static OBJECTS: AtomicU64 = AtomicU64::new(0);

/// Flush ticks between garbage collection passes.
const GC_EVERY_TICKS: u64 = 10;

/// Flush ticks between orphan sweeps of staged parts.
const SWEEP_EVERY_TICKS: u64 = 6 * GC_EVERY_TICKS;

/// Runs forever, flushing (and now and then collecting) the groups this
/// node leads; the leader of group 0 sweeps orphaned parts for the cluster.
pub async fn run<E: GroupEngine>(engine: Arc<E>, cold: Arc<Cold>, node_id: u64) {
    for tick in 1u64.. {
        tokio::time::sleep(cold.config.flush_interval).await;
        if tick % SWEEP_EVERY_TICKS == 0 && matches!(engine.leadership(GroupId(0)), Leadership::Local { .. }) {
            cold.sweep_parts().await;
        }
        for g in 0..engine.group_count() {
            flush_group(&engine, &cold, GroupId(g), node_id).await;
            if cold.config.compaction_enabled && tick % super::compact::EVERY_TICKS == 0 {
                super::compact::compact_group(&engine, &cold, GroupId(g), node_id).await;
            }
            if tick % GC_EVERY_TICKS == 0 {
                super::gc::collect_group(&engine, &cold, GroupId(g)).await;
            }
        }
    }
}

/// Uploads and commits one tick's worth of group `group`; returns the
/// bytes frozen.
pub async fn flush_group<E: GroupEngine>(engine: &Arc<E>, cold: &Arc<Cold>, group: GroupId, node_id: u64) -> u64 {
    let (threshold, batch) = (cold.config.flush_min_hot_size, cold.config.flush_max_size);
    let max_age_ms = u64::try_from(cold.config.flush_max_hot_age.as_millis()).unwrap_or(u64::MAX);
    // Only the leader flushes (and counts the hot bytes its writes are held to).
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return 0;
    }
    let picked = engine.query(group, |store, now| {
        let hot = store.hot_bytes();
        let mut slices = Vec::new();
        let aged = |s: &StreamState| {
            max_age_ms > 0 && s.data.hot_since_ms().is_some_and(|t| now.saturating_sub(t) >= max_age_ms)
        };
        // A hot tail past `flush_max_hot_age` goes whole, whatever the group's size.
        let mut taken = 0;
        for (key, stream) in store.hot_streams(now, aged) {
            taken += slices_of(key, stream, u64::MAX, &mut slices);
        }
        if hot >= threshold.max(1) && taken < batch {
            let mut streams: Vec<_> = store.hot_streams(now, |s| !aged(s)).collect();
            streams.sort_by_key(|(_, s)| std::cmp::Reverse(s.data.hot_bytes()));
            for (key, stream) in streams {
                if taken >= batch {
                    break;
                }
                taken += slices_of(key, stream, batch - taken, &mut slices);
            }
        }
        (hot, slices)
    });
    let Ok((hot, slices)) = picked else { return 0 };
    cold.counted(group.0, hot);
    upload(engine, cold, group, node_id, slices).await
}

/// Takes `stream`'s oldest hot appends, at least `at_least` bytes of them
/// (or all), as slices of at most about `SPAN_BYTES`; returns the bytes.
fn slices_of(key: StreamKey, stream: &StreamState, at_least: u64, slices: &mut Vec<Slice>) -> u64 {
    let mut taken = 0;
    for (start, chunk) in stream.data.oldest_hot(at_least) {
        taken += chunk.len() as u64;
        let open = slices.last_mut().filter(|s: &&mut Slice| s.key == key && s.len() < SPAN_BYTES);
        match open {
            Some(slice) => slice.chunks.push(chunk),
            None => {
                slices.push(Slice { key: key.clone(), incarnation: stream.incarnation, start, chunks: vec![chunk] })
            }
        }
    }
    taken
}

/// `POST /__ursula/flush-cold/{bucket}/{stream}`: every hot byte of `key`
/// goes to the cold tier now, whatever the group's size. `None` when this
/// node does not lead the stream's group.
pub async fn flush_stream<E: GroupEngine>(
    engine: &Arc<E>,
    cold: &Arc<Cold>,
    key: &StreamKey,
    node_id: u64,
) -> Option<u64> {
    let group = ursula_stream::routing::group_of(key, engine.group_count());
    if !matches!(engine.leadership(group), Leadership::Local { .. }) {
        return None;
    }
    let slices = engine
        .query(group, |store, now| {
            let mut slices = Vec::new();
            if let Some(stream) = store.live(key, now) {
                slices_of(key.clone(), stream, u64::MAX, &mut slices);
            }
            slices
        })
        .ok()?;
    Some(upload(engine, cold, group, node_id, slices).await)
}

/// Uploads `slices` (packing the small ones) and commits them; returns the bytes frozen.
async fn upload<E: GroupEngine>(
    engine: &Arc<E>,
    cold: &Arc<Cold>,
    group: GroupId,
    node_id: u64,
    slices: Vec<Slice>,
) -> u64 {
    if slices.is_empty() {
        return 0;
    }
    let (small, large): (Vec<_>, Vec<_>) = slices.into_iter().partition(|s| s.len() < PACK_BELOW);
    let mut objects: Vec<Vec<Slice>> = large.into_iter().map(|s| vec![s]).collect();
    // Small slices are packed per bucket: every object lies in one bucket's erasure domain.
    let mut packs: std::collections::BTreeMap<BucketId, Vec<Slice>> = Default::default();
    for slice in small {
        packs.entry(slice.key.bucket.clone()).or_default().push(slice);
    }
    objects.extend(packs.into_values());
    let uploads = objects.into_iter().map(|slices| upload_and_commit(engine, cold, group, node_id, slices));
    let frozen: Vec<u64> =
        futures_util::stream::iter(uploads).buffer_unordered(cold.config.flush_max_concurrency.max(1)).collect().await;
    frozen.iter().sum()
}

/// Where one span landed in an object built by `object_body`.
pub(super) struct Placed {
    pub object_offset: u64,
    pub len: u64,
    pub digest: [u8; 32],
}

/// An object's body: its spans' block table (`blocks`), then each span's
/// bytes in order; and where each span landed, with its digest.
pub(super) fn object_body<'a>(spans: impl Iterator<Item = &'a [Bytes]>) -> (Bytes, Vec<Placed>) {
    let spans: Vec<&[Bytes]> = spans.collect();
    // The table's size is fixed by the spans' lengths: it is written in
    // front once their block values are known.
    let lens: Vec<u64> = spans.iter().map(|chunks| chunks.iter().map(|c| c.len() as u64).sum()).collect();
    let head = super::blocks::table_size(&lens);
    let mut body = BytesMut::with_capacity(head + lens.iter().sum::<u64>() as usize);
    body.resize(head, 0);
    let mut placed = Vec::with_capacity(spans.len());
    let mut blocks = Vec::with_capacity(spans.len());
    for chunks in spans {
        let at = body.len();
        for chunk in chunks {
            body.extend_from_slice(chunk);
        }
        let bytes = &body[at..];
        let values = super::blocks::block_values(bytes);
        let len = bytes.len() as u64;
        let digest = super::blocks::root(&values, len).unwrap_or_else(|| *blake3::hash(bytes).as_bytes());
        placed.push(Placed { object_offset: at as u64, len, digest });
        blocks.push(((at - head) as u64, len, values));
    }
    body[..head].copy_from_slice(&super::blocks::encode_table(&blocks));
    (body.freeze(), placed)
}

/// A new object's name, unique on this node: `tag` marks its kind.
pub(super) fn object_name(node_id: u64, tag: &str) -> String {
    format!("n{node_id}-{}-{}{tag}.seg", crate::clock::wall_ms(), OBJECTS.fetch_add(1, Relaxed))
}

async fn upload_and_commit<E: GroupEngine>(
    engine: &Arc<E>,
    cold: &Arc<Cold>,
    group: GroupId,
    node_id: u64,
    slices: Vec<Slice>,
) -> u64 {
    let Some(bucket) = slices.first().map(|s| s.key.bucket.clone()) else { return 0 };
    let (body, placed) = object_body(slices.iter().map(|s| s.chunks.as_slice()));
    let bytes = placed.iter().map(|p| p.len).sum();
    let pieces = slices
        .into_iter()
        .zip(placed)
        .map(|(slice, p)| ColdPiece {
            key: slice.key,
            incarnation: slice.incarnation,
            start: Offset(slice.start),
            len: p.len,
            object_offset: p.object_offset,
            digest: p.digest,
        })
        .collect();
    let object = cold.object_key(&bucket, group.0, &object_name(node_id, ""));
    if let Err(e) = cold.store.put(&object, body).await {
        cold.uploaded(false);
        tracing::warn!(%object, error = %e, "cold upload failed; the bytes stay hot and are tried again");
        return 0;
    }
    cold.uploaded(true);
    match engine.propose(group, Command::CommitCold(CommitCold { object: object.clone(), pieces })).await {
        Ok(Outcome::CommitCold { frozen }) if frozen > 0 => {
            cold.stats.bytes_flushed.fetch_add(bytes, Relaxed);
            bytes
        }
        Ok(_) => 0,
        Err(e) => {
            tracing::warn!(%object, error = %e, "committing a cold upload failed; the bytes stay hot");
            0
        }
    }
}
