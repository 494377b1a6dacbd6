//! The S3 cold tier (issue 7) on three voters and a real S3-compatible
//! server (`s3s-fs` on loopback, driven by the voters' `aws-sdk-s3`): a
//! stream written past `max_hot_size_per_group` is flushed and reads back
//! byte for byte from both tiers on the leader and on followers, after a
//! full cluster restart too; with S3 down, appends commit until
//! backpressure answers `503 COLD_BACKPRESSURE`, cold reads answer `502
//! COLD_STORE_FAILED`, and once S3 is back nothing acknowledged is lost. A
//! damaged object is an error on the read, never wrong bytes.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::{Fault, S3Server};
use crate::support::{Node, offset, pattern};

pub const S: &str = "/cold/s";
pub const BIN: &str = "application/octet-stream";
const PIECE: usize = 8 * 1024;
pub const PATIENCE: Duration = Duration::from_secs(60);
pub const FLUSH: &str = "flush_interval = \"100ms\"\nflush_size = \"64KiB\"\nmax_hot_size_per_group = \"256KiB\"\n";

/// Three voters of one group on the cold tier of `s3`, configured by `section`.
pub fn cluster(id: &str, section: String) -> (Layout, Vec<Option<Node>>) {
    let mut layout = Layout::new(3, id, 1, Planes::Shared);
    layout.sections = section;
    let voters = (0..3).map(|i| Some(layout.start(i))).collect();
    (layout, voters)
}

pub async fn metric(node: &Node, name: &str) -> u64 {
    let m = node.get("/__ursula/metrics").send().await.expect(200).json();
    m[name].as_u64().unwrap_or_else(|| panic!("no {name} in {m}"))
}

/// Appends `body` in pieces, waiting out `COLD_BACKPRESSURE`; returns how
/// many refusals it met.
pub async fn append_all(node: &Node, body: &[u8]) -> usize {
    let mut refusals = 0;
    for piece in body.chunks(PIECE) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let answer = node.post(S).content_type(BIN).body(piece.to_vec()).send().await;
            if answer.status == 204 {
                break;
            }
            answer.expect_error(503, "COLD_BACKPRESSURE").expect_header("retry-after", "1");
            refusals += 1;
            assert!(Instant::now() < deadline, "the flush never caught up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    refusals
}

/// Every byte from `from` to the tail, request by request.
async fn read_from(node: &Node, from: u64, max_bytes: u64) -> Vec<u8> {
    read_to_tail(node, S, offset(from), max_bytes).await
}

/// Every byte of `path` from offset `next` (`-1`: its start) to its tail,
/// in requests of at most `max_bytes`.
pub async fn read_to_tail(node: &Node, path: &str, mut next: String, max_bytes: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let answer = node.get(&format!("{path}?offset={next}&max_bytes={max_bytes}")).send().await;
        answer.expect(200);
        out.extend_from_slice(&answer.body);
        next = answer.must("stream-next-offset").to_string();
        if answer.header("stream-up-to-date") == Some("true") {
            return out;
        }
    }
}

pub async fn wait_flushed(node: &Node, at_least: u64) {
    let deadline = Instant::now() + PATIENCE;
    while metric(node, "cold_bytes_flushed").await < at_least {
        assert!(Instant::now() < deadline, "nothing reached the cold tier");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads from the start and from inside cold objects, in small and large
/// requests, and compares with what was written.
async fn check_reads(node: &Node, body: &[u8]) {
    assert!(read_from(node, 0, 8 * 1024 * 1024).await == body, "{}: the whole stream", node.base());
    let from = 12_345u64;
    assert!(read_from(node, from, 5_000).await == body[from as usize..], "{}: from inside a cold span", node.base());
    let ranged = node.get(&format!("{S}?offset={}&max_bytes=5000", offset(70_001))).send().await;
    ranged.expect(200);
    assert!(ranged.body == body[70_001..75_001], "{}: one ranged read", node.base());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_past_the_hot_ceiling_reads_back_from_both_tiers_everywhere_and_after_a_restart() {
    let s3 = S3Server::start().await;
    let (layout, mut voters) = cluster("cold-reads", s3.cold_section(FLUSH));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1 leads the group it initialized");
    leader.create(S, BIN).await;
    let body = pattern(1_200_000);
    let refusals = append_all(leader, &body).await;
    wait_flushed(leader, 900_000).await;
    assert!(!s3.files_with("seg").is_empty(), "objects in the bucket");
    assert!(metric(leader, "hot_bytes").await < 1_200_000);
    eprintln!("backpressure refusals while writing: {refusals}");
    for v in voters.iter().flatten() {
        check_reads(v, &body).await;
    }

    // A full cluster restart: the cold references come back from the WALs.
    for v in voters.iter_mut() {
        v.take().expect("a voter").kill9();
    }
    for (i, v) in voters.iter_mut().enumerate() {
        *v = Some(layout.start(i));
    }
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    // A replica that has not applied the create again confirms through the
    // leader instead of answering 404.
    for v in voters.iter().take(2).flatten() {
        check_reads(v, &body).await;
    }

    // A damaged object is refused, never served: node 3 has cached nothing
    // since its restart.
    let mut files = s3.files_with("seg");
    files.sort();
    let victim = files.first().expect("an object");
    let len = std::fs::metadata(victim).expect("metadata").len() as usize;
    std::fs::write(victim, vec![0xAB; len]).expect("damaging an object");
    let third = voters[2].as_ref().expect("node 3");
    let read = third.get(&format!("{S}?offset=-1")).send().await;
    read.expect_error(502, "COLD_STORE_FAILED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_s3_down_appends_meet_backpressure_and_nothing_is_lost_once_it_returns() {
    let mut s3 = S3Server::start().await;
    let (_layout, voters) = cluster("cold-outage", s3.cold_section(FLUSH));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1");
    leader.create(S, BIN).await;
    let mut written = pattern(400_000);
    append_all(leader, &written).await;
    wait_flushed(leader, 100_000).await;

    s3.stop();
    // Cold bytes cannot be read now, and say so.
    let follower = voters[1].as_ref().expect("node 2");
    follower.get(&format!("{S}?offset=-1")).send().await.expect_error(502, "COLD_STORE_FAILED");
    // Appends commit until the hot ring is full, then wait for the flush.
    let mut refused = false;
    for i in 0..200u32 {
        let piece = vec![(i % 251) as u8; PIECE];
        let answer = leader.post(S).content_type(BIN).body(piece.clone()).send().await;
        if answer.status == 503 {
            answer.expect_error(503, "COLD_BACKPRESSURE");
            refused = true;
            break;
        }
        answer.expect(204);
        written.extend_from_slice(&piece);
    }
    assert!(refused, "backpressure while S3 is down");
    // The refusals under spec/38's names: in all, and in the stream's group (the only one).
    let m = leader.get("/__ursula/metrics").send().await.expect(200).json();
    assert!(m["cold_backpressure_events"].as_u64() >= Some(1), "{m}");
    assert_eq!(m["per_group_cold_backpressure_events"][0], m["cold_backpressure_events"], "{m}");
    assert!(m["per_group_cold_hot_bytes"][0].as_u64() > Some(0), "{m}");
    let deadline = Instant::now() + PATIENCE;
    while metric(leader, "cold_upload_failures").await == 0 {
        assert!(Instant::now() < deadline, "no failed upload counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    s3.start_again().await;
    let more = pattern(300_000);
    append_all(leader, &more).await;
    written.extend_from_slice(&more);
    wait_flushed(leader, 600_000).await;
    for v in voters.iter().flatten() {
        assert!(read_from(v, 0, 8 * 1024 * 1024).await == written, "{}: everything acknowledged", v.base());
    }
}

/// Appends 8 KiB pieces until the hot ceiling refuses one (`503
/// COLD_BACKPRESSURE`), adding what was acknowledged to `written`.
async fn append_until_refused(node: &Node, written: &mut Vec<u8>) {
    for i in 0..400u32 {
        let piece = vec![(i % 251) as u8; PIECE];
        let answer = node.post(S).content_type(BIN).body(piece.clone()).send().await;
        if answer.status == 503 {
            answer.expect_error(503, "COLD_BACKPRESSURE");
            return;
        }
        answer.expect(204);
        written.extend_from_slice(&piece);
    }
    panic!("no backpressure while S3 is broken");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_that_hangs_or_answers_500_holds_writes_back_and_loses_nothing() {
    let mut s3 = S3Server::start().await;
    // No cache: every cold read asks the store.
    let section = s3.cold_section_timed(&format!("{FLUSH}cache_size = \"0\"\n"), "1s");
    let (_layout, voters) = cluster("cold-faults", section);
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1");
    let follower = voters[1].as_ref().expect("node 2");
    leader.create(S, BIN).await;
    let mut written = pattern(300_000);
    append_all(leader, &written).await;
    wait_flushed(leader, 100_000).await;
    for fault in [Fault::Hang, Fault::Fail] {
        s3.misbehave(fault).await;
        let failures = metric(leader, "cold_upload_failures").await;
        let read = follower.get(&format!("{S}?offset=-1")).send().await;
        read.expect_error(502, "COLD_STORE_FAILED");
        append_until_refused(leader, &mut written).await;
        let deadline = Instant::now() + PATIENCE;
        while metric(leader, "cold_upload_failures").await == failures {
            assert!(Instant::now() < deadline, "{fault:?}: no failed upload counted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        s3.start_again().await;
        let flushed = metric(leader, "cold_bytes_flushed").await;
        let more = pattern(100_000);
        append_all(leader, &more).await;
        written.extend_from_slice(&more);
        wait_flushed(leader, flushed + 100_000).await;
        for v in voters.iter().flatten() {
            assert!(
                read_from(v, 0, 8 * 1024 * 1024).await == written,
                "{fault:?}, {}: everything acknowledged",
                v.base()
            );
        }
    }
}

fn seg_files(s3: &S3Server) -> std::collections::BTreeSet<std::path::PathBuf> {
    s3.files_with("seg").into_iter().collect()
}

/// `POST /__ursula/flush-cold/...` on voter 1's admin plane, with the
/// process incarnation its metrics report.
async fn force_flush(http: &reqwest::Client, admin: &str) -> u64 {
    let url = format!("{admin}/__ursula/flush-cold/cold/s");
    let metrics = http.get(format!("{admin}/__ursula/metrics")).send().await.expect("metrics");
    let metrics: serde_json::Value = serde_json::from_slice(&metrics.bytes().await.expect("body")).expect("JSON");
    let incarnation = metrics["process_incarnation"].as_str().expect("process_incarnation").to_string();
    let missing = http.post(&url).send().await.expect("flush");
    assert_eq!(missing.status(), 428, "an admin mutation without the process incarnation");
    let stale = http.post(&url).header("x-ursula-process-incarnation", "0").send().await.expect("flush");
    assert_eq!(stale.status(), 412, "an admin mutation for another process");
    let done = http.post(&url).header("x-ursula-process-incarnation", incarnation).send().await.expect("flush");
    assert_eq!(done.status(), 200);
    let body: serde_json::Value = serde_json::from_slice(&done.bytes().await.expect("body")).expect("JSON");
    body["flushed_bytes"].as_u64().expect("flushed_bytes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_deletes_a_deleted_streams_objects_and_keeps_its_recreations() {
    let s3 = S3Server::start().await;
    let mut layout = Layout::new(3, "cold-gc", 1, Planes::Shared);
    // Flushes only when forced: the threshold is far above what is written.
    layout.sections = s3.cold_section("flush_interval = \"100ms\"\nflush_size = \"64MiB\"\ngc_grace = \"1s\"\n");
    let admin_ports: Vec<u16> = (0..3).map(|_| crate::support::cluster::free_port()).collect();
    let admin = format!("http://127.0.0.1:{}", admin_ports[0]);
    layout.admin = Some(admin_ports);
    let voters: Vec<Node> = (0..3).map(|i| layout.start(i)).collect();
    for v in &voters {
        wait_ready(v).await;
    }
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    let leader = &voters[0];
    leader.create(S, BIN).await;
    append_all(leader, &pattern(300_000)).await;
    assert_eq!(force_flush(&http, &admin).await, 300_000);
    let old = seg_files(&s3);
    assert!(!old.is_empty(), "the forced flush wrote objects");

    leader.delete(S).send().await.expect(204);
    leader.create(S, BIN).await;
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 13) as u8).collect();
    append_all(leader, &body).await;
    assert_eq!(force_flush(&http, &admin).await, 200_000);
    let deadline = Instant::now() + PATIENCE;
    while seg_files(&s3).iter().any(|f| old.contains(f)) {
        assert!(Instant::now() < deadline, "the deleted stream's objects were never collected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Counted on whichever voter led the group when its GC pass ran.
    let mut deleted = 0;
    for v in &voters {
        deleted += metric(v, "cold_gc_deleted").await;
    }
    assert!(deleted >= old.len() as u64, "GC deleted {deleted} of {} objects", old.len());
    assert!(!seg_files(&s3).is_empty(), "the recreated stream's objects stay");
    for v in &voters {
        assert!(read_from(v, 0, 8 * 1024 * 1024).await == body, "{}: the recreated stream", v.base());
    }
}

/// The development node with the in-memory cold store, flushing every
/// 100 ms, with `keys` added to `[storage.cold]`.
fn memory_cold_node(keys: &str) -> Node {
    let dir = tempfile::tempdir().expect("a directory");
    let config = dir.path().join("ursula.toml");
    let text = format!("[storage.cold]\nbackend = \"memory\"\nflush_interval = \"100ms\"\n{keys}");
    std::fs::write(&config, text).expect("config");
    let args: Vec<String> = ["server", "--preset", "default", "--listen", "127.0.0.1:0", "--config"]
        .into_iter()
        .map(String::from)
        .chain([config.display().to_string()])
        .collect();
    Node::spawn(&args, Some(dir))
}

/// The development node with the in-memory cold store: a stream's hot tail
/// older than `flush_max_hot_age` is flushed whole although its group is far
/// below `flush_size`, and reads back the same.
#[tokio::test]
async fn an_old_hot_tail_is_flushed_whole_below_the_flush_size() {
    let node = memory_cold_node("flush_size = \"64MiB\"\nflush_max_hot_age = \"300ms\"\n");
    node.create(S, BIN).await;
    let body = pattern(10_000);
    append_all(&node, &body).await;
    wait_flushed(&node, 10_000).await;
    let deadline = Instant::now() + PATIENCE;
    while metric(&node, "hot_bytes").await != 0 {
        assert!(Instant::now() < deadline, "the whole tail goes cold");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(read_from(&node, 0, 3_000).await == body);
}

/// spec/07's split of `flush_size`: below `flush_min_hot_size` a group is
/// not flushed; past it a tick takes about `flush_max_size` of it.
#[tokio::test]
async fn the_flush_threshold_and_batch_size_split() {
    let node = memory_cold_node("flush_min_hot_size = \"256KiB\"\nflush_max_size = \"64KiB\"\n");
    node.create(S, BIN).await;
    // 200 KiB: below the threshold, several ticks pass and nothing flushes.
    append_all(&node, &pattern(200 * 1024)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(metric(&node, "cold_bytes_flushed").await, 0, "below flush_min_hot_size");
    // Past it, one tick takes about 64 KiB (whole 8 KiB appends); the 236
    // KiB left are below the threshold again, so nothing more goes.
    append_all(&node, &pattern(100 * 1024)).await;
    wait_flushed(&node, 1).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let flushed = metric(&node, "cold_bytes_flushed").await;
    assert!((64 * 1024..=72 * 1024).contains(&flushed), "one batch of about flush_max_size: {flushed}");
    assert_eq!(metric(&node, "cold_hot_bytes").await, 300 * 1024 - flushed);
}
