//! A follower whose WAL filesystem is below `raft.wal.min_available_size`
//! takes no log entries from its leader (heartbeats still pass): the soak
//! of issue 25 saw a follower's log fill its filesystem to the last byte,
//! after which it could not even record its run state to start again. The
//! group commits on the other two voters meanwhile.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};

const S: &str = "/pressure/s";
const BIN: &str = "application/octet-stream";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_under_wal_disk_pressure_takes_no_entries_and_the_group_commits_without_it() {
    let layout = Layout::new(3, "disk-pressure", 1, Planes::Shared);
    let first = layout.start(0);
    let second = layout.start(1);
    // Voter 3 finds no filesystem with a thousand TiB free: under pressure from its start.
    let args = layout.args(2);
    let config = layout.dir.path().join("n3.toml");
    let text = std::fs::read_to_string(&config).expect("n3.toml").replacen(
        "[raft.wal]\n",
        "[raft.wal]\nmin_available_size = \"1000TiB\"\nresume_available_size = \"2000TiB\"\n",
        1,
    );
    std::fs::write(&config, text).expect("n3.toml");
    let third = Node::spawn(&args, None);
    wait_ready(&first).await;
    wait_ready(&second).await;

    let before = metric(&third, "wal_physical_bytes").await;
    let leader = leader(&[&first, &second]).await;
    leader.create(S, BIN).await.expect(201);
    for _ in 0..64 {
        leader.append(S, BIN, vec![7u8; 16 * 1024]).await.expect(204);
    }
    let written = metric(leader, "wal_physical_bytes").await;
    let grew = metric(&third, "wal_physical_bytes").await - before;
    assert!(written > 1024 * 1024, "the leader's WAL holds the megabyte: {written}");
    assert!(grew < 64 * 1024, "the pressured follower's WAL grew by {grew} bytes");
    assert_eq!(metric(&third, "wal_disk_pressure").await, 1, "voter 3 is under pressure");
    let last_index = |m: serde_json::Value| m["raft_groups"][0]["last_log_index"].as_u64().unwrap_or(0);
    let led = last_index(leader.get("/__ursula/metrics").send().await.expect(200).json());
    let followed = last_index(third.get("/__ursula/metrics").send().await.expect(200).json());
    assert!(led >= 65 && followed < 10, "the leader's log reaches {led}, voter 3's {followed}");
}

async fn metric(node: &Node, name: &str) -> u64 {
    let m = node.get("/__ursula/metrics").send().await.expect(200).json();
    m[name].as_u64().or_else(|| m[name].as_bool().map(u64::from)).unwrap_or_else(|| panic!("no {name} in {m}"))
}

/// The voter of `voters` that leads the one group.
pub async fn leader<'a>(voters: &[&'a Node]) -> &'a Node {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for v in voters {
            if metric(v, "raft_leaderships").await > 0 {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "no leader among the voters");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
