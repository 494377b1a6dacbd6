//! A three-voter cluster on loopback (issue 6, first step): Raft over the
//! private gRPC plane, replication to every replica, a new leader after
//! `kill -9` of the old one, and a restarted voter catching up.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::Node;

const S: &str = "/cluster/log";
const TEXT: &str = "text/plain";
const PATIENCE: Duration = Duration::from_secs(60);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

struct Cluster {
    dir: tempfile::TempDir,
    client: Vec<u16>,
    raft: Vec<u16>,
}

impl Cluster {
    fn new(voters: usize) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        Cluster {
            dir,
            client: (0..voters).map(|_| free_port()).collect(),
            raft: (0..voters).map(|_| free_port()).collect(),
        }
    }

    fn args(&self, i: usize) -> Vec<String> {
        let mut text = format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\ncluster_listen = \"127.0.0.1:{}\"\ncluster_id = \"test-cluster\"\n\
             [raft]\nnode_id = {}\ngroup_count = 8\ninit_membership_per_group = true\n[raft.wal]\npath = {:?}\n",
            self.client[i],
            self.raft[i],
            i + 1,
            self.dir.path().join(format!("n{}", i + 1)),
        );
        for j in 0..self.client.len() {
            text.push_str(&format!(
                "[[raft.peers]]\nnode_id = {}\nurl = \"http://127.0.0.1:{}\"\nclient_url = \"http://127.0.0.1:{}\"\n",
                j + 1,
                self.raft[j],
                self.client[j]
            ));
        }
        let path = self.dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, text).expect("config");
        vec!["server".into(), "--config".into(), path.display().to_string()]
    }

    fn start(&self, i: usize) -> Node {
        Node::spawn(&self.args(i), None)
    }
}

async fn wait_ready(node: &Node) {
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

fn record(seq: u64) -> String {
    format!("record {seq:04}\n")
}

/// Sends one producer append to whichever live node leads the stream's
/// group; returns the index of that node.
async fn append(nodes: &[Option<Node>], seq: u64) -> usize {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for (i, node) in nodes.iter().enumerate() {
            let Some(node) = node else { continue };
            let answer = node.post(S).content_type(TEXT).producer("w", 0, seq).body(record(seq)).send().await;
            if answer.status == 200 || answer.status == 204 {
                return i;
            }
            assert_eq!(answer.status, 503, "append {seq} on node {}: {answer:?}", i + 1);
        }
        assert!(Instant::now() < deadline, "no node accepted append {seq}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `node` serves exactly `expected` from its own replica.
async fn converges(node: &Node, expected: &str) {
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
    let cluster = Cluster::new(3);
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

    // kill -9 the group's leader: the other two elect a new one and go on.
    nodes[leader].take().expect("the leader").kill9();
    let killed_at = Instant::now();
    let next = append(&nodes, 20).await;
    assert_ne!(next, leader);
    let failover = killed_at.elapsed();
    for seq in 21..40 {
        append(&nodes, seq).await;
    }
    expected = (0..40).map(record).collect();
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }

    // The old leader restarts on its WAL and catches up without reinitializing.
    nodes[leader] = Some(cluster.start(leader));
    let back = nodes[leader].as_ref().expect("restarted");
    converges(back, &expected).await;
    assert!(Path::new(&cluster.dir.path().join(format!("n{}", leader + 1))).is_dir());
    eprintln!("writes resumed {failover:?} after the leader was killed");
}

#[tokio::test]
async fn a_node_with_peers_and_no_cluster_id_refuses_to_start() {
    let cluster = Cluster::new(3);
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
