//! Cold compaction (spec/07 `storage.cold.compaction_enabled`) on a voter
//! and a real S3-compatible server: a JSON stream flushed in many small
//! packs is rewritten into one object of its own, reads (whole, from inside,
//! after a kill -9) return the same bytes, and the packs it left are
//! collected.

use std::time::{Duration, Instant};

use crate::cold::{metric, read_to_tail};
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::S3Server;

const S: &str = "/compact/s";
const JSON: &str = "application/json";
const PATIENCE: Duration = Duration::from_secs(60);
/// As many flushes as a stream holds before its packs are rewritten, so
/// the first pass that finds it due finds every one of them.
const FLUSHES: usize = 64;

/// `POST /__ursula/flush-cold/compact/s` on the admin plane `admin`:
/// the bytes it flushed.
async fn flush(http: &reqwest::Client, admin: &str) -> u64 {
    let metrics = http.get(format!("{admin}/__ursula/metrics")).send().await.expect("metrics");
    let metrics: serde_json::Value = serde_json::from_slice(&metrics.bytes().await.expect("body")).expect("JSON");
    let incarnation = metrics["process_incarnation"].as_str().expect("process_incarnation").to_string();
    let url = format!("{admin}/__ursula/flush-cold/compact/s");
    let done = http.post(&url).header("x-ursula-process-incarnation", incarnation).send().await.expect("flush");
    assert_eq!(done.status(), 200);
    let body: serde_json::Value = serde_json::from_slice(&done.bytes().await.expect("body")).expect("JSON");
    body["flushed_bytes"].as_u64().expect("flushed_bytes")
}

fn segs(s3: &S3Server) -> usize {
    s3.files_with("seg").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_flushed_in_many_small_packs_is_rewritten_and_reads_the_same() {
    let s3 = S3Server::start().await;
    let mut layout = Layout::new(1, "compaction", 1, Planes::Shared);
    // Flushed only when forced (far below the size, never by age); the GC
    // deletes what stayed unreferenced a second.
    layout.sections = s3.cold_section(
        "flush_interval = \"100ms\"\nflush_size = \"64MiB\"\nflush_max_hot_age = \"0s\"\ngc_grace = \"1s\"\n",
    );
    let admin = format!("http://127.0.0.1:{}", layout.admin.as_ref().expect("admin ports")[0]);
    let node = layout.start(0);
    crate::cluster::wait_ready(&node).await;
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    node.create(S, JSON).await;
    let mut middle = String::new();
    for i in 0..FLUSHES {
        let message = format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 7 * 10));
        node.post(S).content_type(JSON).body(message.into_bytes()).send().await.expect(204);
        assert!(flush(&http, &admin).await > 0, "flush {i}");
        if i == 9 {
            middle = node.head(S).send().await.must("stream-next-offset").to_string();
        }
    }
    let whole = read_to_tail(&node, S, "-1".into(), 1 << 20).await;
    let from_middle = read_to_tail(&node, S, middle.clone(), 300).await;
    assert_eq!(segs(&s3), FLUSHES, "one pack per flush");

    let deadline = Instant::now() + PATIENCE;
    while metric(&node, "cold_compactions").await == 0 {
        assert!(Instant::now() < deadline, "no compaction ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(metric(&node, "cold_compacted_spans").await, FLUSHES as u64, "every span was debt");
    assert_eq!(metric(&node, "cold_compactions_stale").await, 0);
    // The packs go once unreferenced: the compacted object stays alone.
    let deadline = Instant::now() + PATIENCE;
    while segs(&s3) != 1 {
        assert!(Instant::now() < deadline, "{} objects stayed", segs(&s3));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(read_to_tail(&node, S, "-1".into(), 1 << 20).await, whole, "the whole stream");
    assert_eq!(read_to_tail(&node, S, middle.clone(), 300).await, from_middle, "from inside, in small reads");

    // The moves are in the log: after a kill -9 the replayed state reads the same.
    node.kill9();
    let node = layout.start(0);
    crate::cluster::wait_ready(&node).await;
    assert_eq!(read_to_tail(&node, S, "-1".into(), 1 << 20).await, whole, "after a restart");
    assert_eq!(read_to_tail(&node, S, middle, 300).await, from_middle);
}
