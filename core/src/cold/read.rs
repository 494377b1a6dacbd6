//! Materializing a read plan outside the group's state: the cold bytes a
//! read touches are fetched (or taken from the cache) and checked against
//! the digest the log recorded, then sliced; a read that ended inside the
//! cold tier is then cut at its boundary as a hot read would be. A read of
//! a small part of a large span fetches only the blocks it needs, checked
//! through the object's block table (`blocks`), in parallel ranged GETs.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use blake3::hazmat::ChainingValue;
use bytes::{Bytes, BytesMut};
use ursula_stream::{BootstrapView, ColdCut, ColdSlice, ColdSpan, Offset, ReadView};

use super::blocks::{self, BLOCK};
use super::pieces;
use super::store::OnPiece;
use super::{CacheKey, Cold, ColdError};

/// A ranged GET fetches at most this much; longer runs go in parallel.
const RANGE_REQUEST: u64 = 1024 * 1024;
/// The most of an object's head a first look fetches (the header and, for
/// most objects, the whole table).
const HEAD_LOOK: u64 = 16 * 1024;
/// A span shorter than this is cached as one buffer. Longer ones keep the
/// pieces the HTTP client read them in (joining them cost a cold catch-up
/// 14 % of the node's CPU); a piece shares its client's read buffer (up to
/// about 400 KiB) with the next answer's first bytes, so a cached span may
/// hold that much beyond its own bytes, at most a fifth more from here.
const JOIN_SPANS_BELOW: u64 = 2 * 1024 * 1024;
/// The least a read-ahead fetches (1 MiB), or as much as the read that started it.
const READ_AHEAD_BLOCKS: u64 = 16;

impl Cold {
    /// `len` bytes at `offset` of `object` as the pieces they arrived in
    /// (each shown to `on_piece` on arrival), counted as a fetch.
    async fn fetch_range(
        &self,
        object: &str,
        offset: u64,
        len: u64,
        on_piece: OnPiece<'_>,
    ) -> Result<Vec<Bytes>, ColdError> {
        self.stats.fetches.fetch_add(1, Relaxed);
        let pieces = self.store.get_range_pieces(object, offset, len, on_piece).await.inspect_err(|_| {
            self.stats.fetch_failures.fetch_add(1, Relaxed);
        })?;
        self.stats.bytes_fetched.fetch_add(pieces.iter().map(|p| p.len() as u64).sum(), Relaxed);
        Ok(pieces)
    }

    /// A fetched run failed its check: counted, and never served.
    fn corrupt(&self, span: &ColdSpan) -> ColdError {
        self.stats.fetch_failures.fetch_add(1, Relaxed);
        ColdError::Corrupt(span.object.clone())
    }

    /// The bytes of `span`, checked, as pieces: from the cache, from its
    /// read-ahead when one is on its way, else fetched.
    pub(super) async fn span_bytes(&self, span: &ColdSpan) -> Result<Vec<Bytes>, ColdError> {
        let key = CacheKey::span(span);
        let mut cached = self.cache.get(&key);
        if cached.is_none()
            && let Some(pending) = self.pending(&key)
        {
            cached = pending.await;
        }
        if let Some(hit) = cached {
            self.stats.cache_hits.fetch_add(1, Relaxed);
            return Ok(hit);
        }
        if self.config.cache_size == 0 {
            return self.fetch_span_pieces(span).await;
        }
        self.fetch_span(span).await
    }

    /// `span` fetched and checked, into the cache.
    pub(super) async fn fetch_span(&self, span: &ColdSpan) -> Result<Vec<Bytes>, ColdError> {
        let mut fetched = self.fetch_span_pieces(span).await?;
        if span.len < JOIN_SPANS_BELOW {
            fetched = vec![pieces::join(fetched)];
        }
        self.cache.insert(CacheKey::span(span), fetched.clone());
        // See `fetch_blocks`.
        self.cache.run_pending_tasks();
        Ok(fetched)
    }

    /// `span` fetched and checked, as the pieces it arrived in.
    pub(super) async fn fetch_span_pieces(&self, span: &ColdSpan) -> Result<Vec<Bytes>, ColdError> {
        // Hashed as it arrives: the digest runs while the rest is received.
        let mut hasher = blake3::Hasher::new();
        let fetched = self
            .fetch_range(&span.object, span.object_offset, span.len, &mut |piece| {
                hasher.update(piece);
            })
            .await?;
        if *hasher.finalize().as_bytes() != span.digest {
            return Err(self.corrupt(span));
        }
        Ok(fetched)
    }

    /// The block values of `span` from its object's table, verified against
    /// the span's digest; `None` when the object has no usable table.
    async fn span_blocks(&self, span: &ColdSpan) -> Option<Arc<Vec<ChainingValue>>> {
        let table = match self.tables.get(&span.object) {
            Some(table) => table,
            None => {
                // A head that could not be read is not remembered: the next read asks again.
                let table = self.fetch_table(span).await.ok()?.map(Arc::new);
                self.tables.insert(span.object.clone(), table.clone());
                table
            }
        }?;
        let entry = table.get(&span.object_offset).filter(|e| e.len == span.len)?;
        (blocks::root(&entry.values, span.len) == Some(span.digest)).then(|| entry.values.clone())
    }

    /// An object's block table; `Ok(None)` for an object without one.
    async fn fetch_table(&self, span: &ColdSpan) -> Result<Option<blocks::Table>, ColdError> {
        // An object with a table has it before its first span.
        if span.object_offset < blocks::HEADER {
            return Ok(None);
        }
        let look = span.object_offset.min(HEAD_LOOK);
        let head = self.store.get_range(&span.object, 0, look).await?;
        let Some(len) = blocks::table_len(&head) else { return Ok(None) };
        let end = blocks::HEADER.saturating_add(len);
        if end > span.object_offset {
            return Ok(None);
        }
        let raw = if end <= head.len() as u64 {
            head.slice(blocks::HEADER as usize..end as usize)
        } else {
            self.store.get_range(&span.object, blocks::HEADER, len).await?
        };
        Ok(blocks::decode_table(&raw))
    }

    /// Bytes `[lo, hi)` of `span` (relative to its start) as pieces of the
    /// blocks covering them; with a cache, the blocks after them are read ahead.
    async fn span_range(
        self: &Arc<Self>,
        span: &ColdSpan,
        values: &Arc<Vec<ChainingValue>>,
        lo: u64,
        hi: u64,
    ) -> Result<Vec<Bytes>, ColdError> {
        let (first, last) = (lo / BLOCK, hi.div_ceil(BLOCK));
        let got = self.blocks(span, values, first, last).await?;
        self.read_ahead_blocks(span, values, last, (last - first).max(READ_AHEAD_BLOCKS));
        Ok(got
            .into_iter()
            .enumerate()
            .filter_map(|(i, block)| {
                let at = (first + i as u64) * BLOCK;
                let from = lo.saturating_sub(at) as usize;
                let to = (hi - at).min(block.len() as u64) as usize;
                (from < to).then(|| block.slice(from..to))
            })
            .collect())
    }

    /// Blocks `[first, last)` of `span`: cached ones from the cache, runs
    /// of missing ones in parallel ranged GETs of at most `RANGE_REQUEST`.
    async fn blocks(
        &self,
        span: &ColdSpan,
        values: &[ChainingValue],
        first: u64,
        last: u64,
    ) -> Result<Vec<Bytes>, ColdError> {
        let mut got: Vec<Option<Bytes>> =
            (first..last).map(|b| self.cache.get(&CacheKey::block(span, b)).map(pieces::join)).collect();
        self.stats.cache_hits.fetch_add(got.iter().flatten().count() as u64, Relaxed);
        let mut requests = Vec::new();
        let mut b = first;
        while b < last {
            if got[(b - first) as usize].is_some() {
                b += 1;
                continue;
            }
            let start = b;
            while b < last && got[(b - first) as usize].is_none() && (b - start + 1) * BLOCK <= RANGE_REQUEST {
                b += 1;
            }
            requests.push((start, b));
        }
        let fetches = requests.iter().map(|&(from, to)| self.fetch_blocks(span, values, from, to));
        for (run, (from, _)) in futures_util::future::try_join_all(fetches).await?.into_iter().zip(&requests) {
            for (i, block) in run.into_iter().enumerate() {
                got[(from - first) as usize + i] = Some(block);
            }
        }
        Ok(got.into_iter().flatten().collect())
    }

    /// A catch-up reads on where it stopped: with a cache, the next `count`
    /// blocks of the span after `from` are fetched into it in the background
    /// (unless they are there or on their way).
    fn read_ahead_blocks(self: &Arc<Self>, span: &ColdSpan, values: &Arc<Vec<ChainingValue>>, from: u64, count: u64) {
        let to = (from + count).min(values.len() as u64);
        if from >= to {
            return;
        }
        let len = (to * BLOCK).min(span.len) - from * BLOCK;
        let (span, values) = (span.clone(), values.clone());
        let key = CacheKey::block(&span, from);
        self.read_ahead(key, len, |me| async move { me.blocks(&span, &values, from, to).await });
    }

    /// Blocks `[from, to)` of `span` in one ranged GET, each checked (and
    /// cached, with a cache).
    async fn fetch_blocks(
        &self,
        span: &ColdSpan,
        values: &[ChainingValue],
        from: u64,
        to: u64,
    ) -> Result<Vec<Bytes>, ColdError> {
        let start = from * BLOCK;
        let len = (to * BLOCK).min(span.len) - start;
        self.stats.ranged_fetches.fetch_add(1, Relaxed);
        let fetched = self.fetch_range(&span.object, span.object_offset + start, len, &mut |_| {}).await?;
        // Cached blocks own their memory: a slice of the HTTP client's
        // buffer would keep the whole buffer alive beyond the cache's size.
        let fetched = if self.config.cache_size > 0 { vec![pieces::join(fetched)] } else { fetched };
        let cut = pieces::cut_blocks(fetched, BLOCK as usize);
        if cut.len() as u64 != to - from {
            return Err(self.corrupt(span));
        }
        let mut out = Vec::with_capacity(cut.len());
        for (b, block) in (from..to).zip(cut) {
            if values.get(b as usize) != Some(&blocks::block_value(&block, b)) {
                return Err(self.corrupt(span));
            }
            if self.config.cache_size > 0 {
                self.cache.insert(CacheKey::block(span, b), vec![block.clone()]);
            }
            out.push(block);
        }
        if self.config.cache_size > 0 {
            // moka evicts in its housekeeping, which a few large inserts do
            // not trigger: run it, or the cache outgrows `cache_size` many
            // times over (a 16 MiB cache was seen holding 64 MiB).
            self.cache.run_pending_tasks();
        }
        Ok(out)
    }

    /// The bytes of one slice, as pieces: only the blocks it needs when it
    /// is a small part of a large span with a block table, else the span.
    async fn slice_bytes(self: &Arc<Self>, s: &ColdSlice) -> Result<Vec<Bytes>, ColdError> {
        let span = &s.span;
        let lo = s.from.saturating_sub(span.start).min(span.len);
        let hi = s.to.saturating_sub(span.start).clamp(lo, span.len);
        let whole_cached = self.config.cache_size > 0 && self.cache.contains_key(&CacheKey::span(span));
        if !whole_cached
            && (hi - lo) * 2 <= span.len
            && let Some(values) = self.span_blocks(span).await
        {
            return self.span_range(span, &values, lo, hi).await;
        }
        let fetched = self.span_bytes(span).await?;
        Ok(pieces::slice(&fetched, lo as usize, hi as usize))
    }

    /// The stream bytes of `slices`, in order, fetched and checked on the
    /// tier's threads (`io`): the thread serving the read only sends them.
    #[tracing::instrument(name = "cold.fetch", level = "debug", skip_all, fields(slices = slices.len()))]
    async fn fetch(self: &Arc<Self>, slices: &[ColdSlice]) -> Result<Vec<Bytes>, ColdError> {
        let (me, slices) = (self.clone(), slices.to_vec());
        self.on_io(async move { me.fetch_here(&slices).await }).await
    }

    /// `fetch` on this thread. Each slice is fetched and checked in a task
    /// of its own, so a read of several spans receives and hashes them on
    /// every thread of the runtime at once; the tasks end (aborted) with
    /// the read.
    async fn fetch_here(self: &Arc<Self>, slices: &[ColdSlice]) -> Result<Vec<Bytes>, ColdError> {
        if let [one] = slices {
            return self.slice_bytes(one).await;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (i, slice) in slices.iter().enumerate() {
            let (me, slice) = (self.clone(), slice.clone());
            tasks.spawn(async move { (i, me.slice_bytes(&slice).await) });
        }
        let mut fetched = vec![Vec::new(); slices.len()];
        while let Some(done) = tasks.join_next().await {
            let (i, bytes) = done.map_err(|e| ColdError::Unavailable(format!("a cold fetch task failed: {e}")))?;
            fetched[i] = bytes?;
        }
        Ok(fetched.into_iter().flatten().collect())
    }

    /// Puts the fetched cold bytes before `chunks` (cut when the plan says
    /// so, moving `next`) and clears the plan; the one step of both views.
    async fn fill(
        self: &Arc<Self>,
        plan: &mut Vec<ColdSlice>,
        cut: &mut Option<ColdCut>,
        start: Offset,
        chunks: &mut Vec<Bytes>,
        next: &mut Offset,
    ) -> Result<(), ColdError> {
        if plan.is_empty() {
            return Ok(());
        }
        let cold = self.fetch(plan).await?;
        plan.clear();
        let Some(cut) = cut.take() else {
            chunks.splice(0..0, cold);
            return Ok(());
        };
        let mut joined = BytesMut::new();
        for piece in &cold {
            joined.extend_from_slice(piece);
        }
        let joined = joined.freeze();
        let want = usize::try_from(cut.limit.saturating_sub(start.bytes())).unwrap_or(usize::MAX);
        let n = ursula_stream::cold::cut(&joined, want, cut.boundary);
        // A cut read ended inside the cold tier: it holds no hot bytes.
        *chunks = vec![joined.slice(..n)];
        *next = Offset(start.bytes() + n as u64);
        Ok(())
    }

    /// Fetches the cold part of a read so the view holds all its bytes.
    pub async fn materialize(self: &Arc<Self>, view: &mut ReadView) -> Result<(), ColdError> {
        if view.cold.is_empty() {
            return Ok(());
        }
        self.fill(&mut view.cold, &mut view.cold_cut, view.start, &mut view.chunks, &mut view.next).await?;
        self.read_ahead_spans(&std::mem::take(&mut view.cold_ahead));
        view.up_to_date = view.next == view.info.tail;
        view.closed_at_end = view.info.closed && view.next == view.info.tail;
        Ok(())
    }

    pub async fn materialize_bootstrap(self: &Arc<Self>, view: &mut BootstrapView) -> Result<(), ColdError> {
        self.fill(&mut view.cold, &mut view.cold_cut, view.start, &mut view.updates, &mut view.next).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use ursula_stream::ColdSpan;

    use super::super::{CacheKey, Cold, ColdStore, MemoryColdStore};

    #[tokio::test]
    async fn the_cold_cache_stays_within_its_size_after_a_few_large_fetches() {
        const SPAN: u64 = 512 * 1024;
        let store = Arc::new(MemoryColdStore::default());
        let config = super::super::ColdConfig { cache_size: 1024 * 1024, ..super::super::tests::config() };
        let cold = Cold::new(store.clone(), config, 1);
        let mut spans = Vec::new();
        for i in 0..8u64 {
            let bytes = Bytes::from(vec![i as u8; SPAN as usize]);
            let object = format!("o{i}");
            store.put(&object, bytes.clone()).await.expect("put");
            let digest = *blake3::hash(&bytes).as_bytes();
            spans.push(ColdSpan { start: i * SPAN, len: SPAN, object, object_offset: 0, digest });
        }
        for span in &spans {
            assert_eq!(super::pieces::join(cold.span_bytes(span).await.expect("read")).len() as u64, SPAN);
        }
        let held: u64 = spans.iter().filter(|s| cold.cache.contains_key(&CacheKey::span(s))).map(|s| s.len).sum();
        assert!(held <= 1024 * 1024, "a 1 MiB cache holds {held} bytes");
        assert!(held > 0, "the cache keeps the latest spans");
    }

    #[tokio::test]
    async fn a_read_fetches_and_checks_its_slices_on_the_cold_threads() {
        const SPAN: u64 = 256 * 1024;
        // Each ranged read notes whether it ran on a cold thread.
        let noted = Arc::new(std::sync::Mutex::new(Vec::new()));
        let noting = noted.clone();
        let store = Arc::new(super::super::store::RangeHook {
            inner: MemoryColdStore::default(),
            before_range: Box::new(move || {
                noting.lock().expect("noted").push(super::super::io::ColdIo::here());
                Box::pin(async {})
            }),
        });
        let io = super::super::io::ColdIo::start(1).expect("cold threads");
        // The store itself is not moved to the cold threads (as `open`
        // does): only the read's own routing puts its fetches there.
        let cold = Arc::new(Cold { io: Some(io), ..Cold::new(store.clone(), super::super::tests::config(), 1) });
        let mut slices = Vec::new();
        for i in 0..3u64 {
            let bytes = Bytes::from(vec![b'a' + i as u8; SPAN as usize]);
            let object = format!("o{i}");
            store.inner.put(&object, bytes.clone()).await.expect("put");
            let digest = *blake3::hash(&bytes).as_bytes();
            let span = ColdSpan { start: i * SPAN, len: SPAN, object, object_offset: 0, digest };
            slices.push(ursula_stream::ColdSlice { from: span.start + 10, to: span.end(), span });
        }
        let got = super::super::pieces::join(cold.fetch(&slices).await.expect("read"));
        assert_eq!(got.len() as u64, 3 * (SPAN - 10));
        assert!(got[..(SPAN - 10) as usize].iter().all(|&b| b == b'a'));
        assert!(got[(SPAN - 10) as usize..].starts_with(b"bb"));
        assert!(got.ends_with(b"cc"));
        let one = cold.fetch(&slices[..1]).await.expect("one slice");
        assert_eq!(super::super::pieces::join(one).len() as u64, SPAN - 10);
        assert_eq!(*noted.lock().expect("noted"), vec![true; 4], "every fetch ran on the cold threads");
        // A damaged object is refused there as here.
        store.inner.put("o1", Bytes::from(vec![b'x'; SPAN as usize])).await.expect("put");
        assert_eq!(cold.fetch(&slices[1..2]).await, Err(super::super::ColdError::Corrupt("o1".into())));
    }
}
