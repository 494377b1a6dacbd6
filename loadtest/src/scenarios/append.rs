//! `append`: S streams, C concurrent writers (writer i appends to stream
//! i mod S, closed loop: one request in flight per writer), B-byte bodies,
//! optionally as idempotent producers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http::header::{CONTENT_TYPE, HeaderName};
use http::{HeaderValue, Method, StatusCode, Uri};
use serde_json::{Value, json};

use super::{Ctx, latency_figures};
use crate::client::{Conn, Placement, Target, create_at_leader, drain, random_body, redirected};
use crate::report::{Better, Figure};
use crate::stats::{Latency, Outcomes, Sample, rate};

#[derive(Args, Clone, Debug)]
pub struct AppendArgs {
    /// Number of streams written.
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Concurrent writers, each with its own connection.
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// Body size of each append, in bytes.
    #[arg(long, default_value_t = 256)]
    pub bytes: usize,
    /// Measured seconds per round.
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Unmeasured seconds before each round's measurement.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Cap on measured appends per round.
    #[arg(long, default_value_t = 5_000_000)]
    pub max_requests: u64,
    /// Send Producer-Id/Epoch/Seq headers (one producer per writer per round).
    #[arg(long)]
    pub producer: bool,
    /// Content type of the streams and appends.
    #[arg(long, default_value = "application/octet-stream")]
    pub content_type: String,
}

impl AppendArgs {
    pub fn params(&self) -> Value {
        json!({
            "streams": self.streams, "writers": self.writers, "bytes": self.bytes,
            "duration_s": self.duration, "warmup_s": self.warmup, "max_requests": self.max_requests,
            "producer": self.producer, "content_type": self.content_type,
        })
    }
}

pub struct State {
    uris: Vec<Uri>,
    /// Where each stream takes writes (its group leader on a cluster).
    placements: Vec<Placement>,
    content_type: HeaderValue,
    body: Bytes,
}

pub async fn setup(a: &AppendArgs, ctx: &Ctx, t: &Target) -> anyhow::Result<State> {
    anyhow::ensure!(a.streams > 0 && a.writers > 0 && a.bytes > 0, "--streams, --writers and --bytes must be positive");
    let content_type = HeaderValue::from_str(&a.content_type)?;
    let mut uris = Vec::with_capacity(a.streams);
    let mut placements = Vec::with_capacity(a.streams);
    for i in 0..a.streams {
        let uri = t.uri(&ctx.name(format_args!("append-{i}")), "");
        let (status, placement) = create_at_leader(t, uri.clone(), &content_type).await?;
        anyhow::ensure!(status.is_success(), "{}: creating {uri} answered {status}", t.label);
        uris.push(uri);
        placements.push(placement);
    }
    Ok(State { uris, placements, content_type, body: random_body(a.bytes) })
}

struct WriterOut {
    hist: Latency,
    outcomes: Outcomes,
    last_done: Instant,
}

pub async fn round(a: &AppendArgs, _t: &Target, st: &State, round: u32) -> anyhow::Result<Sample> {
    let budget = Arc::new(AtomicU64::new(0));
    let start = Instant::now() + Duration::from_millis(200);
    let measure_from = start + Duration::from_secs_f64(a.warmup);
    let end = measure_from + Duration::from_secs_f64(a.duration);
    let mut tasks = Vec::with_capacity(a.writers);
    for w in 0..a.writers {
        let mut conn = Conn::to(&st.placements[w % st.placements.len()]);
        let uri = st.uris[w % st.uris.len()].clone();
        let (ct, body, budget, max) = (st.content_type.clone(), st.body.clone(), budget.clone(), a.max_requests);
        let producer_id = a.producer.then(|| HeaderValue::from_str(&format!("lt-r{round}-w{w}"))).transpose()?;
        tasks.push(tokio::spawn(async move {
            let mut out = WriterOut { hist: Latency::new(), outcomes: Outcomes::default(), last_done: Instant::now() };
            if conn.ensure().await.is_err() {
                out.outcomes.io += 1;
                return out;
            }
            tokio::time::sleep_until(start.into()).await;
            let zero = HeaderValue::from_static("0");
            let mut seq: u64 = 0;
            loop {
                let sent = Instant::now();
                let measured = sent >= measure_from;
                if sent >= end || (measured && budget.fetch_add(1, Ordering::Relaxed) >= max) {
                    break;
                }
                let mut req = conn.request(Method::POST, uri.clone(), body.clone());
                let h = req.headers_mut();
                h.insert(CONTENT_TYPE, ct.clone());
                if let Some(id) = &producer_id {
                    h.insert(HeaderName::from_static("producer-id"), id.clone());
                    h.insert(HeaderName::from_static("producer-epoch"), zero.clone());
                    h.insert(HeaderName::from_static("producer-seq"), HeaderValue::from(seq));
                    seq += 1;
                }
                let mut moved = None;
                let result = match conn.send(req).await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        if resp.status() == StatusCode::TEMPORARY_REDIRECT {
                            moved = redirected(resp.headers()).await.ok();
                        }
                        drain(resp.into_body()).await.map(|_| status)
                    }
                    Err(e) => Err(e),
                };
                let done = Instant::now();
                // Not appended (a redirect, a `503`) or not known to be: a
                // producer sends the same seq again, as its clients retry
                // (the server drops a duplicate). Else the next seq would
                // leave a gap the server refuses with `409`.
                let resend = moved.is_some() || matches!(result, Ok(503) | Err(_));
                if resend && producer_id.is_some() {
                    seq = seq.saturating_sub(1);
                }
                if measured {
                    match result {
                        Ok(status) => {
                            if out.outcomes.status(status) {
                                out.hist.record(done.duration_since(sent).as_micros() as u64);
                            }
                        }
                        Err(_) => out.outcomes.io += 1,
                    }
                    out.last_done = done;
                }
                // The stream's leadership moved (a balancer, an election):
                // the `307` counts, and the writer follows it from now on.
                if let Some(placement) = moved {
                    conn = Conn::to(&placement);
                    if conn.ensure().await.is_err() {
                        out.outcomes.io += 1;
                        break;
                    }
                }
            }
            out
        }));
    }
    let mut hist = Latency::new();
    let mut outcomes = Outcomes::default();
    let mut last = measure_from;
    for task in tasks {
        let out = task.await?;
        hist.merge(&out.hist);
        outcomes.merge(&out.outcomes);
        last = last.max(out.last_done);
    }
    let mut s = Sample::default();
    let ok = outcomes.ok() as f64;
    s.add("ops", ok);
    s.add("bytes", ok * a.bytes as f64);
    s.add("elapsed_s", last.duration_since(measure_from).as_secs_f64());
    outcomes.fold_into(&mut s);
    s.hist("latency").merge(&hist);
    Ok(s)
}

pub fn figures(s: &Sample) -> Vec<Figure> {
    let elapsed = s.counter("elapsed_s");
    let mut f = vec![
        Figure::new("appends_per_s", "appends/s", "", rate(s.counter("ops"), elapsed), Better::Higher),
        Figure::new("mib_per_s", "throughput", "MiB/s", rate(s.counter("bytes") / 1048576.0, elapsed), Better::Higher),
    ];
    f.extend(latency_figures(
        s.histogram("latency"),
        "latency",
        "latency",
        &[(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")],
    ));
    let mean = s.histogram("latency").and_then(|h| h.mean_us()).map(|us| us / 1000.0);
    f.push(Figure::new("latency_mean_ms", "latency mean", "ms", mean, Better::Lower));
    f.push(Figure::new("appends", "appends measured", "", Some(s.counter("ops")), Better::Neither));
    f
}
