//! The usage log (`--usage-log`, spec/08 "Usage", spec/35 "Usage export"):
//! per (bucket, principal, class) counts of requests, request body bytes
//! received, response body bytes written and, with `--usage-chunk-bytes`,
//! write units, appended every `--usage-flush-secs` as one JSON line per
//! non-empty window. A failing sink never blocks a request and never drops
//! a count: windows merge and are written when it recovers.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use http::request::Parts;
use serde::Serialize;
use ursula_http::front::Holds;

use crate::auth::policy::Principal;

/// What kind of work a request was, for billing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// An append or a close, and a create with a body.
    Append,
    /// A catch-up read, a `HEAD`, a snapshot or bootstrap read.
    Read,
    /// A long-poll or an SSE read.
    LiveRead,
    /// A create without a body, a delete, a snapshot publish, retention, parts.
    Admin,
}

/// The class of `request`, or `None` for the gateway's own routes.
pub fn classify(request: &Parts) -> Option<Class> {
    let path = request.uri.path();
    if crate::target::is_operational(path) {
        return None;
    }
    let segments = path.trim_start_matches('/').split('/').count();
    let live = crate::target::is_live_read(request);
    let has_body = ursula_http::headers::content_length(&request.headers).is_some_and(|n| n > 0)
        || request.headers.contains_key(http::header::TRANSFER_ENCODING);
    Some(match request.method {
        _ if live => Class::LiveRead,
        Method::GET | Method::HEAD => Class::Read,
        Method::POST if segments == 2 => Class::Append,
        Method::PUT if segments == 2 && has_body => Class::Append,
        _ => Class::Admin,
    })
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    bucket: String,
    principal: Option<Principal>,
    class: Class,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    requests: u64,
    request_bytes: u64,
    response_bytes: u64,
    chunks: u64,
}

impl Counts {
    fn add(&mut self, other: Counts) {
        self.requests += other.requests;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
        self.chunks += other.chunks;
    }
}

/// A window of counts not yet written.
struct Window {
    start_ms: u64,
    end_ms: u64,
    counts: HashMap<Key, Counts>,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The gateway's usage ledger and its sink.
pub struct Usage {
    path: PathBuf,
    chunk_bytes: Option<u64>,
    gateway_id: String,
    boot_unix_ms: u64,
    /// Counts of requests answered since the window began.
    open: Mutex<Window>,
    /// Closed windows the sink has not taken yet, merged into one.
    pending: Mutex<Option<Window>>,
    /// Lines written so far: the next line's `sequence`.
    sequence: AtomicU64,
    /// Writes that failed, for the metrics.
    pub sink_failures: AtomicU64,
}

/// One request's tally, added to the ledger when its answer is done.
struct Tally {
    usage: Arc<Usage>,
    key: Key,
    request_bytes: Arc<AtomicU64>,
    response_bytes: Arc<AtomicU64>,
}

impl Drop for Tally {
    fn drop(&mut self) {
        let request_bytes = self.request_bytes.load(Relaxed);
        let chunks = match (self.key.class, self.usage.chunk_bytes) {
            (Class::Append, Some(unit)) => request_bytes.div_ceil(unit.max(1)).max(1),
            _ => 0,
        };
        let counts = Counts { requests: 1, request_bytes, response_bytes: self.response_bytes.load(Relaxed), chunks };
        let mut open = self.usage.open.lock().unwrap_or_else(|p| p.into_inner());
        match open.counts.get_mut(&self.key) {
            Some(total) => total.add(counts),
            None => drop(open.counts.insert(self.key.clone(), counts)),
        }
    }
}

#[derive(Serialize)]
struct Line<'a> {
    version: u32,
    gateway_id: &'a str,
    boot_unix_ms: u64,
    sequence: u64,
    window_start_unix_ms: u64,
    window_end_unix_ms: u64,
    records: Vec<Record<'a>>,
}

#[derive(Serialize)]
struct Record<'a> {
    bucket: &'a str,
    principal: Option<&'a Principal>,
    class: Class,
    requests: u64,
    request_bytes: u64,
    response_bytes: u64,
    /// Only with `--usage-chunk-bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    chunks: Option<u64>,
}

impl Usage {
    pub fn new(path: PathBuf, chunk_bytes: Option<u64>) -> Arc<Usage> {
        let now = unix_ms();
        Arc::new(Usage {
            path,
            chunk_bytes,
            gateway_id: format!("gw-{:016x}", fastrand::u64(..)),
            boot_unix_ms: now,
            open: Mutex::new(Window { start_ms: now, end_ms: now, counts: HashMap::new() }),
            pending: Mutex::new(None),
            sequence: AtomicU64::new(0),
            sink_failures: AtomicU64::new(0),
        })
    }

    /// Writes a window every `every`, until the process ends.
    pub fn flush_every(self: &Arc<Usage>, every: Duration) {
        let usage = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let usage = usage.clone();
                // File I/O off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || usage.flush()).await;
            }
        });
    }

    /// Starts the tally of an admitted request: `holds` keeps it until the
    /// answer is done, and counts the response bytes written.
    pub fn admit(self: &Arc<Usage>, request: &Parts, principal: Option<Principal>, holds: &mut Holds) {
        let Some(class) = classify(request) else { return };
        let bucket = crate::target::bucket(request.uri.path()).to_string();
        let response_bytes = holds.sent.get_or_insert_with(Default::default).clone();
        let request_bytes = holds.received.get_or_insert_with(Default::default).clone();
        let key = Key { bucket, principal, class };
        holds.held.push(Arc::new(Tally { usage: self.clone(), key, request_bytes, response_bytes }));
    }

    /// Closes the open window and writes every pending one; a write that
    /// fails keeps them, merged, for the next flush.
    pub fn flush(&self) {
        let now = unix_ms();
        let closed = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let counts = std::mem::take(&mut open.counts);
            let window = Window { start_ms: open.start_ms, end_ms: now, counts };
            open.start_ms = now;
            window
        };
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let merged = match pending.take() {
            Some(mut earlier) => {
                earlier.end_ms = closed.end_ms;
                for (key, counts) in closed.counts {
                    earlier.counts.entry(key).or_default().add(counts);
                }
                earlier
            }
            None => closed,
        };
        if merged.counts.is_empty() {
            return;
        }
        if let Err(e) = self.write(&merged) {
            self.sink_failures.fetch_add(1, Relaxed);
            tracing::warn!(path = %self.path.display(), "the usage log could not be written; the counts are kept: {e}");
            *pending = Some(merged);
        }
    }

    fn write(&self, window: &Window) -> std::io::Result<()> {
        let mut records: Vec<Record<'_>> = window
            .counts
            .iter()
            .map(|(key, c)| Record {
                bucket: &key.bucket,
                principal: key.principal.as_ref(),
                class: key.class,
                requests: c.requests,
                request_bytes: c.request_bytes,
                response_bytes: c.response_bytes,
                chunks: self.chunk_bytes.map(|_| c.chunks),
            })
            .collect();
        records.sort_by(|a, b| (a.bucket, a.class as u8).cmp(&(b.bucket, b.class as u8)));
        let line = Line {
            version: 1,
            gateway_id: &self.gateway_id,
            boot_unix_ms: self.boot_unix_ms,
            sequence: self.sequence.load(Relaxed),
            window_start_unix_ms: window.start_ms,
            window_end_unix_ms: window.end_ms,
            records,
        };
        let mut text = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        text.push(b'\n');
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(&text)?;
        file.sync_data()?;
        self.sequence.fetch_add(1, Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, body: Option<u64>) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        if let Some(n) = body {
            b = b.header("content-length", n);
        }
        b.body(()).expect("a request").into_parts().0
    }

    #[test]
    fn requests_are_classed_as_the_usage_log_bills_them() {
        for (method, uri, body, class) in [
            ("POST", "/t-a1/s", Some(5), Some(Class::Append)),
            ("POST", "/t-a1/s", None, Some(Class::Append)),
            ("PUT", "/t-a1/s", Some(5), Some(Class::Append)),
            ("PUT", "/t-a1/s", None, Some(Class::Admin)),
            ("DELETE", "/t-a1/s", None, Some(Class::Admin)),
            ("PUT", "/t-a1/s/snapshot/00000000000000000001", Some(5), Some(Class::Admin)),
            ("PUT", "/t-a1/s/retention/00000000000000000001", None, Some(Class::Admin)),
            ("POST", "/t-a1/s/snapshot/00000000000000000001/parts", Some(5), Some(Class::Admin)),
            ("GET", "/t-a1/s?offset=-1", None, Some(Class::Read)),
            ("HEAD", "/t-a1/s", None, Some(Class::Read)),
            ("GET", "/t-a1/s/bootstrap", None, Some(Class::Read)),
            ("GET", "/t-a1/s?offset=-1&live=sse", None, Some(Class::LiveRead)),
            ("GET", "/t-a1/s?live=long-poll&offset=-1", None, Some(Class::LiveRead)),
            ("GET", "/__ursula/metrics", None, None),
        ] {
            assert_eq!(classify(&parts(method, uri, body)), class, "{method} {uri}");
        }
    }

    /// A sink that fails keeps every count: windows merge and are written,
    /// with the next sequence number, once it recovers.
    #[test]
    fn a_failing_sink_drops_no_count() {
        let dir = tempfile::tempdir().expect("a directory");
        let blocked = dir.path().join("blocked");
        std::fs::write(&blocked, b"a file where the log's directory should be").expect("a file");
        let usage = Usage::new(blocked.join("usage.jsonl"), Some(10));
        let tally = |bytes: u64| {
            let mut holds = Holds::default();
            usage.admit(&parts("POST", "/tenant-a/s", Some(bytes)), None, &mut holds);
            holds.received.as_ref().expect("a tally").store(bytes, Relaxed);
            drop(holds);
        };
        tally(25);
        usage.flush();
        tally(5);
        usage.flush();
        assert_eq!(usage.sink_failures.load(Relaxed), 2);
        std::fs::remove_file(&blocked).expect("removing the file");
        std::fs::create_dir(&blocked).expect("the directory");
        usage.flush();
        let text = std::fs::read_to_string(blocked.join("usage.jsonl")).expect("the log");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(lines.len(), 1, "{text}");
        let record = &lines[0]["records"][0];
        assert_eq!(lines[0]["sequence"], 0);
        assert_eq!((record["requests"].as_u64(), record["request_bytes"].as_u64()), (Some(2), Some(30)));
        assert_eq!(record["chunks"].as_u64(), Some(4), "ceil(25/10) + ceil(5/10)");
        assert_eq!(record["class"], "append");
        assert!(record["principal"].is_null());
    }
}
