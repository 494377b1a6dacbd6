//! Read-ahead of whole spans for a sequential catch-up. A read names the
//! spans its reader takes next (`ReadView::cold_ahead`); with a cache they
//! are fetched into it in the background while the read's answer goes out,
//! so the next read finds them there instead of waiting on the object
//! store. A read that needs a span still on its way waits for that fetch
//! rather than starting a second one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use ursula_stream::ColdSpan;

use super::{CacheKey, Cold};

/// A span on its way: the checked bytes, `None` when the fetch failed.
pub(super) type Pending = Shared<BoxFuture<'static, Option<Vec<Bytes>>>>;

/// The spans being read ahead, with their lengths.
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

impl Cold {
    fn spans_ahead(&self) -> std::sync::MutexGuard<'_, InFlight> {
        self.spans_ahead.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The read-ahead of `key`'s span, if one is on its way.
    pub(super) fn pending_span(&self, key: &CacheKey) -> Option<Pending> {
        self.spans_ahead().0.get(key).map(|(_, pending)| pending.clone())
    }

    /// Fetches `spans` into the cache in the background, unless they are
    /// there or on their way. What is read ahead at once, across readers,
    /// stays within half the cache, so it does not evict the spans the
    /// readers are taking now.
    pub fn read_ahead_spans(self: &Arc<Self>, spans: &[ColdSpan]) {
        if self.config.cache_size == 0 {
            return;
        }
        let room = self.config.cache_size / 2;
        let mut in_flight = self.spans_ahead();
        for span in spans {
            let key = CacheKey::span(span);
            if in_flight.0.contains_key(&key) || self.cache.contains_key(&key) {
                continue;
            }
            if in_flight.bytes().saturating_add(span.len) > room {
                return;
            }
            let len = span.len;
            let (me, span, done) = (self.clone(), span.clone(), key.clone());
            let fetch = async move {
                me.stats.read_ahead_fetches.fetch_add(1, Relaxed);
                let got = me.fetch_span(&span).await;
                me.spans_ahead().0.remove(&done);
                match got {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        tracing::debug!(object = %span.object, error = %e, "a cold span's read-ahead failed");
                        None
                    }
                }
            };
            let pending = fetch.boxed().shared();
            in_flight.0.insert(key, (len, pending.clone()));
            tokio::spawn(pending);
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

    use super::super::store::{ColdResult, ColdStore, MemoryColdStore};
    use super::super::{CacheKey, Cold, ColdConfig};

    const SPAN: u64 = 64 * 1024;

    /// A memory store whose ranged reads wait for a permit each, counted.
    struct Gated {
        inner: MemoryColdStore,
        gate: Semaphore,
        gets: AtomicU64,
    }

    impl ColdStore for Gated {
        fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
            self.inner.put(key, body)
        }
        fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
            Box::pin(async move {
                self.gets.fetch_add(1, Relaxed);
                self.gate.acquire().await.expect("gate").forget();
                self.inner.get_range(key, offset, len).await
            })
        }
        fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
            self.inner.get(key)
        }
        fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
            self.inner.delete(key)
        }
        fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
            self.inner.delete_batch(keys)
        }
        fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
            self.inner.size(key)
        }
        fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
            self.inner.list(prefix)
        }
        fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
            self.inner.list_sized(prefix)
        }
    }

    /// A tier over a gated store holding `n` spans of `SPAN` bytes (the
    /// first `bad` of them recorded with a wrong digest).
    async fn tier(cache_size: u64, n: u64, bad: u64) -> (Arc<Cold>, Arc<Gated>, Vec<ColdSpan>) {
        let gate = Semaphore::new(0);
        let store = Arc::new(Gated { inner: MemoryColdStore::default(), gate, gets: AtomicU64::new(0) });
        let mut spans = Vec::new();
        for i in 0..n {
            let bytes = Bytes::from(vec![i as u8; SPAN as usize]);
            let object = format!("o{i}");
            store.put(&object, bytes.clone()).await.expect("put");
            let digest = if i < bad { [0; 32] } else { *blake3::hash(&bytes).as_bytes() };
            spans.push(ColdSpan { start: i * SPAN, len: SPAN, object, object_offset: 0, digest });
        }
        let config = ColdConfig { cache_size, ..super::super::tests::config() };
        (Arc::new(Cold::new(store.clone(), config, 1)), store, spans)
    }

    async fn settle(cold: &Cold, spans: &[ColdSpan]) {
        for span in spans {
            if let Some(pending) = cold.pending_span(&CacheKey::span(span)) {
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
        assert_eq!(cold.spans_ahead().len(), 2, "two spans of four fill half a four-span cache");
        store.gate.add_permits(100);
        settle(&cold, &spans).await;
        assert_eq!(store.gets.load(Relaxed), 2);

        let (cold, store, spans) = tier(0, 2, 0).await;
        cold.read_ahead_spans(&spans);
        assert_eq!(cold.spans_ahead().len(), 0);
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
