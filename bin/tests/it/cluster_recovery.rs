//! Crash recovery on a three-voter cluster (spec/35 "Recovering after a
//! host crash"): recovery gates after a lost run state or a damaged
//! journal, and a leader that catches up a follower which lost
//! acknowledged entries.

use std::time::{Duration, Instant};

use crate::cluster::{append, converges, record, until_created, wait_ready};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};

const PATIENCE: Duration = Duration::from_secs(60);

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
    let mut nodes = started(&cluster).await;
    let metrics = async |node: &Node| node.get("/__ursula/metrics").send().await.json();
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
    assert_eq!(m["wal_recovery"]["damaged_tail"], serde_json::Value::Null, "{m}");
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
    one_more_everywhere(&nodes, 20, &mut expected).await;
}

/// spec/35: a follower that lost entries it had acknowledged (its
/// journal's tail cut while it was down, as a host crash under `fsync =
/// "never"` can) is caught up in place, and its leader counts the rewind
/// in `raft_follower_log_reversions` by follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_counts_a_follower_that_lost_acknowledged_entries() {
    let cluster = Layout::new(3, "reversion", 1, Planes::Shared);
    let mut nodes = started(&cluster).await;
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
    let segments = segments(&log);
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
    one_more_everywhere(&nodes, 40, &mut expected).await;
}

/// spec/35: a voter whose newest journal segment holds a damaged frame
/// that valid frames follow (a batch a power loss tore out of order, or a
/// bad sector) starts anyway: it cuts the damage and everything after it,
/// gates every group before it forgets the cut, and catches up from the
/// leaders, so no acknowledged write is lost. Before, it refused to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_whose_journal_holds_a_hole_cuts_it_and_rejoins_through_its_gates() {
    let cluster = Layout::new(3, "damaged-tail", 4, Planes::Shared);
    let mut nodes = started(&cluster).await;
    let mut expected = String::new();
    for seq in 0..30 {
        append(&nodes, seq).await;
        expected.push_str(&record(seq));
    }
    converges(nodes[2].as_ref().expect("node 3"), &expected).await;
    nodes[2].take().expect("node 3").kill9();
    // Zeros in the newest segment where only entries follow: a hole, as
    // a power loss tears a batch (a vote after it would refuse the start).
    let log = cluster.wal(2).join("raft-log");
    let segments = segments(&log);
    let newest = segments.last().expect("a segment");
    let on_disk: u64 = segments.iter().map(|p| std::fs::metadata(p).expect("a segment").len()).sum();
    let mut raw = std::fs::read(newest).expect("the segment");
    let middle = hole_before_entries(&raw);
    raw[middle..middle + 16].fill(0);
    std::fs::write(newest, &raw).expect("writing the hole");

    nodes[2] = Some(cluster.start(2));
    let third = nodes[2].as_ref().expect("node 3");
    wait_ready(third).await;
    let m = third.get("/__ursula/metrics").send().await.json();
    assert_eq!(m["wal_recovery"]["prior_run"], "running", "killed on this boot: {m}");
    assert_eq!(m["wal_recovery"]["lost_tail_possible"], true, "{m}");
    let reason = m["wal_recovery"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("damaged frame"), "{m}");
    let cut = m["wal_recovery"]["damaged_tail"].as_str().unwrap_or_default();
    assert!(cut.contains("valid frames after it dropped too"), "{m}");
    assert_eq!(
        m["recovery_gates"],
        serde_json::json!({ "closed": [], "stalled": [] }),
        "the leaders' barriers opened them: {m}"
    );
    assert!(!log.join("damaged-tail").exists(), "the cut is settled once the gates are kept");
    // Replay kept at most what lay before the hole.
    let replayed = m["wal_recovery_bytes"].as_u64().expect("wal_recovery_bytes");
    assert!(replayed <= on_disk - (raw.len() - middle) as u64, "cut at the hole: {replayed} of {on_disk} bytes kept");
    converges(third, &expected).await;
    one_more_everywhere(&nodes, 30, &mut expected).await;
}

/// Where a frame starts in `segment` that at least two frames follow, all
/// of them entries (the frame layout of `ursula_wal::frame`: kind at byte
/// 3, payload length at 16, a 24-byte header).
fn hole_before_entries(segment: &[u8]) -> usize {
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 24 <= segment.len() {
        let len = u32::from_le_bytes(segment[at + 16..at + 20].try_into().expect("4 bytes")) as usize;
        frames.push((at, segment[at + 3]));
        at += 24 + len;
    }
    let entries_from = frames.iter().rposition(|(_, kind)| *kind != 1).map_or(0, |i| i + 1);
    assert!(frames.len() >= entries_from + 3, "too few entries at the end of the segment: {frames:?}");
    frames[frames.len() - 3].0
}

/// Three voters of `cluster`, ready, with the test stream created.
pub async fn started(cluster: &Layout) -> Vec<Option<Node>> {
    let nodes: Vec<Option<Node>> = (0..3).map(|i| Some(cluster.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    until_created(&nodes).await;
    nodes
}

/// Appends record `seq` and waits until every live replica serves `expected` with it.
async fn one_more_everywhere(nodes: &[Option<Node>], seq: u64, expected: &mut String) {
    append(nodes, seq).await;
    expected.push_str(&record(seq));
    for node in nodes.iter().flatten() {
        converges(node, expected).await;
    }
}

/// The journal segments in `log`, oldest first.
fn segments(log: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut segments: Vec<_> = std::fs::read_dir(log)
        .expect("a journal")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    segments
}
