//! Peers of another cluster, both ways (spec/35-operations.md, "Peers of
//! another cluster"): every refusal is counted, each refused peer is
//! logged once while it keeps being refused, and configured peers refused
//! within the last minute are listed for `/__ursula/ready` and metrics.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::types::NodeId;

/// How long a refused configured peer stays listed.
const LISTED_FOR: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct PeerRefusals {
    count: AtomicU64,
    /// Requests without a cluster id (a stray client or an old node).
    unidentified: AtomicU64,
    /// Some peer is logged as refused: checked before taking a lock on
    /// the fast path of every accepted request.
    any_logged: AtomicBool,
    logged: Mutex<HashSet<(NodeId, String)>>,
    /// Configured peers by node id: the cluster id they sent or answered
    /// with, and when.
    recent: Mutex<HashMap<NodeId, (String, Instant)>>,
    /// Addresses of senders that named no cluster id, logged once each.
    unidentified_logged: Mutex<HashSet<String>>,
    /// Peers of another format epoch: `format_epoch_mismatch`.
    pub format: super::format_check::FormatMismatch,
}

/// Which way a refusal went.
#[derive(Debug, Clone, Copy)]
pub enum Direction {
    /// This node refused a request from the peer.
    Refused,
    /// The peer refused a request this node sent it.
    RefusedBy,
    /// The startup probe found it; nothing was refused yet.
    Probed,
}

impl PeerRefusals {
    /// Records a refusal; `configured` when the peer's node id is one of
    /// `raft.peers` (only those are listed).
    pub fn record(&self, direction: Direction, peer: NodeId, cluster_id: &str, address: &str, configured: bool) {
        if !matches!(direction, Direction::Probed) {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        if cluster_id.is_empty() {
            self.unidentified.fetch_add(1, Ordering::Relaxed);
            if lock(&self.unidentified_logged).insert(address.to_string()) {
                tracing::error!(
                    peer,
                    address,
                    "refusing Raft traffic from a sender that names no cluster id: a node before format epoch 4 \
                     or not an Ursula node (logged once per address; this node stays ready)"
                );
            }
            return;
        }
        let first = lock(&self.logged).insert((peer, cluster_id.to_string()));
        if first {
            self.any_logged.store(true, Ordering::Relaxed);
            let why = match direction {
                Direction::Refused => "it sent this node a request",
                Direction::RefusedBy => "it refused this node's request",
                Direction::Probed => "it answered the startup probe; starting anyway",
            };
            tracing::error!(
                peer,
                cluster_id,
                address,
                why,
                "refusing Raft traffic with a peer of another cluster (logged once while it lasts)"
            );
        }
        if configured {
            lock(&self.recent).insert(peer, (cluster_id.to_string(), Instant::now()));
        }
    }

    /// The peer spoke as one of this cluster again: log it anew if it is
    /// ever refused later.
    pub fn accepted(&self, peer: NodeId) {
        if self.any_logged.load(Ordering::Relaxed) {
            let mut logged = lock(&self.logged);
            logged.retain(|(node, _)| *node != peer);
            self.any_logged.store(!logged.is_empty(), Ordering::Relaxed);
        }
    }

    pub fn total(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// `peer_cluster_mismatches`: configured peers refused within a minute.
    pub fn mismatches(&self) -> Value {
        let mut recent = lock(&self.recent);
        recent.retain(|_, (_, at)| at.elapsed() < LISTED_FOR);
        let mut list: Vec<(&NodeId, &String)> = recent.iter().map(|(id, (c, _))| (id, c)).collect();
        list.sort();
        Value::Array(list.into_iter().map(|(id, c)| json!({"node_id": id, "cluster_id": c})).collect())
    }

    pub fn metrics(&self, m: &mut serde_json::Map<String, Value>) {
        m.insert("raft_grpc_peer_cluster_refusals".into(), self.total().into());
        m.insert("raft_grpc_unidentified_peer_refusals".into(), self.unidentified.load(Ordering::Relaxed).into());
        m.insert("peer_cluster_mismatches".into(), self.mismatches());
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_refusal_lists_configured_peers_only() {
        let r = PeerRefusals::default();
        r.record(Direction::Refused, 4, "uother", "127.0.0.1:1", true);
        r.record(Direction::Refused, 4, "uother", "127.0.0.1:1", true);
        r.record(Direction::RefusedBy, 9, "uelse", "127.0.0.1:2", false);
        r.record(Direction::Refused, 7, "", "127.0.0.1:3", false);
        let mut m = serde_json::Map::new();
        r.metrics(&mut m);
        assert_eq!(m["raft_grpc_peer_cluster_refusals"], 4);
        assert_eq!(m["raft_grpc_unidentified_peer_refusals"], 1);
        assert_eq!(m["peer_cluster_mismatches"], json!([{"node_id": 4, "cluster_id": "uother"}]));
    }

    #[test]
    fn logs_once_while_refused_and_again_after_an_accept() {
        let r = PeerRefusals::default();
        r.record(Direction::Refused, 4, "uother", "a", true);
        assert!(r.any_logged.load(Ordering::Relaxed));
        assert!(!lock(&r.logged).insert((4, "uother".into())), "already logged");
        r.accepted(4);
        assert!(!r.any_logged.load(Ordering::Relaxed));
        assert!(lock(&r.logged).is_empty());
    }

    #[test]
    fn a_sender_without_a_cluster_id_is_logged_by_address_and_not_listed() {
        let r = PeerRefusals::default();
        r.record(Direction::Refused, 0, "", "10.0.0.9:5000", true);
        r.record(Direction::Refused, 7, "", "10.0.0.9:5000", true);
        assert_eq!(lock(&r.unidentified_logged).len(), 1);
        assert!(lock(&r.logged).is_empty() && lock(&r.recent).is_empty());
        assert_eq!(r.total(), 2);
    }

    #[test]
    fn a_probe_finding_is_listed_and_logged_but_not_counted() {
        let r = PeerRefusals::default();
        r.record(Direction::Probed, 2, "uother", "a", true);
        assert_eq!(r.total(), 0);
        assert_eq!(r.mismatches(), json!([{"node_id": 2, "cluster_id": "uother"}]));
        r.record(Direction::RefusedBy, 2, "uother", "a", true);
        assert_eq!(lock(&r.logged).len(), 1, "the later refusal is not logged again");
    }
}
