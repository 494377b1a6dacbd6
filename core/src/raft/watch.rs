//! openraft's watch channel with a fixed wake order. Tokio's watch parks
//! its receivers on one of eight notifiers picked at random, so which task
//! wakes first after a send changes from run to run; openraft signals its
//! replication and heartbeat tasks through watches, and a simulation whose
//! seed must reproduce its run cannot have that. This one parks every
//! receiver on one `Notify`, woken in the order they waited.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use openraft::OptionalSend;
use openraft::OptionalSync;
use openraft::async_runtime::watch::{RecvError, SendError, Watch, WatchReceiver, WatchSender};
use tokio::sync::Notify;

pub struct OrderedWatch;

struct Shared<T> {
    value: RwLock<T>,
    /// Bumped by every send that changed the value.
    version: AtomicU64,
    senders: AtomicUsize,
    receivers: AtomicUsize,
    changed: Notify,
}

impl<T> Shared<T> {
    fn read(&self) -> RwLockReadGuard<'_, T> {
        self.value.read().unwrap_or_else(|p| p.into_inner())
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

pub struct Sender<T>(Arc<Shared<T>>);

pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The version this receiver last saw.
    seen: u64,
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
            receivers: AtomicUsize::new(1),
            changed: Notify::new(),
        });
        (Sender(shared.clone()), Receiver { shared, seen: 0 })
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
            self.0.changed.notify_waiters();
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.shared.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver { shared: self.shared.clone(), seen: self.seen }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.receivers.fetch_sub(1, Ordering::AcqRel);
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
            self.0.changed.notify_waiters();
        }
        modified
    }

    fn borrow_watched(&self) -> RwLockReadGuard<'_, T> {
        self.0.read()
    }

    fn subscribe(&self) -> Receiver<T> {
        self.0.receivers.fetch_add(1, Ordering::AcqRel);
        Receiver { shared: self.0.clone(), seen: self.0.version() }
    }
}

impl<T: OptionalSend + OptionalSync> WatchReceiver<OrderedWatch, T> for Receiver<T> {
    async fn changed(&mut self) -> Result<(), RecvError> {
        loop {
            // Registered before the version is read: a send in between still wakes it.
            let notified = self.shared.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let version = self.shared.version();
            if version != self.seen {
                self.seen = version;
                return Ok(());
            }
            if self.shared.senders.load(Ordering::Acquire) == 0 {
                return Err(RecvError(()));
            }
            notified.await;
        }
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
