//! The Raft protocol's format epoch between voters (spec/35 "Upgrading",
//! spec/38): a start refuses a configured peer of another protocol, a
//! running node exchanging a Raft RPC with one turns unready for good
//! (`format_epoch_mismatch`), and a sender that names no cluster id is
//! refused with the protocol-mismatch text without touching readiness.
//!
//! The peer of another release is played by a test server that knows no
//! `RaftService` call (what a node of another protocol answers: gRPC
//! `UNIMPLEMENTED`), or by the test sending requests of epoch 4 itself.

use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;

use crate::support::cluster::{Layout, Planes};
use crate::support::{Node, run_to_exit};

const PATIENCE: Duration = Duration::from_secs(60);

/// A gRPC server on `port` answering every call `UNIMPLEMENTED`, as a node
/// of another Raft protocol does; it stops when the task is aborted.
async fn foreign_peer(port: u16) -> tokio::task::JoinHandle<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind the foreign peer");
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            connections.spawn(async move {
                let unknown = hyper::service::service_fn(|_req| async {
                    hyper::Response::builder()
                        .header("content-type", "application/grpc")
                        .header("grpc-status", "12")
                        .header("grpc-message", "unknown service ursula.raft.v1.RaftService")
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                });
                let _ = ConnBuilder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), unknown).await;
            });
        }
    })
}

/// `/__ursula/ready`'s reason once `done` holds of it (within `PATIENCE`).
async fn ready_until(node: &Node, done: impl Fn(u16, &serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = node.get("/__ursula/ready").send().await;
        let body = ready.json();
        if done(ready.status.as_u16(), &body) {
            return body;
        }
        assert!(Instant::now() < deadline, "readiness never came: {} {}", ready.status, ready.text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_raft_protocol_refuses_the_start_or_leaves_a_running_node_unready() {
    let layout = Layout::new(3, "protocol-cluster", 2, Planes::Shared);
    // Its peers are down at start: the probe skips them and the node runs,
    // unready for want of a quorum.
    let node = layout.start(0);
    let body = ready_until(&node, |status, _| status == 503).await;
    assert_eq!(body["reason"], "raft_replica_unready", "{body}");
    // Peer 2 comes up speaking another protocol: the node's first exchange
    // with it (the group bootstrap's probe) leaves it unready for good.
    let foreign = foreign_peer(layout.raft[1]).await;
    ready_until(&node, |status, b| status == 503 && b["reason"] == "format_epoch_mismatch").await;
    let deadline = Instant::now() + PATIENCE;
    while !node.stderr_text().contains("a peer of another format epoch") {
        assert!(Instant::now() < deadline, "nothing logged: {}", node.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    node.kill9();
    // Started again with that peer up, the probe refuses the start and names it.
    let (status, stderr) = run_to_exit(&layout.args(0));
    assert!(!status.success(), "{stderr}");
    let expected = format!("peer 2 (http://127.0.0.1:{}) refused Raft protocol 5", layout.raft[1]);
    assert!(stderr.contains(&expected), "expected {expected:?} in: {stderr}");
    foreign.abort();
}

/// A `Vote` as a sender with `cluster_id` and `format_epoch` sends it: the
/// refusal it gets back, if any.
async fn vote_as(url: &str, cluster_id: &str, format_epoch: u32) -> Option<pb::Refusal> {
    let mut client = RaftServiceClient::connect(url.to_owned()).await.expect("connect");
    let preamble = pb::Preamble { cluster_id: cluster_id.into(), node_id: 2, group: 0, format_epoch };
    let request = pb::VoteRequest {
        preamble: Some(preamble),
        vote: Some(pb::Vote { term: 1, node_id: 2, committed: false }),
        last_log_id: None,
        leadership_transfer: false,
        pre_vote: true,
    };
    match client.vote(request).await.expect("an answer").into_inner().result {
        Some(pb::vote_reply::Result::Refusal(r)) => Some(r),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_of_another_epoch_makes_the_node_unready_and_one_without_a_cluster_id_does_not() {
    // One voter: it is ready alone and serves the cluster plane.
    let layout = Layout::new(1, "protocol-solo", 2, Planes::Shared);
    let node = layout.start(0);
    ready_until(&node, |status, _| status == 200).await;
    let url = format!("http://127.0.0.1:{}", layout.raft[0]);

    // No cluster id (a node before format epoch 4, or a stray client): the
    // protocol-mismatch refusal, counted and logged once, still ready.
    for _ in 0..3 {
        let refusal = vote_as(&url, "", 0).await.expect("refused");
        assert_eq!(refusal.kind(), pb::refusal::Kind::FormatEpochMismatch);
        assert!(refusal.detail.contains("Raft protocol mismatch"), "{}", refusal.detail);
    }
    let metrics = node.get("/__ursula/metrics").send().await.json();
    assert_eq!(metrics["raft_grpc_unidentified_peer_refusals"], 3, "{metrics}");
    node.get("/__ursula/ready").send().await.expect(200);
    let logged = node.stderr_text().matches("refusing Raft traffic from a sender that names no cluster id").count();
    assert_eq!(logged, 1, "{}", node.stderr_text());

    // This cluster and this epoch (or the field left out) are served.
    assert_eq!(vote_as(&url, "protocol-solo", 5).await, None);
    assert_eq!(vote_as(&url, "protocol-solo", 0).await, None);
    node.get("/__ursula/ready").send().await.expect(200);

    // A node of this cluster on another release: refused, and this node
    // stays unready until it restarts.
    let refusal = vote_as(&url, "protocol-solo", 4).await.expect("refused");
    assert_eq!(refusal.kind(), pb::refusal::Kind::FormatEpochMismatch);
    assert!(refusal.detail.contains("protocol 5, the sender 4"), "{}", refusal.detail);
    let ready = node.get("/__ursula/ready").send().await;
    ready.expect(503);
    assert_eq!(ready.json()["reason"], "format_epoch_mismatch", "{}", ready.text());
    assert!(node.stderr_text().contains("refusing Raft traffic from a peer of another format epoch"));
    // Later traffic of this epoch does not clear it.
    assert_eq!(vote_as(&url, "protocol-solo", 5).await, None);
    node.get("/__ursula/ready").send().await.expect(503);
}
