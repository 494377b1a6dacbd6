//! Materializing a read plan outside the group's state: each cold span a
//! read touches is fetched whole (or taken from the cache), checked against
//! the digest the log recorded, and sliced; a read that ended inside the
//! cold tier is then cut at its boundary as a hot read would be.

use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};
use ursula_stream::{BootstrapView, ColdCut, ColdSlice, ColdSpan, Offset, ReadView};

use super::{Cold, ColdError};

impl Cold {
    /// The bytes of `span`, checked.
    async fn span_bytes(&self, span: &ColdSpan) -> Result<Bytes, ColdError> {
        let key = (span.object.clone(), span.object_offset);
        if let Some(hit) = self.cache.get(&key) {
            self.stats.cache_hits.fetch_add(1, Relaxed);
            return Ok(hit);
        }
        self.stats.fetches.fetch_add(1, Relaxed);
        let fetched = self.store.get_range(&span.object, span.object_offset, span.len).await;
        let bytes = fetched.inspect_err(|_| {
            self.stats.fetch_failures.fetch_add(1, Relaxed);
        })?;
        if *blake3::hash(&bytes).as_bytes() != span.digest {
            self.stats.fetch_failures.fetch_add(1, Relaxed);
            return Err(ColdError::Corrupt(span.object.clone()));
        }
        if self.config.cache_size > 0 {
            self.cache.insert(key, bytes.clone());
        }
        Ok(bytes)
    }

    /// The stream bytes of `slices`, in order.
    async fn fetch(&self, slices: &[ColdSlice]) -> Result<Vec<Bytes>, ColdError> {
        let spans = slices.iter().map(|s| self.span_bytes(&s.span));
        let fetched = futures_util::future::try_join_all(spans).await?;
        Ok(slices
            .iter()
            .zip(fetched)
            .map(|(s, bytes)| {
                let lo = usize::try_from(s.from - s.span.start).unwrap_or(usize::MAX).min(bytes.len());
                let hi = usize::try_from(s.to - s.span.start).unwrap_or(usize::MAX).min(bytes.len());
                bytes.slice(lo..hi)
            })
            .collect())
    }

    /// Cold bytes first, then `hot`; cut when the plan says so. Returns the
    /// chunks and the read's end.
    async fn assemble(
        &self,
        slices: &[ColdSlice],
        cut: Option<ColdCut>,
        start: Offset,
        hot: Vec<Bytes>,
        end: Offset,
    ) -> Result<(Vec<Bytes>, Offset), ColdError> {
        let cold = self.fetch(slices).await?;
        let Some(cut) = cut else {
            return Ok((cold.into_iter().chain(hot).collect(), end));
        };
        let mut joined = BytesMut::new();
        for piece in &cold {
            joined.extend_from_slice(piece);
        }
        let joined = joined.freeze();
        let want = usize::try_from(cut.limit.saturating_sub(start.bytes())).unwrap_or(usize::MAX);
        let n = ursula_stream::cold::cut(&joined, want, cut.boundary);
        Ok((vec![joined.slice(..n)], Offset(start.bytes() + n as u64)))
    }

    /// Fetches the cold part of a read so the view holds all its bytes.
    pub async fn materialize(&self, view: &mut ReadView) -> Result<(), ColdError> {
        if view.cold.is_empty() {
            return Ok(());
        }
        let hot = std::mem::take(&mut view.chunks);
        let (chunks, next) = self.assemble(&view.cold, view.cold_cut, view.start, hot, view.next).await?;
        view.chunks = chunks;
        view.next = next;
        view.up_to_date = next == view.info.tail;
        view.closed_at_end = view.info.closed && next == view.info.tail;
        view.cold.clear();
        view.cold_cut = None;
        Ok(())
    }

    pub async fn materialize_bootstrap(&self, view: &mut BootstrapView) -> Result<(), ColdError> {
        if view.cold.is_empty() {
            return Ok(());
        }
        let hot = std::mem::take(&mut view.updates);
        let (updates, next) = self.assemble(&view.cold, view.cold_cut, view.start, hot, view.next).await?;
        view.updates = updates;
        view.next = next;
        view.cold.clear();
        view.cold_cut = None;
        Ok(())
    }
}
