//! Snapshot upload in parts (spec/30 "Upload in parts", "Staged parts"):
//! parts are objects under `{root}/parts/{bucket}/{stream}/{incarnation}/`,
//! named `{staged_ms}-{random}.part`, apart from the groups' objects so the
//! group GC never touches one. The node keeps, per stream, a count of the
//! parts no commit used (seeded by a listing, so it survives neither a
//! restart nor a leader change without one) and bounds it; it runs one
//! commit or discard per stream incarnation and at most two copies at
//! once; deleting a stream deletes its parts, and the orphan sweep
//! reclaims parts older than their grace.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ursula_stream::{Incarnation, StreamKey};

use super::snapshots::unique_name;
use super::{Cold, ColdError};

/// The largest snapshot taken in parts (`Ursula-Max-Snapshot-Bytes`).
pub const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024 * 1024;
/// Unused staged parts a stream may hold (`Ursula-Max-Staged-Parts`).
pub const MAX_STAGED_PARTS: u64 = 8192;
/// Bytes of them (`Ursula-Max-Staged-Bytes`).
pub const MAX_STAGED_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Copies of commits a node runs at once.
pub const MAX_COPIES: usize = 2;
/// A refused part relists when the last listing is older than this; parts
/// of other incarnations older than this are deleted (clocks agree within it).
const MARGIN: Duration = Duration::from_secs(60);

/// Parts one delete request removes (S3's `DeleteObjects` limit), and such
/// requests in flight at once: a discard or a delete may remove thousands.
const DELETE_BATCH: usize = 1000;
const BATCHES_AT_ONCE: usize = 4;

/// Why a commit's parts did not assemble.
#[derive(Debug)]
pub enum PartsError {
    /// A part is not staged for this stream incarnation.
    Unknown,
    TooLarge,
    Store(ColdError),
}

/// Which staged-parts bound a part met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagedBound {
    Parts,
    Bytes,
}

/// Why a commit or discard may not start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitRefusal {
    /// A commit of the same stream incarnation runs.
    InProgress,
    /// Every copy slot is taken.
    Busy,
}

struct Staged {
    parts: u64,
    bytes: u64,
    listed: Instant,
}

#[derive(Default)]
pub struct PartsState {
    staged: Mutex<HashMap<(String, String), Staged>>,
    commits: Mutex<HashSet<(String, String, u64)>>,
    copies: AtomicUsize,
    pub limit_refusals: AtomicU64,
    pub commits_busy: AtomicU64,
    pub swept: AtomicU64,
}

/// A running commit (or discard) of one stream incarnation; dropping it
/// frees its slot.
pub struct CommitSlot<'a> {
    state: &'a PartsState,
    claim: (String, String, u64),
    copying: bool,
}

impl Drop for CommitSlot<'_> {
    fn drop(&mut self) {
        lock(&self.state.commits).remove(&self.claim);
        if self.copying {
            self.state.copies.fetch_sub(1, Relaxed);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn stream_of(key: &StreamKey) -> (String, String) {
    (key.bucket.as_str().to_string(), key.stream.as_str().to_string())
}

/// A part id as this node issues it: 16 hex digits, `-`, 16 hex digits, `.part`.
fn valid_part_id(id: &str) -> bool {
    staged_ms(id).is_some()
}

/// When the part `id` was staged (the node's clock, in its name).
fn staged_ms(id: &str) -> Option<u64> {
    let stem = id.strip_suffix(".part")?;
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let (ms, random) = stem.split_once('-')?;
    if !(hex(ms) && hex(random)) {
        return None;
    }
    u64::from_str_radix(ms, 16).ok()
}

/// A listed part under a stream's directory: `{incarnation}/{id}` exactly
/// (a longer rest belongs to another stream whose name extends this one).
fn parse_listed(rest: &str) -> Option<(u64, u64)> {
    let (incarnation, id) = rest.split_once('/')?;
    Some((incarnation.parse().ok()?, staged_ms(id)?))
}

impl Cold {
    /// Deletes `objects` in batches of `DELETE_BATCH`, `BATCHES_AT_ONCE` at
    /// a time; each object with its result.
    async fn delete_each(&self, objects: Vec<String>) -> Vec<(String, Result<(), ColdError>)> {
        use futures_util::StreamExt;
        let batches: Vec<Vec<String>> = objects.chunks(DELETE_BATCH).map(<[String]>::to_vec).collect();
        let done: Vec<Vec<(String, Result<(), ColdError>)>> = futures_util::stream::iter(batches)
            .map(|batch| async move {
                let failed = self.store.delete_batch(&batch).await;
                batch
                    .into_iter()
                    .map(|object| {
                        let result = match &failed {
                            Ok(keys) if keys.contains(&object) => {
                                Err(ColdError::Unavailable(format!("{object} stayed")))
                            }
                            Ok(_) => Ok(()),
                            Err(e) => Err(e.clone()),
                        };
                        (object, result)
                    })
                    .collect()
            })
            .buffer_unordered(BATCHES_AT_ONCE)
            .collect()
            .await;
        done.into_iter().flatten().collect()
    }

    /// `{bucket prefix}parts/{stream}/`: under the bucket's erasure domain.
    fn stream_parts_prefix(&self, key: &StreamKey) -> String {
        format!("{}parts/{}/", self.bucket_prefix(&key.bucket), key.stream.as_str())
    }

    /// Every staged part under the buckets' root, with its bucket, stream
    /// and the rest of its key (`{incarnation}/{id}`).
    async fn listed_parts(&self) -> Result<Vec<ListedPart>, ColdError> {
        let root = self.buckets_root();
        let listed = self.store.list_sized(&root).await?;
        Ok(listed
            .into_iter()
            .filter_map(|(object, size)| {
                // `{bucket}/parts/{stream}/{incarnation}/{id}`: ids hold no `/`.
                let mut segments = object.strip_prefix(&root)?.splitn(4, '/');
                let (bucket, kind, stream, tail) =
                    (segments.next()?, segments.next()?, segments.next()?, segments.next()?);
                (kind == "parts").then(|| ListedPart {
                    bucket: bucket.to_string(),
                    stream: stream.to_string(),
                    tail: tail.to_string(),
                    object: object.clone(),
                    size,
                })
            })
            .collect())
    }

    fn parts_prefix(&self, key: &StreamKey, incarnation: Incarnation) -> String {
        format!("{}{}/", self.stream_parts_prefix(key), incarnation.value())
    }

    /// Counts the stream's parts, every incarnation's; parts of other
    /// incarnations than `current` staged over a minute ago are deleted.
    async fn recount(&self, key: &StreamKey, current: Incarnation) -> Result<(u64, u64), ColdError> {
        let prefix = self.stream_parts_prefix(key);
        let listed = self.store.list_sized(&prefix).await?;
        let stale_before = crate::clock::wall_ms().saturating_sub(MARGIN.as_millis() as u64);
        let (mut parts, mut bytes) = (0, 0);
        let mut stale = Vec::new();
        for (object, size) in listed {
            let Some((incarnation, staged)) = object.strip_prefix(&prefix).and_then(parse_listed) else { continue };
            if incarnation != current.value() && staged < stale_before {
                stale.push((object, size));
                continue;
            }
            parts += 1;
            bytes += size;
        }
        // A stale part whose delete failed still counts.
        let sizes: HashMap<String, u64> = stale.iter().cloned().collect();
        for (object, deleted) in self.delete_each(stale.into_iter().map(|(o, _)| o).collect()).await {
            if deleted.is_err() {
                parts += 1;
                bytes += sizes.get(&object).copied().unwrap_or(0);
            }
        }
        lock(&self.parts.staged).insert(stream_of(key), Staged { parts, bytes, listed: Instant::now() });
        Ok((parts, bytes))
    }

    /// Every staged part's bytes, by stream: one listing of the parts tree
    /// (`/__ursula/usage`'s `staged_snapshot_parts`).
    pub async fn staged_part_bytes(&self) -> Result<Vec<(StreamKey, u64)>, ColdError> {
        let mut by_stream: HashMap<(String, String), u64> = HashMap::new();
        for part in self.listed_parts().await? {
            if parse_listed(&part.tail).is_some() {
                *by_stream.entry((part.bucket, part.stream)).or_default() += part.size;
            }
        }
        Ok(by_stream
            .into_iter()
            .filter_map(|((bucket, stream), bytes)| Some((StreamKey::parse(&bucket, &stream).ok()?, bytes)))
            .collect())
    }

    /// Refuses a part past either bound before its body is read; `declared`
    /// is its `Content-Length` (32 MiB without one).
    pub async fn admit_part(
        &self,
        key: &StreamKey,
        current: Incarnation,
        declared: u64,
    ) -> Result<Result<(), StagedBound>, ColdError> {
        let known = lock(&self.parts.staged).get(&stream_of(key)).map(|s| (s.parts, s.bytes, s.listed.elapsed()));
        let (parts, bytes) = match known {
            Some((parts, bytes, age)) if age < MARGIN || fits(parts, bytes, declared).is_ok() => (parts, bytes),
            _ => self.recount(key, current).await?,
        };
        let verdict = fits(parts, bytes, declared);
        if verdict.is_err() {
            self.parts.limit_refusals.fetch_add(1, Relaxed);
        }
        Ok(verdict)
    }

    /// Stages one part; returns its id.
    pub async fn stage_part(
        &self,
        key: &StreamKey,
        incarnation: Incarnation,
        body: Bytes,
    ) -> Result<String, ColdError> {
        let id = format!("{}.part", unique_name());
        let len = body.len() as u64;
        self.store.put(&format!("{}{id}", self.parts_prefix(key, incarnation)), body).await?;
        if let Some(s) = lock(&self.parts.staged).get_mut(&stream_of(key)) {
            s.parts += 1;
            s.bytes += len;
        }
        Ok(id)
    }

    /// Claims the stream incarnation's commit (and a copy slot when `copy`).
    pub fn claim_commit(
        &self,
        key: &StreamKey,
        incarnation: Incarnation,
        copy: bool,
    ) -> Result<CommitSlot<'_>, CommitRefusal> {
        let (bucket, stream) = stream_of(key);
        let claim = (bucket, stream, incarnation.value());
        if !lock(&self.parts.commits).insert(claim.clone()) {
            return Err(CommitRefusal::InProgress);
        }
        let mut slot = CommitSlot { state: &self.parts, claim, copying: false };
        if copy {
            if self.parts.copies.fetch_add(1, Relaxed) >= MAX_COPIES {
                self.parts.copies.fetch_sub(1, Relaxed);
                self.parts.commits_busy.fetch_add(1, Relaxed);
                return Err(CommitRefusal::Busy);
            }
            slot.copying = true;
        }
        Ok(slot)
    }

    /// The snapshot made of `ids`, in order.
    pub async fn assemble_parts(
        &self,
        key: &StreamKey,
        incarnation: Incarnation,
        ids: &[String],
    ) -> Result<Bytes, PartsError> {
        if !ids.iter().all(|id| valid_part_id(id)) {
            return Err(PartsError::Unknown);
        }
        let prefix = self.parts_prefix(key, incarnation);
        let mut out = BytesMut::new();
        for id in ids {
            let part = match self.store.get(&format!("{prefix}{id}")).await {
                Ok(part) => part,
                Err(ColdError::Missing(_)) => return Err(PartsError::Unknown),
                Err(e) => return Err(PartsError::Store(e)),
            };
            if (out.len() + part.len()) as u64 > MAX_SNAPSHOT_BYTES {
                return Err(PartsError::TooLarge);
            }
            out.extend_from_slice(&part);
        }
        Ok(out.freeze())
    }

    /// Deletes the parts `ids` (after a commit's final answer), then recounts.
    pub async fn delete_parts(&self, key: &StreamKey, incarnation: Incarnation, ids: &[String]) {
        let prefix = self.parts_prefix(key, incarnation);
        let spent = ids.iter().filter(|id| valid_part_id(id)).map(|id| format!("{prefix}{id}")).collect();
        for (part, deleted) in self.delete_each(spent).await {
            if let Err(e) = deleted {
                tracing::warn!(%part, error = %e, "deleting a spent snapshot part failed");
            }
        }
        let _ = self.recount(key, incarnation).await;
    }

    /// Deletes every staged part of the stream incarnation (a discard),
    /// and earlier incarnations' parts staged over a minute ago.
    pub async fn discard_parts(&self, key: &StreamKey, incarnation: Incarnation) -> Result<(), ColdError> {
        let staged = self.store.list(&self.parts_prefix(key, incarnation)).await?;
        for (_, deleted) in self.delete_each(staged).await {
            deleted?;
        }
        self.recount(key, incarnation).await.map(drop)
    }

    /// After a delete of the stream: the deleted incarnation's parts at any
    /// age, the stream's other parts staged over a minute before.
    pub async fn delete_stream_parts(&self, key: &StreamKey, deleted: Incarnation) {
        let prefix = self.stream_parts_prefix(key);
        let stale_before = crate::clock::wall_ms().saturating_sub(MARGIN.as_millis() as u64);
        let listed = match self.store.list(&prefix).await {
            Ok(listed) => listed,
            Err(e) => return tracing::warn!(error = %e, "listing a deleted stream's parts failed; the sweep will"),
        };
        let doomed = listed
            .into_iter()
            .filter(|object| {
                object
                    .strip_prefix(&prefix)
                    .and_then(parse_listed)
                    .is_some_and(|(incarnation, staged)| incarnation == deleted.value() || staged < stale_before)
            })
            .collect();
        for (part, result) in self.delete_each(doomed).await {
            if let Err(e) = result {
                tracing::warn!(%part, error = %e, "deleting a deleted stream's part failed");
            }
        }
        lock(&self.parts.staged).remove(&stream_of(key));
    }

    /// The orphan sweep: deletes every part staged longer than
    /// `parts_grace` ago, whether its stream exists or not.
    pub async fn sweep_parts(&self) -> usize {
        let Ok(listed) = self.listed_parts().await else { return 0 };
        let grace = u64::try_from(self.config.parts_grace.as_millis()).unwrap_or(u64::MAX);
        let before = crate::clock::wall_ms().saturating_sub(grace);
        let old = listed
            .into_iter()
            .filter(|part| staged_ms(part.object.rsplit('/').next().unwrap_or_default()).is_some_and(|ms| ms < before))
            .map(|part| part.object)
            .collect();
        let swept = self.delete_each(old).await.into_iter().filter(|(_, deleted)| deleted.is_ok()).count();
        if swept > 0 {
            // Counts of swept streams are stale: the next part relists.
            lock(&self.parts.staged).clear();
            self.parts.swept.fetch_add(swept as u64, Relaxed);
        }
        swept
    }
}

/// A staged part as a listing of the buckets' root shows it.
struct ListedPart {
    bucket: String,
    stream: String,
    /// `{incarnation}/{id}`.
    tail: String,
    object: String,
    size: u64,
}

fn fits(parts: u64, bytes: u64, declared: u64) -> Result<(), StagedBound> {
    if parts >= MAX_STAGED_PARTS {
        Err(StagedBound::Parts)
    } else if bytes.saturating_add(declared) > MAX_STAGED_BYTES {
        Err(StagedBound::Bytes)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ids_are_only_the_issued_form() {
        assert!(valid_part_id("0000000000000001-00000000000000ff.part"));
        assert_eq!(staged_ms("00000000000003e8-00000000000000ff.part"), Some(1000));
        for bad in
            ["../x.part", "1-2.part", "0000000000000001-00000000000000ff", "0000000000000001/00000000000000ff.part"]
        {
            assert!(!valid_part_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_listing_belongs_to_the_stream_only_when_two_components_remain() {
        assert_eq!(parse_listed("42/00000000000003e8-00000000000000ff.part"), Some((42, 1000)));
        assert_eq!(parse_listed("b/42/00000000000003e8-00000000000000ff.part"), None, "stream a/b, not a");
        assert_eq!(parse_listed("42/x.part"), None);
    }

    #[test]
    fn the_bounds_are_8192_parts_and_2_gib() {
        assert_eq!(fits(MAX_STAGED_PARTS - 1, 0, 1), Ok(()));
        assert_eq!(fits(MAX_STAGED_PARTS, 0, 1), Err(StagedBound::Parts));
        assert_eq!(fits(1, MAX_STAGED_BYTES - 10, 10), Ok(()));
        assert_eq!(fits(1, MAX_STAGED_BYTES - 10, 11), Err(StagedBound::Bytes));
    }

    #[tokio::test]
    async fn one_commit_per_incarnation_and_two_copies_at_once() {
        let cold =
            Cold::new(std::sync::Arc::new(super::super::MemoryColdStore::default()), crate::cold::tests::config(), 1);
        let key = |s: &str| StreamKey::parse("bucket-1", s).expect("key");
        let inc = Incarnation::parse("4503599627370497").expect("an incarnation");
        let first = cold.claim_commit(&key("a"), inc, true).expect("first");
        assert_eq!(cold.claim_commit(&key("a"), inc, false).err(), Some(CommitRefusal::InProgress));
        let second = cold.claim_commit(&key("b"), inc, true).expect("second copy");
        assert_eq!(cold.claim_commit(&key("c"), inc, true).err(), Some(CommitRefusal::Busy));
        assert!(cold.claim_commit(&key("c"), inc, false).is_ok(), "a refused claim frees its stream");
        drop((first, second));
        assert!(cold.claim_commit(&key("a"), inc, true).is_ok(), "dropped slots are free again");
    }
}
