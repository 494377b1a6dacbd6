//! The per-group membership bootstrap (`raft.init_membership_per_group`,
//! spec/35-operations.md "Rejoining a wiped node"): one voter per group
//! initializes it, and only once every other configured voter reports the
//! group empty with no leader. A wiped or replaced replica therefore waits
//! to be replicated to instead of starting a second history, and a fresh
//! cluster with a voter that never comes up stays uninitialized.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;

use super::grpc_client::Peers;
use super::types::{GroupRaft, NodeId};

/// Between two surveys of the peers.
const SURVEY_EVERY: Duration = Duration::from_millis(300);

/// The voter that initializes `group`, and so usually its first leader:
/// the voters in turn, so a fresh cluster starts with its leaderships
/// spread (the balancer keeps them so).
pub fn initializer(members: &BTreeMap<NodeId, BasicNode>, group: u32) -> Option<NodeId> {
    let n = members.len();
    if n == 0 {
        return None;
    }
    members.keys().nth(group as usize % n).copied()
}

/// What the other voters hold of a group.
#[derive(Debug, PartialEq, Eq)]
enum Survey {
    /// Some voter holds it or follows a leader: the group exists.
    Exists,
    /// Every other voter answered, and none holds it.
    Empty,
    /// Some voters did not answer.
    Incomplete(Vec<NodeId>),
}

async fn survey(peers: &Peers, members: &BTreeMap<NodeId, BasicNode>, me: NodeId, group: u32) -> Survey {
    let others: Vec<NodeId> = members.keys().copied().filter(|id| *id != me).collect();
    let answers = futures_util::future::join_all(others.iter().map(|id| peers.probe(*id, group))).await;
    let mut missing = Vec::new();
    for (id, answer) in others.iter().zip(answers) {
        match answer {
            Ok(h) if h.holds || h.leader.is_some() => return Survey::Exists,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(group, peer = id, error = %e, "bootstrap probe failed");
                missing.push(*id);
            }
        }
    }
    if missing.is_empty() { Survey::Empty } else { Survey::Incomplete(missing) }
}

/// Runs on the group's initializer until the group exists somewhere.
pub async fn bootstrap(
    raft: GroupRaft,
    group: u32,
    me: NodeId,
    members: BTreeMap<NodeId, BasicNode>,
    peers: Arc<Peers>,
) {
    let mut logged = false;
    loop {
        match raft.is_initialized().await {
            Ok(false) => {}
            Ok(true) | Err(_) => return,
        }
        match survey(&peers, &members, me, group).await {
            Survey::Exists => {
                tracing::info!(group, "the group exists on a peer: waiting to be replicated to, not initializing");
                return;
            }
            Survey::Empty => {
                // Refused only when entries arrived meanwhile: the group exists.
                if let Err(e) = raft.initialize(members.clone()).await {
                    tracing::info!(group, error = %e, "did not initialize the group");
                }
                return;
            }
            Survey::Incomplete(missing) if !logged => {
                tracing::info!(group, ?missing, "waits for every voter before initializing");
                logged = true;
            }
            Survey::Incomplete(_) => {}
        }
        tokio::time::sleep(SURVEY_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_voters_initialize_the_groups_in_turn() {
        let members: BTreeMap<NodeId, BasicNode> =
            [9, 3, 7].into_iter().map(|id| (id, BasicNode { addr: String::new() })).collect();
        let picked: Vec<Option<NodeId>> = (0..4).map(|g| initializer(&members, g)).collect();
        assert_eq!(picked, [Some(3), Some(7), Some(9), Some(3)]);
        assert_eq!(initializer(&BTreeMap::new(), 0), None);
    }
}
