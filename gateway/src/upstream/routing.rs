//! Calls on a group's leader: the leader last seen, else an upstream not
//! tried yet, following typed `not_leader` hints within the hop budget.

use std::time::Instant;

use ursula_http::wire::Refused;
use ursula_http::{BackendError, Unavailable, UpstreamFailure};
use ursula_stream::StreamKey;
use ursula_stream::routing::group_of;

use super::{CallError, Client, HOP_WINDOW, MAX_HOPS, Upstreams, exhausted};

/// How long a request waits for a group without a leader to elect one.
const LEADER_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);
/// The first pause before asking the upstreams again; it doubles.
const SETTLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

impl Upstreams {
    fn leader_of(&self, group: usize) -> Option<usize> {
        self.leaders.read().unwrap_or_else(|p| p.into_inner()).get(group).copied().flatten()
    }

    fn set_leader(&self, group: usize, at: Option<usize>) {
        if let Some(slot) = self.leaders.write().unwrap_or_else(|p| p.into_inner()).get_mut(group) {
            *slot = at;
        }
    }

    /// The first upstream after `from` (or `from` itself when `including`)
    /// not yet tried, preferring ones not ejected; `from` when all were tried.
    fn next_untried(&self, from: usize, tried: &[bool], including: bool) -> usize {
        let n = self.clients.len();
        let now = Instant::now();
        let start = if including { 0 } else { 1 };
        let order = || (start..start + n).map(|d| (from + d) % n).filter(|i| !tried[*i]);
        order().find(|i| !self.health.is_ejected(*i, now)).or_else(|| order().next()).unwrap_or(from)
    }

    /// Calls `f` on the leader of `key`'s group, following hints. `resend`
    /// says whether a call that may have reached a voter may go again
    /// (reads), or not (writes).
    pub async fn on_leader<T, F, Fut>(&self, key: &StreamKey, resend: bool, f: F) -> Result<T, BackendError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        self.on_leader_at(key, resend, |at| f(self.clients[at].clone())).await
    }

    /// A read on the leader of `key`'s group, on that upstream's connection for reads.
    pub async fn read_on_leader<T, F, Fut>(&self, key: &StreamKey, f: F) -> Result<T, BackendError>
    where
        F: Fn(super::reads::ReadChannel) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        self.on_leader_at(key, true, |at| f(self.reads.get(at, &self.urls[at]))).await
    }

    /// An append on the leader of `key`'s group, in that upstream's next batch.
    pub async fn append_on_leader<T, F, Fut>(&self, key: &StreamKey, f: F) -> Result<T, BackendError>
    where
        F: Fn(super::appends::Appends) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        self.on_leader_at(key, false, |at| f(self.appends[at].clone())).await
    }

    /// `on_leader` with the upstream's index.
    async fn on_leader_at<T, F, Fut>(&self, key: &StreamKey, resend: bool, f: F) -> Result<T, BackendError>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.calls.fetch_add(1, Relaxed);
        let group = group_of(key, self.group_count).0 as usize;
        let n = self.clients.len();
        let mut at = self.leader_of(group).unwrap_or_else(|| self.next_untried(group % n, &vec![false; n], true));
        let started = Instant::now();
        let mut any_answered = false;
        let mut pause = SETTLE_PAUSE;
        loop {
            let mut tried = vec![false; n];
            // Every upstream answered that it does not lead and knows no leader
            // to send us to: an election or a transfer is under way.
            let mut leaderless = false;
            for hop in 0..=MAX_HOPS {
                if hop > 0 {
                    self.stats.hops.fetch_add(1, Relaxed);
                    if started.elapsed() > HOP_WINDOW {
                        break;
                    }
                }
                tried[at] = true;
                let next_untried = |from: usize, tried: &[bool]| {
                    let next = self.next_untried(from, tried, false);
                    (!tried[next]).then_some(next)
                };
                let outcome = f(at).await;
                match &outcome {
                    Err(CallError::Unreached(_) | CallError::Broken(_)) => self.health.failed(at, Instant::now()),
                    // One slow group on a live voter times out too: not an ejection.
                    Err(CallError::TimedOut) => {}
                    _ => {
                        any_answered = true;
                        self.health.answered(at, Instant::now());
                    }
                }
                match outcome {
                    Ok(value) => {
                        self.set_leader(group, Some(at));
                        return Ok(value);
                    }
                    Err(CallError::Refused(Refused::NotLeader { leader, .. })) => {
                        let hinted = leader.as_ref().and_then(|h| self.index_of(&h.client_url));
                        self.set_leader(group, hinted);
                        match hinted.filter(|i| !tried[*i]).or_else(|| next_untried(at, &tried)) {
                            Some(next) => at = next,
                            None => {
                                leaderless = true;
                                break;
                            }
                        }
                    }
                    Err(CallError::Refused(Refused::Backend(BackendError::Unavailable {
                        reason: Unavailable::NoLeader,
                        ..
                    }))) => match next_untried(at, &tried) {
                        Some(next) => at = next,
                        None => {
                            leaderless = true;
                            break;
                        }
                    },
                    Err(CallError::Refused(Refused::Backend(e))) => return Err(e),
                    Err(CallError::Refused(other)) => {
                        self.stats.upstream_errors.fetch_add(1, Relaxed);
                        return Err(BackendError::Internal(format!("upstream refused: {other:?}")));
                    }
                    Err(CallError::Unreached(why)) => {
                        self.stats.upstream_errors.fetch_add(1, Relaxed);
                        tracing::debug!(upstream = %self.urls[at], %why, "upstream unreachable");
                        self.set_leader(group, None);
                        match next_untried(at, &tried) {
                            Some(next) => at = next,
                            None => break,
                        }
                    }
                    Err(CallError::TimedOut) => {
                        self.stats.upstream_errors.fetch_add(1, Relaxed);
                        return Err(BackendError::Upstream(UpstreamFailure::TimedOut));
                    }
                    Err(CallError::Broken(why)) => {
                        self.stats.upstream_errors.fetch_add(1, Relaxed);
                        self.set_leader(group, None);
                        if !resend {
                            // It may have been proposed: the client repeats it with its key.
                            return Err(BackendError::OutcomeUnknown { retry_after_secs: 1 });
                        }
                        tracing::debug!(upstream = %self.urls[at], %why, "upstream call failed");
                        match next_untried(at, &tried) {
                            Some(next) => at = next,
                            None => break,
                        }
                    }
                }
            }
            // A leadership that moves (a transfer, a balancer tick, a voter's
            // graceful stop) settles within an election: the request waits for
            // it rather than answering 503, nothing having been proposed.
            if !leaderless || started.elapsed() + pause > LEADER_SETTLE {
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(SETTLE_PAUSE * 8);
            at = self.leader_of(group).unwrap_or_else(|| self.next_untried(group % n, &vec![false; n], true));
        }
        self.stats.exhausted.fetch_add(1, Relaxed);
        Err(exhausted(any_answered))
    }
}
