//! `connection-flood`: a well-behaved appender measured twice per round,
//! alone and while thousands of connections flood the server: idle ones
//! that never send a byte, and slow ones that send a request head one byte
//! per interval (slowloris). The figure that matters is the appender's p99
//! during the flood against without it, and how many flood connections the
//! server still held at the end (its timeouts close them).

use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::append::{self, AppendArgs};
use super::{Ctx, latency_figures};
use crate::client::Target;
use crate::report::{Better, Figure};
use crate::stats::{Sample, rate};

#[derive(Args, Clone, Debug)]
pub struct FloodArgs {
    #[command(flatten)]
    pub append: AppendArgs,
    /// Connections opened that never send a byte.
    #[arg(long, default_value_t = 2000)]
    pub idle: usize,
    /// Connections that send a request head one byte per --slow-interval-ms.
    #[arg(long, default_value_t = 500)]
    pub slow: usize,
    #[arg(long, default_value_t = 1000)]
    pub slow_interval_ms: u64,
}

impl FloodArgs {
    pub fn params(&self) -> Value {
        let mut p = self.append.params();
        if let Some(m) = p.as_object_mut() {
            m.insert("idle".into(), json!(self.idle));
            m.insert("slow".into(), json!(self.slow));
            m.insert("slow_interval_ms".into(), json!(self.slow_interval_ms));
        }
        p
    }
}

/// The flood of one round; dropping it closes every connection.
struct Flood {
    tasks: Vec<tokio::task::JoinHandle<bool>>,
    opened: usize,
}

impl Flood {
    async fn open(a: &FloodArgs, t: &Target) -> Flood {
        let addr = t.socket_addr();
        let mut tasks = Vec::with_capacity(a.idle + a.slow);
        let mut opened = 0;
        for i in 0..a.idle + a.slow {
            let Ok(tcp) = TcpStream::connect(addr).await else { continue };
            opened += 1;
            let slow = i >= a.idle;
            let interval = Duration::from_millis(a.slow_interval_ms.max(1));
            tasks.push(tokio::spawn(hold(tcp, slow, interval)));
        }
        Flood { tasks, opened }
    }

    /// Connections the server still holds open.
    fn still_open(&self) -> usize {
        self.tasks.iter().filter(|t| !t.is_finished()).count()
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Holds one flood connection until the server closes it (`true`: closed).
async fn hold(mut tcp: TcpStream, slow: bool, interval: Duration) -> bool {
    const HEAD: &[u8] = b"GET /loadtest/flood HTTP/1.1\r\nHost: flood\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut sent = 0usize;
    let mut buf = [0u8; 512];
    loop {
        tokio::select! {
            read = tokio::io::AsyncReadExt::read(&mut tcp, &mut buf) => {
                if matches!(read, Ok(0) | Err(_)) {
                    return true;
                }
            }
            () = tokio::time::sleep(interval), if slow => {
                let byte = HEAD.get(sent % HEAD.len()).copied().unwrap_or(b'a');
                if tcp.write_all(&[byte]).await.is_err() {
                    return true;
                }
                sent += 1;
            }
        }
    }
}

pub async fn setup(a: &FloodArgs, ctx: &Ctx, t: &Target) -> anyhow::Result<append::State> {
    append::setup(&a.append, ctx, t).await
}

pub async fn round(a: &FloodArgs, t: &Target, st: &append::State, round: u32) -> anyhow::Result<Sample> {
    let calm = append::round(&a.append, t, st, round).await?;
    let flood = Flood::open(a, t).await;
    let during = append::round(&a.append, t, st, round).await?;
    let mut s = Sample::default();
    s.add("flood_opened", flood.opened as f64);
    s.add("flood_still_open", flood.still_open() as f64);
    drop(flood);
    s.add("ops_calm", calm.counter("ops"));
    s.add("elapsed_calm", calm.counter("elapsed_s"));
    s.add("ops", during.counter("ops"));
    s.add("elapsed_s", during.counter("elapsed_s"));
    if let Some(h) = calm.histogram("latency") {
        s.hist("latency_calm").merge(h);
    }
    if let Some(h) = during.histogram("latency") {
        s.hist("latency").merge(h);
    }
    Ok(s)
}

pub fn figures(s: &Sample) -> Vec<Figure> {
    let p99 = |key: &str| s.histogram(key).and_then(|h| h.quantile_ms(0.99));
    let ratio = match (p99("latency"), p99("latency_calm")) {
        (Some(flood), Some(calm)) if calm > 0.0 => Some(flood / calm),
        _ => None,
    };
    let mut f = vec![
        Figure::new(
            "appends_per_s_calm",
            "appends/s alone",
            "",
            rate(s.counter("ops_calm"), s.counter("elapsed_calm")),
            Better::Higher,
        ),
        Figure::new(
            "appends_per_s",
            "appends/s in the flood",
            "",
            rate(s.counter("ops"), s.counter("elapsed_s")),
            Better::Higher,
        ),
    ];
    f.extend(latency_figures(
        s.histogram("latency_calm"),
        "latency_calm",
        "latency alone",
        &[(0.5, "p50"), (0.99, "p99")],
    ));
    f.extend(latency_figures(
        s.histogram("latency"),
        "latency",
        "latency in the flood",
        &[(0.5, "p50"), (0.99, "p99")],
    ));
    f.push(Figure::new("p99_ratio", "p99 in the flood / alone", "x", ratio, Better::Lower));
    f.push(Figure::new(
        "flood_opened",
        "flood connections opened",
        "",
        Some(s.counter("flood_opened")),
        Better::Neither,
    ));
    f.push(Figure::new(
        "flood_still_open",
        "flood connections held at the end",
        "",
        Some(s.counter("flood_still_open")),
        Better::Lower,
    ));
    f
}
