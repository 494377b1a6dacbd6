//! Snapshot upload in parts on the S3 cold tier (issue 7, spec/30 "Upload
//! in parts", "Staged parts"): a 100 MiB snapshot in parts read back with
//! ranges on every voter; the staged-parts bound answers `429
//! STAGED_PARTS_LIMIT` before a body is read; a stream's delete takes its
//! parts along, and the orphan sweep reclaims parts past their grace.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::cold::{BIN, FLUSH, PATIENCE, S, cluster, metric};
use crate::support::s3::{BUCKET, S3Server};
use crate::support::{Node, offset, pattern};

const PART: usize = 25 * 1024 * 1024;

/// Stages `body` at `snapshot_offset` as one part; returns the part id.
async fn stage(node: &Node, at: &str, body: Vec<u8>) -> String {
    let staged = node.post(&format!("{S}/snapshot/{at}/parts")).body(body).send().await;
    staged.expect(201);
    staged.must("stream-snapshot-part").to_string()
}

/// Commits the parts `ids` as the snapshot at byte `at` with `digest`.
async fn commit_parts(node: &Node, at: u64, ids: &[String], digest: &str) -> crate::support::Answer {
    node.put(&format!("{S}/snapshot/{}", offset(at)))
        .content_type(BIN)
        .header("stream-snapshot-parts", ids.len().to_string())
        .header("stream-snapshot-digest", digest)
        .body(ids.iter().map(|id| format!("{id}\n")).collect::<String>())
        .send()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mib_snapshot_goes_up_in_parts_and_reads_back_with_ranges() {
    let s3 = S3Server::start().await;
    // A 100 MiB PUT of a debug build needs more than the outage tests' 2 s.
    let (_layout, voters) = cluster("cold-parts", s3.cold_section_timed(FLUSH, "60s"));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1");
    leader.create(S, BIN).await;
    leader.append(S, BIN, "0123456789").await;
    leader.head(S).send().await.expect(200).expect_header("ursula-max-snapshot-bytes", "1073741824");
    let at = offset(10);

    // A 2 MiB snapshot in one request goes to the cold tier whole.
    let single = pattern(2 * 1024 * 1024);
    leader.publish(S, &offset(5), BIN, single.clone()).await;
    let read = voters[1].as_ref().expect("node 2").get(&format!("{S}/snapshot/{}", offset(5))).send().await;
    assert!(read.expect(200).body == single, "a follower reads the cold snapshot body");

    let body: Vec<u8> = (0..4 * PART).map(|i| ((i / 7) % 251) as u8).collect();
    let digest = crate::support::snapshot_digest(BIN, &body);
    let mut ids = Vec::new();
    for piece in body.chunks(PART) {
        ids.push(stage(leader, &at, piece.to_vec()).await);
    }
    // Refusals that copy nothing keep the parts for a corrected commit.
    let unknown = ["0000000000000000-0000000000000000.part".to_string()];
    let with_unknown: Vec<String> = unknown.iter().chain(&ids).cloned().collect();
    commit_parts(leader, 10, &with_unknown, &digest).await.expect_error(400, "UNKNOWN_PART");
    let short = leader
        .put(&format!("{S}/snapshot/{at}"))
        .content_type(BIN)
        .header("stream-snapshot-parts", "3")
        .header("stream-snapshot-digest", &digest)
        .body(ids.iter().map(|id| format!("{id}\n")).collect::<String>())
        .send()
        .await;
    short.expect_error(400, "INVALID_PARTS_COMMIT");
    commit_parts(leader, 10, &ids, &digest).await.expect(204).expect_header("stream-snapshot-digest", &digest);
    // A repeat answers from the key, after the parts are gone.
    commit_parts(leader, 10, &ids, &digest).await.expect(204);
    assert!(s3.files_with("part").is_empty(), "the commit deleted its parts");

    for v in voters.iter().flatten() {
        let path = format!("{S}/snapshot/{at}");
        let first = v.get(&path).header("range", "bytes=0-99").send().await;
        first.expect(206).expect_header("content-range", &format!("bytes 0-99/{}", body.len()));
        assert!(first.body == body[..100]);
        let (lo, hi) = (PART - 50, PART + 49);
        let across = v.get(&path).header("range", format!("bytes={lo}-{hi}")).send().await;
        assert!(across.expect(206).body == body[lo..=hi], "{}: a range across two parts", v.base());
        let tail = v.get(&path).header("range", "bytes=-10").send().await;
        assert!(tail.expect(206).body == body[body.len() - 10..]);
    }

    // A digest that differs is refused, and a discard empties what is staged.
    let spare = stage(leader, &offset(10), vec![1; 10]).await;
    let other = crate::support::snapshot_digest(BIN, b"other");
    commit_parts(leader, 10, &[spare], &other).await.expect_error(409, "SNAPSHOT_CONFLICT");
    leader.append(S, BIN, "abcdefghij").await;
    let later = stage(leader, &offset(20), vec![3; 10]).await;
    commit_parts(leader, 20, &[later], &other).await.expect_error(400, "SNAPSHOT_DIGEST_MISMATCH");
    stage(leader, &at, vec![2; 10]).await;
    leader.delete(&format!("{S}/snapshot/parts")).send().await.expect(204);
    assert!(s3.files_with("part").is_empty(), "the discard deleted the staged parts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_holds_at_most_8192_unused_parts_and_a_discard_frees_them() {
    let s3 = S3Server::start().await;
    // Counting the 8,192 parts lists them in nine pages, and the test S3
    // server reads its directory for each: on a loaded host one page can
    // outlast the default 2 s attempt (a 502 before the limit is reached).
    let (_layout, voters) = cluster("parts-bound", s3.cold_section_timed(FLUSH, "20s"));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1");
    leader.create(S, BIN).await;
    let incarnation = leader.head(S).send().await.expect(200).must("stream-incarnation").to_string();
    // 8,192 parts staged earlier (by an abandoned upload), written straight
    // into the S3 server's directory before the node first counts them.
    // Under the bucket's erasure domain: `{root}/buckets/{bucket}/parts/{stream}/{incarnation}/`.
    let (bucket, stream) = S.trim_start_matches('/').split_once('/').expect("bucket/stream");
    let dir = s3.dir.path().join(BUCKET).join(format!("it/buckets/{bucket}/parts/{stream}/{incarnation}"));
    std::fs::create_dir_all(&dir).expect("the parts directory");
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis();
    for i in 0..8192u64 {
        std::fs::write(dir.join(format!("{now_ms:016x}-{i:016x}.part")), b"x").expect("a staged part");
    }
    let refused = leader.post(&format!("{S}/snapshot/{}/parts", offset(0))).body(vec![1u8; 10]).send().await;
    refused
        .expect_error(429, "STAGED_PARTS_LIMIT")
        .expect_header("ursula-max-staged-parts", "8192")
        .expect_header("stream-incarnation", &incarnation)
        .expect_no_header("retry-after");
    assert!(metric(leader, "snapshot_parts_staged_limit").await >= 1);
    assert_eq!(s3.files_with("part").len(), 8192, "nothing of the refused part was stored");
    // `/__ursula/usage` (spec/35): the leader of the stream's group reports
    // the staged bytes of its bucket, with its term.
    let reports: Vec<serde_json::Value> = {
        let mut all = Vec::new();
        for v in voters.iter().flatten() {
            let usage = v.get("/__ursula/usage").send().await.json();
            all.extend(usage["staged_snapshot_parts"].as_array().cloned().unwrap_or_default());
        }
        all
    };
    let staged: Vec<_> = reports.iter().filter(|r| r["bytes"]["cold"] == 8192).collect();
    assert_eq!(staged.len(), 1, "one leader reports the bucket's staged bytes: {reports:#?}");
    assert_eq!(staged[0]["counting_finished"], true);
    assert!(staged[0]["term"].as_u64() >= Some(1), "{:?}", staged[0]);

    leader
        .delete(&format!("{S}/snapshot/parts"))
        .send()
        .await
        .expect(204)
        .expect_header("stream-incarnation", &incarnation);
    assert!(s3.files_with("part").is_empty(), "the discard deleted every staged part");
    stage(leader, &offset(0), vec![1; 10]).await;
}

async fn until_no_parts(s3: &S3Server, what: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !s3.files_with("part").is_empty() {
        assert!(Instant::now() < deadline, "{what}: {:?}", s3.files_with("part"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_takes_the_streams_parts_and_the_sweep_reclaims_orphans() {
    let s3 = S3Server::start().await;
    let (_layout, voters) =
        cluster("parts-sweep", s3.cold_section("flush_interval = \"100ms\"\nparts_grace = \"1s\"\n"));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1");
    leader.create(S, BIN).await;
    stage(leader, &offset(0), pattern(1000)).await;
    stage(leader, &offset(0), pattern(2000)).await;
    assert_eq!(s3.files_with("part").len(), 2);
    leader.delete(S).send().await.expect(204);
    until_no_parts(&s3, "the delete left the stream's parts").await;
    assert_eq!(swept(&voters).await, 0, "the delete, not the sweep, removed them");

    // A part no commit uses is an orphan once its grace passes.
    leader.create(S, BIN).await;
    stage(leader, &offset(0), pattern(10)).await;
    until_no_parts(&s3, "the sweep never reclaimed the orphan").await;
    assert!(swept(&voters).await >= 1);
}

/// Parts the voters' orphan sweeps deleted: the leader of group 0 sweeps,
/// and the balancer may have moved that leadership off node 1.
async fn swept(voters: &[Option<Node>]) -> u64 {
    let mut total = 0;
    for v in voters.iter().flatten() {
        total += metric(v, "snapshot_parts_swept").await;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_go_up_through_a_gateway() {
    let s3 = S3Server::start().await;
    let (layout, voters) = cluster("parts-gateway", s3.cold_section_timed(FLUSH, "30s"));
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let gateway = Node::spawn(&crate::support::cluster::gateway_args(&layout, &[]), None);
    gateway.wait_ready_blocking();
    gateway.create(S, BIN).await;
    gateway.append(S, BIN, "0123456789").await;
    gateway.head(S).send().await.expect(200).expect_header("ursula-max-snapshot-bytes", "1073741824");

    let body = pattern(3 * 1024 * 1024 + 17);
    let digest = crate::support::snapshot_digest(BIN, &body);
    let mut ids = Vec::new();
    for piece in body.chunks(1024 * 1024) {
        ids.push(stage(&gateway, &offset(10), piece.to_vec()).await);
    }
    commit_parts(&gateway, 10, &ids, &digest).await.expect(204).expect_header("stream-snapshot-digest", &digest);
    let path = format!("{S}/snapshot/{}", offset(10));
    let read = gateway.get(&path).header("range", "bytes=1048570-1048589").send().await;
    assert!(read.expect(206).body == body[1_048_570..1_048_590], "a range across parts, through the gateway");
    assert!(voters[1].as_ref().expect("node 2").get(&path).send().await.expect(200).body == body);

    stage(&gateway, &offset(10), vec![1; 10]).await;
    gateway.delete(&format!("{S}/snapshot/parts")).send().await.expect(204);
    assert!(s3.files_with("part").is_empty(), "the discard through the gateway deleted the part");
}
