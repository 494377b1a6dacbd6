//! The durable node (spec/07 "Raft", issue 5): a node on `raft.wal.path`
//! keeps every acknowledged append across `kill -9`, keeps its cluster id in
//! its WAL, refuses a damaged or foreign WAL, and guards its disk.

use std::path::Path;
use std::time::Duration;

use crate::support::{Node, run_to_exit};

const S: &str = "/durable/log";
const TEXT: &str = "text/plain";

/// Args of a node on the WAL in `dir`, with `extra` TOML appended.
pub(crate) fn args_for(dir: &Path, extra: &str) -> Vec<String> {
    let config = dir.join("ursula.toml");
    let text = format!("[raft.wal]\npath = {:?}\n{extra}", dir.join("wal"));
    std::fs::write(&config, text).expect("writing the config");
    ["server", "--listen", "127.0.0.1:0", "--config"]
        .iter()
        .map(|s| s.to_string())
        .chain([config.display().to_string()])
        .collect()
}

fn body(seq: u64) -> String {
    format!("record {seq:06}\n")
}

/// Appends with producer headers until the node goes away; returns the next
/// sequence number to send (the first one not yet acknowledged).
async fn write_until_gone(node_url: String, mut seq: u64) -> u64 {
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build().expect("client");
    loop {
        let sent = client
            .post(format!("{node_url}{S}"))
            .header("content-type", TEXT)
            .header("producer-id", "crash-writer")
            .header("producer-epoch", "0")
            .header("producer-seq", seq.to_string())
            .body(body(seq))
            .send()
            .await;
        match sent {
            // 200: appended now; 204: a repeat of a write that had landed before the kill.
            Ok(r) if r.status() == 200 || r.status() == 204 => seq += 1,
            Ok(r) => panic!("append {seq} answered {}: {:?}", r.status(), r.text().await),
            Err(_) => return seq,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_points_loses_no_acknowledged_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small segments and snapshot budgets, so rotation, snapshots and purge
    // all happen during the run and restart replays snapshot + log tail.
    let args = args_for(dir.path(), "[raft]\nsnapshot_backstop_logs = 50\n");
    let mut next = 0u64;
    let rounds = 8;
    for round in 0..rounds {
        let node = Node::spawn(&args, None);
        if round == 0 {
            node.put(S).content_type(TEXT).send().await.expect(201);
        }
        let writer = tokio::spawn(write_until_gone(node.base().to_string(), next));
        tokio::time::sleep(Duration::from_millis(fastrand::u64(150..700))).await;
        node.kill9();
        next = writer.await.expect("the writer task");
        assert!(next > 0, "round {round}: nothing was acknowledged");
    }
    let node = Node::spawn(&args, None);
    // The last unacknowledged write may or may not have landed; sending it
    // again settles it exactly once.
    let settled = node.post(S).content_type(TEXT).producer("crash-writer", 0, next).body(body(next)).send().await;
    assert!(settled.status == 200 || settled.status == 204, "{settled:?}");
    let expected: String = (0..=next).map(body).collect();
    let got = node.read_all(S).await.text();
    assert_eq!(got.len(), expected.len(), "every acknowledged append exactly once ({next} acknowledged)");
    assert!(got == expected, "the bytes read back differ from what was acknowledged");
    let metrics = node.get("/__ursula/metrics").send().await;
    let snapshots = metrics.json()["raft_groups"]
        .as_array()
        .expect("raft_groups")
        .iter()
        .filter(|g| g["snapshot_index"].as_u64() > Some(0))
        .count();
    assert!(snapshots > 0, "no group snapshotted: {}", metrics.text());
}

#[tokio::test]
async fn streams_survive_a_clean_restart_and_the_cluster_id_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = args_for(dir.path(), "");
    let node = Node::spawn(&args, None);
    node.create(S, TEXT).await;
    node.append(S, TEXT, "kept").await;
    let id = node.head(S).send().await.must("ursula-cluster-id").to_string();
    assert!(id.len() == 33 && id.starts_with('u'), "{id}");
    let ready = node.get("/__ursula/ready").send().await;
    ready.expect(200);
    assert_eq!(ready.json()["cluster_id"], id.as_str());
    let (status, stderr) = node.terminate();
    assert!(status.success(), "{status}: {stderr}");
    let node = Node::spawn(&args, None);
    assert_eq!(node.read_all(S).await.text(), "kept");
    assert_eq!(node.head(S).send().await.must("ursula-cluster-id"), id, "the WAL keeps the generated id");
    node.kill9();

    // The same WAL under another configured id refuses to start.
    let args = args_for(dir.path(), "[server]\ncluster_id = \"another-cluster\"\n");
    let (status, stderr) = run_to_exit(&args);
    assert!(!status.success());
    assert!(stderr.contains("belongs to cluster") && stderr.contains(&id), "{stderr}");
}

#[tokio::test]
async fn a_node_without_a_wal_path_uses_a_temporary_wal_removed_on_clean_shutdown() {
    let args: Vec<String> =
        ["server", "--listen", "127.0.0.1:0", "--preset", "tiny"].iter().map(|s| s.to_string()).collect();
    let node = Node::spawn(&args, None);
    node.create(S, TEXT).await;
    let metrics = node.get("/__ursula/metrics").send().await.json();
    assert_eq!(metrics["engine"], "raft");
    assert_eq!(metrics["group_count"], 64, "the tiny preset");
    let stderr = node.stderr_text();
    let dir = stderr
        .split_whitespace()
        .find(|w| w.contains("ursula-wal-"))
        .unwrap_or_else(|| panic!("the WAL location is logged: {stderr}"))
        .to_string();
    assert!(Path::new(&dir).is_dir(), "{dir}");
    let (status, stderr) = node.terminate();
    assert!(status.success(), "{stderr}");
    assert!(!Path::new(&dir).exists(), "{dir} was not removed");
}

#[tokio::test]
async fn disk_pressure_refuses_writes_with_503_and_marks_the_node_unready() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No filesystem here has a thousand TiB free: the guard trips at once.
    let extra = "min_available_size = \"1000TiB\"\nresume_available_size = \"2000TiB\"\n";
    let args = args_for(dir.path(), extra);
    let node = Node::spawn(&args, None);
    let refused = node.put(S).content_type(TEXT).send().await;
    refused.expect(503);
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    assert_eq!(refused.json()["error"]["code"], "WAL_DISK_PRESSURE", "{refused:?}");
    let ready = node.get("/__ursula/ready").send().await;
    ready.expect(503);
    assert_eq!(ready.json()["reason"], "wal_disk_pressure");
    let metrics = node.get("/__ursula/metrics").send().await.json();
    assert_eq!(metrics["wal_disk_pressure"], true);
    // Reads still answer.
    node.get(S).send().await.expect(404);
}

#[tokio::test]
async fn a_corrupt_segment_refuses_start_and_a_torn_tail_is_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = args_for(dir.path(), "");
    let node = Node::spawn(&args, None);
    node.create(S, TEXT).await;
    for i in 0..50 {
        node.append(S, TEXT, format!("line {i}\n")).await;
    }
    node.kill9();
    let seg = std::fs::read_dir(dir.path().join("wal/raft-log"))
        .expect("raft-log")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .expect("a segment");
    let clean = std::fs::read(&seg).expect("segment");

    // A torn tail: the last bytes of the newest segment are gone.
    std::fs::write(&seg, &clean[..clean.len() - 5]).expect("tear");
    let node = Node::spawn(&args, None);
    assert!(node.stderr_text().contains("torn tail"), "{}", node.stderr_text());
    let text = node.read_all(S).await.text();
    assert!(text.starts_with("line 0\n") && text.lines().count() == 49, "{text}");
    node.kill9();

    // A flipped bit in the middle: refused, naming the segment.
    let mut damaged = clean.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x20;
    std::fs::write(&seg, &damaged).expect("flip");
    let (status, stderr) = run_to_exit(&args);
    assert!(!status.success());
    assert!(stderr.contains("corrupt") && stderr.contains("segment-"), "{stderr}");
}

#[test]
fn config_mistakes_refuse_start_with_one_line_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (extra, key) in [
        ("fsync = \"sometimes\"\n", "raft.wal.fsync"),
        ("segment_size = \"1KiB\"\n", "raft.wal.segment_size"),
        ("pth = \"x\"\n", "pth"),
    ] {
        let (status, stderr) = run_to_exit(&args_for(dir.path(), extra));
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(key) && stderr.trim().lines().count() == 1, "{stderr}");
    }
    let (status, stderr) = run_to_exit(&["--preset".to_string(), "huge".to_string()]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("preset"), "{stderr}");
}

#[tokio::test]
async fn the_group_count_of_a_wal_cannot_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::spawn(&args_for(dir.path(), "[raft]\ngroup_count = 8\n"), None);
    node.create(S, TEXT).await;
    node.kill9();
    let (status, stderr) = run_to_exit(&args_for(dir.path(), "[raft]\ngroup_count = 9\n"));
    assert!(!status.success());
    assert!(stderr.contains("raft.group_count"), "{stderr}");
}

/// spec/35 "Deleted data": a small removal makes its group snapshot a
/// quarter of `raft.deleted_data_max_age` after the replica applied it, and
/// the log is purged through that snapshot. The group's log (a few bytes)
/// is far below its snapshot threshold, so nothing else would snapshot it.
#[tokio::test]
async fn a_deleted_stream_leaves_the_snapshot_and_the_log_within_a_quarter_of_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = "[raft]\ngroup_count = 1\ninstall_snapshot_timeout = \"1s\"\ndeleted_data_max_age = \"8s\"\n";
    let node = Node::spawn(&args_for(dir.path(), extra), None);
    node.create(S, TEXT).await;
    node.append(S, TEXT, body(1)).await;
    let group = |m: &serde_json::Value, key: &str| m["raft_groups"][0][key].as_u64().unwrap_or(0);
    let before = node.get("/__ursula/metrics").send().await.json();
    node.delete(S).send().await.expect(204);
    let removed_at = group(&node.get("/__ursula/metrics").send().await.json(), "last_applied_index");
    assert!(group(&before, "snapshot_index") < removed_at, "{before}");
    let started = std::time::Instant::now();
    loop {
        let m = node.get("/__ursula/metrics").send().await.json();
        if group(&m, "snapshot_index") >= removed_at && group(&m, "purged_index") >= removed_at {
            eprintln!("deleted data: snapshot and purge {:?} after the delete", started.elapsed());
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no snapshot covers the delete: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
