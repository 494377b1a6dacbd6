//! `ursula-loadtest otlp-sink`: an OTLP/HTTP endpoint on loopback that takes
//! what it is sent and counts it, so a benchmark of telemetry export has a
//! receiver on the same machine that costs little of its own.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

#[derive(Default)]
struct Received {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// Serves on `listen` until killed, printing what arrived every few seconds.
pub async fn serve(listen: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("otlp listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let received: Arc<Received> = Arc::default();
    let report = received.clone();
    tokio::spawn(async move {
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let requests = report.requests.load(Relaxed);
            if requests != last {
                last = requests;
                println!("otlp received {requests} requests, {} bytes", report.bytes.load(Relaxed));
                let _ = std::io::stdout().flush();
            }
        }
    });
    loop {
        let (tcp, _) = listener.accept().await?;
        let received = received.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let received = received.clone();
                async move {
                    let body = req.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
                    received.requests.fetch_add(1, Relaxed);
                    received.bytes.fetch_add(body.len() as u64, Relaxed);
                    // An empty export answer (every field of it is optional).
                    hyper::Response::builder()
                        .header("content-type", "application/x-protobuf")
                        .body(Full::new(bytes::Bytes::new()))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}
