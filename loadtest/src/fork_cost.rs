//! `fork-cost`: what forking a stream costs as its source grows (issue 26:
//! O(1), the same for a 64 MiB source as for a 1 KiB one). Per source size
//! it writes a source, then creates F forks of it one at a time, timing
//! each `PUT` and reading the server's `VmRSS` before and after.

use std::time::Instant;

use bytes::Bytes;
use clap::Args;
use http::Method;
use http::header::CONTENT_TYPE;

use crate::client::{Target, random_body};
use crate::stats::{Latency, proc_rss_bytes};

#[derive(Args, Clone, Debug)]
pub struct ForkCostArgs {
    /// Base URL of the server.
    #[arg(long)]
    pub url: String,
    #[arg(long, default_value = "/loadtest/{name}")]
    pub path_template: String,
    /// The server's process id, for resident memory per fork.
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// Source sizes in KiB, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,65536")]
    pub source_kib: Vec<u64>,
    /// Forks created of each source.
    #[arg(long, default_value_t = 500)]
    pub forks: u64,
    /// Size of each append that writes a source, in KiB.
    #[arg(long, default_value_t = 1024)]
    pub append_kib: u64,
}

struct Row {
    kib: u64,
    median_us: f64,
    p99_us: f64,
    rss_per_fork: Option<f64>,
}

pub async fn run(a: ForkCostArgs) -> anyhow::Result<()> {
    let t = Target::resolve(&a.url, &a.path_template, "server", a.server_pid).await?;
    let mut conn = t.conn();
    let run = format!("fc{:x}", fastrand::u32(..));
    let mut rows = Vec::new();
    for &kib in &a.source_kib {
        let source = format!("{run}-src-{kib}");
        let put = conn.request(Method::PUT, t.uri(&source, ""), Bytes::new());
        let (status, _, _) = conn.call(with_type(put)).await?;
        anyhow::ensure!(status.is_success(), "creating the source: {status}");
        let mut left = kib * 1024;
        while left > 0 {
            let n = left.min(a.append_kib * 1024);
            let post = conn.request(Method::POST, t.uri(&source, ""), random_body(usize::try_from(n)?));
            let (status, _, _) = conn.call(with_type(post)).await?;
            anyhow::ensure!(status.is_success(), "writing the source: {status}");
            left -= n;
        }
        let from = t.uri(&source, "").path().to_string();
        let before = t.pid.and_then(proc_rss_bytes);
        let mut latency = Latency::new();
        for i in 0..a.forks {
            let mut put = conn.request(Method::PUT, t.uri(&format!("{run}-fork-{kib}-{i}"), ""), Bytes::new());
            put.headers_mut().insert("stream-forked-from", from.parse()?);
            let started = Instant::now();
            let (status, _, _) = conn.call(put).await?;
            latency.record(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
            anyhow::ensure!(status.as_u16() == 201, "fork {i} of the {kib} KiB source: {status}");
        }
        let after = t.pid.and_then(proc_rss_bytes);
        let rss_per_fork = before.zip(after).map(|(b, a2)| (a2 - b) / a.forks as f64);
        let q = |q| latency.quantile_us(q).unwrap_or(0) as f64;
        rows.push(Row { kib, median_us: q(0.5), p99_us: q(0.99), rss_per_fork });
    }
    println!("fork-cost: {} forks of each source, created one at a time", a.forks);
    println!("{:>12} {:>14} {:>12} {:>22}", "source KiB", "fork p50 (us)", "p99 (us)", "resident per fork (B)");
    for r in &rows {
        let rss = r.rss_per_fork.map_or_else(|| "-".to_string(), |b| format!("{b:.0}"));
        println!("{:>12} {:>14.0} {:>12.0} {:>22}", r.kib, r.median_us, r.p99_us, rss);
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        println!("p50 of the largest source / the smallest: {:.2}x", last.median_us / first.median_us);
    }
    Ok(())
}

fn with_type(mut req: http::Request<http_body_util::Full<Bytes>>) -> http::Request<http_body_util::Full<Bytes>> {
    req.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/octet-stream"));
    req
}
