//! spec/35 "Deleted data", spec/37 WAL metrics: a group that went quiet
//! keeps a few live entries in the journal's oldest segment, and without
//! compaction every later segment would stay on disk with it, the purged
//! entries of busy groups included. A durable node copies such runs
//! forward a quarter of `raft.deleted_data_max_age` after the segments
//! turned dirty, deletes the old segments, and reads everything back,
//! also after `kill -9`. Expired streams leave the same way, in the
//! background and bounded.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::durability::args_for;
use crate::support::Node;

const TEXT: &str = "text/plain";

/// A durable node on small segments and a short `raft.deleted_data_max_age`.
fn config(dir: &std::path::Path) -> Vec<String> {
    let extra = "segment_size = \"64KiB\"\n[raft]\ngroup_count = 2\ninstall_snapshot_timeout = \"1s\"\n\
                 deleted_data_max_age = \"8s\"\nsnapshot_log_budget = \"64KiB\"\n";
    args_for(dir, extra)
}

async fn metrics(node: &Node) -> Value {
    node.get("/__ursula/metrics").send().await.json()
}

fn applied(m: &Value) -> Vec<u64> {
    m["raft_groups"]
        .as_array()
        .expect("raft_groups")
        .iter()
        .map(|g| g["last_applied_index"].as_u64().unwrap_or(0))
        .collect()
}

fn count(m: &Value, key: &str) -> u64 {
    m[key].as_u64().unwrap_or_else(|| panic!("{key} missing: {m}"))
}

#[tokio::test]
async fn a_quiet_groups_entries_are_copied_forward_and_the_old_segments_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = config(dir.path());
    let node = Node::spawn(&args, None);
    let busy = "/journal/busy";
    node.create(busy, TEXT).await;
    // A quiet stream in the other group: created and written once.
    let before = applied(&metrics(&node).await);
    let busy_group = {
        node.append(busy, TEXT, "b").await;
        let after = applied(&metrics(&node).await);
        (0..after.len()).find(|g| after[*g] > before[*g]).expect("the busy stream's group moved")
    };
    let mut quiet = None;
    for i in 0..64 {
        let path = format!("/journal/quiet-{i}");
        let before = applied(&metrics(&node).await);
        node.create(&path, TEXT).await;
        let after = applied(&metrics(&node).await);
        if after[busy_group] == before[busy_group] {
            quiet = Some(path);
            break;
        }
        node.delete(&path).send().await.expect(204);
    }
    let quiet = quiet.expect("a stream in the other group");
    node.append(&quiet, TEXT, "quiet and kept").await;
    // 1 MiB through the busy group: about 16 segments, snapshotted and purged behind.
    let record = "x".repeat(4095) + "\n";
    for _ in 0..256 {
        node.append(busy, TEXT, record.clone()).await;
    }
    let written = metrics(&node).await;
    assert!(count(&written, "wal_rotations") >= 10, "{written}");

    let started = Instant::now();
    let settled = loop {
        let m = metrics(&node).await;
        if count(&m, "wal_segments") <= 4 && count(&m, "wal_rewritten_bytes") > 0 {
            break m;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the old segments stay: {m}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "journal: {} segments freed, {} bytes copied forward, {:?} after the writes",
        count(&settled, "wal_reclaims"),
        count(&settled, "wal_rewritten_bytes"),
        started.elapsed()
    );
    assert!(count(&settled, "wal_reclaimed_bytes") >= 10 * 64 * 1024, "{settled}");
    assert_eq!(count(&settled, "wal_reclaim_failures"), 0);
    assert_eq!(node.read_all(&quiet).await.text(), "quiet and kept");
    assert_eq!(node.read_all(busy).await.body.len(), 1 + 256 * 4096);

    node.kill9();
    let node = Node::spawn(&args, None);
    assert_eq!(node.read_all(&quiet).await.text(), "quiet and kept");
    assert_eq!(node.read_all(busy).await.body.len(), 1 + 256 * 4096);
    let reopened = metrics(&node).await;
    assert!(count(&reopened, "wal_segments") <= 5, "{reopened}");
    assert!(count(&reopened, "wal_recovery_records") > 0 && count(&reopened, "wal_recovery_bytes") > 0, "{reopened}");
}

/// spec/35 "Deleted data": the group's leader removes expired streams in
/// the background with bounded `ExpireStreams` entries (256 streams each)
/// every quarter of `raft.deleted_data_max_age` here, and writes none
/// while nothing expired.
#[tokio::test]
async fn expired_streams_leave_in_bounded_entries_and_a_quiet_group_gets_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = "[raft]\ngroup_count = 1\ninstall_snapshot_timeout = \"1s\"\ndeleted_data_max_age = \"8s\"\n";
    let args = args_for(dir.path(), extra);
    let node = Node::spawn(&args, None);
    node.create("/ttl-test/kept", TEXT).await;
    for i in 0..300 {
        node.put(&format!("/ttl-test/s{i}")).content_type(TEXT).header("stream-ttl", "1").send().await.expect(201);
    }
    let started = Instant::now();
    let m = loop {
        let m = metrics(&node).await;
        if count(&m, "ttl_expiry_swept_streams") == 300 {
            break m;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the expired streams stay: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("ttl sweep: 300 streams removed {:?} after their creates", started.elapsed());
    assert!(count(&m, "ttl_expiry_sweeps") >= 2, "256 streams per entry at most: {m}");
    assert_eq!(count(&m, "ttl_expiry_sweep_due_groups"), 0);
    assert_eq!(count(&m, "streams"), 1, "{m}");
    assert_eq!(m["group_state_gauges"][0]["streams"], 1, "{m}");
    assert_eq!(m["group_state_gauges"][0]["group"], 0, "{m}");
    assert_eq!(node.read_all("/ttl-test/kept").await.text(), "");
    // Nothing left to expire: two more passes write no entry.
    let before = applied(&m)[0];
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = metrics(&node).await;
    assert_eq!(count(&later, "ttl_expiry_sweeps"), count(&m, "ttl_expiry_sweeps"), "{later}");
    assert_eq!(applied(&later)[0], before, "a pass with nothing expired writes nothing");
}
