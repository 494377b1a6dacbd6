//! `many-streams`: create K streams (PUT) and write each once (POST of B
//! bytes), C at a time; then, given `--server-pid`, read the server's
//! `VmRSS` and report resident bytes per stream above the empty server
//! (measured in setup, so start the server fresh for this scenario).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Method};
use serde_json::{Value, json};

use super::{Ctx, latency_figures};
use crate::client::{Target, random_body};
use crate::report::{Better, Figure};
use crate::stats::{Latency, Outcomes, Sample, proc_rss_bytes, rate};

#[derive(Args, Clone, Debug)]
pub struct ManyArgs {
    /// Streams created (and written once) per round.
    #[arg(long, default_value_t = 10_000)]
    pub streams: u64,
    /// Concurrent creators, each with its own connection.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Bytes appended to each stream after creating it (0: create only).
    #[arg(long, default_value_t = 16)]
    pub bytes: usize,
    /// Seconds to wait after the last write before reading the memory.
    #[arg(long, default_value_t = 2.0)]
    pub settle: f64,
    /// Seconds a round may take.
    #[arg(long, default_value_t = 100.0)]
    pub timeout: f64,
}

impl ManyArgs {
    pub fn params(&self) -> Value {
        json!({"streams": self.streams, "concurrency": self.concurrency, "bytes": self.bytes, "settle_s": self.settle})
    }
}

/// The empty server's resident memory.
pub fn setup(t: &Target, sample: &mut Sample) {
    if let Some(rss) = t.pid.and_then(proc_rss_bytes) {
        sample.set("rss_baseline", rss);
    }
}

struct WorkerOut {
    created: u64,
    create: Latency,
    write: Latency,
    outcomes: Outcomes,
}

pub async fn round(a: &ManyArgs, ctx: &Ctx, t: &Target, round: u32) -> anyhow::Result<Sample> {
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(a.timeout);
    let body = random_body(a.bytes);
    let ct = HeaderValue::from_static("application/octet-stream");
    let start = Instant::now();
    let tasks: Vec<_> = (0..a.concurrency.max(1))
        .map(|_| {
            let (t, next, body, ct, k, bytes) = (t.clone(), next.clone(), body.clone(), ct.clone(), a.streams, a.bytes);
            let prefix = ctx.name(format_args!("m{round}"));
            tokio::spawn(async move {
                let mut out = WorkerOut {
                    created: 0,
                    create: Latency::new(),
                    write: Latency::new(),
                    outcomes: Outcomes::default(),
                };
                let mut conn = t.conn();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= k || Instant::now() >= deadline {
                        break;
                    }
                    let uri = t.uri(&format!("{prefix}-{i}"), "");
                    let sent = Instant::now();
                    let mut req = conn.request(Method::PUT, uri.clone(), bytes::Bytes::new());
                    req.headers_mut().insert(CONTENT_TYPE, ct.clone());
                    match conn.call(req).await {
                        Ok((status, _, _)) if out.outcomes.status(status.as_u16()) => {
                            out.create.record(sent.elapsed().as_micros() as u64);
                            out.created += 1;
                        }
                        Ok(_) => continue,
                        Err(_) => {
                            out.outcomes.io += 1;
                            continue;
                        }
                    }
                    if bytes > 0 {
                        let sent = Instant::now();
                        let mut req = conn.request(Method::POST, uri, body.clone());
                        req.headers_mut().insert(CONTENT_TYPE, ct.clone());
                        match conn.call(req).await {
                            Ok((status, _, _)) => {
                                if out.outcomes.status(status.as_u16()) {
                                    out.write.record(sent.elapsed().as_micros() as u64);
                                }
                            }
                            Err(_) => out.outcomes.io += 1,
                        }
                    }
                }
                out
            })
        })
        .collect();
    let mut s = Sample::default();
    let mut outcomes = Outcomes::default();
    for task in tasks {
        let out = task.await?;
        s.add("ops", out.created as f64);
        s.hist("create").merge(&out.create);
        s.hist("write").merge(&out.write);
        outcomes.merge(&out.outcomes);
    }
    s.add("elapsed_s", start.elapsed().as_secs_f64());
    outcomes.fold_into(&mut s);
    if let Some(pid) = t.pid {
        tokio::time::sleep(Duration::from_secs_f64(a.settle)).await;
        if let Some(rss) = proc_rss_bytes(pid) {
            s.set("rss_after", rss);
        }
    }
    Ok(s)
}

pub fn figures(s: &Sample) -> Vec<Figure> {
    let created = s.counter("ops");
    let per_stream = match (s.gauge("rss_baseline"), s.gauge("rss_after")) {
        (Some(b), Some(a)) if created > 0.0 => Some((a - b) / created),
        _ => None,
    };
    let mib = |v: Option<f64>| v.map(|v| v / 1048576.0);
    let mut f = vec![
        Figure::new("rss_per_stream", "resident memory per stream", "bytes", per_stream, Better::Lower),
        Figure::new(
            "streams_per_s",
            "streams created and written/s",
            "",
            rate(created, s.counter("elapsed_s")),
            Better::Higher,
        ),
        Figure::new("streams", "streams created", "", Some(created), Better::Neither),
        Figure::new(
            "rss_baseline_mib",
            "RSS of the empty server",
            "MiB",
            mib(s.gauge("rss_baseline")),
            Better::Neither,
        ),
        Figure::new("rss_after_mib", "RSS after", "MiB", mib(s.gauge("rss_after")), Better::Neither),
    ];
    f.extend(latency_figures(s.histogram("create"), "create", "create latency", &[(0.5, "p50"), (0.99, "p99")]));
    f.extend(latency_figures(s.histogram("write"), "write", "first-append latency", &[(0.5, "p50"), (0.99, "p99")]));
    f
}
