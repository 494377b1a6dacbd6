//! Tenant quotas (`--quota-policy`, spec/08 "Quotas"): per bucket, a request
//! rate (a `governor` token bucket), concurrent live reads, the request
//! body size, and concurrent large uploads and their bytes. Every refusal
//! is the gateway's own answer and applies nothing. Limits are per gateway
//! process. The limiter state of idle buckets is pruned, so a million
//! buckets do not grow the gateway without bound.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::request::Parts;
use serde::Deserialize;
use ursula_http::Metrics;
use ursula_http::error::ApiError;
use ursula_http::front::{Holds, RequestLimit};
use ursula_stream::BucketId;

use crate::watched::Watched;

/// One bucket's limits; an absent key is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub requests_per_second: Option<u32>,
    /// Default: one second of the rate.
    pub burst: Option<u32>,
    /// Concurrent SSE and long-poll reads.
    pub max_live_reads: Option<u64>,
    pub max_request_body_bytes: Option<u64>,
    /// Bodies over `--small-body-max-bytes` being read at once.
    pub max_concurrent_uploads: Option<u64>,
    /// Bytes of such bodies being read at once.
    pub max_upload_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaFile {
    #[serde(default)]
    default: Limits,
    /// Each entry is an `id` and the keys of `Limits`.
    #[serde(default)]
    bucket: Vec<toml::Table>,
}

/// The quota policy: the default, and the buckets with their own entry.
#[derive(Debug, Default)]
pub struct QuotaPolicy {
    default: Limits,
    buckets: HashMap<String, Limits>,
}

fn check(limits: &Limits, whose: &str) -> anyhow::Result<()> {
    let protocol = ursula_http::limits::MAX_REQUEST_BYTES;
    anyhow::ensure!(limits.requests_per_second != Some(0), "{whose}: requests_per_second must be at least 1");
    anyhow::ensure!(limits.burst != Some(0), "{whose}: burst must be at least 1");
    anyhow::ensure!(
        limits.burst.is_none() || limits.requests_per_second.is_some(),
        "{whose}: burst needs requests_per_second"
    );
    if let Some(max) = limits.max_request_body_bytes {
        anyhow::ensure!(
            (1..=protocol).contains(&max),
            "{whose}: max_request_body_bytes must be between 1 and the protocol's {protocol}"
        );
    }
    Ok(())
}

impl QuotaPolicy {
    pub fn parse(text: &str) -> anyhow::Result<QuotaPolicy> {
        let file: QuotaFile = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
        check(&file.default, "[default]")?;
        let mut buckets = HashMap::new();
        for mut entry in file.bucket {
            let id = match entry.remove("id") {
                Some(toml::Value::String(id)) => id,
                _ => anyhow::bail!("a [[bucket]] needs an id"),
            };
            BucketId::parse(&id).map_err(|e| anyhow::anyhow!("bucket {id:?}: {e}"))?;
            let limits: Limits =
                entry.try_into().map_err(|e: toml::de::Error| anyhow::anyhow!("bucket {id:?}: {}", e.message()))?;
            check(&limits, &format!("bucket {id:?}"))?;
            anyhow::ensure!(buckets.insert(id.clone(), limits).is_none(), "bucket {id:?} is listed twice");
        }
        Ok(QuotaPolicy { default: file.default, buckets })
    }

    pub fn load(path: &Path) -> anyhow::Result<QuotaPolicy> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        QuotaPolicy::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))
    }

    /// A bucket's own entry, else the default.
    pub fn limits(&self, bucket: &str) -> &Limits {
        self.buckets.get(bucket).unwrap_or(&self.default)
    }
}

/// What one bucket uses now.
struct BucketState {
    /// The limiter and the (rate, burst) it was built for; rebuilt when a
    /// reload changes them.
    rate: Mutex<Option<((u32, u32), DefaultDirectRateLimiter)>>,
    live_reads: AtomicU64,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
    /// When a request of the bucket was last admitted (ms of the clock's start).
    last_used_ms: AtomicU64,
}

/// Refusals by kind, for `/__ursula/gateway/metrics`.
#[derive(Default)]
struct Refusals {
    rate: AtomicU64,
    live_reads: AtomicU64,
    body: AtomicU64,
    uploads: AtomicU64,
    upload_bytes: AtomicU64,
}

pub struct Quotas {
    policy: Arc<Watched<QuotaPolicy>>,
    buckets: Mutex<HashMap<String, Arc<BucketState>>>,
    /// Bodies above this are uploads (`--small-body-max-bytes`).
    small_body_max: u64,
    started: tokio::time::Instant,
    refusals: Refusals,
}

/// A bucket idle this long loses its limiter state (a fresh one starts
/// full, as the old one would have refilled by then).
const IDLE: Duration = Duration::from_secs(600);

/// A slot a request holds until its answer is done.
struct Slot {
    state: Arc<BucketState>,
    kind: SlotKind,
}

enum SlotKind {
    LiveRead,
    Upload { bytes: u64 },
}

impl Drop for Slot {
    fn drop(&mut self) {
        match self.kind {
            SlotKind::LiveRead => self.state.live_reads.fetch_sub(1, Relaxed),
            SlotKind::Upload { bytes } => {
                self.state.upload_bytes.fetch_sub(bytes, Relaxed);
                self.state.uploads.fetch_sub(1, Relaxed)
            }
        };
    }
}

/// Takes one of `max` slots counted by `counter`, or says it cannot.
fn take(counter: &AtomicU64, max: Option<u64>, amount: u64) -> bool {
    let Some(max) = max else {
        counter.fetch_add(amount, Relaxed);
        return true;
    };
    counter.fetch_update(Relaxed, Relaxed, |now| now.checked_add(amount).filter(|n| *n <= max)).is_ok()
}

impl Quotas {
    fn new(policy: Arc<Watched<QuotaPolicy>>, small_body_max: u64) -> Quotas {
        Quotas {
            policy,
            buckets: Mutex::new(HashMap::new()),
            small_body_max,
            started: tokio::time::Instant::now(),
            refusals: Refusals::default(),
        }
    }

    /// Loads the policy (an invalid one refuses the start) and watches it.
    pub fn start(path: PathBuf, small_body_max: u64) -> anyhow::Result<Arc<Quotas>> {
        let policy = Watched::open("quota policy", path, QuotaPolicy::load)?;
        policy.clone().watch();
        let quotas = Arc::new(Quotas::new(policy, small_body_max));
        let pruner = Arc::downgrade(&quotas);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                let Some(quotas) = pruner.upgrade() else { return };
                quotas.prune(IDLE);
            }
        });
        Ok(quotas)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn state(&self, bucket: &str) -> Arc<BucketState> {
        let now = self.now_ms();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        // A known bucket costs no allocation.
        if let Some(state) = buckets.get(bucket) {
            state.last_used_ms.store(now, Relaxed);
            return state.clone();
        }
        let state = Arc::new(BucketState {
            rate: Mutex::new(None),
            live_reads: AtomicU64::new(0),
            uploads: AtomicU64::new(0),
            upload_bytes: AtomicU64::new(0),
            last_used_ms: AtomicU64::new(now),
        });
        buckets.insert(bucket.to_string(), state.clone());
        state
    }

    /// Drops the state of buckets idle for `idle` with nothing in flight.
    fn prune(&self, idle: Duration) {
        let now = self.now_ms();
        let idle = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        buckets.retain(|_, s| Arc::strong_count(s) > 1 || now.saturating_sub(s.last_used_ms.load(Relaxed)) < idle);
    }

    /// Buckets with limiter state now.
    pub fn tracked_buckets(&self) -> usize {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Admits `request` under its bucket's limits, adding what it holds to
    /// `holds` and the bucket's body limit to its extensions, or refuses it.
    pub fn admit(&self, request: &mut Parts, holds: &mut Holds) -> Result<(), ApiError> {
        let path = request.uri.path();
        if crate::target::is_operational(path) {
            return Ok(());
        }
        let bucket = crate::target::bucket(path);
        if !BucketId::is_valid(bucket) {
            // The surface refuses the id itself; no state for junk.
            return Ok(());
        }
        let policy = self.policy.current();
        let limits = policy.limits(bucket);
        let state = self.state(bucket);
        if let Some(rps) = limits.requests_per_second.and_then(NonZeroU32::new) {
            let burst = limits.burst.and_then(NonZeroU32::new).unwrap_or(rps);
            let mut rate = state.rate.lock().unwrap_or_else(|p| p.into_inner());
            if rate.as_ref().is_none_or(|(built, _)| *built != (rps.get(), burst.get())) {
                *rate =
                    Some(((rps.get(), burst.get()), RateLimiter::direct(Quota::per_second(rps).allow_burst(burst))));
            }
            if let Some((_, limiter)) = rate.as_ref()
                && let Err(not_until) = limiter.check()
            {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                self.refusals.rate.fetch_add(1, Relaxed);
                // Whole seconds until a token, at least one.
                return Err(ApiError::RateLimited { retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64 });
            }
        }
        let declared = ursula_http::headers::content_length(&request.headers).unwrap_or(0);
        if let Some(max) = limits.max_request_body_bytes {
            request.extensions.insert(RequestLimit(max));
            if declared > max {
                self.refusals.body.fetch_add(1, Relaxed);
                return Err(ApiError::QuotaTooLarge { limit: max });
            }
        }
        if crate::target::is_live_read(request) {
            if !take(&state.live_reads, limits.max_live_reads, 1) {
                self.refusals.live_reads.fetch_add(1, Relaxed);
                return Err(ApiError::LiveReadsExhausted);
            }
            holds.held.push(Arc::new(Slot { state: state.clone(), kind: SlotKind::LiveRead }));
        }
        if declared > self.small_body_max {
            if !take(&state.uploads, limits.max_concurrent_uploads, 1) {
                self.refusals.uploads.fetch_add(1, Relaxed);
                return Err(ApiError::UploadsExhausted);
            }
            // The slot owns the upload count from here, its bytes once taken.
            let mut slot = Slot { state: state.clone(), kind: SlotKind::Upload { bytes: 0 } };
            if !take(&state.upload_bytes, limits.max_upload_bytes, declared) {
                self.refusals.upload_bytes.fetch_add(1, Relaxed);
                drop(slot);
                return Err(ApiError::UploadBytesExhausted);
            }
            slot.kind = SlotKind::Upload { bytes: declared };
            holds.held.push(Arc::new(slot));
        }
        Ok(())
    }

    pub fn metrics(&self, m: &mut Metrics) {
        m.count("quota_refusals_rate", self.refusals.rate.load(Relaxed));
        m.count("quota_refusals_live_reads", self.refusals.live_reads.load(Relaxed));
        m.count("quota_refusals_body", self.refusals.body.load(Relaxed));
        m.count("quota_refusals_uploads", self.refusals.uploads.load(Relaxed));
        m.count("quota_refusals_upload_bytes", self.refusals.upload_bytes.load(Relaxed));
        m.count("quota_tracked_buckets", self.tracked_buckets() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_is_valid() {
        let policy = QuotaPolicy::parse(include_str!("../../policies/quotas.toml")).expect("policies/quotas.toml");
        assert_eq!(policy.limits("tenant-free").requests_per_second, Some(5));
        assert_eq!(policy.limits("tenant-free").max_concurrent_uploads, None, "an entry replaces the default");
        assert_eq!(policy.limits("anyone-else").requests_per_second, Some(200));
    }

    #[test]
    fn a_bad_quota_policy_is_refused_with_its_problem_named() {
        for (text, names) in [
            ("[default]\nrequests_per_secnd = 5\n", "requests_per_secnd"),
            ("[default]\nrequests_per_second = 0\n", "at least 1"),
            ("[default]\nburst = 4\n", "burst needs"),
            ("[default]\nmax_request_body_bytes = 40000000\n", "max_request_body_bytes"),
            ("[[bucket]]\nid = \"No\"\n", "No"),
            ("[[bucket]]\nid = \"tenant-a\"\n[[bucket]]\nid = \"tenant-a\"\n", "twice"),
            ("[[bucket]]\nid = \"tenant-a\"\nmax_live_read = 2\n", "max_live_read"),
            ("[[bucket]]\nmax_live_reads = 2\n", "needs an id"),
        ] {
            let e = QuotaPolicy::parse(text).expect_err(text);
            assert!(format!("{e:#}").contains(names), "{text}: {e:#}");
        }
    }

    fn parts(uri: &str) -> Parts {
        http::Request::builder().uri(uri).body(()).expect("a request").into_parts().0
    }

    /// Idle buckets lose their state (a million buckets do not grow the
    /// gateway without bound); a bucket with a read in flight keeps it.
    #[tokio::test]
    async fn idle_buckets_are_pruned_and_busy_ones_kept() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("quotas.toml");
        std::fs::write(&path, "[default]\nrequests_per_second = 100\nmax_live_reads = 5\n").expect("a policy");
        let policy = Watched::open("quota policy", path, QuotaPolicy::load).expect("the policy");
        let quotas = Quotas::new(policy, 1024);
        for i in 0..1000 {
            quotas.admit(&mut parts(&format!("/bucket-{i}/s")), &mut Holds::default()).expect("admitted");
        }
        let mut live = Holds::default();
        quotas.admit(&mut parts("/bucket-live/s?offset=-1&live=sse"), &mut live).expect("admitted");
        assert_eq!(quotas.tracked_buckets(), 1001);
        quotas.prune(Duration::from_secs(600));
        assert_eq!(quotas.tracked_buckets(), 1001, "none idle long enough");
        quotas.prune(Duration::ZERO);
        assert_eq!(quotas.tracked_buckets(), 1, "only the bucket with a live read");
        drop(live);
        quotas.prune(Duration::ZERO);
        assert_eq!(quotas.tracked_buckets(), 0);
    }

    #[test]
    fn a_counted_slot_is_taken_only_under_its_bound() {
        let counter = AtomicU64::new(0);
        assert!(take(&counter, Some(2), 1) && take(&counter, Some(2), 1));
        assert!(!take(&counter, Some(2), 1), "at the bound");
        assert_eq!(counter.load(Relaxed), 2, "a refusal takes nothing");
        assert!(take(&counter, None, 5), "no bound");
    }
}
