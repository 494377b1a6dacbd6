//! `sse-fanout`: R live SSE readers of one fresh stream, one writer at a fixed
//! rate. Each append carries `#SEQ,TS;` (see [`crate::sse`]); a reader records
//! now − TS for each first sighting of a sequence number, and counts
//! duplicates and, at the end, the sequence numbers it never saw. The writer
//! closes the stream when done, so readers end on `streamClosed`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName};
use http::{HeaderValue, Method};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore, watch};

use super::{Ctx, latency_figures};
use crate::client::{Conn, Target, create_at_leader, drain, header_str};
use crate::report::{Better, Figure};
use crate::sse::{Parser, json_str, json_true, payload, records};
use crate::stats::{Latency, Outcomes, Sample, Seen, now_us, rate};

#[derive(Args, Clone, Debug)]
pub struct FanoutArgs {
    /// Live SSE readers of the stream.
    #[arg(long, default_value_t = 1000)]
    pub readers: usize,
    /// Appends per second of the writer.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// Seconds of writing per round.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Size of each append (the record, padded), in bytes.
    #[arg(long, default_value_t = 64)]
    pub bytes: usize,
    /// Seconds readers may take after the last append to see everything.
    #[arg(long, default_value_t = 5.0)]
    pub grace: f64,
    /// Seconds allowed for all readers to connect.
    #[arg(long, default_value_t = 30.0)]
    pub connect_timeout: f64,
    /// Readers connecting at once.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
    /// Content type of the stream (a text type, so SSE data is not base64).
    #[arg(long, default_value = "text/plain")]
    pub content_type: String,
}

impl FanoutArgs {
    pub fn params(&self) -> Value {
        json!({
            "readers": self.readers, "rate_per_s": self.rate, "duration_s": self.duration, "bytes": self.bytes,
            "grace_s": self.grace, "content_type": self.content_type,
        })
    }
}

#[derive(Default)]
struct ReaderOut {
    hist: Latency,
    seen: Seen,
    connected: bool,
    closed: bool,
    reconnects: u64,
    events: u64,
    error: Option<String>,
}

struct Ready {
    count: AtomicUsize,
    notify: Notify,
}

impl Ready {
    fn done(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

#[allow(clippy::too_many_arguments)]
async fn reader(
    t: Target,
    name: Arc<String>,
    mut stop: watch::Receiver<bool>,
    gate: Arc<Semaphore>,
    ready: Arc<Ready>,
    deadline: Instant,
) -> ReaderOut {
    let mut out = ReaderOut::default();
    let mut conn = t.conn();
    let mut parser = Parser::default();
    let mut offset = String::from("-1");
    let mut attempts = 0;
    while !out.closed && !*stop.borrow() && Instant::now() < deadline {
        let permit = if out.connected { None } else { gate.acquire().await.ok() };
        let mut req = conn.request(Method::GET, t.uri(&name, &format!("offset={offset}&live=sse")), Bytes::new());
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let resp = match tokio::time::timeout_at(deadline.into(), conn.send(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                attempts += 1;
                out.error = Some(e.to_string());
                if attempts >= 5 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100 * attempts)).await;
                continue;
            }
            Err(_) => break,
        };
        drop(permit);
        if resp.status() != 200 {
            out.error = Some(format!("status {}", resp.status()));
            break;
        }
        if header_str(resp.headers(), "stream-sse-data-encoding") == Some("base64") {
            out.error = Some("server sends base64 data events; use a text/* content type".to_string());
            break;
        }
        if out.connected {
            out.reconnects += 1;
        } else {
            out.connected = true;
            ready.done();
        }
        let mut body = resp.into_body();
        loop {
            let frame = tokio::select! {
                biased;
                _ = stop.changed() => return out,
                f = body.frame() => f,
            };
            let Some(Ok(frame)) = frame else { break };
            let Ok(data) = frame.into_data() else { continue };
            let ReaderOut { hist, seen, closed, events, .. } = &mut out;
            parser.feed(&data, |event, payload| match event {
                b"data" => {
                    *events += 1;
                    let now = now_us();
                    records(payload, |seq, ts| {
                        if seen.insert(seq) {
                            hist.record(now.saturating_sub(ts));
                        }
                    });
                }
                b"control" => {
                    if let Some(next) = json_str(payload, "streamNextOffset").and_then(|o| std::str::from_utf8(o).ok())
                    {
                        offset.clear();
                        offset.push_str(next);
                    }
                    if json_true(payload, "streamClosed") {
                        *closed = true;
                    }
                }
                _ => {}
            });
            if out.closed {
                break;
            }
        }
    }
    if !out.connected {
        // Let the controller stop waiting for this reader.
        ready.done();
    }
    out
}

pub async fn round(a: &FanoutArgs, ctx: &Ctx, t: &Target, round: u32) -> anyhow::Result<Sample> {
    anyhow::ensure!(a.readers > 0 && a.rate > 0.0, "--readers and --rate must be positive");
    let name = Arc::new(ctx.name(format_args!("sse-{round}")));
    let ct = HeaderValue::from_str(&a.content_type)?;
    // The writer appends where the stream was created (a redirect names
    // its group's leader); the readers subscribe at the target.
    let (status, placement) = create_at_leader(t, t.uri(&name, ""), &ct).await?;
    anyhow::ensure!(status.is_success(), "{}: creating {name} answered {status}", t.label);
    let mut conn = Conn::to(&placement);

    let total = Duration::from_secs_f64(a.connect_timeout + a.duration + a.grace + 5.0);
    let deadline = Instant::now() + total;
    let (stop_tx, stop_rx) = watch::channel(false);
    let gate = Arc::new(Semaphore::new(a.connect_concurrency.max(1)));
    let ready = Arc::new(Ready { count: AtomicUsize::new(0), notify: Notify::new() });
    let connect_started = Instant::now();
    let readers: Vec<_> = (0..a.readers)
        .map(|_| tokio::spawn(reader(t.clone(), name.clone(), stop_rx.clone(), gate.clone(), ready.clone(), deadline)))
        .collect();
    // Wait until every reader has its response headers (or gave up).
    let connect_deadline = connect_started + Duration::from_secs_f64(a.connect_timeout);
    while ready.count.load(Ordering::SeqCst) < a.readers && Instant::now() < connect_deadline {
        let _ = tokio::time::timeout(Duration::from_millis(100), ready.notify.notified()).await;
    }
    let connect_s = connect_started.elapsed().as_secs_f64();
    // Let the servers settle their subscriptions before the first append.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The writer: appends at a fixed rate, each stamped when sent.
    let n = (a.rate * a.duration).round().max(1.0) as u64;
    let interval = Duration::from_secs_f64(1.0 / a.rate);
    let mut append_hist = Latency::new();
    let mut outcomes = Outcomes::default();
    let mut sent = 0u64;
    let write_start = Instant::now();
    for seq in 0..n {
        tokio::time::sleep_until((write_start + interval * seq as u32).into()).await;
        let before = Instant::now();
        let body = Bytes::from(payload(seq, now_us(), a.bytes));
        let mut req = conn.request(Method::POST, t.uri(&name, ""), body);
        req.headers_mut().insert(CONTENT_TYPE, ct.clone());
        match conn.call(req).await {
            Ok((status, _, _)) => {
                if outcomes.status(status.as_u16()) {
                    append_hist.record(before.elapsed().as_micros() as u64);
                }
            }
            Err(_) => outcomes.io += 1,
        }
        // Counted as sent whatever the answer: a failed append is missed too.
        sent += 1;
    }
    let write_s = write_start.elapsed().as_secs_f64();
    // Close the stream: readers end on the `streamClosed` control event.
    let mut req = conn.request(Method::POST, t.uri(&name, ""), Bytes::new());
    req.headers_mut().insert(HeaderName::from_static("stream-closed"), HeaderValue::from_static("true"));
    req.headers_mut().insert(CONTENT_TYPE, ct.clone());
    let closed_ok = match conn.send(req).await {
        Ok(resp) => {
            let ok = resp.status().is_success();
            let _ = drain(resp.into_body()).await;
            ok
        }
        Err(_) => false,
    };
    let grace_end = Instant::now() + Duration::from_secs_f64(a.grace);
    let mut s = Sample::default();
    let mut hist = Latency::new();
    let (mut connected, mut closed, mut missed, mut dups, mut reconnects, mut events, mut bogus) =
        (0, 0, 0, 0, 0, 0, 0);
    let mut first_error = None;
    let mut handles = readers;
    // Past the grace period, stop whoever is still reading.
    let stopper = tokio::spawn(async move {
        tokio::time::sleep_until(grace_end.into()).await;
        let _ = stop_tx.send(true);
    });
    for h in handles.drain(..) {
        let out = h.await?;
        hist.merge(&out.hist);
        connected += u64::from(out.connected);
        closed += u64::from(out.closed);
        missed += out.seen.missed(sent);
        dups += out.seen.dups;
        bogus += out.seen.bogus;
        reconnects += out.reconnects;
        events += out.events;
        if first_error.is_none() {
            first_error = out.error;
        }
    }
    stopper.abort();
    if let Some(e) = first_error {
        eprintln!("[sse-fanout] {}: a reader reported: {e}", t.label);
    }
    if !closed_ok {
        eprintln!("[sse-fanout] {}: closing the stream failed; readers were stopped after the grace period", t.label);
    }
    s.add("ops", hist.count() as f64);
    s.add("elapsed_s", write_s);
    s.add("sent", sent as f64);
    s.add("readers", a.readers as f64);
    s.add("readers_connected", connected as f64);
    s.add("readers_saw_close", closed as f64);
    s.add("expected", (sent * a.readers as u64) as f64);
    s.add("missed", missed as f64);
    s.add("duplicated", dups as f64);
    s.add("bogus", bogus as f64);
    s.add("reconnects", reconnects as f64);
    s.add("data_events", events as f64);
    s.add("connect_s", connect_s);
    outcomes.fold_into(&mut s);
    s.hist("delivery").merge(&hist);
    s.hist("append").merge(&append_hist);
    Ok(s)
}

pub fn figures(s: &Sample) -> Vec<Figure> {
    let mut f = latency_figures(
        s.histogram("delivery"),
        "delivery",
        "delivery",
        &[(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")],
    );
    // The p99 is the headline: put it first.
    f.swap(0, 1);
    let c = |k: &str| Some(s.counter(k));
    // Summed over rounds, like `readers`: a share of all reader sessions.
    let pct = |k: &str| rate(s.counter(k) * 100.0, s.counter("readers"));
    f.extend([
        Figure::new("missed", "missed events", "", c("missed"), Better::Lower),
        Figure::new("duplicated", "duplicated events", "", c("duplicated"), Better::Lower),
        Figure::new("delivered", "events delivered", "", c("ops"), Better::Higher),
        Figure::new("expected", "events expected", "", c("expected"), Better::Neither),
        Figure::new(
            "deliveries_per_s",
            "deliveries/s",
            "",
            rate(s.counter("ops"), s.counter("elapsed_s")),
            Better::Higher,
        ),
        Figure::new("readers_connected_pct", "readers connected", "%", pct("readers_connected"), Better::Higher),
        Figure::new(
            "readers_saw_close_pct",
            "readers that saw the close",
            "%",
            pct("readers_saw_close"),
            Better::Higher,
        ),
        Figure::new("reconnects", "reader reconnects", "", c("reconnects"), Better::Lower),
        Figure::new("data_events", "SSE data events", "", c("data_events"), Better::Neither),
        Figure::new("connect_s", "time to connect all readers (all rounds)", "s", c("connect_s"), Better::Lower),
        Figure::new("appends_sent", "appends sent", "", c("sent"), Better::Neither),
    ]);
    if s.counter("bogus") > 0.0 {
        f.push(Figure::new("bogus", "unparseable sequence numbers", "", c("bogus"), Better::Lower));
    }
    f.extend(latency_figures(s.histogram("append"), "append", "append latency", &[(0.5, "p50"), (0.99, "p99")]));
    f
}
