//! A three-voter cluster on loopback (issue 6): Raft over the private gRPC
//! plane sharing each node's `server.listen`, replication to every replica, a new leader after
//! `kill -9` of the old one, and a restarted voter catching up.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::Node;
use crate::support::cluster::{Layout, Planes, Writer};

pub const S: &str = "/cluster/log";
const TEXT: &str = "text/plain";
const PATIENCE: Duration = Duration::from_secs(60);

/// The planes share `server.listen` here (the default of spec/07); the
/// fault test runs them apart.
fn cluster() -> Layout {
    Layout::new(3, "test-cluster", 8, Planes::Shared)
}

pub async fn wait_ready(node: &Node) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = node.get("/__ursula/ready").send().await;
        if ready.status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "not ready: {}", ready.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn record(seq: u64) -> String {
    format!("record {seq:04}\n")
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Sends producer append `seq` (producer `w`) to each live node in turn,
/// without following redirects, until the leader of the stream's group
/// takes it; returns the leader's index. Every follower's answer must be a
/// well-formed `307`, and a `503` must carry `Retry-After`.
pub async fn append(nodes: &[Option<Node>], seq: u64) -> usize {
    let mut writer =
        Writer::new(no_redirects(), S, "w", record).in_rounds(Duration::from_millis(100)).patience(PATIENCE);
    writer
        .write(nodes, seq, |i, answer| match answer.status().as_u16() {
            307 => {
                let h = answer.headers();
                let location = h.get("location").and_then(|v| v.to_str().ok()).expect("307 has a Location");
                let leader: usize = h
                    .get("x-ursula-raft-leader-id")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok())
                    .expect("307 names the leader");
                assert!(h.get("x-ursula-raft-group").is_some() && h.get("x-ursula-raft-term").is_some());
                // A redirect is no error answer (extensions §11): no JSON body, no code.
                assert!(h.get("content-type").is_none(), "a 307 carries no error body: {h:?}");
                assert!(location.ends_with(S), "{location}");
                assert_ne!(leader, i + 1, "a node redirected to itself");
            }
            503 => assert!(answer.headers().get("retry-after").is_some()),
            other => panic!("append {seq} on node {}: {other}", i + 1),
        })
        .await
}

/// Waits until `node` serves exactly `expected` from its own replica.
pub async fn converges(node: &Node, expected: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let read = node.get(&format!("{S}?offset=-1")).send().await;
        if read.status == 200 && read.text() == expected {
            return;
        }
        assert!(Instant::now() < deadline, "replica never converged: {} {:?}", read.status, read.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_replicate_fail_over_and_catch_up() {
    let cluster = cluster();
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let deadline = Instant::now() + PATIENCE;
    'create: loop {
        for node in nodes.iter().flatten() {
            let answer = node.put(S).content_type(TEXT).send().await;
            if answer.status == 201 {
                break 'create;
            }
        }
        assert!(Instant::now() < deadline, "no node created the stream");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut leader = 0;
    for seq in 0..20 {
        leader = append(&nodes, seq).await;
    }
    let mut expected: String = (0..20).map(record).collect();
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }

    // Through a follower, a client that follows redirects (resending the
    // body, as curl and reqwest do) lands its write on the leader.
    let follower = (0..3).find(|i| *i != leader).expect("a follower");
    let via = nodes[follower].as_ref().expect("running");
    via.post(S).content_type(TEXT).producer("w", 0, 20).body(record(20)).send().await.expect(200);
    expected.push_str(&record(20));
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }

    // kill -9 the group's leader: the other two elect a new one and go on.
    // (A voter may have seen a peer come up late at the start: only lines
    // from here on count.)
    // Only lines about the killed peer: a loaded host may make a live one
    // miss a deadline now and then, which is said too.
    let gone = format!("peer={} ", cluster.client_url(leader));
    let lost = |n: &Node| {
        n.stderr_text().lines().filter(|l| l.contains("a Raft peer is unreachable") && l.contains(&gone)).count()
    };
    let lost_before: Vec<usize> = nodes.iter().map(|n| n.as_ref().map_or(0, lost)).collect();
    nodes[leader].take().expect("the leader").kill9();
    let killed_at = Instant::now();
    let next = append(&nodes, 21).await;
    assert_ne!(next, leader);
    let failover = killed_at.elapsed();
    for seq in 22..40 {
        append(&nodes, seq).await;
    }
    expected = (0..40).map(record).collect();
    // A linearizable read through any node reflects every acknowledged
    // append at once (redirected to the leader, confirmed by ReadIndex).
    for node in nodes.iter().flatten() {
        let read = node.get(&format!("{S}?offset=-1&consistency=leader")).send().await;
        read.expect(200);
        assert!(read.text() == expected, "a consistency=leader read missed acknowledged appends");
    }
    // HEAD is tail-sensitive: a follower redirects it to the leader.
    let new_leader = append(&nodes, 39).await;
    let follower = (0..3).find(|i| *i != new_leader && nodes[*i].is_some()).expect("a live follower");
    let head = no_redirects().head(nodes[follower].as_ref().expect("live").url(S)).send().await.expect("HEAD");
    assert_eq!(head.status(), 307);
    assert_eq!(
        head.headers().get("x-ursula-raft-leader-id").and_then(|v| v.to_str().ok()),
        Some((new_leader + 1).to_string().as_str())
    );
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }

    // A survivor that talks to the lost peer (one that leads a group, or
    // campaigns) says once that it went (issue 17, finding 8: one line of
    // ours per peer state change, not openraft's per failed RPC).
    let lost_since = |i: usize| nodes[i].as_ref().map_or(0, |n| lost(n) - lost_before[i]);
    let deadline = Instant::now() + PATIENCE;
    while !(0..3).any(|i| lost_since(i) > 0) {
        assert!(Instant::now() < deadline, "no survivor said the peer went");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (i, survivor) in nodes.iter().enumerate().filter_map(|(i, n)| n.as_ref().map(|n| (i, n))) {
        assert!(lost_since(i) <= 1, "one line for the lost peer:\n{}", survivor.stderr_text());
        assert!(!survivor.stderr_text().contains("openraft"), "openraft's own lines are off by default");
    }

    // The old leader restarts on its WAL and catches up without reinitializing.
    nodes[leader] = Some(cluster.start(leader));
    let back = nodes[leader].as_ref().expect("restarted");
    converges(back, &expected).await;
    let deadline = Instant::now() + PATIENCE;
    let survivor = nodes.iter().flatten().find(|n| n.base() != back.base()).expect("a survivor");
    while !survivor.stderr_text().contains("a Raft peer is reachable again") {
        assert!(Instant::now() < deadline, "no line for the peer's return:\n{}", survivor.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(Path::new(&cluster.wal(leader)).is_dir());
    eprintln!("writes resumed {failover:?} after the leader was killed");
}

#[tokio::test]
async fn a_node_with_peers_and_no_cluster_id_refuses_to_start() {
    let cluster = cluster();
    // Missing cluster id with peers: refused at startup, naming the key.
    let mut args = cluster.args(0);
    let path = args.pop().expect("config path");
    let text = std::fs::read_to_string(&path).expect("config").replace("cluster_id = \"test-cluster\"\n", "");
    std::fs::write(&path, text).expect("config");
    args.push(path);
    let (status, stderr) = crate::support::run_to_exit(&args);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("server.cluster_id"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_of_another_cluster_is_refused_and_the_majority_serves() {
    let cluster = cluster();
    // A fresh cluster waits for every voter before it initializes a group,
    // so the cluster forms first; then node 3 comes back on an empty WAL
    // with the id of another deployment (a mistyped server.cluster_id).
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    nodes[2].take().expect("running").kill9();
    std::fs::remove_dir_all(cluster.wal(2)).expect("wipe");
    let mut args = cluster.args(2);
    let path = args.pop().expect("config path");
    let text = std::fs::read_to_string(&path).expect("config").replace("\"test-cluster\"", "\"other-cluster\"");
    std::fs::write(&path, text).expect("config");
    args.push(path);
    let stranger = Node::spawn(&args, None);
    let first = nodes[0].as_ref().expect("running");
    let deadline = Instant::now() + PATIENCE;
    while first.put(S).content_type(TEXT).send().await.status != 201 {
        assert!(Instant::now() < deadline, "no node created the stream");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    append(&nodes, 0).await;
    let deadline = Instant::now() + PATIENCE;
    while !stranger.stderr_text().contains("another cluster") {
        assert!(Instant::now() < deadline, "no refusal logged: {}", stranger.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The stranger never joins: it knows no leader and stays unready.
    let ready = stranger.get("/__ursula/ready").send().await;
    ready.expect(503);
    assert_eq!(ready.json()["cluster_id"], "other-cluster");
    assert_eq!(ready.json()["peer_cluster_mismatches"][0]["cluster_id"], "test-cluster", "{}", ready.text());
    // Both sides count every refusal and list the configured peer they refused.
    let metrics = first.get("/__ursula/metrics").send().await.json();
    assert!(metrics["raft_grpc_peer_cluster_refusals"].as_u64() > Some(0), "{metrics}");
    let listed = metrics["peer_cluster_mismatches"].as_array().cloned().unwrap_or_default();
    assert!(listed.iter().any(|p| p["node_id"] == 3 && p["cluster_id"] == "other-cluster"), "{metrics}");
    let mine = first.get("/__ursula/ready").send().await.json();
    assert!(mine["peer_cluster_mismatches"].as_array().is_some_and(|l| !l.is_empty()), "{mine}");
    // Logged once per refused peer, not once per RPC (two peers here).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines = stranger.stderr_text().lines().filter(|l| l.contains("another cluster")).count();
    assert!((1..=2).contains(&lines), "{lines} log lines:\n{}", stranger.stderr_text());
}

/// The stream's group and its leader's `raft_groups` entry, asked of `node`.
async fn group_metrics(node: &Node, group: u64) -> serde_json::Value {
    let metrics = node.get("/__ursula/metrics").send().await.json();
    metrics["raft_groups"][group as usize].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_voter_rejoins_by_snapshot_install_without_initializing_again() {
    let mut cluster = cluster();
    // Snapshots every few entries, so the leader purges the log a wiped
    // replica would need and has to send it a snapshot instead.
    cluster.raft_extra = "snapshot_backstop_logs = 10\n".into();
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let first = nodes[0].as_ref().expect("running");
    let deadline = Instant::now() + PATIENCE;
    while first.put(S).content_type(TEXT).send().await.status != 201 {
        assert!(Instant::now() < deadline, "no node created the stream");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut leader = 0;
    for seq in 0..60 {
        leader = append(&nodes, seq).await;
    }
    let mut expected: String = (0..60).map(record).collect();
    // Wipe node 1, which initialized every group on the fresh cluster;
    // if it leads the stream's group, another node takes over.
    let wiped = 0;
    let witness = (0..3).find(|i| *i != wiped).expect("another node");
    let head = no_redirects().head(nodes[witness].as_ref().expect("live").url(S)).send().await.expect("HEAD");
    let group: u64 = match head.headers().get("x-ursula-raft-group").and_then(|v| v.to_str().ok()) {
        Some(g) => g.parse().expect("a group number"),
        None => {
            // The witness leads: ask the wiped node instead, which redirects to it.
            let head = no_redirects().head(nodes[wiped].as_ref().expect("live").url(S)).send().await.expect("HEAD");
            let g = head.headers().get("x-ursula-raft-group").and_then(|v| v.to_str().ok()).expect("a redirect");
            g.parse().expect("a group number")
        }
    };
    nodes[wiped].take().expect("running").kill9();
    std::fs::remove_dir_all(cluster.wal(wiped)).expect("wipe the WAL");
    for seq in 60..80 {
        leader = append(&nodes, seq).await;
    }
    expected.extend((60..80).map(record));
    let purged = group_metrics(nodes[leader].as_ref().expect("leader"), group).await;
    assert!(purged["purged_index"].as_u64() > Some(0), "the leader purged its log: {purged}");

    nodes[wiped] = Some(Node::spawn_logging(&cluster.args(wiped), None, "warn,ursula_core=info"));
    let back = nodes[wiped].as_ref().expect("restarted");
    converges(back, &expected).await;
    let mine = group_metrics(back, group).await;
    assert!(mine["snapshot_index"].as_u64() > Some(0), "caught up from a snapshot: {mine}");
    let stderr = back.stderr_text();
    assert!(stderr.contains("the group exists on a peer"), "a wiped initializer must not initialize again: {stderr}");
    // And the cluster goes on with all three.
    append(&nodes, 80).await;
    expected.push_str(&record(80));
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }

    // Committed usage (spec/35, issue 19) agrees on every voter, the one
    // that installed a snapshot included: a producer retry counts nothing,
    // a deleted stream's bytes stay counted.
    append(&nodes, 80).await;
    let first = nodes[0].as_ref().expect("running");
    first.put("/cluster/gone").content_type(TEXT).body("abc").send().await.expect(201);
    first.delete("/cluster/gone").send().await.expect(204);
    let bytes = expected.len() as u64;
    let want = serde_json::json!({
        "committed_append_bytes": bytes + 3,
        "committed_records": 81 + 1,
        "committed_write_units": 1 + 81 + 1,
        "retained_bytes": bytes,
        "stream_count": 1,
    });
    for node in nodes.iter().flatten() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let usage = node.get("/__ursula/usage").send().await.json();
            if usage["buckets"]["cluster"] == want {
                assert_eq!(usage["write_unit_bytes"], 10240);
                assert_eq!(usage["raft_group_count"], 8);
                break;
            }
            assert!(Instant::now() < deadline, "{} reports {usage}, not {want}", node.base());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A read on a follower renews a sliding TTL (spec/13) through the group's
/// leader: a stream read only on a follower outlives its TTL, and expires
/// once the reads stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_on_a_follower_renew_a_sliding_ttl_through_the_leader() {
    use crate::cluster_leadership::{group_of, metrics, start_all, wait_leaders};
    let layout = Layout::new(3, "follower-ttl", 4, Planes::Shared);
    let _nodes = start_all(&layout).await;
    let urls = layout.client_urls();
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let leaders = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await;
    let path = "/sliding/ttl";
    let leader = leaders[group_of(path, 4)];
    let follower = &urls[if leader == 1 { 1 } else { 0 }];
    let created = http
        .put(format!("{}{path}", urls[leader as usize - 1]))
        .header("content-type", TEXT)
        .header("stream-ttl", "2")
        .body("alive")
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    // Reads every 600 ms (past a quarter of the window) for twice the TTL.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(600)).await;
        let read = http.get(format!("{follower}{path}?offset=-1")).send().await.expect("read");
        let (status, body) = (read.status(), read.text().await.expect("body"));
        assert_eq!((status.as_u16(), body.as_str()), (200, "alive"), "a follower's read, {:?} in", started.elapsed());
    }
    let m = metrics(&http, follower).await.expect("metrics");
    assert!(m["raft_groups"][group_of(path, 4)]["current_leader"] == leader, "the reads stayed on a follower: {m}");
    // Unread for longer than its TTL, it expires (a read now answers 404 and renews nothing).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let read = http.get(format!("{follower}{path}?offset=-1")).send().await.expect("read");
    assert_eq!(read.status(), 404, "the stream expired once unread");
}

pub async fn until_created(nodes: &[Option<Node>]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for node in nodes.iter().flatten() {
            if node.put(S).content_type(TEXT).send().await.status == 201 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no node created {S}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
