//! Followers that lost entries they had acknowledged (spec/35, "Recovering
//! after a host crash"): under `fsync = "never"` a host crash can cost a
//! follower its unsynced tail. Its leader then sees a conflict at a log id
//! the follower acknowledged under the same leadership, rewinds its
//! replication (openraft, `allow_log_reversion`) and sends the log again.
//! This counts each such rewind by follower and logs it with the group; a
//! follower that shows up here without a crash may have a disk that drops
//! synced writes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::types::{LogId, NodeId};

/// What a follower answered to one AppendEntries.
pub enum Answered {
    /// It holds the log up to this id.
    Took(Option<LogId>),
    /// It lacks the request's previous log id.
    Conflict,
}

#[derive(Default)]
pub struct Reversions {
    /// (group, follower) → the leader's vote term and the greatest log id
    /// the follower acknowledged under it.
    acked: Mutex<HashMap<(u32, NodeId), (u64, LogId)>>,
    by_follower: Mutex<BTreeMap<NodeId, u64>>,
}

fn position(id: &LogId) -> (u64, u64) {
    (id.leader_id.term, id.index)
}

impl Reversions {
    /// Records `answer` of `follower` to a request of `group` sent under
    /// `vote_term` after `prev`; `true` when it shows a lost acknowledged entry.
    pub fn observe(
        &self,
        group: u32,
        follower: NodeId,
        vote_term: u64,
        prev: Option<&LogId>,
        answer: Answered,
    ) -> bool {
        let mut acked = self.acked.lock().unwrap_or_else(|p| p.into_inner());
        let key = (group, follower);
        match answer {
            Answered::Took(Some(took)) => {
                let keep = acked
                    .get(&key)
                    .filter(|(term, id)| *term == vote_term && position(id) >= position(&took))
                    .is_some();
                if !keep {
                    acked.insert(key, (vote_term, took));
                }
                false
            }
            Answered::Took(None) => false,
            Answered::Conflict => {
                let lost = match (acked.get(&key), prev) {
                    (Some((term, id)), Some(prev)) => *term == vote_term && position(prev) <= position(id),
                    _ => false,
                };
                if lost {
                    let had = acked.remove(&key).map(|(_, id)| id);
                    drop(acked);
                    *self.by_follower.lock().unwrap_or_else(|p| p.into_inner()).entry(follower).or_default() += 1;
                    tracing::warn!(
                        group,
                        follower,
                        acknowledged = ?had.map(|id| position(&id)),
                        "a follower lost Raft log entries it had acknowledged; replication to it rewinds"
                    );
                }
                lost
            }
        }
    }

    /// `raft_follower_log_reversions`: rewinds by follower node id.
    pub fn metrics(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        let by = self.by_follower.lock().unwrap_or_else(|p| p.into_inner());
        let counts: serde_json::Map<String, serde_json::Value> =
            by.iter().map(|(node, n)| (node.to_string(), (*n).into())).collect();
        m.insert("raft_follower_log_reversions".into(), counts.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::vote::RaftLeaderId;
    use openraft::vote::leader_id_adv::CommittedLeaderId;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn a_conflict_at_an_acknowledged_entry_is_one_reversion() {
        let r = Reversions::default();
        assert!(!r.observe(0, 2, 5, Some(&id(5, 9)), Answered::Took(Some(id(5, 12)))));
        // An older, smaller acknowledgement does not lower what was acknowledged.
        assert!(!r.observe(0, 2, 5, Some(&id(5, 8)), Answered::Took(Some(id(5, 10)))));
        // A conflict past what it acknowledged is ordinary (a probe).
        assert!(!r.observe(0, 2, 5, Some(&id(5, 13)), Answered::Conflict));
        // At or below it: the follower lost entries it had.
        assert!(r.observe(0, 2, 5, Some(&id(5, 12)), Answered::Conflict));
        // The probes that walk back after it count nothing more.
        assert!(!r.observe(0, 2, 5, Some(&id(5, 11)), Answered::Conflict));
        assert!(!r.observe(0, 2, 5, Some(&id(5, 6)), Answered::Conflict));
        let mut m = serde_json::Map::new();
        r.metrics(&mut m);
        assert_eq!(m["raft_follower_log_reversions"], serde_json::json!({"2": 1}));
    }

    #[test]
    fn another_leadership_or_group_or_follower_is_apart() {
        let r = Reversions::default();
        r.observe(0, 2, 5, None, Answered::Took(Some(id(5, 12))));
        // A later leader's conflict: the follower's tail from term 5 may be replaced lawfully.
        assert!(!r.observe(0, 2, 6, Some(&id(5, 12)), Answered::Conflict));
        assert!(!r.observe(1, 2, 5, Some(&id(5, 3)), Answered::Conflict), "another group");
        assert!(!r.observe(0, 3, 5, Some(&id(5, 3)), Answered::Conflict), "another follower");
        assert!(!r.observe(0, 2, 5, None, Answered::Conflict), "nothing precedes the first entry");
        let mut m = serde_json::Map::new();
        r.metrics(&mut m);
        assert_eq!(m["raft_follower_log_reversions"], serde_json::json!({}));
    }
}
