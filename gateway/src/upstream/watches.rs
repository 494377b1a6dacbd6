//! Live reads share one upstream watch per stream incarnation: the first
//! waiting reader opens a `Watch` on the group leader (positions only), and
//! every reader of the same stream waits on what it reports. The watch
//! closes when its upstream call times out with no reader waiting, and ends its
//! readers cleanly when the leader stops serving it (leadership moved, or
//! the voter went away), so an SSE client resumes from its last
//! `streamNextOffset` through the new leader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use ursula_http::wire::{self, Refused, pb};
use ursula_http::{BackendError, WaitOutcome, WaitStream};
use ursula_stream::{Boundary, Incarnation, Offset, ReadFrom, ReadQuery, StreamKey};

use super::{CallError, Upstreams};

/// How long one upstream `Watch` call may wait without news before it is
/// opened again (while readers remain), and so how long a watch without
/// readers lingers.
const UPSTREAM_WAIT: Duration = Duration::from_secs(10);

/// What a shared watch knows of its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Progress {
    /// The committed tail is at least this byte position.
    At(u64),
    /// Closed, deleted or replaced: every waiter re-reads and sees which.
    Changed,
    /// The leader stopped serving the watch: readers end cleanly.
    Ended,
    /// The watch could not be opened.
    Failed(BackendError),
}

type WatchKey = (StreamKey, u64);

struct Shared {
    progress: watch::Sender<Progress>,
}

/// The gateway's shared watches and what `/__ursula/gateway/metrics` shows.
#[derive(Default)]
pub struct Watches {
    open: Mutex<HashMap<WatchKey, Arc<Shared>>>,
    /// Readers waiting now, across every watch.
    pub live_readers: AtomicU64,
    /// Upstream watches open now.
    pub upstream_watches: AtomicU64,
    /// Waits that joined a watch another reader had opened.
    pub shared_waits: AtomicU64,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WatchKey, Arc<Shared>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `key` moves past `offset`, is closed, deleted or
    /// replaced, until `timeout`, or until the leader ends the watch.
    pub async fn wait(upstreams: &Arc<Upstreams>, req: WaitStream) -> Result<WaitOutcome, BackendError> {
        let WaitStream { key, incarnation, offset, timeout } = req;
        let watches = &upstreams.watches;
        let mut rx = {
            let mut open = watches.lock();
            let slot = (key.clone(), incarnation.value());
            match open.get(&slot) {
                Some(shared) => {
                    watches.shared_waits.fetch_add(1, Relaxed);
                    shared.progress.subscribe()
                }
                None => {
                    let (tx, rx) = watch::channel(Progress::At(offset.bytes()));
                    open.insert(slot.clone(), Arc::new(Shared { progress: tx }));
                    watches.upstream_watches.fetch_add(1, Relaxed);
                    tokio::spawn(pump(upstreams.clone(), slot, incarnation, offset));
                    rx
                }
            }
        };
        watches.live_readers.fetch_add(1, Relaxed);
        let outcome = tokio::time::timeout(timeout, async {
            loop {
                let seen = rx.borrow_and_update().clone();
                match seen {
                    Progress::At(tail) if tail > offset.bytes() => return Ok(WaitOutcome::Changed),
                    Progress::At(_) => {}
                    Progress::Changed => return Ok(WaitOutcome::Changed),
                    Progress::Ended => return Ok(WaitOutcome::Ended),
                    Progress::Failed(e) => return Err(e),
                }
                if rx.changed().await.is_err() {
                    return Ok(WaitOutcome::Ended);
                }
            }
        })
        .await
        .unwrap_or(Ok(WaitOutcome::TimedOut));
        watches.live_readers.fetch_sub(1, Relaxed);
        outcome
    }
}

/// Runs one shared watch: opens upstream `Watch` calls on the leader from
/// the last known position while readers remain, and publishes progress.
async fn pump(upstreams: Arc<Upstreams>, slot: WatchKey, incarnation: Incarnation, from: Offset) {
    let Some(shared) = upstreams.watches.lock().get(&slot).cloned() else { return };
    let mut position = from.bytes();
    let last = loop {
        match watch_once(&upstreams, &slot.0, incarnation, position, &shared).await {
            Ok(Some(next)) => position = next,
            Ok(None) => break Progress::Changed,
            Err(ended) => break ended,
        }
        // The upstream wait timed out: go on only while someone waits.
        if idle(&upstreams, &slot, &shared) {
            break Progress::Ended;
        }
    };
    let mut open = upstreams.watches.lock();
    shared.progress.send_replace(last);
    if open.get(&slot).is_some_and(|s| Arc::ptr_eq(s, &shared)) {
        open.remove(&slot);
    }
    upstreams.watches.upstream_watches.fetch_sub(1, Relaxed);
}

/// Whether no reader waits on the watch; if so it is taken out of the map
/// under the lock, so no reader joins it meanwhile.
fn idle(upstreams: &Upstreams, slot: &WatchKey, shared: &Arc<Shared>) -> bool {
    let mut open = upstreams.watches.lock();
    if shared.progress.receiver_count() > 0 {
        return false;
    }
    if open.get(slot).is_some_and(|s| Arc::ptr_eq(s, shared)) {
        open.remove(slot);
    }
    true
}

/// One upstream `Watch` call from `position`. `Ok(Some(p))`: it timed out
/// at position `p`; `Ok(None)`: the stream closed or was deleted or
/// replaced; `Err`: the watch ended for readers (`Ended` or `Failed`).
async fn watch_once(
    upstreams: &Upstreams,
    key: &StreamKey,
    incarnation: Incarnation,
    position: u64,
    shared: &Shared,
) -> Result<Option<u64>, Progress> {
    let query = ReadQuery {
        from: ReadFrom::At(Offset(position)),
        max_bytes: 1,
        boundary: Boundary::Byte,
        whole_json_messages: false,
    };
    let request = pb::WatchRequest {
        target: Some(upstreams.target(key)),
        incarnation: incarnation.value(),
        offset: position,
        encoded_query: wire::encode(&query),
        timeout_ms: u64::try_from(UPSTREAM_WAIT.as_millis()).unwrap_or(u64::MAX),
        positions_only: true,
    };
    // The first event decides where the watch runs: a refusal (not the
    // leader, say) is the routing's to follow, like any call's.
    let opened = upstreams
        .on_leader(key, true, |mut c| {
            let request = request.clone();
            async move {
                let mut events = c.watch(request).await?.into_inner();
                match events.message().await?.and_then(|e| e.event) {
                    Some(pb::watch_event::Event::Failure(f)) => match wire::refused(f) {
                        Refused::Backend(BackendError::Rejected(_)) => Ok((None, events)),
                        other => Err(CallError::Refused(other)),
                    },
                    first => Ok((first, events)),
                }
            }
        })
        .await;
    let (mut first, mut events) = opened.map_err(Progress::Failed)?;
    if first.is_none() {
        return Ok(None);
    }
    let mut position = position;
    loop {
        let event = match first.take() {
            Some(event) => Some(event),
            None => match events.message().await {
                Ok(Some(event)) => event.event,
                // The voter went away or the call broke: readers resume elsewhere.
                Ok(None) | Err(_) => return Err(Progress::Ended),
            },
        };
        match event {
            Some(pb::watch_event::Event::Data(chunk)) => {
                let view = wire::read_view(chunk).map_err(|_| Progress::Ended)?;
                if view.closed_at_end {
                    return Ok(None);
                }
                position = position.max(view.next.bytes());
                shared.progress.send_replace(Progress::At(position));
            }
            Some(pb::watch_event::Event::TimedOut(_)) => return Ok(Some(position)),
            Some(pb::watch_event::Event::Failure(f)) => {
                return match wire::refused(f) {
                    // Deleted or replaced: a change every reader will see.
                    Refused::Backend(BackendError::Rejected(_)) => Ok(None),
                    _ => Err(Progress::Ended),
                };
            }
            None => return Err(Progress::Ended),
        }
    }
}
