//! The cold tier (spec/07 "Cold storage", spec/39 "Read path and cold
//! offload"): older stream bytes move from the groups' hot rings to objects
//! of one shared store, which every replica reads.
//!
//! Module map:
//! - `store`: the `ColdStore` trait and its in-memory implementation.
//! - `io`: the tier's own threads, where store requests and checks run.
//! - `s3`: the S3 implementation on `aws-sdk-s3`.
//! - `read`: materializing a read plan's cold slices (fetch, check, cut).
//! - `ahead`: read-ahead of what a sequential reader takes next.
//! - `blocks`: per-block digests of spans, so reads fetch only what they need.
//! - `pieces`: fetched bytes kept as the pieces they arrived in.
//! - `flush`: the background worker that uploads and commits hot ranges.
//! - `compact`: rewriting a stream's spans scattered over packs into one object.
//! - `gc`: deleting objects no stream references any more.
//! - `snapshots`: snapshot bodies as cold objects.
//! - `parts`: snapshot upload in parts, its bounds, commit slots and sweep.

mod ahead;
pub mod blocks;
pub mod compact;
pub mod flush;
pub mod gc;
pub mod io;
pub mod parts;
pub mod pieces;
pub mod read;
pub mod s3;
pub mod snapshots;
pub mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
pub use store::{ColdError, ColdStore, MemoryColdStore};
use ursula_stream::BucketId;

/// `[storage.cold]` as a node runs with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdConfig {
    pub backend: ColdBackend,
    /// Prefix of every object key (may be empty).
    pub root: String,
    pub flush_interval: Duration,
    pub flush_size: u64,
    /// `storage.cold.flush_min_hot_size`: a group's hot bytes at which a
    /// tick flushes it (`flush_size` unless set).
    pub flush_min_hot_size: u64,
    /// `storage.cold.flush_max_size`: what one tick takes of a group at
    /// most, aged tails aside (`flush_size` unless set).
    pub flush_max_size: u64,
    pub flush_max_concurrency: usize,
    /// 0: no backpressure.
    pub max_hot_size_per_group: u64,
    /// How long an object stays unreferenced before it is deleted.
    pub gc_grace: Duration,
    /// A stream's hot tail older than this is flushed whole; zero: never.
    pub flush_max_hot_age: Duration,
    /// Bytes of fetched cold spans kept for repeated reads; 0: none.
    pub cache_size: u64,
    /// The orphan sweep reclaims a staged part older than this.
    pub parts_grace: Duration,
    /// `runtime.external_payload_min_size`: snapshot bodies of at least
    /// this many bytes go to the cold tier instead of replicated state.
    pub external_payload_min_size: u64,
    /// `storage.cold.compaction_enabled`: stream spans scattered over
    /// packs are rewritten into objects of their own (`compact`).
    pub compaction_enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColdBackend {
    Memory,
    S3(Box<s3::S3Config>),
}

/// The node's cold tier: the store, its settings, the cache of fetched
/// spans, and what the flush worker last counted per group.
pub struct Cold {
    pub store: Arc<dyn ColdStore>,
    pub config: ColdConfig,
    /// Fetched spans and blocks, as pieces (see `read::JOIN_SPANS_BELOW`).
    cache: moka::sync::Cache<CacheKey, Vec<Bytes>>,
    /// Objects' block tables (`None`: an object without one).
    tables: moka::sync::Cache<String, Option<Arc<blocks::Table>>>,
    /// Read-aheads on their way (`ahead`).
    ahead: std::sync::Mutex<ahead::InFlight>,
    /// Per group: hot bytes at the last flush tick plus what was appended since.
    hot: Vec<AtomicU64>,
    /// Per group: writes refused with `COLD_BACKPRESSURE`.
    backpressured: Vec<AtomicU64>,
    /// Objects seen unreferenced, and since when (on this node's passes).
    unreferenced: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    pub stats: ColdStats,
    pub parts: parts::PartsState,
    /// The zero of `ColdStats`' write times.
    born: std::time::Instant,
    /// The tier's threads (`io`); without them (unit tests) its work runs
    /// on the caller's runtime.
    io: Option<Arc<io::ColdIo>>,
}

/// A cached run of cold bytes: a whole span, or one block of one.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct CacheKey {
    object: String,
    offset: u64,
    len: u64,
}

impl CacheKey {
    fn span(span: &ursula_stream::ColdSpan) -> CacheKey {
        CacheKey { object: span.object.clone(), offset: span.object_offset, len: span.len }
    }

    fn block(span: &ursula_stream::ColdSpan, block: u64) -> CacheKey {
        let at = block * blocks::BLOCK;
        CacheKey {
            object: span.object.clone(),
            offset: span.object_offset + at,
            len: blocks::BLOCK.min(span.len.saturating_sub(at)),
        }
    }
}

/// What the snapshot-store health gate reads of the node's cold writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColdWrites {
    pub uploads: u64,
    pub failures: u64,
    /// Since the node started: when the last write succeeded and failed.
    pub last_ok: Option<std::time::Duration>,
    pub last_failed: Option<std::time::Duration>,
    /// Since the node started: now.
    pub now: std::time::Duration,
}

#[derive(Default)]
pub struct ColdStats {
    pub uploads: AtomicU64,
    pub upload_failures: AtomicU64,
    pub bytes_flushed: AtomicU64,
    pub fetches: AtomicU64,
    /// Fetches of some blocks of a span, not all of it.
    pub ranged_fetches: AtomicU64,
    pub bytes_fetched: AtomicU64,
    pub read_ahead_fetches: AtomicU64,
    pub fetch_failures: AtomicU64,
    pub cache_hits: AtomicU64,
    pub backpressure_refusals: AtomicU64,
    pub gc_deleted: AtomicU64,
    /// Compacted objects committed, the spans they took, and those that
    /// went stale before their commit (deleted at once).
    pub compactions: AtomicU64,
    pub compacted_spans: AtomicU64,
    pub compactions_stale: AtomicU64,
    /// Milliseconds after `Cold::born`, plus one (0: never).
    last_upload_ok_ms: AtomicU64,
    last_upload_failed_ms: AtomicU64,
}

impl Cold {
    pub fn new(store: Arc<dyn ColdStore>, config: ColdConfig, groups: u32) -> Cold {
        let cache = moka::sync::Cache::builder()
            .max_capacity(config.cache_size)
            .weigher(|k: &CacheKey, v: &Vec<Bytes>| {
                let len: usize = v.iter().map(Bytes::len).sum();
                u32::try_from(k.object.len() + len).unwrap_or(u32::MAX)
            })
            // Least recently used goes first: a catch-up reads each span
            // once, in order, and its read-ahead must not be refused
            // admission for being new (the default TinyLFU would).
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .build();
        let tables = moka::sync::Cache::new(4096);
        let hot = (0..groups).map(|_| AtomicU64::new(0)).collect();
        let backpressured = (0..groups).map(|_| AtomicU64::new(0)).collect();
        Cold {
            store,
            config,
            cache,
            tables,
            ahead: Default::default(),
            hot,
            backpressured,
            unreferenced: Default::default(),
            stats: ColdStats::default(),
            parts: parts::PartsState::default(),
            born: std::time::Instant::now(),
            io: None,
        }
    }

    /// `work` on the tier's threads when it has them, else where it is called.
    async fn on_io<T, F>(&self, work: F) -> Result<T, ColdError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, ColdError>> + Send + 'static,
    {
        match &self.io {
            Some(io) => io.run(work).await,
            None => work.await,
        }
    }

    /// `work` started on the tier's threads when it has them, else on the caller's runtime.
    fn spawn_io<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match &self.io {
            Some(io) => io.spawn(work),
            None => drop(tokio::spawn(work)),
        }
    }

    fn since_born_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_add(1)
    }

    /// Counts a cold write (an upload of flushed bytes) and its outcome.
    pub fn uploaded(&self, ok: bool) {
        let now = self.since_born_ms();
        if ok {
            self.stats.uploads.fetch_add(1, Relaxed);
            self.stats.last_upload_ok_ms.store(now, Relaxed);
        } else {
            self.stats.upload_failures.fetch_add(1, Relaxed);
            self.stats.last_upload_failed_ms.store(now, Relaxed);
        }
    }

    pub fn writes(&self) -> ColdWrites {
        let at = |ms: u64| (ms > 0).then(|| std::time::Duration::from_millis(ms - 1));
        ColdWrites {
            uploads: self.stats.uploads.load(Relaxed),
            failures: self.stats.upload_failures.load(Relaxed),
            last_ok: at(self.stats.last_upload_ok_ms.load(Relaxed)),
            last_failed: at(self.stats.last_upload_failed_ms.load(Relaxed)),
            now: self.born.elapsed(),
        }
    }

    /// The hot bytes of `group` the flush has not moved to the store.
    pub fn hot_bytes(&self, group: u32) -> u64 {
        self.hot.get(group as usize).map_or(0, |h| h.load(Relaxed))
    }

    /// Builds the configured store (S3 clients resolve credentials here);
    /// its requests, and the checks of what they fetch, run on `io`'s threads.
    pub async fn open(config: ColdConfig, groups: u32, io: Arc<io::ColdIo>) -> anyhow::Result<Cold> {
        let store: Arc<dyn ColdStore> = match &config.backend {
            ColdBackend::Memory => Arc::new(MemoryColdStore::default()),
            ColdBackend::S3(s3) => Arc::new(s3::S3ColdStore::connect(s3).await?),
        };
        let store: Arc<dyn ColdStore> = Arc::new(io::OnColdIo::new(store, io.clone()));
        Ok(Cold { io: Some(io), ..Cold::new(store, config, groups) })
    }

    /// Whether a write of `group` must wait for the flush (`503 COLD_BACKPRESSURE`).
    pub fn backpressure(&self, group: u32) -> bool {
        let max = self.config.max_hot_size_per_group;
        let hot = self.hot.get(group as usize).map_or(0, |h| h.load(Relaxed));
        if max > 0 && hot > max {
            self.stats.backpressure_refusals.fetch_add(1, Relaxed);
            if let Some(b) = self.backpressured.get(group as usize) {
                b.fetch_add(1, Relaxed);
            }
            return true;
        }
        false
    }

    pub fn appended(&self, group: u32, bytes: u64) {
        if let Some(h) = self.hot.get(group as usize) {
            h.fetch_add(bytes, Relaxed);
        }
    }

    fn counted(&self, group: u32, hot: u64) {
        if let Some(h) = self.hot.get(group as usize) {
            h.store(hot, Relaxed);
        }
    }

    /// Where every object of every bucket lives: `{root}/buckets/`. Each
    /// bucket is one erasure domain under it (spec/35 "Tenant offboarding"),
    /// apart from the Raft snapshots (`snapshots/`) and the epoch marker.
    pub(crate) fn buckets_root(&self) -> String {
        let root = self.config.root.trim_matches('/');
        if root.is_empty() { "buckets/".into() } else { format!("{root}/buckets/") }
    }

    /// `{root}/buckets/{bucket}/`: everything the bucket stored.
    pub fn bucket_prefix(&self, bucket: &BucketId) -> String {
        format!("{}{}/", self.buckets_root(), bucket.as_str())
    }

    /// Where `group`'s cold objects of `bucket` live: `{bucket prefix}cold/g{group}/`.
    fn group_prefix(&self, bucket: &BucketId, group: u32) -> String {
        format!("{}cold/g{group}/", self.bucket_prefix(bucket))
    }

    /// The key of a new object of `group` in `bucket`.
    fn object_key(&self, bucket: &BucketId, group: u32, name: &str) -> String {
        format!("{}{name}", self.group_prefix(bucket, group))
    }

    fn unreferenced_since(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, std::time::Instant>> {
        self.unreferenced.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn metrics(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        let s = &self.stats;
        m.insert("cold_uploads".into(), s.uploads.load(Relaxed).into());
        m.insert("cold_upload_failures".into(), s.upload_failures.load(Relaxed).into());
        // spec/38's name for the same count.
        m.insert("cold_flush_write_errors".into(), s.upload_failures.load(Relaxed).into());
        m.insert("cold_bytes_flushed".into(), s.bytes_flushed.load(Relaxed).into());
        m.insert("cold_fetches".into(), s.fetches.load(Relaxed).into());
        m.insert("cold_ranged_fetches".into(), s.ranged_fetches.load(Relaxed).into());
        m.insert("cold_bytes_fetched".into(), s.bytes_fetched.load(Relaxed).into());
        m.insert("cold_read_ahead_fetches".into(), s.read_ahead_fetches.load(Relaxed).into());
        m.insert("cold_read_ahead_in_flight".into(), (self.in_flight().len() as u64).into());
        m.insert("cold_fetch_failures".into(), s.fetch_failures.load(Relaxed).into());
        m.insert("cold_cache_hits".into(), s.cache_hits.load(Relaxed).into());
        m.insert("cold_backpressure_refusals".into(), s.backpressure_refusals.load(Relaxed).into());
        m.insert("cold_gc_deleted".into(), s.gc_deleted.load(Relaxed).into());
        m.insert("cold_compactions".into(), s.compactions.load(Relaxed).into());
        m.insert("cold_compacted_spans".into(), s.compacted_spans.load(Relaxed).into());
        m.insert("cold_compactions_stale".into(), s.compactions_stale.load(Relaxed).into());
        let p = &self.parts;
        m.insert("snapshot_parts_staged_limit".into(), p.limit_refusals.load(Relaxed).into());
        m.insert("snapshot_commits_busy".into(), p.commits_busy.load(Relaxed).into());
        m.insert("snapshot_parts_swept".into(), p.swept.load(Relaxed).into());
        let hot: Vec<u64> = self.hot.iter().map(|h| h.load(Relaxed)).collect();
        m.insert("hot_bytes".into(), hot.iter().sum::<u64>().into());
        m.insert("cold_hot_bytes".into(), hot.iter().sum::<u64>().into());
        // spec/38's names: per group, indexed by group id.
        m.insert("per_group_cold_hot_bytes".into(), hot.into());
        m.insert("cold_backpressure_events".into(), s.backpressure_refusals.load(Relaxed).into());
        let refused: Vec<u64> = self.backpressured.iter().map(|b| b.load(Relaxed)).collect();
        m.insert("per_group_cold_backpressure_events".into(), refused.into());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    /// A memory-backed tier's settings for unit tests.
    pub fn config() -> super::ColdConfig {
        super::ColdConfig {
            backend: super::ColdBackend::Memory,
            root: "t".into(),
            flush_interval: Duration::from_secs(1),
            flush_size: 1 << 20,
            flush_min_hot_size: 1 << 20,
            flush_max_size: 1 << 20,
            flush_max_concurrency: 1,
            max_hot_size_per_group: 0,
            gc_grace: Duration::from_secs(300),
            flush_max_hot_age: Duration::ZERO,
            cache_size: 0,
            parts_grace: Duration::from_secs(86_400),
            external_payload_min_size: crate::cold::snapshots::EXTERNAL_PAYLOAD_MIN_SIZE as u64,
            compaction_enabled: true,
        }
    }
}
