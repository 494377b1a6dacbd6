//! Forks (docs/forks.md, upstream Durable Streams "Stream forking"): a
//! stream whose history up to an offset is another stream's. The tests
//! that pick groups or restart a node run on nodes of their own.

use ursula_stream::StreamKey;
use ursula_stream::routing::group_of;

use crate::support::{Node, offset, through_gateway};

const TEXT: &str = "text/plain";

/// A stream name in bucket `demo` whose group differs from `source`'s
/// (`differ`) or is the same, for a node of `group_count` groups.
fn name_in_group(source: &str, group_count: u32, differ: bool, tag: &str) -> String {
    let key = |name: &str| StreamKey::parse("demo", name).expect("a key");
    let home = group_of(&key(source), group_count);
    (0..10_000)
        .map(|i| format!("{tag}-{i}"))
        .find(|name| (group_of(&key(name), group_count) != home) == differ)
        .expect("some name lands there")
}

async fn group_count(node: &Node) -> u32 {
    let metrics = node.get("/__ursula/metrics").send().await.json();
    metrics["group_count"].as_u64().and_then(|n| u32::try_from(n).ok()).expect("group_count")
}

#[tokio::test]
async fn a_fork_in_another_group_reads_its_source_then_its_own_and_the_source_goes_with_its_last_fork() {
    if through_gateway() {
        return;
    }
    let node = Node::start();
    let groups = group_count(&node).await;
    node.create("/demo/src", TEXT).await;
    node.append("/demo/src", TEXT, "source").await;
    for differ in [true, false] {
        let name = name_in_group("src", groups, differ, "fork");
        let path = format!("/demo/{name}");
        let created = node.put(&path).header("stream-forked-from", "/demo/src").send().await;
        created.expect(201).expect_header("content-type", TEXT).expect_header("stream-next-offset", &offset(6));
        created.expect_no_header("stream-forked-from").expect_no_header("stream-fork-offset");
        node.append(&path, TEXT, " fork").await;
        assert_eq!(node.read_all(&path).await.text(), "source fork", "differ={differ}");
        // From the fork point on, a read is the fork's own.
        let own = node.get(&format!("{path}?offset={}", offset(6))).send().await;
        assert_eq!(own.expect(200).text(), " fork");
        // A repeat answers 200; another fork point of the same path 409.
        node.put(&path).header("stream-forked-from", "/demo/src").content_type(TEXT).send().await.expect(200);
        let elsewhere =
            node.put(&path).header("stream-forked-from", "/demo/src").header("stream-fork-offset", offset(2));
        elsewhere.send().await.expect(409);
    }
    node.append("/demo/src", TEXT, " later").await;
    let fork = format!("/demo/{}", name_in_group("src", groups, true, "fork"));
    assert_eq!(node.read_all(&fork).await.text(), "source fork", "the source's later appends are not the fork's");

    // Deleted under its forks, the source is soft-deleted: 410, its path blocked.
    node.delete("/demo/src").send().await.expect(204);
    node.head("/demo/src").send().await.expect_head_error(410);
    node.get("/demo/src?offset=-1").send().await.expect_error(410, "STREAM_DELETED");
    node.post("/demo/src").content_type(TEXT).body("x").send().await.expect_error(410, "STREAM_DELETED");
    node.delete("/demo/src").send().await.expect_error(410, "STREAM_DELETED");
    node.put("/demo/src").content_type(TEXT).send().await.expect(409);
    let again = node.put("/demo/again").header("stream-forked-from", "/demo/src").send().await;
    again.expect(409);
    assert_eq!(node.read_all(&fork).await.text(), "source fork", "forks still read it");

    for differ in [true, false] {
        let path = format!("/demo/{}", name_in_group("src", groups, differ, "fork"));
        node.delete(&path).send().await.expect(204);
        node.head(&path).send().await.expect_head_error(404);
    }
    // The release runs after the delete answers.
    let mut status = 0;
    for _ in 0..100 {
        status = node.head("/demo/src").send().await.status.as_u16();
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 404, "collected with its last fork");
    node.create("/demo/src", TEXT).await;
}

#[tokio::test]
async fn fork_requests_the_source_cannot_satisfy_are_refused() {
    let node = Node::start();
    node.put("/demo/f").header("stream-forked-from", "/demo/none").send().await.expect_error(404, "STREAM_NOT_FOUND");
    node.create("/demo/s", TEXT).await;
    node.append("/demo/s", TEXT, "hello").await;
    let beyond = node.put("/demo/f").header("stream-forked-from", "/demo/s").header("stream-fork-offset", offset(6));
    beyond.send().await.expect_error(400, "INVALID_FORK");
    let sub = node.put("/demo/f").header("stream-forked-from", "/demo/s").header("stream-fork-offset", offset(0));
    sub.header("stream-fork-sub-offset", "6").send().await.expect_error(400, "INVALID_FORK");
    for bad in ["-1", "abc", "1.5", "05", "+1"] {
        let req = node.put("/demo/f").header("stream-forked-from", "/demo/s").header("stream-fork-sub-offset", bad);
        req.send().await.expect_error(400, "INVALID_HEADER");
    }
    node.put("/demo/f").header("stream-fork-sub-offset", "0").send().await.expect_error(400, "INVALID_HEADER");
    let other_bucket = node.put("/other/f").header("stream-forked-from", "/demo/s").send().await;
    other_bucket.expect_error(400, "INVALID_FORK");
    let mismatch = node.put("/demo/f").header("stream-forked-from", "/demo/s").content_type("application/json");
    mismatch.send().await.expect(409);
    // None of those left a reference: the source's delete is a hard one.
    node.delete("/demo/s").send().await.expect(204);
    node.head("/demo/s").send().await.expect_head_error(404);
}

#[tokio::test]
async fn a_sub_offset_forks_inside_an_append_and_a_json_fork_reads_as_one_stream() {
    let node = Node::start_with(&["--json-reads", "array"]);
    node.create("/demo/t", TEXT).await;
    node.append("/demo/t", TEXT, "hello").await;
    let f = node.put("/demo/tf").header("stream-forked-from", "/demo/t").header("stream-fork-offset", offset(0));
    f.header("stream-fork-sub-offset", "3").send().await.expect(201);
    node.append("/demo/tf", TEXT, "LO").await;
    assert_eq!(node.read_all("/demo/tf").await.text(), "helLO");

    node.create("/demo/j", "application/json").await;
    node.append("/demo/j", "application/json", r#"[{"n":1},{"n":2},{"n":3}]"#).await;
    let f = node.put("/demo/jf").header("stream-forked-from", "/demo/j").header("stream-fork-offset", offset(0));
    f.header("stream-fork-sub-offset", "2").send().await.expect(201);
    node.append("/demo/jf", "application/json", r#"{"n":"own"}"#).await;
    let read = node.read_all("/demo/jf").await;
    assert_eq!(read.json(), serde_json::json!([{"n":1},{"n":2},{"n":"own"}]));
}

#[tokio::test]
async fn a_fork_and_its_soft_deleted_source_survive_a_restart() {
    if through_gateway() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("ursula.toml");
    std::fs::write(&config, format!("[raft.wal]\npath = {:?}\n", dir.path().join("wal"))).expect("config");
    let args: Vec<String> = ["server", "--listen", "127.0.0.1:0", "--config"]
        .iter()
        .map(|s| s.to_string())
        .chain([config.display().to_string()])
        .collect();
    let node = Node::spawn(&args, None);
    node.create("/demo/src", TEXT).await;
    node.append("/demo/src", TEXT, "kept").await;
    node.put("/demo/fork").header("stream-forked-from", "/demo/src").send().await.expect(201);
    node.append("/demo/fork", TEXT, "+own").await;
    node.delete("/demo/src").send().await.expect(204);
    node.kill9();
    let node = Node::spawn(&args, None);
    assert_eq!(node.read_all("/demo/fork").await.text(), "kept+own");
    node.head("/demo/src").send().await.expect_head_error(410);
    node.kill9();
}

/// Each group's leader as voter `node` sees it, once at least two voters
/// lead some group (the initializers and the balancer spread them).
async fn spread_leaders(node: &Node) -> Vec<u64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let metrics = node.get("/__ursula/metrics").send().await.json();
        let leaders: Vec<u64> = metrics["raft_groups"]
            .as_array()
            .map(|groups| groups.iter().map(|g| g["current_leader"].as_u64().unwrap_or(0)).collect())
            .unwrap_or_default();
        let distinct: std::collections::BTreeSet<u64> = leaders.iter().copied().filter(|l| *l != 0).collect();
        if distinct.len() >= 2 && leaders.iter().all(|l| *l != 0) {
            return leaders;
        }
        assert!(std::time::Instant::now() < deadline, "leaders never spread: {leaders:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The fork's leader takes the source's reference from another voter (a
/// forwarded step), reads the source's part from its own replica of the
/// source's group, and the release after the fork's delete reaches the
/// source's leader too.
#[tokio::test]
async fn through_a_gateway_a_fork_whose_source_another_voter_leads_reads_and_is_collected() {
    use crate::support::cluster::{Layout, Planes, gateway_args};
    if through_gateway() {
        return;
    }
    let layout = Layout::new(3, "forks", 8, Planes::Shared);
    let voters: Vec<Node> = (0..layout.voters()).map(|i| layout.start(i)).collect();
    let gateway = Node::spawn(&gateway_args(&layout, &[]), None);
    let leaders = spread_leaders(&voters[0]).await;
    let key = |name: &str| StreamKey::parse("demo", name).expect("a key");
    let leader_of = |name: &str| leaders[group_of(&key(name), layout.group_count).0 as usize];
    let source = "src";
    let fork = (0..10_000)
        .map(|i| format!("fork-{i}"))
        .find(|name| leader_of(name) != leader_of(source))
        .expect("a fork name another voter leads");
    let (source_path, fork_path) = (format!("/demo/{source}"), format!("/demo/{fork}"));
    gateway.create(&source_path, TEXT).await;
    gateway.append(&source_path, TEXT, "abc").await;
    gateway.put(&fork_path).header("stream-forked-from", &source_path).send().await.expect(201);
    gateway.append(&fork_path, TEXT, " own").await;
    gateway.append(&source_path, TEXT, " later").await;
    assert_eq!(gateway.read_all(&fork_path).await.text(), "abc own");
    gateway.delete(&source_path).send().await.expect(204);
    gateway.head(&source_path).send().await.expect_head_error(410);
    assert_eq!(gateway.read_all(&fork_path).await.text(), "abc own", "a soft-deleted source still serves its forks");
    gateway.delete(&fork_path).send().await.expect(204);
    let mut status = 0;
    for _ in 0..200 {
        status = gateway.head(&source_path).send().await.status.as_u16();
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 404, "the release reached the source's leader");
    drop(voters);
}

/// A fork of a prefix flushed to the cold tier (a real S3-compatible
/// server) reads it back byte for byte on every voter, in small and large
/// requests, after its source is deleted too: the source's cold spans stay
/// referenced by the soft-deleted source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_flushed_prefix_reads_back_after_its_source_is_deleted() {
    use crate::cold::{BIN, FLUSH, S, append_all, cluster, read_to_tail, wait_flushed};
    use crate::support::pattern;
    use crate::support::s3::S3Server;
    if through_gateway() {
        return;
    }
    let s3 = S3Server::start().await;
    let (_layout, voters) = cluster("fork-cold", s3.cold_section(FLUSH));
    for v in voters.iter().flatten() {
        crate::cluster::wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1 leads the group it initialized");
    leader.create(S, BIN).await;
    let body = pattern(600_000);
    append_all(leader, &body).await;
    // Flushed until the hot bytes are well below the group's 256 KiB
    // ceiling, so the fork's own append meets no backpressure.
    wait_flushed(leader, 450_000).await;
    let fork = "/cold/fork";
    leader.put(fork).header("stream-forked-from", S).send().await.expect(201);
    leader.post(fork).content_type(BIN).body("+own").send().await.expect(204);
    leader.delete(S).send().await.expect(204);
    let mut expected = body;
    expected.extend_from_slice(b"+own");
    for v in voters.iter().flatten() {
        let whole = |max| read_to_tail(v, fork, "-1".to_string(), max);
        assert!(whole(8 * 1024 * 1024).await == expected, "{}: in one request", v.base());
        assert!(whole(5_000).await == expected, "{}: in small requests", v.base());
    }
}

/// A voter whose WAL was wiped comes back by snapshot install, and the
/// snapshot carries the forks: the fork reads its source's part on that
/// voter, and the soft-deleted source still answers `410` there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_that_installs_a_snapshot_serves_forks_and_soft_deleted_sources() {
    use crate::support::cluster::{Layout, Planes};
    if through_gateway() {
        return;
    }
    let mut layout = Layout::new(3, "fork-snapshot", 1, Planes::Shared);
    // Snapshots every few entries: the leader purges what a wiped voter needs.
    layout.raft_extra = "snapshot_backstop_logs = 10\n".into();
    let mut voters: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for v in voters.iter().flatten() {
        crate::cluster::wait_ready(v).await;
    }
    let leader = voters[0].as_ref().expect("node 1 leads the group it initialized");
    leader.create("/demo/src", TEXT).await;
    leader.append("/demo/src", TEXT, "inherited").await;
    leader.put("/demo/fork").header("stream-forked-from", "/demo/src").send().await.expect(201);
    leader.delete("/demo/src").send().await.expect(204);
    let wiped = 2;
    voters[wiped].take().expect("running").kill9();
    std::fs::remove_dir_all(layout.wal(wiped)).expect("wiping the WAL");
    let leader = voters[0].as_ref().expect("node 1");
    let mut expected = "inherited".to_string();
    for i in 0..30 {
        let record = format!("|{i}");
        leader.append("/demo/fork", TEXT, record.clone()).await;
        expected.push_str(&record);
    }
    voters[wiped] = Some(layout.start(wiped));
    let back = voters[wiped].as_ref().expect("restarted");
    crate::cluster::wait_ready(back).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let read = back.get("/demo/fork?offset=-1").send().await;
        if read.status == 200 && read.text() == expected {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never converged: {} {}", read.status, read.text());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let metrics = back.get("/__ursula/metrics").send().await.json();
    let group = &metrics["raft_groups"][0];
    assert!(group["snapshot_index"].as_u64() > Some(0), "caught up from a snapshot: {group}");
    back.head("/demo/src").send().await.expect_head_error(410);
}

/// The extensions on a fork: its own `Stream-Incarnation`, and an
/// immutable chunk URL that serves its inherited bytes as any chunk.
#[tokio::test]
async fn a_forks_immutable_chunk_serves_its_inherited_bytes_under_its_own_incarnation() {
    let node = Node::start();
    node.create("/demo/src", TEXT).await;
    node.append("/demo/src", TEXT, "inherited").await;
    node.put("/demo/fork").header("stream-forked-from", "/demo/src").send().await.expect(201);
    node.append("/demo/fork", TEXT, "+own").await;
    let source = node.incarnation("/demo/src").await;
    let fork = node.incarnation("/demo/fork").await;
    assert_ne!(source, fork, "a fork is a stream of its own");
    let chunk = node.get(&format!("/demo/fork/incarnation/{fork}/chunk/{}", offset(0))).send().await;
    chunk.expect(200).expect_header("stream-incarnation", &fork).expect_header("stream-next-offset", &offset(13));
    assert_eq!(chunk.text(), "inherited+own");
    let wrong = node.get(&format!("/demo/fork/incarnation/{source}/chunk/{}", offset(0))).send().await;
    assert_ne!(wrong.status, 200, "the source's token does not name the fork");
}
