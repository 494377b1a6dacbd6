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

/// spec/35 "Recovering after a host crash": a voter killed on the same
/// host boot restarts ungated (the page cache kept its writes); one whose
/// run state is gone beside a non-empty journal (as after a host crash
/// under `fsync = "never"`) waits at every group's recovery gate: unready
/// with `recovery_gate_closed`, granting no vote, so a lone surviving peer
/// cannot be elected with it; once a leader exists its barrier opens the
/// gates and every acknowledged write is on the replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_that_may_have_lost_its_tail_waits_at_its_recovery_gates() {
    let cluster = Layout::new(3, "recovery-gate", 4, Planes::Shared);
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let metrics = async |node: &Node| node.get("/__ursula/metrics").send().await.json();
    until_created(&nodes).await;
    let mut expected = String::new();
    for seq in 0..20 {
        append(&nodes, seq).await;
        expected.push_str(&record(seq));
    }
    // kill -9 on the same boot: nothing was lost, no gate.
    nodes[2].take().expect("node 3").kill9();
    nodes[2] = Some(cluster.start(2));
    let third = nodes[2].as_ref().expect("node 3");
    wait_ready(third).await;
    let m = metrics(third).await;
    assert_eq!(m["wal_recovery"]["prior_run"], "running", "{m}");
    assert_eq!(m["wal_recovery"]["lost_tail_possible"], false, "{m}");
    assert_eq!(m["recovery_gates"]["closed"], serde_json::json!([]), "{m}");

    // Node 3 loses its run state; node 2 dies too, so node 1 alone would
    // need node 3's vote in the groups node 2 led.
    let deadline = Instant::now() + PATIENCE;
    while metrics(nodes[1].as_ref().expect("node 2")).await["raft_leaderships"].as_u64() < Some(1) {
        assert!(Instant::now() < deadline, "the balancer never gave node 2 a group");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    nodes[2].take().expect("node 3").kill9();
    std::fs::remove_file(cluster.wal(2).join("run-state")).expect("removing node 3's run state");
    nodes[1].take().expect("node 2").kill9();
    nodes[2] = Some(cluster.start(2));
    let third = nodes[2].as_ref().expect("node 3");
    let deadline = Instant::now() + PATIENCE;
    let gated = loop {
        let ready = third.get("/__ursula/ready").send().await;
        if ready.status == 503 && ready.text().contains("recovery_gate_closed") {
            break metrics(third).await;
        }
        assert!(Instant::now() < deadline, "node 3 never reported its gates: {}", ready.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(gated["wal_recovery"]["prior_run"], "missing", "{gated}");
    assert_eq!(gated["wal_recovery"]["lost_tail_possible"], true, "{gated}");
    // The groups node 1 still leads open at once (node 3's acknowledgements
    // keep its quorum); those node 2 led wait. Several election timeouts
    // pass: node 1 gets no vote from node 3 there, so it is not elected.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still: Vec<u64> = metrics(third).await["recovery_gates"]["closed"]
        .as_array()
        .expect("gates")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert!(!still.is_empty(), "node 2's groups wait at node 3's gates");
    let first = metrics(nodes[0].as_ref().expect("node 1")).await;
    for g in &still {
        let leader = &first["raft_groups"][*g as usize]["current_leader"];
        assert_ne!(*leader, 1, "node 1 was elected in group {g} with a gated replica's vote: {first}");
    }
    // spec/35: after 30 s without a barrier and without applying anything,
    // node 3 reports those groups stalled, on its readiness and its metrics.
    let deadline = Instant::now() + Duration::from_secs(60);
    let stalled = loop {
        let ready = third.get("/__ursula/ready").send().await;
        if ready.status == 503 && ready.json()["reason"] == "recovery_stalled" {
            break ready.json();
        }
        assert!(Instant::now() < deadline, "no group was reported stalled: {}", ready.text());
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let stalled_groups = stalled["recovery_stalled_groups"].as_array().expect("stalled groups").clone();
    assert!(!stalled_groups.is_empty(), "{stalled}");
    assert!(stalled_groups.iter().all(|g| g.as_u64().is_some_and(|g| still.contains(&g))), "{stalled}");
    // More may stall between the two reads.
    let m3 = metrics(third).await;
    let in_metrics = m3["recovery_gates"]["stalled"].as_array().expect("stalled").clone();
    assert!(stalled_groups.iter().all(|g| in_metrics.contains(g)), "{in_metrics:?} lacks some of {stalled}");
    // The recovery runbook's fields (spec/35): each group's gate, its last
    // log term, whether it runs, and who leads with a live quorum.
    let m1 = metrics(nodes[0].as_ref().expect("node 1")).await;
    for g in 0..4 {
        let (on3, on1) = (&m3["raft_groups"][g], &m1["raft_groups"][g]);
        let closed = m3["recovery_gates"]["closed"].as_array().is_some_and(|c| c.contains(&serde_json::json!(g)));
        let gate = on3["recovery_gate"].as_str().unwrap_or_default();
        match (in_metrics.contains(&serde_json::json!(g)), closed) {
            (true, _) => assert_eq!(gate, "stalled", "group {g}: {m3}"),
            // Not stalled yet, or waiting for its barrier to apply.
            (false, true) => assert!(["awaiting_barrier", "catching_up", "stalled"].contains(&gate), "{m3}"),
            (false, false) => assert_eq!(gate, "open", "group {g}: {m3}"),
        }
        assert_eq!(on3["maintenance"]["running"], true, "{m3}");
        assert!(on3["last_log_term"].as_u64().is_some(), "{m3}");
        assert_eq!(on3["recovery"], serde_json::Value::Null, "{m3}");
        // Nodes 1 and 3 are a live quorum: whichever of them leads, leads live.
        assert_eq!(on1["leads_live"], on1["current_leader"] == 1, "group {g}: {m1}");
        assert_eq!(on3["leads_live"], on3["current_leader"] == 3, "group {g}: {m3}");
    }

    // Node 2 returns: a leader is elected, its barrier opens node 3's gates.
    nodes[1] = Some(cluster.start(1));
    wait_ready(nodes[2].as_ref().expect("node 3")).await;
    let third = nodes[2].as_ref().expect("node 3");
    let opened = metrics(third).await;
    assert_eq!(opened["recovery_gates"], serde_json::json!({ "closed": [], "stalled": [] }), "{opened}");
    converges(third, &expected).await;
    append(&nodes, 20).await;
    expected.push_str(&record(20));
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }
}

/// spec/35: a follower that lost entries it had acknowledged (its
/// journal's tail cut while it was down, as a host crash under `fsync =
/// "never"` can) is caught up in place, and its leader counts the rewind
/// in `raft_follower_log_reversions` by follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_counts_a_follower_that_lost_acknowledged_entries() {
    let cluster = Layout::new(3, "reversion", 1, Planes::Shared);
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    until_created(&nodes).await;
    let mut expected = String::new();
    let mut leader = 0;
    for seq in 0..40 {
        leader = append(&nodes, seq).await;
        expected.push_str(&record(seq));
    }
    let follower = (leader + 1) % 3;
    converges(nodes[follower].as_ref().expect("the follower"), &expected).await;
    nodes[follower].take().expect("the follower").kill9();
    let log = cluster.wal(follower).join("raft-log");
    let mut segments: Vec<_> = std::fs::read_dir(&log)
        .expect("the follower's journal")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    let newest = segments.last().expect("a segment");
    let len = std::fs::metadata(newest).expect("segment").len();
    let cut = std::fs::OpenOptions::new().write(true).open(newest).expect("open the segment");
    cut.set_len(len * 2 / 3).expect("cutting the journal's tail");
    drop(cut);
    let _ = std::fs::remove_file(cluster.wal(follower).join("run-state"));
    nodes[follower] = Some(cluster.start(follower));

    let leading = nodes[leader].as_ref().expect("the leader");
    let key = (follower + 1).to_string();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let m: serde_json::Value = leading.get("/__ursula/metrics").send().await.json();
        if m["raft_follower_log_reversions"][&key].as_u64() >= Some(1) {
            break;
        }
        assert!(Instant::now() < deadline, "the leader never counted the rewind: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    append(&nodes, 40).await;
    expected.push_str(&record(40));
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }
}

async fn until_created(nodes: &[Option<Node>]) {
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
