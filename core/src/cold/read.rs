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
    #[tracing::instrument(name = "cold.fetch", level = "debug", skip_all, fields(slices = slices.len()))]
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

    /// Puts the fetched cold bytes before `chunks` (cut when the plan says
    /// so, moving `next`) and clears the plan; the one step of both views.
    async fn fill(
        &self,
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
    pub async fn materialize(&self, view: &mut ReadView) -> Result<(), ColdError> {
        if view.cold.is_empty() {
            return Ok(());
        }
        self.fill(&mut view.cold, &mut view.cold_cut, view.start, &mut view.chunks, &mut view.next).await?;
        view.up_to_date = view.next == view.info.tail;
        view.closed_at_end = view.info.closed && view.next == view.info.tail;
        Ok(())
    }

    pub async fn materialize_bootstrap(&self, view: &mut BootstrapView) -> Result<(), ColdError> {
        self.fill(&mut view.cold, &mut view.cold_cut, view.start, &mut view.updates, &mut view.next).await
    }
}
