//! openraft's watch channel with a fixed wake order. Tokio's watch parks
//! its receivers on one of eight notifiers picked at random, so which task
//! wakes first after a send changes from run to run; openraft signals its
//! replication and heartbeat tasks through watches, and a simulation whose
//! seed must reproduce its run cannot have that. Here each receiver that
//! ever waited has a waker slot, and a send wakes the slots in the order
//! their receivers first waited.
//!
//! openraft's tasks wait on several watches at once and make a new
//! `changed()` for each of them every time round their loops, so waiting
//! must be cheap: a wait checks the version, registers its waker in its
//! receiver's slot (no lock; only a receiver's first wait adds its slot to
//! the list, under its lock) and checks again; a wait given up leaves no
//! waker behind.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::task::{Poll, Waker};

use futures_util::task::AtomicWaker;
use openraft::OptionalSend;
use openraft::OptionalSync;
use openraft::async_runtime::watch::{RecvError, SendError, Watch, WatchReceiver, WatchSender};

pub struct OrderedWatch;

struct Shared<T> {
    value: RwLock<T>,
    /// Bumped by every send that changed the value.
    version: AtomicU64,
    senders: AtomicUsize,
    receivers: AtomicUsize,
    /// The waker slots of the receivers that waited, in the order they
    /// first did.
    slots: Mutex<Vec<Arc<AtomicWaker>>>,
}

impl<T> Shared<T> {
    fn read(&self) -> RwLockReadGuard<'_, T> {
        self.value.read().unwrap_or_else(|p| p.into_inner())
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Arc<AtomicWaker>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes every waiting receiver, in slot order, outside the lock.
    fn wake_all(&self) {
        let wakers: Vec<Waker> = self.slots().iter().filter_map(|slot| slot.take()).collect();
        for waker in wakers {
            waker.wake();
        }
    }
}

pub struct Sender<T>(Arc<Shared<T>>);

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The version this receiver last saw.
    seen: u64,
    /// Its waker slot, made when it first waits: most receivers (a
    /// `metrics()` read) never do.
    slot: Option<Arc<AtomicWaker>>,
}

impl<T> Receiver<T> {
    fn new(shared: Arc<Shared<T>>, seen: u64) -> Receiver<T> {
        shared.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver { shared, seen, slot: None }
    }

    /// What a wait would return now: a change not seen yet, or the channel closed.
    fn ready(&mut self) -> Option<Result<(), RecvError>> {
        let version = self.shared.version();
        if version != self.seen {
            self.seen = version;
            return Some(Ok(()));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Some(Err(RecvError(())));
        }
        None
    }

    fn slot(&mut self) -> Arc<AtomicWaker> {
        let shared = &self.shared;
        self.slot
            .get_or_insert_with(|| {
                let slot = Arc::new(AtomicWaker::new());
                shared.slots().push(slot.clone());
                slot
            })
            .clone()
    }
}

impl Watch for OrderedWatch {
    type Sender<T: OptionalSend + OptionalSync> = Sender<T>;
    type Receiver<T: OptionalSend + OptionalSync> = Receiver<T>;
    type Ref<'a, T: OptionalSend + 'a> = RwLockReadGuard<'a, T>;

    fn channel<T: OptionalSend + OptionalSync>(init: T) -> (Sender<T>, Receiver<T>) {
        let shared = Arc::new(Shared {
            value: RwLock::new(init),
            version: AtomicU64::new(0),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(0),
            slots: Mutex::new(Vec::new()),
        });
        (Sender(shared.clone()), Receiver::new(shared, 0))
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::AcqRel);
        Sender(self.0.clone())
    }
}

impl<T> Drop for Sender<T> {
    /// The last sender gone closes the channel: waiting receivers wake to see it.
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.wake_all();
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        Receiver::new(self.shared.clone(), self.seen)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receivers.fetch_sub(1, Ordering::AcqRel);
        if let Some(slot) = self.slot.take() {
            self.shared.slots().retain(|s| !Arc::ptr_eq(s, &slot));
        }
    }
}

impl<T: OptionalSend + OptionalSync> WatchSender<OrderedWatch, T> for Sender<T> {
    fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.0.receivers.load(Ordering::Acquire) == 0 {
            return Err(SendError(value));
        }
        self.send_if_modified(|current| {
            *current = value;
            true
        });
        Ok(())
    }

    fn send_if_modified<F>(&self, modify: F) -> bool
    where
        F: FnOnce(&mut T) -> bool,
    {
        let modified = {
            let mut value = self.0.value.write().unwrap_or_else(|p| p.into_inner());
            let modified = modify(&mut value);
            if modified {
                self.0.version.fetch_add(1, Ordering::AcqRel);
            }
            modified
        };
        if modified {
            self.0.wake_all();
        }
        modified
    }

    fn borrow_watched(&self) -> RwLockReadGuard<'_, T> {
        self.0.read()
    }

    fn subscribe(&self) -> Receiver<T> {
        Receiver::new(self.0.clone(), self.0.version())
    }
}

/// Takes a waiting receiver's waker out of its slot when the wait ends,
/// however it ends: a wait dropped unfinished leaves nothing for a later
/// send to wake.
struct Unregister(Arc<AtomicWaker>);

impl Drop for Unregister {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}

impl<T: OptionalSend + OptionalSync> WatchReceiver<OrderedWatch, T> for Receiver<T> {
    async fn changed(&mut self) -> Result<(), RecvError> {
        if let Some(ready) = self.ready() {
            return ready;
        }
        let slot = Unregister(self.slot());
        poll_fn(|cx| {
            if let Some(ready) = self.ready() {
                return Poll::Ready(ready);
            }
            // Registered before the second look: a send in between wakes it.
            slot.0.register(cx.waker());
            match self.ready() {
                Some(ready) => Poll::Ready(ready),
                None => Poll::Pending,
            }
        })
        .await
    }

    fn borrow_watched(&self) -> RwLockReadGuard<'_, T> {
        self.shared.read()
    }

    fn borrow_and_update(&mut self) -> RwLockReadGuard<'_, T> {
        let value = self.shared.read();
        // Read under the value's lock: a send cannot slip between the two.
        self.seen = self.shared.version();
        value
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Mutex;
    use std::task::{Context, Wake};

    use super::*;

    /// The names of the wakers woken, in order.
    type Woken = Arc<Mutex<Vec<&'static str>>>;

    /// A waker that notes its name in a shared list when woken.
    struct Named(&'static str, Woken);

    impl Wake for Named {
        fn wake(self: Arc<Self>) {
            self.1.lock().unwrap().push(self.0);
        }
    }

    /// Polls `wait` once with a waker that notes `name` in `woken`.
    fn poll<F: Future>(wait: std::pin::Pin<&mut F>, name: &'static str, woken: &Woken) -> Poll<F::Output> {
        wait.poll(&mut Context::from_waker(&Waker::from(Arc::new(Named(name, woken.clone())))))
    }

    #[test]
    fn a_send_wakes_the_waiting_receivers_in_the_order_they_first_waited() {
        let (tx, mut first) = OrderedWatch::channel(0u32);
        let mut second = tx.subscribe();
        let woken = Woken::default();
        let mut b = std::pin::pin!(second.changed());
        assert!(poll(b.as_mut(), "second", &woken).is_pending());
        let mut a = std::pin::pin!(first.changed());
        assert!(poll(a.as_mut(), "first", &woken).is_pending());
        tx.send(1).unwrap();
        assert_eq!(*woken.lock().unwrap(), ["second", "first"]);
        assert!(poll(a.as_mut(), "first", &woken).is_ready());
        assert!(poll(b.as_mut(), "second", &woken).is_ready());
    }

    #[test]
    fn a_wait_given_up_leaves_no_waker_for_the_next_send() {
        let (tx, mut rx) = OrderedWatch::channel(0u32);
        let woken = Woken::default();
        {
            let mut wait = std::pin::pin!(rx.changed());
            assert!(poll(wait.as_mut(), "dropped", &woken).is_pending());
        }
        tx.send(1).unwrap();
        assert!(woken.lock().unwrap().is_empty());
        // The change is still there for the next wait, which returns at once.
        let mut again = std::pin::pin!(rx.changed());
        assert!(poll(again.as_mut(), "again", &woken).is_ready());
    }

    #[test]
    fn an_unmodified_send_wakes_nobody_and_the_last_sender_gone_ends_every_wait() {
        let (tx, mut rx) = OrderedWatch::channel(0u32);
        let woken = Woken::default();
        let mut wait = std::pin::pin!(rx.changed());
        assert!(poll(wait.as_mut(), "rx", &woken).is_pending());
        assert!(!tx.send_if_modified(|_| false));
        assert!(woken.lock().unwrap().is_empty());
        let other = tx.clone();
        drop(tx);
        assert!(woken.lock().unwrap().is_empty(), "a sender is left");
        drop(other);
        assert_eq!(*woken.lock().unwrap(), ["rx"]);
        match poll(wait.as_mut(), "rx", &woken) {
            Poll::Ready(r) => assert!(r.is_err()),
            Poll::Pending => panic!("a closed channel ends the wait"),
        }
    }

    #[test]
    fn a_send_without_receivers_is_refused_and_a_dropped_receiver_gives_up_its_slot() {
        let (tx, mut rx) = OrderedWatch::channel(0u32);
        {
            let woken = Woken::default();
            let mut wait = std::pin::pin!(rx.changed());
            assert!(poll(wait.as_mut(), "rx", &woken).is_pending());
        }
        assert_eq!(tx.0.slots().len(), 1);
        drop(rx);
        assert_eq!(tx.0.slots().len(), 0);
        assert!(tx.send(1).is_err());
    }
}
