//! A group's replication pipelined (issue 20): large appends, which the
//! batcher sends on a lane of their own, interleaved with small ones of the
//! same group. Each follower must see the group's requests in order: one
//! overtaken by the next would answer a conflict for entries it was about to
//! take, which its leader counts as a follower that lost acknowledged
//! entries (`raft_follower_log_reversions`, spec/35) and replicates again.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::disk_pressure::leader;
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};

const BIN: &str = "application/octet-stream";
const PATIENCE: Duration = Duration::from_secs(60);

async fn metrics(node: &Node) -> serde_json::Value {
    node.get("/__ursula/metrics").send().await.expect(200).json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_small_appends_of_one_group_reach_the_followers_in_order() {
    let layout = Layout::new(3, "pipeline", 1, Planes::Shared);
    let nodes: Vec<Node> = (0..3).map(|i| layout.start(i)).collect();
    for node in &nodes {
        wait_ready(node).await;
    }
    let leading = leader(&nodes.iter().collect::<Vec<_>>()).await;
    leading.create("/pipe/big", BIN).await.expect(201);
    leading.create("/pipe/small", BIN).await.expect(201);
    let big = async {
        for i in 0..12u8 {
            leading.append("/pipe/big", BIN, vec![i; 2 * 1024 * 1024]).await.expect(204);
        }
    };
    let small = async {
        for i in 0..400u32 {
            leading.append("/pipe/small", BIN, i.to_le_bytes().repeat(16)).await.expect(204);
        }
    };
    tokio::join!(big, small);

    let m = metrics(leading).await;
    let applied = |m: &serde_json::Value| m["raft_groups"][0]["last_applied_index"].as_u64().unwrap_or(0);
    let last = applied(&m);
    for node in &nodes {
        let deadline = Instant::now() + PATIENCE;
        while applied(&metrics(node).await) < last {
            assert!(Instant::now() < deadline, "{} never applied up to {last}", node.base());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let reversions = &metrics(leading).await["raft_follower_log_reversions"];
    let counted: u64 = reversions.as_object().map_or(0, |by| by.values().filter_map(|v| v.as_u64()).sum());
    assert_eq!(counted, 0, "followers answered conflicts for entries they took: {reversions}");
}
