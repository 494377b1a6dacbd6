//! The Raft protocol's format epoch between voters (spec/35 "Upgrading",
//! spec/38 "`peer N (…) refused Raft protocol 5`"): a start probes every
//! configured peer and refuses to run beside one of another epoch; later,
//! any Raft RPC exchanged with a peer of another epoch, either way, leaves
//! the node unready (`format_epoch_mismatch`) until it restarts.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tonic::transport::Endpoint;
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;

use super::refusals::Direction;
use super::types::NodeId;
use crate::format_epoch::FORMAT_EPOCH;

/// How long the startup probe waits for a peer to connect and to answer:
/// a peer that is not up yet is skipped, not waited for.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// Whether a sender's format epoch is this release's: 0 is a node of this
/// epoch that does not fill in the field.
pub fn speaks_ours(epoch: u32) -> bool {
    epoch == 0 || epoch == FORMAT_EPOCH
}

/// The refusal's text for a sender of another Raft protocol.
pub fn mismatch_text(their_epoch: u32) -> String {
    format!("Raft protocol mismatch: this node speaks Raft protocol {FORMAT_EPOCH}, the sender {their_epoch}")
}

/// The refusal's text for a sender that names no cluster id (a node
/// before format epoch 4 reads it as a protocol mismatch).
pub fn unidentified_text() -> String {
    format!(
        "Raft protocol mismatch: this node speaks Raft protocol {FORMAT_EPOCH} and every request names a cluster id"
    )
}

/// The latch behind `format_epoch_mismatch`: set by the first exchange with
/// a peer of another epoch and held until the process ends.
#[derive(Default)]
pub struct FormatMismatch {
    seen: AtomicBool,
    /// Peer addresses already logged (one error line per peer).
    logged: Mutex<HashSet<String>>,
}

impl FormatMismatch {
    pub fn record(&self, direction: Direction, address: &str, detail: &str) {
        self.seen.store(true, Ordering::Relaxed);
        if !lock(&self.logged).insert(address.to_owned()) {
            return;
        }
        match direction {
            Direction::Refused => tracing::error!(
                address,
                detail,
                "refusing Raft traffic from a peer of another format epoch; this node stays unready until it restarts"
            ),
            Direction::RefusedBy | Direction::Probed => tracing::error!(
                address,
                detail,
                "a peer of another format epoch refuses this node's Raft traffic; this node stays unready until it restarts"
            ),
        }
    }

    /// Whether this node exchanged a Raft RPC with a peer of another epoch.
    pub fn seen(&self) -> bool {
        self.seen.load(Ordering::Relaxed)
    }

    /// A call failed with `status`: a peer that does not know the call
    /// runs another Raft protocol.
    pub fn check_status(&self, address: &str, status: &tonic::Status) {
        if status.code() == tonic::Code::Unimplemented {
            self.record(Direction::RefusedBy, address, status.message());
        }
    }
}

/// Why a start is refused: a configured peer speaks another Raft protocol.
#[derive(Debug, thiserror::Error)]
#[error("peer {node} ({url}) refused Raft protocol {FORMAT_EPOCH}: {why}")]
pub struct ProtocolRefused {
    pub node: NodeId,
    pub url: String,
    pub why: String,
}

/// What the startup probe learnt of one peer.
#[derive(Debug, PartialEq)]
pub enum Probed {
    /// It answered as a node of this epoch, with its cluster id.
    Answered { cluster_id: String },
    /// It could not be asked (down, not listening yet, no answer in time).
    Unreachable(String),
    /// It speaks another Raft protocol.
    Refused(String),
}

/// Classifies a peer's answer to the format probe (an `UNIMPLEMENTED` is
/// asked again as the group probe, `classify_group_probe`).
pub fn classify(outcome: Result<pb::FormatProbeReply, tonic::Status>) -> Probed {
    match outcome {
        Ok(reply) if reply.format_epoch == FORMAT_EPOCH => Probed::Answered { cluster_id: reply.cluster_id },
        Ok(reply) => Probed::Refused(format!("it speaks Raft protocol {}", reply.format_epoch)),
        Err(status) => Probed::Unreachable(status.to_string()),
    }
}

/// Classifies the group probe's answer of a peer that does not know the
/// format probe: a build of this epoch from before it answers the group
/// probe (so a rolling restart onto this build goes on), a node of another
/// protocol knows neither. `ours` is this node's cluster id.
pub fn classify_group_probe(outcome: Result<pb::ProbeGroupReply, tonic::Status>, ours: &str) -> Probed {
    use pb::probe_group_reply::Result as R;
    use pb::refusal::Kind;
    match outcome.map(|reply| reply.result) {
        Ok(Some(R::Refusal(r))) if r.kind() == Kind::FormatEpochMismatch => {
            Probed::Refused(format!("it refused the group probe: {}", r.detail))
        }
        Ok(Some(R::Refusal(r))) if r.kind() == Kind::ClusterMismatch => Probed::Answered { cluster_id: r.cluster_id },
        Ok(_) => Probed::Answered { cluster_id: ours.to_owned() },
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            Probed::Refused(format!("it knows neither the format probe nor the group probe ({})", status.message()))
        }
        Err(status) => Probed::Unreachable(status.to_string()),
    }
}

/// Asks one peer which Raft protocol and cluster it speaks.
pub async fn probe(url: &str, preamble: pb::Preamble) -> Probed {
    let endpoint = match Endpoint::from_shared(url.to_owned()) {
        Ok(e) => e.connect_timeout(PROBE_WAIT).timeout(PROBE_WAIT),
        Err(e) => return Probed::Unreachable(e.to_string()),
    };
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => return Probed::Unreachable(e.to_string()),
    };
    let mut client = RaftServiceClient::new(channel);
    let late = || Probed::Unreachable(format!("no answer within {PROBE_WAIT:?}"));
    let ours = preamble.cluster_id.clone();
    let request = pb::FormatProbeRequest { preamble: Some(preamble.clone()) };
    let Ok(answer) = tokio::time::timeout(PROBE_WAIT, client.format_probe(request)).await else { return late() };
    match answer {
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            let request = pb::ProbeGroupRequest { preamble: Some(preamble) };
            match tokio::time::timeout(PROBE_WAIT, client.probe_group(request)).await {
                Ok(outcome) => classify_group_probe(outcome.map(tonic::Response::into_inner), &ours),
                Err(_) => late(),
            }
        }
        outcome => classify(outcome.map(tonic::Response::into_inner)),
    }
}

/// Probes every peer at once: an error names the first peer of another
/// protocol; otherwise the peers that answered, with their cluster ids.
/// An unreachable peer is skipped (its first exchange is checked later).
pub async fn probe_peers(
    peers: &[(NodeId, String)],
    preamble: pb::Preamble,
) -> Result<Vec<(NodeId, String, String)>, ProtocolRefused> {
    let asks = peers.iter().map(|(node, url)| {
        let preamble = preamble.clone();
        async move { (*node, url.clone(), probe(url, preamble).await) }
    });
    let mut answered = Vec::new();
    for (node, url, outcome) in futures_util::future::join_all(asks).await {
        match outcome {
            Probed::Answered { cluster_id } => answered.push((node, url, cluster_id)),
            Probed::Unreachable(why) => {
                tracing::warn!(peer = node, %url, error = %why, "format-epoch probe: peer unreachable; checked at first contact")
            }
            Probed::Refused(why) => return Err(ProtocolRefused { node, url, why }),
        }
    }
    Ok(answered)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_is_this_epoch_or_the_field_left_out() {
        assert!(speaks_ours(0));
        assert!(speaks_ours(FORMAT_EPOCH));
        assert!(!speaks_ours(4));
        assert!(!speaks_ours(FORMAT_EPOCH + 1));
    }

    #[test]
    fn a_probe_answer_of_another_epoch_refuses_the_start() {
        let reply = |format_epoch| Ok(pb::FormatProbeReply { format_epoch, cluster_id: "c".into(), node_id: 2 });
        assert_eq!(classify(reply(FORMAT_EPOCH)), Probed::Answered { cluster_id: "c".into() });
        assert!(matches!(classify(reply(4)), Probed::Refused(why) if why.contains("protocol 4")));
        assert!(matches!(classify(reply(0)), Probed::Refused(_)), "a probe answer always names its epoch");
        assert!(matches!(classify(Err(tonic::Status::unavailable("refused"))), Probed::Unreachable(_)));
        assert!(matches!(classify(Err(tonic::Status::deadline_exceeded("slow"))), Probed::Unreachable(_)));
    }

    #[test]
    fn a_peer_without_the_format_probe_is_judged_by_the_group_probe() {
        use pb::probe_group_reply::Result as R;
        use pb::refusal::Kind;
        let refusal = |kind: Kind, cluster_id: &str| {
            Ok(pb::ProbeGroupReply {
                result: Some(R::Refusal(pb::Refusal {
                    kind: kind as i32,
                    cluster_id: cluster_id.into(),
                    node_id: 2,
                    detail: "d".into(),
                })),
            })
        };
        // A build of this epoch from before the format probe.
        let holding = Ok(pb::ProbeGroupReply { result: Some(R::Holding(pb::GroupHolding::default())) });
        assert_eq!(classify_group_probe(holding, "ours"), Probed::Answered { cluster_id: "ours".into() });
        let other = classify_group_probe(refusal(Kind::ClusterMismatch, "theirs"), "ours");
        assert_eq!(other, Probed::Answered { cluster_id: "theirs".into() });
        let unknown_group = classify_group_probe(refusal(Kind::UnknownGroup, "ours"), "ours");
        assert_eq!(unknown_group, Probed::Answered { cluster_id: "ours".into() });
        // Another protocol.
        assert!(matches!(classify_group_probe(refusal(Kind::FormatEpochMismatch, "ours"), "ours"), Probed::Refused(_)));
        let unknown_call = Err(tonic::Status::unimplemented("unknown service"));
        assert!(matches!(classify_group_probe(unknown_call, "ours"), Probed::Refused(_)));
        let down = Err(tonic::Status::unavailable("down"));
        assert!(matches!(classify_group_probe(down, "ours"), Probed::Unreachable(_)));
    }

    #[test]
    fn the_refusal_names_the_peer_and_this_protocol() {
        let e =
            ProtocolRefused { node: 3, url: "http://10.0.0.3:4438".into(), why: "it speaks Raft protocol 4".into() };
        assert!(e.to_string().starts_with("peer 3 (http://10.0.0.3:4438) refused Raft protocol 5"), "{e}");
    }

    #[test]
    fn latches_for_good_and_logs_each_peer_once() {
        let m = FormatMismatch::default();
        assert!(!m.seen());
        m.check_status("a", &tonic::Status::unavailable("down"));
        assert!(!m.seen(), "an unreachable peer is no mismatch");
        m.check_status("a", &tonic::Status::unimplemented("unknown method"));
        assert!(m.seen());
        m.record(Direction::Refused, "a", "again");
        m.record(Direction::Refused, "b", "another peer");
        assert_eq!(lock(&m.logged).len(), 2);
        assert!(m.seen());
    }
}
