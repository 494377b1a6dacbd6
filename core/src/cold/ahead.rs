//! Read-ahead for a sequential catch-up: what a reader takes next is
//! fetched into the cache in the background while its answer goes out, so
//! the next read finds it there instead of waiting on the object store.
//! Two kinds go through the one registry of fetches on their way: whole
//! spans a read names (`ReadView::cold_ahead`), and the next blocks of a
//! span read in part (`read::span_range`). A read that needs a whole span
//! still on its way waits for that fetch rather than starting a second one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use ursula_stream::ColdSpan;

use super::{CacheKey, Cold, ColdError};

/// A fetch on its way: the checked bytes, `None` when it failed.
pub(super) type Pending = Shared<BoxFuture<'static, Option<Vec<Bytes>>>>;

/// The read-aheads on their way, by the key of what they fetch (a span,
/// or the first of a run of blocks), with their lengths.
#[derive(Default)]
pub(super) struct InFlight(HashMap<CacheKey, (u64, Pending)>);

impl InFlight {
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    fn bytes(&self) -> u64 {
        self.0.values().map(|(len, _)| len).sum()
    }
}

/// Whether a read-ahead started.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ahead {
    Started,
    /// Cached, or on its way already (or no cache to read into).
    Needless,
    /// What is on its way fills the room for read-ahead.
    Full,
}

impl Cold {
    pub(super) fn in_flight(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The read-ahead of `key`, if one is on its way.
    pub(super) fn pending(&self, key: &CacheKey) -> Option<Pending> {
        self.in_flight().0.get(key).map(|(_, pending)| pending.clone())
    }

    /// Runs `fetch` (of `len` bytes, into the cache) in the background,
    /// unless `key` is cached or on its way. What is read ahead at once,
    /// across readers, stays within half the cache, so it does not evict
    /// what the readers are taking now.
    pub(super) fn read_ahead<F, Fut>(self: &Arc<Self>, key: CacheKey, len: u64, fetch: F) -> Ahead
    where
        F: FnOnce(Arc<Self>) -> Fut,
        Fut: Future<Output = Result<Vec<Bytes>, ColdError>> + Send + 'static,
    {
        if self.config.cache_size == 0 {
            return Ahead::Needless;
        }
        let mut in_flight = self.in_flight();
        if in_flight.0.contains_key(&key) || self.cache.contains_key(&key) {
            return Ahead::Needless;
        }
        if in_flight.bytes().saturating_add(len) > self.config.cache_size / 2 {
            return Ahead::Full;
        }
        let (me, done) = (self.clone(), key.clone());
        let fetch = fetch(self.clone());
        let pending = async move {
            me.stats.read_ahead_fetches.fetch_add(1, Relaxed);
            let got = fetch.await;
            me.in_flight().0.remove(&done);
            got.inspect_err(|e| tracing::debug!(object = %done.object, error = %e, "a cold read-ahead failed")).ok()
        }
        .boxed()
        .shared();
        in_flight.0.insert(key, (len, pending.clone()));
        self.spawn_io(async move { drop(pending.await) });
        Ahead::Started
    }

    /// Fetches the whole `spans` a reader takes next into the cache.
    pub fn read_ahead_spans(self: &Arc<Self>, spans: &[ColdSpan]) {
        for span in spans {
            let whole = span.clone();
            let ahead =
                self.read_ahead(CacheKey::span(span), span.len, |me| async move { me.fetch_span(&whole).await });
            if ahead == Ahead::Full {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use bytes::Bytes;
    use tokio::sync::Semaphore;
    use ursula_stream::ColdSpan;

    use super::super::store::{ColdStore, MemoryColdStore, RangeHook};
    use super::super::{CacheKey, Cold, ColdConfig};

    const SPAN: u64 = 64 * 1024;

    /// What the tier's store does on each ranged read: count it, then
    /// wait for a permit.
    struct Gated {
        gate: Semaphore,
        gets: AtomicU64,
    }

    /// A tier over a gated store holding `n` spans of `SPAN` bytes (the
    /// first `bad` of them recorded with a wrong digest).
    async fn tier(cache_size: u64, n: u64, bad: u64) -> (Arc<Cold>, Arc<Gated>, Vec<ColdSpan>) {
        let gated = Arc::new(Gated { gate: Semaphore::new(0), gets: AtomicU64::new(0) });
        let hook = gated.clone();
        let store = Arc::new(RangeHook {
            inner: MemoryColdStore::default(),
            before_range: Box::new(move || {
                let gated = hook.clone();
                Box::pin(async move {
                    gated.gets.fetch_add(1, Relaxed);
                    gated.gate.acquire().await.expect("gate").forget();
                })
            }),
        });
        let mut spans = Vec::new();
        for i in 0..n {
            let bytes = Bytes::from(vec![i as u8; SPAN as usize]);
            let object = format!("o{i}");
            store.put(&object, bytes.clone()).await.expect("put");
            let digest = if i < bad { [0; 32] } else { *blake3::hash(&bytes).as_bytes() };
            spans.push(ColdSpan { start: i * SPAN, len: SPAN, object, object_offset: 0, digest });
        }
        let config = ColdConfig { cache_size, ..super::super::tests::config() };
        (Arc::new(Cold::new(store, config, 1)), gated, spans)
    }

    async fn settle(cold: &Cold, spans: &[ColdSpan]) {
        for span in spans {
            if let Some(pending) = cold.pending(&CacheKey::span(span)) {
                pending.await;
            }
        }
    }

    #[tokio::test]
    async fn spans_read_ahead_are_served_from_the_cache() {
        let (cold, store, spans) = tier(1 << 20, 4, 0).await;
        store.gate.add_permits(100);
        cold.read_ahead_spans(&spans[1..3]);
        settle(&cold, &spans).await;
        assert_eq!(store.gets.load(Relaxed), 2);
        for span in &spans[1..3] {
            let got = super::super::pieces::join(cold.span_bytes(span).await.expect("read"));
            assert_eq!(got.len() as u64, SPAN);
            assert!(got.iter().all(|b| u64::from(*b) == span.start / SPAN));
        }
        assert_eq!(store.gets.load(Relaxed), 2, "no second fetch");
        assert_eq!(cold.stats.read_ahead_fetches.load(Relaxed), 2);
        // Asked again while cached or on their way: nothing more is fetched.
        cold.read_ahead_spans(&spans[1..3]);
        settle(&cold, &spans).await;
        assert_eq!(store.gets.load(Relaxed), 2);
    }

    #[tokio::test]
    async fn a_read_waits_for_its_span_on_the_way_instead_of_fetching_it_again() {
        let (cold, store, spans) = tier(1 << 20, 2, 0).await;
        cold.read_ahead_spans(&spans[..1]);
        let reader = {
            let (cold, span) = (cold.clone(), spans[0].clone());
            tokio::spawn(async move { cold.span_bytes(&span).await })
        };
        tokio::task::yield_now().await;
        store.gate.add_permits(100);
        let got = reader.await.expect("reader").expect("read");
        assert_eq!(super::super::pieces::join(got).len() as u64, SPAN);
        assert_eq!(store.gets.load(Relaxed), 1);
        assert_eq!(cold.stats.cache_hits.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn read_ahead_stays_within_half_the_cache_and_never_without_one() {
        let (cold, store, spans) = tier(4 * SPAN, 4, 0).await;
        cold.read_ahead_spans(&spans);
        assert_eq!(cold.in_flight().len(), 2, "two spans of four fill half a four-span cache");
        store.gate.add_permits(100);
        settle(&cold, &spans).await;
        assert_eq!(store.gets.load(Relaxed), 2);

        let (cold, store, spans) = tier(0, 2, 0).await;
        cold.read_ahead_spans(&spans);
        assert_eq!(cold.in_flight().len(), 0);
        assert_eq!(store.gets.load(Relaxed), 0);
    }

    #[tokio::test]
    async fn a_span_that_fails_its_check_ahead_is_refused_on_the_read_too() {
        let (cold, store, spans) = tier(1 << 20, 1, 1).await;
        store.gate.add_permits(100);
        cold.read_ahead_spans(&spans);
        settle(&cold, &spans).await;
        assert_eq!(cold.span_bytes(&spans[0]).await, Err(super::super::ColdError::Corrupt("o0".into())));
        assert!(!cold.cache.contains_key(&CacheKey::span(&spans[0])));
        assert_eq!(store.gets.load(Relaxed), 2, "the read fetched it again after the read-ahead failed");
    }
}
