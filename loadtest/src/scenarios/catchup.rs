//! `catchup`: setup writes M MiB into one stream in large appends; each round
//! reads it back from the start, following `Stream-Next-Offset` until
//! `Stream-Up-To-Date`, with R readers at once, and checks the byte count.
//! With `--chunks` the readers fetch the stream's immutable chunk URLs
//! (`{stream}/incarnation/{token}/chunk/{offset}`, extensions §4) instead,
//! which a gateway's cache may answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method};
use serde_json::{Value, json};

use super::{Ctx, latency_figures};
use crate::client::{Conn, Target, create_at_leader, header_str, random_body};
use crate::report::{Better, Figure};
use crate::stats::{Latency, Outcomes, Sample, rate};

#[derive(Args, Clone, Debug)]
pub struct CatchupArgs {
    /// MiB written in setup and read back in every round.
    #[arg(long, default_value_t = 256.0)]
    pub mib: f64,
    /// Size of each setup append, in KiB.
    #[arg(long, default_value_t = 1024)]
    pub chunk_kib: usize,
    /// Concurrent writers in setup.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
    /// Readers reading the whole stream at once in each round.
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// Times each reader reads the whole stream per round (longer rounds
    /// time more steadily).
    #[arg(long, default_value_t = 1)]
    pub passes: u32,
    /// Cap on read requests per reader per round.
    #[arg(long, default_value_t = 100_000)]
    pub max_requests: u64,
    /// Seconds a round may take before its readers stop.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Read the immutable chunk URLs instead of `?offset=` reads.
    #[arg(long)]
    pub chunks: bool,
    /// Seconds to wait after setup before the first round (lets a cold
    /// tier flush what was written).
    #[arg(long, default_value_t = 0.0)]
    pub settle_secs: f64,
}

impl CatchupArgs {
    pub fn params(&self) -> Value {
        json!({
            "mib": self.mib, "chunk_kib": self.chunk_kib, "writers": self.writers, "readers": self.readers,
            "passes": self.passes, "chunks": self.chunks, "settle_secs": self.settle_secs,
        })
    }
}

pub struct State {
    name: String,
    /// `Stream-Incarnation`, the token of the chunk URLs.
    token: String,
    /// Bytes the stream holds.
    bytes: u64,
}

pub async fn setup(a: &CatchupArgs, ctx: &Ctx, t: &Target, sample: &mut Sample) -> anyhow::Result<State> {
    anyhow::ensure!(a.chunk_kib > 0 && a.mib > 0.0 && a.writers > 0 && a.readers > 0, "sizes must be positive");
    let name = ctx.name(format_args!("catchup"));
    let ct = HeaderValue::from_static("application/octet-stream");
    // A voter that does not lead the stream's group redirects its create;
    // the setup writes go where it was created (its leader).
    let (status, placement) = create_at_leader(t, t.uri(&name, ""), &ct).await?;
    anyhow::ensure!(status.is_success(), "{}: creating {name} answered {status}", t.label);
    let mut conn = Conn::to(&placement);
    let chunk = a.chunk_kib * 1024;
    let chunks = ((a.mib * 1048576.0) / chunk as f64).ceil() as u64;
    let body = random_body(chunk);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.writers {
        let (mut conn, next, body, ct, uri) =
            (Conn::to(&placement), next.clone(), body.clone(), ct.clone(), t.uri(&name, ""));
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Outcomes::default();
            while next.fetch_add(1, Ordering::Relaxed) < chunks {
                let mut req = conn.request(Method::POST, uri.clone(), body.clone());
                req.headers_mut().insert(CONTENT_TYPE, ct.clone());
                match conn.call(req).await {
                    Ok((status, _, _)) => {
                        outcomes.status(status.as_u16());
                    }
                    Err(_) => outcomes.io += 1,
                }
            }
            outcomes
        }));
    }
    let mut outcomes = Outcomes::default();
    for task in tasks {
        outcomes.merge(&task.await?);
    }
    let written = outcomes.ok() * chunk as u64;
    sample.add("write_bytes", written as f64);
    sample.add("write_elapsed_s", start.elapsed().as_secs_f64());
    let mut write_errors = Sample::default();
    outcomes.fold_into(&mut write_errors);
    for (kind, n) in write_errors.errors() {
        sample.add(&format!("err:write-{kind}"), n);
    }
    anyhow::ensure!(written > 0, "{}: no append of the setup succeeded", t.label);
    let (status, headers, _) = conn.call(conn.request(Method::HEAD, t.uri(&name, ""), Bytes::new())).await?;
    anyhow::ensure!(status.is_success(), "{}: HEAD {name} answered {status}", t.label);
    let token = header_str(&headers, "stream-incarnation").unwrap_or_default().to_string();
    if a.settle_secs > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(a.settle_secs)).await;
    }
    Ok(State { name, token, bytes: written })
}

struct ReaderOut {
    bytes: u64,
    requests: u64,
    hist: Latency,
    outcomes: Outcomes,
    complete: bool,
}

/// How a reader names the next read: a catch-up query, or a chunk URL.
#[derive(Clone)]
enum Reads {
    Offsets,
    Chunks { token: String },
}

async fn read_all(
    t: Target,
    name: String,
    reads: Reads,
    expected: u64,
    max_requests: u64,
    deadline: Instant,
) -> ReaderOut {
    let mut out =
        ReaderOut { bytes: 0, requests: 0, hist: Latency::new(), outcomes: Outcomes::default(), complete: false };
    let mut conn = t.conn();
    let mut offset = match reads {
        Reads::Offsets => String::from("-1"),
        Reads::Chunks { .. } => format!("{:020}", 0),
    };
    while out.requests < max_requests && Instant::now() < deadline {
        let sent = Instant::now();
        let uri = match &reads {
            Reads::Offsets => t.uri(&name, &format!("offset={offset}")),
            Reads::Chunks { token } => t.uri(&format!("{name}/incarnation/{token}/chunk/{offset}"), ""),
        };
        let req = conn.request(Method::GET, uri, Bytes::new());
        out.requests += 1;
        let Ok(Ok((status, headers, n))) = tokio::time::timeout_at(deadline.into(), conn.call(req)).await else {
            out.outcomes.io += 1;
            break;
        };
        if !out.outcomes.status(status.as_u16()) {
            break;
        }
        out.hist.record(sent.elapsed().as_micros() as u64);
        out.bytes += n;
        // A chunk answer past the full chunks is the open tail: the last one.
        let last_chunk = matches!(reads, Reads::Chunks { .. }) && header_str(&headers, "stream-immutable").is_none();
        let up_to_date = header_str(&headers, "stream-up-to-date") == Some("true") || last_chunk;
        let Some(next) = header_str(&headers, "stream-next-offset") else { break };
        let stuck = n == 0 && next == offset;
        offset.clear();
        offset.push_str(next);
        if up_to_date || stuck {
            break;
        }
    }
    out.complete = out.bytes == expected;
    out
}

pub async fn round(a: &CatchupArgs, t: &Target, st: &State) -> anyhow::Result<Sample> {
    let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
    let start = Instant::now();
    let tasks: Vec<_> = (0..a.readers)
        .map(|_| {
            let (t, name, bytes, max, passes) = (t.clone(), st.name.clone(), st.bytes, a.max_requests, a.passes.max(1));
            let reads = if a.chunks { Reads::Chunks { token: st.token.clone() } } else { Reads::Offsets };
            tokio::spawn(async move {
                let mut all = Vec::new();
                for _ in 0..passes {
                    all.push(read_all(t.clone(), name.clone(), reads.clone(), bytes, max, deadline).await);
                }
                all
            })
        })
        .collect();
    let mut s = Sample::default();
    let mut outcomes = Outcomes::default();
    for out in join_all(tasks).await? {
        s.add("read_bytes", out.bytes as f64);
        s.add("ops", out.bytes as f64 / 1048576.0);
        s.add("read_requests", out.requests as f64);
        s.hist("request").merge(&out.hist);
        outcomes.merge(&out.outcomes);
        if !out.complete {
            s.add("err:short-read", 1.0);
        }
    }
    s.add("elapsed_s", start.elapsed().as_secs_f64());
    outcomes.fold_into(&mut s);
    Ok(s)
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<Vec<ReaderOut>>>) -> anyhow::Result<Vec<ReaderOut>> {
    let mut outs = Vec::new();
    for task in tasks {
        outs.extend(task.await?);
    }
    Ok(outs)
}

pub fn figures(s: &Sample) -> Vec<Figure> {
    let elapsed = s.counter("elapsed_s");
    let mut f = vec![
        Figure::new(
            "read_mib_per_s",
            "catch-up read",
            "MiB/s",
            rate(s.counter("read_bytes") / 1048576.0, elapsed),
            Better::Higher,
        ),
        Figure::new("read_mib", "read", "MiB", Some(s.counter("read_bytes") / 1048576.0), Better::Neither),
        Figure::new("read_requests", "read requests", "", Some(s.counter("read_requests")), Better::Neither),
    ];
    f.extend(latency_figures(s.histogram("request"), "request", "read request", &[(0.5, "p50"), (0.99, "p99")]));
    f.push(Figure::new(
        "write_mib_per_s",
        "setup write",
        "MiB/s",
        rate(s.counter("write_bytes") / 1048576.0, s.counter("write_elapsed_s")),
        Better::Higher,
    ));
    f
}
