//! AppendEntries of one group that queued for the same batch to a peer,
//! joined into one request. openraft pipelines a group's replication: once
//! an entry commits it sends the commit in a request without entries, and
//! the group's next write follows in a request of its own, so a follower
//! paid one Raft turn for each. A request that continues where the one
//! before it ended (same group and vote, its previous log id the other's
//! last) carries both: the entries of the two, the later commit. Each
//! waiter gets the answer its own request would have had.

use std::collections::HashMap;

use tokio::sync::oneshot;
use ursula_proto::raft::v1 as pb;

use super::peer_error::PeerError;

pub type Reply = Result<pb::AppendEntriesReply, PeerError>;

/// Entries bytes a joined request may reach; a request this large goes on
/// alone anyway (the batcher's large-request lane).
pub const MAX_JOINED_BYTES: usize = 1024 * 1024;

/// A request waiting for the next batch: `last`, the log id it ends at
/// (its last entry's, else its previous log id).
pub struct Queued {
    pub request: pb::AppendEntriesRequest,
    pub last: Option<pb::LogId>,
    pub reply: oneshot::Sender<Reply>,
}

/// One request of a batch and everyone waiting on it, in order: the
/// requests joined into it, each with the log id it ended at.
pub struct Joined {
    pub request: pb::AppendEntriesRequest,
    last: Option<pb::LogId>,
    bytes: usize,
    waiters: Vec<(oneshot::Sender<Reply>, Option<pb::LogId>)>,
}

impl Joined {
    pub fn alone(q: Queued) -> Joined {
        let bytes = entry_bytes(&q.request);
        Joined { request: q.request, last: q.last, bytes, waiters: vec![(q.reply, q.last)] }
    }

    /// Whether `q` continues this request: same group and vote, its
    /// previous log id this one's last, the two within the size bound.
    fn continued_by(&self, q: &Queued) -> bool {
        let group = |r: &pb::AppendEntriesRequest| r.preamble.as_ref().map(|p| p.group);
        group(&self.request) == group(&q.request)
            && self.request.vote == q.request.vote
            && q.request.prev_log_id == self.last
            && self.bytes + entry_bytes(&q.request) <= MAX_JOINED_BYTES
    }

    /// Takes `q`, which continues this request, into it.
    fn join(&mut self, q: Queued) {
        let bytes = entry_bytes(&q.request);
        let Queued { request, last, reply } = q;
        self.request.entries.extend(request.entries);
        // The greater commit: a heartbeat made before a write may be queued after it.
        let key = |c: &Option<pb::LogId>| c.as_ref().map(|c| (c.term, c.index));
        if key(&request.leader_commit) > key(&self.request.leader_commit) {
            self.request.leader_commit = request.leader_commit;
        }
        self.last = last;
        self.bytes += bytes;
        self.waiters.push((reply, last));
    }

    /// Answers every waiter from the reply to the joined request.
    pub fn answer(self, reply: Reply) {
        for (waiter, last) in self.waiters {
            let _ = waiter.send(reply.clone().map(|r| own_reply(r, last.as_ref())));
        }
    }
}

fn entry_bytes(r: &pb::AppendEntriesRequest) -> usize {
    r.entries.iter().map(bytes::Bytes::len).sum()
}

/// What a request ending at `last` gets from the reply to a request that
/// contains it: the follower took it whole when it took anything past it.
fn own_reply(reply: pb::AppendEntriesReply, last: Option<&pb::LogId>) -> pb::AppendEntriesReply {
    use pb::append_entries_reply::Result as R;
    match &reply.result {
        Some(R::PartialSuccess(p)) if reaches(p.matching.as_ref(), last) => {
            pb::AppendEntriesReply { result: Some(R::Success(pb::Success {})) }
        }
        _ => reply,
    }
}

fn reaches(matching: Option<&pb::LogId>, last: Option<&pb::LogId>) -> bool {
    match (matching, last) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(m), Some(l)) => (m.term, m.index) >= (l.term, l.index),
    }
}

/// `queued` in order, each request joined into the last one of its group
/// when it continues it. Counts the joins in `joins`.
pub fn join_all(queued: Vec<Queued>, joins: &mut u64) -> Vec<Joined> {
    let mut out: Vec<Joined> = Vec::with_capacity(queued.len());
    let mut latest: HashMap<u32, usize> = HashMap::new();
    for q in queued {
        let group = q.request.preamble.as_ref().map(|p| p.group);
        if let Some(at) = group.and_then(|g| latest.get(&g).copied())
            && out[at].continued_by(&q)
        {
            out[at].join(q);
            *joins += 1;
            continue;
        }
        if let Some(g) = group {
            latest.insert(g, out.len());
        }
        out.push(Joined::alone(q));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::append_entries_reply::Result as R;

    fn id(term: u64, index: u64) -> pb::LogId {
        pb::LogId { term, node_id: 1, index }
    }

    fn vote(term: u64) -> Option<pb::Vote> {
        Some(pb::Vote { term, node_id: 1, committed: true })
    }

    /// A request of `group` after `prev` with entries at `indexes`.
    fn request(
        group: u32,
        term: u64,
        prev: Option<u64>,
        indexes: &[u64],
        commit: u64,
    ) -> (Queued, oneshot::Receiver<Reply>) {
        let preamble = Some(pb::Preamble { cluster_id: "c".into(), node_id: 1, group, format_epoch: 5 });
        let entries = indexes.iter().map(|i| bytes::Bytes::from(vec![*i as u8; 8])).collect();
        let prev_log_id = prev.map(|i| id(term, i));
        let request = pb::AppendEntriesRequest {
            preamble,
            vote: vote(term),
            prev_log_id,
            entries,
            leader_commit: Some(id(term, commit)),
        };
        let last = indexes.last().map(|i| id(term, *i)).or(prev_log_id);
        let (reply, rx) = oneshot::channel();
        (Queued { request, last, reply }, rx)
    }

    fn success() -> pb::AppendEntriesReply {
        pb::AppendEntriesReply { result: Some(R::Success(pb::Success {})) }
    }

    #[test]
    fn a_commit_update_and_the_next_write_of_its_group_go_as_one() {
        let (commit_only, a) = request(7, 3, Some(10), &[], 10);
        let (other_group, b) = request(8, 3, Some(4), &[5], 4);
        let (next, c) = request(7, 3, Some(10), &[11, 12], 10);
        let (after, d) = request(7, 3, Some(12), &[13], 11);
        let mut joins = 0;
        let joined = join_all(vec![commit_only, other_group, next, after], &mut joins);
        assert_eq!((joined.len(), joins), (2, 2));
        let first = &joined[0].request;
        assert_eq!(first.prev_log_id, Some(id(3, 10)));
        assert_eq!(first.entries.len(), 3);
        assert_eq!(first.leader_commit, Some(id(3, 11)), "the later commit");
        assert_eq!(joined[1].request.preamble.as_ref().map(|p| p.group), Some(8));
        for j in joined {
            j.answer(Ok(success()));
        }
        for rx in [a, b, c, d] {
            assert_eq!(rx.blocking_recv().expect("answered").expect("reply"), success());
        }
    }

    #[test]
    fn requests_that_do_not_continue_stay_apart() {
        let cases = [
            ("a gap", request(7, 3, Some(10), &[11], 10), request(7, 3, Some(12), &[13], 10)),
            ("another term", request(7, 3, Some(10), &[11], 10), request(7, 4, Some(11), &[12], 10)),
            ("the same position again", request(7, 3, Some(10), &[11], 10), request(7, 3, Some(10), &[11], 10)),
        ];
        for (why, (a, _ra), (b, _rb)) in cases {
            let mut joins = 0;
            assert_eq!(join_all(vec![a, b], &mut joins).len(), 2, "{why}");
            assert_eq!(joins, 0, "{why}");
        }
        let (big, _r1) = request(7, 3, Some(10), &[11], 10);
        let (mut huge, _r2) = request(7, 3, Some(11), &[12], 10);
        huge.request.entries = vec![bytes::Bytes::from(vec![0u8; MAX_JOINED_BYTES])];
        let mut joins = 0;
        assert_eq!(join_all(vec![big, huge], &mut joins).len(), 2, "past the size bound");
    }

    #[test]
    fn each_waiter_gets_what_its_own_request_would_have() {
        let (first, a) = request(7, 3, Some(10), &[11], 10);
        let (second, b) = request(7, 3, Some(11), &[12, 13], 10);
        let mut joins = 0;
        let mut joined = join_all(vec![first, second], &mut joins);
        // The follower took up to 12: the first request whole, the second in part.
        let partial = pb::AppendEntriesReply {
            result: Some(R::PartialSuccess(pb::PartialSuccess { matching: Some(id(3, 12)) })),
        };
        joined.remove(0).answer(Ok(partial.clone()));
        assert_eq!(a.blocking_recv().expect("a").expect("reply"), success());
        assert_eq!(b.blocking_recv().expect("b").expect("reply"), partial);

        for refusal in [
            pb::AppendEntriesReply { result: Some(R::Conflict(pb::Conflict {})) },
            pb::AppendEntriesReply { result: Some(R::HigherVote(pb::Vote { term: 9, node_id: 2, committed: false })) },
        ] {
            let (first, a) = request(7, 3, Some(10), &[], 10);
            let (second, b) = request(7, 3, Some(10), &[11], 10);
            let mut joined = join_all(vec![first, second], &mut joins);
            joined.remove(0).answer(Ok(refusal.clone()));
            assert_eq!(a.blocking_recv().expect("a").expect("reply"), refusal);
            assert_eq!(b.blocking_recv().expect("b").expect("reply"), refusal);
        }
        let (first, a) = request(7, 3, Some(10), &[], 10);
        let (second, b) = request(7, 3, Some(10), &[11], 10);
        let mut joined = join_all(vec![first, second], &mut joins);
        joined.remove(0).answer(Err(PeerError::BatchDropped));
        assert!(a.blocking_recv().expect("a").is_err() && b.blocking_recv().expect("b").is_err());
    }
}
