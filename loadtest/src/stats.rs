//! Statistics: latency histograms, mergeable samples, rates, ratios, and the
//! bookkeeping of which sequence numbers a reader saw.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Instant;

use hdrhistogram::Histogram;

/// Microseconds since the first call in this process: the clock that the SSE
/// writer stamps into payloads and the readers compare against.
pub fn now_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// The highest latency a histogram tracks exactly: one hour, in microseconds.
const MAX_TRACKED_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds (1 µs to 1 h, 3 significant digits).
#[derive(Clone, Debug)]
pub struct Latency {
    h: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    pub fn new() -> Self {
        // Constant, valid bounds: creation cannot fail.
        let h = Histogram::new_with_bounds(1, MAX_TRACKED_US, 3).expect("valid histogram bounds");
        Latency { h }
    }

    /// Records one value; values above one hour count as one hour.
    pub fn record(&mut self, us: u64) {
        self.h.saturating_record(us.max(1));
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides: addition cannot go out of range.
        let _ = self.h.add(&other.h);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// The value at quantile `q` (0..=1) in microseconds, `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        (self.count() > 0).then(|| self.h.value_at_quantile(q))
    }

    pub fn max_us(&self) -> Option<u64> {
        (self.count() > 0).then(|| self.h.max())
    }

    pub fn mean_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.h.mean())
    }

    /// The value at quantile `q` in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        self.quantile_us(q).map(us_to_ms)
    }

    pub fn max_ms(&self) -> Option<f64> {
        self.max_us().map(us_to_ms)
    }
}

fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// What one round against one server measured, in a form that adds up over
/// rounds: counters are summed, gauges keep the latest value, histograms merge.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub counters: BTreeMap<String, f64>,
    pub gauges: BTreeMap<String, f64>,
    pub hists: BTreeMap<String, Latency>,
}

impl Sample {
    pub fn add(&mut self, key: &str, v: f64) {
        *self.counters.entry(key.to_string()).or_insert(0.0) += v;
    }

    pub fn set(&mut self, key: &str, v: f64) {
        self.gauges.insert(key.to_string(), v);
    }

    pub fn hist(&mut self, key: &str) -> &mut Latency {
        self.hists.entry(key.to_string()).or_default()
    }

    /// A counter's value (0 when never added to).
    pub fn counter(&self, key: &str) -> f64 {
        self.counters.get(key).copied().unwrap_or(0.0)
    }

    pub fn gauge(&self, key: &str) -> Option<f64> {
        self.gauges.get(key).copied()
    }

    pub fn histogram(&self, key: &str) -> Option<&Latency> {
        self.hists.get(key)
    }

    pub fn merge(&mut self, other: &Sample) {
        for (k, v) in &other.counters {
            *self.counters.entry(k.clone()).or_insert(0.0) += v;
        }
        for (k, v) in &other.gauges {
            self.gauges.insert(k.clone(), *v);
        }
        for (k, h) in &other.hists {
            self.hists.entry(k.clone()).or_default().merge(h);
        }
    }

    /// The error counters (`err:…`), by their status or kind.
    pub fn errors(&self) -> impl Iterator<Item = (&str, f64)> {
        self.counters.iter().filter_map(|(k, v)| k.strip_prefix("err:").map(|s| (s, *v)))
    }

    pub fn error_total(&self) -> f64 {
        self.errors().map(|(_, v)| v).sum()
    }
}

/// Response outcomes counted without allocating: successes, each error
/// status, and transport errors. Folded into a [`Sample`] at the end.
#[derive(Clone, Debug)]
pub struct Outcomes {
    by_status: [u64; 600],
    pub io: u64,
}

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes { by_status: [0; 600], io: 0 }
    }
}

impl Outcomes {
    /// Records a status; true for a success (2xx).
    pub fn status(&mut self, status: u16) -> bool {
        let i = usize::from(status).min(599);
        self.by_status[i] += 1;
        (200..300).contains(&status)
    }

    pub fn ok(&self) -> u64 {
        self.by_status[200..300].iter().sum()
    }

    /// Adds `err:STATUS` and `err:io` counters to the sample.
    pub fn fold_into(&self, s: &mut Sample) {
        for (status, n) in self.by_status.iter().enumerate() {
            if *n > 0 && !(200..300).contains(&status) {
                s.add(&format!("err:{status}"), *n as f64);
            }
        }
        if self.io > 0 {
            s.add("err:io", self.io as f64);
        }
    }

    pub fn merge(&mut self, other: &Outcomes) {
        for (a, b) in self.by_status.iter_mut().zip(other.by_status.iter()) {
            *a += b;
        }
        self.io += other.io;
    }
}

/// `count` per second over `secs`; `None` for an empty interval.
pub fn rate(count: f64, secs: f64) -> Option<f64> {
    (secs > 0.0).then(|| count / secs)
}

/// `value / base`: how a figure compares with the first server's. `None` when
/// either is missing or the base is zero (a ratio to nothing means nothing).
pub fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (value, base) {
        (Some(v), Some(b)) if b != 0.0 && v.is_finite() && b.is_finite() => Some(v / b),
        _ => None,
    }
}

/// The median of the values (mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if !v.len().is_multiple_of(2) { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// Which sequence numbers one reader received: the first sighting of each
/// counts, later ones are duplicates, and the ones never seen are missed.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    seen: Vec<bool>,
    pub dups: u64,
    /// Sequence numbers beyond any the writer could have sent (corruption).
    pub bogus: u64,
}

/// Sequence numbers above this are treated as garbage rather than grown into.
const MAX_SEQ: u64 = 50_000_000;

impl Seen {
    /// Records `seq`; true when it is the first sighting.
    pub fn insert(&mut self, seq: u64) -> bool {
        if seq > MAX_SEQ {
            self.bogus += 1;
            return false;
        }
        let i = seq as usize;
        if i >= self.seen.len() {
            self.seen.resize((i + 1).max(self.seen.len() * 2), false);
        }
        if self.seen[i] {
            self.dups += 1;
            false
        } else {
            self.seen[i] = true;
            true
        }
    }

    /// How many of the sequence numbers `0..sent` were never seen.
    pub fn missed(&self, sent: u64) -> u64 {
        let seen_below = self.seen.iter().take(sent as usize).filter(|s| **s).count() as u64;
        sent - seen_below
    }
}

/// Reads a counter of clock ticks (`utime + stime`, fields 14 and 15) from
/// `/proc/PID/stat`, in seconds (Linux's USER_HZ is 100).
pub fn proc_cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    parse_stat_cpu(&text)
}

fn parse_stat_cpu(stat: &str) -> Option<f64> {
    // The command name (field 2) is parenthesised and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so fields 14 and 15 are at indices 11 and 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// `VmRSS` of a process from `/proc/PID/status`, in bytes.
pub fn proc_rss_bytes(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&text)
}

fn parse_vm_rss(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let mut h = Latency::new();
        for v in 1..=10_000 {
            h.record(v);
        }
        assert_eq!(h.count(), 10_000);
        let within = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(within(h.quantile_us(0.5).unwrap(), 5_000));
        assert!(within(h.quantile_us(0.9).unwrap(), 9_000));
        assert!(within(h.quantile_us(0.99).unwrap(), 9_900));
        assert!(within(h.quantile_us(0.999).unwrap(), 9_990));
        assert!(within(h.max_us().unwrap(), 10_000));
        assert!((h.mean_us().unwrap() - 5_000.5).abs() < 5.0);
        assert!((h.quantile_ms(0.5).unwrap() - 5.0).abs() < 0.01);
    }

    #[test]
    fn an_outlier_shows_in_the_tail_only() {
        let mut h = Latency::new();
        for _ in 0..999 {
            h.record(100);
        }
        h.record(50_000);
        assert_eq!(h.quantile_us(0.5), Some(100));
        assert_eq!(h.quantile_us(0.99), Some(100));
        let max = h.max_us().unwrap();
        assert!((49_950..=50_050).contains(&max), "{max}");
        assert!(h.quantile_us(0.9999).unwrap() >= 49_950);
    }

    #[test]
    fn empty_histogram_has_no_figures() {
        let h = Latency::new();
        assert_eq!(h.quantile_us(0.5), None);
        assert_eq!(h.max_ms(), None);
        assert_eq!(h.mean_us(), None);
    }

    #[test]
    fn zero_and_huge_values_are_clamped() {
        let mut h = Latency::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.count(), 2);
        assert_eq!(h.quantile_us(0.0), Some(1));
        assert!(h.max_us().unwrap() >= MAX_TRACKED_US);
    }

    #[test]
    fn merged_histograms_equal_one_histogram_of_everything() {
        let (mut a, mut b, mut all) = (Latency::new(), Latency::new(), Latency::new());
        for v in 1..=500 {
            a.record(v);
            all.record(v);
        }
        for v in 501..=1000 {
            b.record(v * 10);
            all.record(v * 10);
        }
        a.merge(&b);
        assert_eq!(a.count(), all.count());
        for q in [0.1, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(a.quantile_us(q), all.quantile_us(q));
        }
    }

    #[test]
    fn samples_sum_counters_keep_latest_gauges_and_merge_histograms() {
        let mut total = Sample::default();
        let mut r1 = Sample::default();
        r1.add("ops", 10.0);
        r1.add("elapsed_s", 2.0);
        r1.add("err:503", 1.0);
        r1.set("rss", 100.0);
        r1.hist("latency").record(5);
        let mut r2 = Sample::default();
        r2.add("ops", 30.0);
        r2.add("elapsed_s", 2.0);
        r2.add("err:503", 1.0);
        r2.add("err:io", 1.0);
        r2.set("rss", 300.0);
        r2.hist("latency").record(7);
        total.merge(&r1);
        total.merge(&r2);
        assert_eq!(total.counter("ops"), 40.0);
        assert_eq!(total.counter("missing"), 0.0);
        assert_eq!(rate(total.counter("ops"), total.counter("elapsed_s")), Some(10.0));
        assert_eq!(total.gauge("rss"), Some(300.0));
        assert_eq!(total.histogram("latency").unwrap().count(), 2);
        let errors: Vec<_> = total.errors().collect();
        assert_eq!(errors, vec![("503", 2.0), ("io", 1.0)]);
        assert_eq!(total.error_total(), 3.0);
    }

    #[test]
    fn outcomes_fold_errors_by_status() {
        let mut a = Outcomes::default();
        assert!(a.status(204));
        assert!(a.status(200));
        assert!(!a.status(409));
        let mut b = Outcomes::default();
        b.status(409);
        b.status(999);
        b.io += 2;
        a.merge(&b);
        assert_eq!(a.ok(), 2);
        let mut s = Sample::default();
        a.fold_into(&mut s);
        let errors: Vec<_> = s.errors().collect();
        assert_eq!(errors, vec![("409", 2.0), ("599", 1.0), ("io", 2.0)]);
    }

    #[test]
    fn rates_and_ratios() {
        assert_eq!(rate(10.0, 0.0), None);
        assert_eq!(rate(10.0, 4.0), Some(2.5));
        assert_eq!(ratio(Some(30.0), Some(10.0)), Some(3.0));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn seen_counts_duplicates_and_misses() {
        let mut s = Seen::default();
        assert!(s.insert(0));
        assert!(s.insert(2));
        assert!(!s.insert(2));
        assert!(s.insert(1000));
        assert!(!s.insert(MAX_SEQ + 1));
        assert_eq!(s.dups, 1);
        assert_eq!(s.bogus, 1);
        // Of 0..5, only 0 and 2 arrived.
        assert_eq!(s.missed(5), 3);
        assert_eq!(s.missed(0), 0);
        // Of 0..1001: 0, 2 and 1000 arrived.
        assert_eq!(s.missed(1001), 998);
        assert_eq!(Seen::default().missed(7), 7);
    }

    #[test]
    fn proc_parsing() {
        let stat = "1234 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 4 0";
        assert_eq!(parse_stat_cpu(stat), Some(4.0));
        assert_eq!(parse_stat_cpu("garbage"), None);
        let status = "Name:\tursula\nVmPeak:\t  9999 kB\nVmRSS:\t    2048 kB\nThreads: 3\n";
        assert_eq!(parse_vm_rss(status), Some(2048.0 * 1024.0));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
        // This process can always read its own figures.
        assert!(proc_cpu_seconds(None).is_some());
        assert!(proc_rss_bytes(std::process::id()).unwrap() > 0.0);
    }

    #[test]
    fn clock_is_monotonic() {
        let a = now_us();
        let b = now_us();
        assert!(b >= a);
    }
}
