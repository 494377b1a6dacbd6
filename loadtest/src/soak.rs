//! `ursula-loadtest soak`: one producer per stream writes records of mixed
//! sizes for a while (with idempotent producer headers, repeating a write
//! until it is acknowledged), a reader catches each stream up now and
//! then, while `scripts/soak.sh` injects faults; then every stream is read
//! back whole and each record checked against what was acknowledged:
//! lost, duplicated or out of order. The verdict is printed (and written
//! as JSON with `--json`); the exit status says whether it held.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use bytes::Bytes;
use clap::Args;
use http::{HeaderValue, Method, StatusCode, Uri};
use http_body_util::BodyExt;

use crate::client::{Conn, Placement, Target, header_str, redirected};

#[derive(Args, Clone)]
pub struct SoakArgs {
    /// Where the producers write and the checker reads (a gateway, or a voter: redirects are followed).
    #[arg(long)]
    pub url: String,
    #[arg(long, default_value = "/soak/{name}")]
    pub path_template: String,
    #[arg(long, default_value_t = 16)]
    pub streams: usize,
    /// Seconds of writing.
    #[arg(long, default_value_t = 1800)]
    pub duration: u64,
    #[arg(long, default_value_t = 32)]
    pub min_bytes: usize,
    #[arg(long, default_value_t = 4096)]
    pub max_bytes: usize,
    /// Write the verdict here as JSON.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// What the producers met.
#[derive(Default)]
struct Counters {
    attempts: AtomicU64,
    acknowledged: AtomicU64,
    refused_503: AtomicU64,
    other_status: AtomicU64,
    /// The other answers by status and error code, e.g. "409 PRODUCER_SEQ_GAP".
    other_kinds: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    transport_errors: AtomicU64,
    reads: AtomicU64,
}

impl Counters {
    fn other(&self, status: StatusCode, body: &[u8]) {
        self.other_status.fetch_add(1, Relaxed);
        let code = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "-".into());
        let mut kinds = self.other_kinds.lock().unwrap_or_else(|p| p.into_inner());
        *kinds.entry(format!("{} {code}", status.as_u16())).or_default() += 1;
    }
}

fn record(stream: usize, seq: u64, pad: usize) -> Bytes {
    let mut line = format!("s{stream:03} {seq:09} ");
    line.extend(std::iter::repeat_n('x', pad));
    line.push('\n');
    Bytes::from(line)
}

/// Sends `method uri body` at `placement`, following a leader's `307`s.
async fn call(
    placement: &mut Placement,
    conn: &mut Conn,
    method: Method,
    uri: &Uri,
    body: Bytes,
    headers: &[(&'static str, String)],
) -> anyhow::Result<(StatusCode, http::HeaderMap, Bytes)> {
    for _ in 0..4 {
        let mut req = conn.request(method.clone(), uri.clone(), body.clone());
        for (name, value) in headers {
            req.headers_mut().insert(*name, HeaderValue::from_str(value)?);
        }
        let resp = conn.send(req).await?;
        let (parts, incoming) = resp.into_parts();
        let bytes = incoming.collect().await?.to_bytes();
        if parts.status != StatusCode::TEMPORARY_REDIRECT {
            return Ok((parts.status, parts.headers, bytes));
        }
        *placement = redirected(&parts.headers).await?;
        *conn = Conn::to(placement);
    }
    Err(anyhow!("redirected more than three times"))
}

/// One stream's producer: returns the acknowledged seqs.
async fn produce(
    target: Target,
    stream: usize,
    args: SoakArgs,
    until: Instant,
    counters: Arc<Counters>,
) -> anyhow::Result<BTreeSet<u64>> {
    let name = format!("soak{stream:03}");
    let uri = target.uri(&name, "");
    let mut placement = target.placement();
    let mut conn = Conn::to(&placement);
    let mut rng = fastrand::Rng::with_seed(stream as u64);
    let text = vec![("content-type", "text/plain".to_owned())];
    loop {
        match call(&mut placement, &mut conn, Method::PUT, &uri, Bytes::new(), &text).await {
            Ok((s, _, _)) if s.is_success() => break,
            _ if Instant::now() > until => return Err(anyhow!("{name} was never created")),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let producer = format!("soak-{stream}");
    let mut acked = BTreeSet::new();
    let mut seq = 0u64;
    let mut pad = rng.usize(args.min_bytes..=args.max_bytes.max(args.min_bytes));
    while Instant::now() < until {
        let headers = vec![
            ("content-type", "text/plain".to_owned()),
            ("producer-id", producer.clone()),
            ("producer-epoch", "0".to_owned()),
            ("producer-seq", seq.to_string()),
        ];
        counters.attempts.fetch_add(1, Relaxed);
        let body = record(stream, seq, pad);
        match call(&mut placement, &mut conn, Method::POST, &uri, body, &headers).await {
            Ok((s, _, _)) if s == StatusCode::OK || s == StatusCode::NO_CONTENT => {
                counters.acknowledged.fetch_add(1, Relaxed);
                acked.insert(seq);
                seq += 1;
                pad = rng.usize(args.min_bytes..=args.max_bytes.max(args.min_bytes));
                // Now and then a catch-up read, for mixed load.
                if rng.u32(0..20) == 0 {
                    let read = target.uri(&name, "offset=-1");
                    if call(&mut placement, &mut conn, Method::GET, &read, Bytes::new(), &[]).await.is_ok() {
                        counters.reads.fetch_add(1, Relaxed);
                    }
                }
                continue;
            }
            // The same write again after a pause: its producer key makes it exactly-once.
            Ok((s, _, _)) if s == StatusCode::SERVICE_UNAVAILABLE => counters.refused_503.fetch_add(1, Relaxed),
            Ok((s, _, body)) => {
                counters.other(s, &body);
                0
            }
            Err(_) => {
                conn = Conn::to(&target.placement());
                placement = target.placement();
                counters.transport_errors.fetch_add(1, Relaxed)
            }
        };
        tokio::time::sleep(Duration::from_millis(rng.u64(50..300))).await;
    }
    Ok(acked)
}

/// Reads stream `stream` whole, following `Stream-Next-Offset`.
async fn read_back(target: &Target, stream: usize) -> anyhow::Result<String> {
    let name = format!("soak{stream:03}");
    let mut placement = target.placement();
    let mut conn = Conn::to(&placement);
    let mut offset = "-1".to_owned();
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let uri = target.uri(&name, &format!("offset={offset}"));
        let (status, headers, body) = match call(&mut placement, &mut conn, Method::GET, &uri, Bytes::new(), &[]).await
        {
            Ok(answer) => answer,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                conn = Conn::to(&target.placement());
                placement = target.placement();
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("reading {name}")),
        };
        if !status.is_success() {
            anyhow::ensure!(Instant::now() < deadline, "reading {name} answered {status}");
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        text.push_str(std::str::from_utf8(&body).context("a text stream")?);
        let next = header_str(&headers, "stream-next-offset").ok_or_else(|| anyhow!("no Stream-Next-Offset"))?;
        let done = header_str(&headers, "stream-up-to-date").is_some() || body.is_empty();
        offset = next.to_owned();
        if done {
            return Ok(text);
        }
    }
}

/// The check of one stream's bytes against its acknowledged seqs.
#[derive(Default, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub acknowledged: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
    /// Records present that were never acknowledged (a write whose answer was lost): allowed once.
    pub unacknowledged_present: u64,
    pub damaged: u64,
}

pub fn check(stream: usize, text: &str, acked: &BTreeSet<u64>) -> Verdict {
    let mut v = Verdict { acknowledged: acked.len() as u64, ..Verdict::default() };
    let mut seen = BTreeSet::new();
    let mut last = None;
    let prefix = format!("s{stream:03} ");
    for line in text.lines() {
        let Some(seq) = line.strip_prefix(&prefix).and_then(|rest| rest.get(..9)).and_then(|s| s.parse::<u64>().ok())
        else {
            v.damaged += 1;
            continue;
        };
        if !seen.insert(seq) {
            v.duplicated += 1;
        }
        if last.is_some_and(|l| seq <= l) {
            v.out_of_order += 1;
        }
        last = Some(seq);
        if !acked.contains(&seq) {
            v.unacknowledged_present += 1;
        }
    }
    v.lost = acked.iter().filter(|s| !seen.contains(s)).count() as u64;
    v
}

pub async fn run(args: SoakArgs) -> anyhow::Result<bool> {
    let target = Target::resolve(&args.url, &args.path_template, "soak", None).await?;
    let started = Instant::now();
    let until = started + Duration::from_secs(args.duration);
    let counters = Arc::new(Counters::default());
    let producers: Vec<_> = (0..args.streams)
        .map(|s| tokio::spawn(produce(target.clone(), s, args.clone(), until, counters.clone())))
        .collect();
    let ticker = {
        let counters = counters.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(30)).await;
                eprintln!(
                    "[soak] {:>5} s: {} acknowledged, {} 503, {} transport errors",
                    started.elapsed().as_secs(),
                    counters.acknowledged.load(Relaxed),
                    counters.refused_503.load(Relaxed),
                    counters.transport_errors.load(Relaxed)
                );
            }
        })
    };
    let mut acked = Vec::new();
    for p in producers {
        acked.push(p.await??);
    }
    ticker.abort();
    let mut total = Verdict::default();
    for (stream, acked) in acked.iter().enumerate() {
        let text = read_back(&target, stream).await?;
        let v = check(stream, &text, acked);
        total.acknowledged += v.acknowledged;
        total.lost += v.lost;
        total.duplicated += v.duplicated;
        total.out_of_order += v.out_of_order;
        total.unacknowledged_present += v.unacknowledged_present;
        total.damaged += v.damaged;
    }
    let held = total.lost == 0 && total.duplicated == 0 && total.out_of_order == 0 && total.damaged == 0;
    let json = serde_json::json!({
        "seconds": started.elapsed().as_secs(),
        "streams": args.streams,
        "attempts": counters.attempts.load(Relaxed),
        "acknowledged": total.acknowledged,
        "lost": total.lost,
        "duplicated": total.duplicated,
        "out_of_order": total.out_of_order,
        "damaged": total.damaged,
        "unacknowledged_present": total.unacknowledged_present,
        "refused_503": counters.refused_503.load(Relaxed),
        "other_status": counters.other_status.load(Relaxed),
        "other_status_kinds": counters.other_kinds.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        "transport_errors": counters.transport_errors.load(Relaxed),
        "catch_up_reads": counters.reads.load(Relaxed),
        "verdict": if held { "held" } else { "VIOLATED" },
    });
    println!("{}", serde_json::to_string_pretty(&json)?);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json)? + "\n")?;
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_counts_lost_duplicated_out_of_order_and_damaged_records() {
        let acked: BTreeSet<u64> = [0, 1, 2, 3].into();
        let line = |s: u64| String::from_utf8(record(7, s, 3).to_vec()).expect("text");
        let good: String = [0, 1, 2, 3, 4].map(line).concat();
        let v = check(7, &good, &acked);
        assert_eq!(v, Verdict { acknowledged: 4, unacknowledged_present: 1, ..Verdict::default() });
        let bad = [line(0), line(2), line(1), line(2), "garbage\n".into()].concat();
        let v = check(7, &bad, &acked);
        assert_eq!((v.lost, v.duplicated, v.out_of_order, v.damaged), (1, 1, 1, 1), "{v:?}");
    }
}
