//! Cold reads by block (issue 24): a small read of a large cold span
//! fetches only the blocks it needs, checked against the span's digest
//! through the object's block table; a damaged block fails the reads that
//! touch it and no other, never with wrong bytes. A catch-up finds the
//! spans after each read fetched ahead.

use crate::cluster::wait_ready;
use crate::cold::{BIN, S, append_all, metric, wait_flushed};
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::S3Server;
use crate::support::{Node, offset};

const BLOCK: u64 = 64 * 1024;
/// Spans of about 1 MiB, nothing cached: every read goes to the store.
const FLUSH: &str =
    "flush_interval = \"100ms\"\nflush_size = \"1MiB\"\nmax_hot_size_per_group = \"8MiB\"\ncache_size = \"0\"\n";

/// One voter on `s3` with `section`, a stream of 1.5 MB of random bytes
/// written and at least 1 MB of it flushed; the layout (which owns the
/// node's directory: the node's free-space check fails once it is gone),
/// the node and the bytes.
async fn flushed_stream(s3: &S3Server, id: &str, section: &str) -> (Layout, Node, Vec<u8>) {
    let mut layout = Layout::new(1, id, 1, Planes::Shared);
    layout.sections = s3.cold_section(section);
    let node = layout.start(0);
    wait_ready(&node).await;
    node.create(S, BIN).await;
    let body: Vec<u8> = {
        let mut rng = fastrand::Rng::with_seed(24);
        (0..1_500_000).map(|_| rng.u8(..)).collect()
    };
    append_all(&node, &body).await;
    wait_flushed(&node, 1_000_000).await;
    (layout, node, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_read_of_a_large_span_fetches_its_blocks_and_a_damaged_block_fails_only_its_reads() {
    let s3 = S3Server::start().await;
    let (_layout, node, body) = flushed_stream(&s3, "cold-blocks", FLUSH).await;

    let (fetched, ranged) = (metric(&node, "cold_bytes_fetched").await, metric(&node, "cold_ranged_fetches").await);
    let read = node.get(&format!("{S}?offset={}&max_bytes=5000", offset(300_000))).send().await;
    read.expect(200);
    assert!(read.body == body[300_000..305_000], "the bytes of a ranged read");
    let more = metric(&node, "cold_bytes_fetched").await - fetched;
    assert!(more <= 2 * BLOCK, "a 5,000-byte read fetched {more} bytes of a 1 MiB span");
    assert!(metric(&node, "cold_ranged_fetches").await > ranged, "it was a ranged fetch");

    // Damage one byte inside the fourth block of the first span of the
    // largest object (after its header and table).
    let mut files = s3.files_with("seg");
    files.sort_by_key(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0));
    let victim = files.last().expect("an object");
    let mut raw = std::fs::read(victim).expect("the object");
    assert_eq!(&raw[..8], b"ursblk1\n", "an object opens with its block table");
    let table_len = u64::from_le_bytes(raw[8..16].try_into().expect("8 bytes"));
    let at = (16 + table_len + 3 * BLOCK + 10) as usize;
    raw[at] ^= 0xFF;
    std::fs::write(victim, raw).expect("damaging the object");

    // Every byte read again in small reads: those of the damaged block fail,
    // every other read answers the bytes written.
    let mut failed = Vec::new();
    for from in (0..body.len() as u64).step_by(5_000) {
        let read = node.get(&format!("{S}?offset={}&max_bytes=5000", offset(from))).send().await;
        if read.status == 502 {
            read.expect_error(502, "COLD_STORE_FAILED");
            failed.push(from);
            continue;
        }
        read.expect(200);
        let end = (from as usize + read.body.len()).min(body.len());
        assert!(read.body == body[from as usize..end], "the bytes at {from}");
    }
    assert!(!failed.is_empty(), "some read touched the damaged block");
    let spread = failed.last().unwrap_or(&0) - failed.first().unwrap_or(&0);
    assert!(spread <= BLOCK, "only the reads of one block failed: {failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_cache_a_read_fetches_the_blocks_after_it_ahead_of_the_next_read() {
    let s3 = S3Server::start().await;
    let section = FLUSH.replace("cache_size = \"0\"", "cache_size = \"64MiB\"");
    let (_layout, node, body) = flushed_stream(&s3, "cold-ahead", &section).await;
    let first = node.get(&format!("{S}?offset={}&max_bytes=5000", offset(100_000))).send().await;
    first.expect(200);
    assert!(first.body == body[100_000..105_000]);
    let deadline = std::time::Instant::now() + crate::cold::PATIENCE;
    while metric(&node, "cold_read_ahead_fetches").await == 0 || metric(&node, "cold_read_ahead_in_flight").await > 0 {
        assert!(std::time::Instant::now() < deadline, "no read-ahead started and ended");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The read-ahead landed in the cache: the next reads fetch nothing more.
    let fetched = metric(&node, "cold_bytes_fetched").await;
    for from in [140_000u64, 200_000, 400_000] {
        let next = node.get(&format!("{S}?offset={}&max_bytes=5000", offset(from))).send().await;
        next.expect(200);
        assert!(next.body == body[from as usize..from as usize + 5000], "the bytes at {from}");
    }
    assert_eq!(metric(&node, "cold_bytes_fetched").await, fetched, "the later reads came from the read-ahead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_finds_each_next_span_read_ahead() {
    let s3 = S3Server::start().await;
    let section = FLUSH
        .replace("flush_size = \"1MiB\"", "flush_size = \"256KiB\"")
        .replace("cache_size = \"0\"", "cache_size = \"64MiB\"");
    let (_layout, node, body) = flushed_stream(&s3, "cold-catch-up", &section).await;
    // Five spans of 256 KiB (appends of 8 KiB); the rest stays hot.
    wait_flushed(&node, 5 * 256 * 1024).await;
    let cold = metric(&node, "cold_bytes_flushed").await as usize;
    assert_eq!(cold, 5 * 256 * 1024);
    let settled = || async {
        let deadline = std::time::Instant::now() + crate::cold::PATIENCE;
        while metric(&node, "cold_read_ahead_in_flight").await > 0 {
            assert!(std::time::Instant::now() < deadline, "a read-ahead never ended");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    // Reads of about a span each, from the start through the cold bytes.
    let (mut at, mut reads, mut first) = (0usize, 0, None);
    while at < cold {
        let read = node.get(&format!("{S}?offset={}&max_bytes=300000", offset(at as u64))).send().await;
        read.expect(200);
        assert!(read.body == body[at..at + read.body.len()], "the bytes at {at}");
        at += read.body.len();
        reads += 1;
        settled().await;
        if first.is_none() {
            first = Some((metric(&node, "cold_fetches").await, metric(&node, "cold_read_ahead_fetches").await));
        }
    }
    let (fetches, ahead) = first.expect("a read");
    assert!(reads >= 3, "{reads} reads");
    let later_fetches = metric(&node, "cold_fetches").await - fetches;
    let later_ahead = metric(&node, "cold_read_ahead_fetches").await - ahead;
    assert!(later_ahead > 0, "the spans after each read were fetched ahead");
    assert_eq!(later_fetches, later_ahead, "after the first read, every fetch was a read-ahead");
    // The blocks the first read took of its last span are fetched again
    // with the rest of it; nothing else twice.
    let fetched = metric(&node, "cold_bytes_fetched").await as usize;
    assert!(fetched <= cold + 300_000, "{fetched} bytes fetched for {cold} cold ones");
}
