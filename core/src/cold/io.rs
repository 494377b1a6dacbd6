//! The cold tier's own threads (`ursula-cold`): every request to the store,
//! and the check of what a read fetched, runs there instead of on the
//! thread that asked (an HTTP worker serving a catch-up, the runtime that
//! flushes).
//!
//! A cold catch-up was bound by one HTTP worker that received the store's
//! answer, hashed every byte and sent it on (BENCHMARKS.md, issue 24 #3),
//! while the HTTP client's connections lived on whichever runtime first
//! opened them, so each piece of an answer woke a second thread. With all
//! store traffic started here, the connections live here too: a fetch
//! receives and hashes on one thread, and the worker that serves the read
//! only sends.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

use super::store::{ColdError, ColdResult, ColdStore, OnPiece};

thread_local! {
    /// Set on the cold tier's threads.
    static ON_COLD_IO: Cell<bool> = const { Cell::new(false) };
}

/// The cold tier's runtime.
pub struct ColdIo {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl ColdIo {
    /// A runtime of `workers` threads (at least one) named `ursula-cold`.
    pub fn start(workers: usize) -> std::io::Result<Arc<ColdIo>> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("ursula-cold")
            .on_thread_start(|| ON_COLD_IO.with(|on| on.set(true)))
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        Ok(Arc::new(ColdIo { runtime: Some(runtime), handle }))
    }

    /// Threads for a node of `core_count` cores: one per four, at least one.
    pub fn workers_for(core_count: usize) -> usize {
        (core_count / 4).max(1)
    }

    /// Whether this thread is one of the cold tier's.
    pub fn here() -> bool {
        ON_COLD_IO.with(Cell::get)
    }

    /// `work` run on the cold tier's threads (at once when called from one
    /// of them). Dropping the returned future aborts it there.
    pub async fn run<T, F>(&self, work: F) -> Result<T, ColdError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, ColdError>> + Send + 'static,
    {
        if Self::here() {
            return work.await;
        }
        Aborting(self.handle.spawn(work)).join().await
    }

    /// `work` started on the cold tier's threads, left to run on its own.
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.handle.spawn(work));
    }
}

impl Drop for ColdIo {
    /// A node may drop its cold tier inside another runtime, where a
    /// blocking shutdown is not allowed.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A task aborted when its waiter goes away (a reader that disconnected).
struct Aborting<T>(JoinHandle<Result<T, ColdError>>);

impl<T> Aborting<T> {
    async fn join(mut self) -> Result<T, ColdError> {
        match (&mut self.0).await {
            Ok(done) => done,
            Err(e) => Err(ColdError::Unavailable(format!("a cold store task failed: {e}"))),
        }
    }
}

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A store whose every request runs on the cold tier's threads.
pub struct OnColdIo {
    inner: Arc<dyn ColdStore>,
    io: Arc<ColdIo>,
}

impl OnColdIo {
    pub fn new(inner: Arc<dyn ColdStore>, io: Arc<ColdIo>) -> OnColdIo {
        OnColdIo { inner, io }
    }

    /// `request` (given the inner store) on the cold tier's threads.
    fn on_io<'a, T, F, Fut>(&'a self, request: F) -> ColdResult<'a, T>
    where
        T: Send + 'static,
        F: FnOnce(Arc<dyn ColdStore>) -> Fut,
        Fut: Future<Output = Result<T, ColdError>> + Send + 'static,
    {
        let work = request(self.inner.clone());
        Box::pin(self.io.run(work))
    }
}

impl ColdStore for OnColdIo {
    fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
        let key = key.to_string();
        self.on_io(|s| async move { s.put(&key, body).await })
    }

    fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
        let key = key.to_string();
        self.on_io(move |s| async move { s.get_range(&key, offset, len).await })
    }

    /// On a cold thread the pieces are shown as they arrive; from another
    /// thread they are fetched there and shown once all arrived.
    fn get_range_pieces<'a>(
        &'a self,
        key: &'a str,
        offset: u64,
        len: u64,
        on_piece: OnPiece<'a>,
    ) -> ColdResult<'a, Vec<Bytes>> {
        if ColdIo::here() {
            return self.inner.get_range_pieces(key, offset, len, on_piece);
        }
        let key = key.to_string();
        let fetched = self.on_io(move |s| async move { s.get_range_pieces(&key, offset, len, &mut |_| {}).await });
        Box::pin(async move {
            let pieces = fetched.await?;
            pieces.iter().for_each(|p| on_piece(p));
            Ok(pieces)
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
        let key = key.to_string();
        self.on_io(|s| async move { s.get(&key).await })
    }

    fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
        let key = key.to_string();
        self.on_io(|s| async move { s.delete(&key).await })
    }

    fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
        let keys = keys.to_vec();
        self.on_io(|s| async move { s.delete_batch(&keys).await })
    }

    fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
        let key = key.to_string();
        self.on_io(|s| async move { s.size(&key).await })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
        let prefix = prefix.to_string();
        self.on_io(|s| async move { s.list(&prefix).await })
    }

    fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
        let prefix = prefix.to_string();
        self.on_io(|s| async move { s.list_sized(&prefix).await })
    }

    fn any_under<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, bool> {
        let prefix = prefix.to_string();
        self.on_io(|s| async move { s.any_under(&prefix).await })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::cold::MemoryColdStore;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or_default().to_string()
    }

    /// A memory store that notes the thread each request ran on.
    #[derive(Default)]
    struct Noting {
        inner: MemoryColdStore,
        threads: Mutex<Vec<String>>,
    }

    impl Noting {
        fn note(&self) {
            self.threads.lock().expect("threads").push(thread_name());
        }
    }

    impl ColdStore for Noting {
        fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
            self.note();
            self.inner.put(key, body)
        }
        fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
            self.note();
            self.inner.get_range(key, offset, len)
        }
        fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
            self.note();
            self.inner.get(key)
        }
        fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
            self.note();
            self.inner.delete(key)
        }
        fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
            self.note();
            self.inner.delete_batch(keys)
        }
        fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
            self.note();
            self.inner.size(key)
        }
        fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
            self.note();
            self.inner.list(prefix)
        }
        fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
            self.note();
            self.inner.list_sized(prefix)
        }
    }

    #[tokio::test]
    async fn work_runs_on_the_cold_threads_and_inline_from_them() {
        let io = ColdIo::start(1).expect("start");
        assert!(!ColdIo::here());
        let (outer, inner) = io
            .run({
                let io = io.clone();
                async move {
                    let inner = io.run(async { Ok((thread_name(), ColdIo::here())) }).await?;
                    Ok((thread_name(), inner))
                }
            })
            .await
            .expect("run");
        assert_eq!(outer, "ursula-cold");
        assert_eq!(inner, ("ursula-cold".to_string(), true));
        assert_eq!(
            io.run(async { Err::<(), _>(ColdError::Missing("k".into())) }).await,
            Err(ColdError::Missing("k".into()))
        );
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_aborts_its_work() {
        struct Dropped(Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let io = ColdIo::start(1).expect("start");
        let dropped = Arc::new(AtomicBool::new(false));
        let (started, on_start) = tokio::sync::oneshot::channel();
        let held = Dropped(dropped.clone());
        let waiting = io.run(async move {
            let _held = held;
            let _ = started.send(());
            std::future::pending::<Result<(), ColdError>>().await
        });
        let mut waiting = Box::pin(waiting);
        tokio::select! {
            _ = &mut waiting => panic!("the work never ends"),
            started = on_start => started.expect("the work started"),
        }
        drop(waiting);
        for _ in 0..200 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the work outlived its waiter");
    }

    #[tokio::test]
    async fn every_request_of_the_store_runs_on_the_cold_threads() {
        let io = ColdIo::start(1).expect("start");
        let noting = Arc::new(Noting::default());
        let store = OnColdIo::new(noting.clone(), io.clone());
        store.put("a/1", Bytes::from_static(b"hello world")).await.expect("put");
        store.put("a/2", Bytes::from_static(b"x")).await.expect("put");
        assert_eq!(store.get_range("a/1", 6, 5).await.expect("range"), Bytes::from_static(b"world"));
        let mut seen = Vec::new();
        let pieces = store.get_range_pieces("a/1", 0, 5, &mut |p: &[u8]| seen.push(p.to_vec())).await.expect("pieces");
        assert_eq!(pieces, vec![Bytes::from_static(b"hello")]);
        assert_eq!(seen, vec![b"hello".to_vec()], "each piece is shown to the caller");
        assert_eq!(store.get("a/2").await.expect("get"), Bytes::from_static(b"x"));
        assert_eq!(store.size("a/1").await.expect("size"), 11);
        assert_eq!(store.list("a/").await.expect("list").len(), 2);
        assert_eq!(store.list_sized("a/").await.expect("list").len(), 2);
        assert!(store.any_under("a/").await.expect("any"));
        store.delete("a/2").await.expect("delete");
        assert_eq!(store.delete_batch(&["a/1".to_string()]).await.expect("batch"), Vec::<String>::new());
        assert_eq!(store.get("a/1").await, Err(ColdError::Missing("a/1".into())));
        let threads = noting.threads.lock().expect("threads").clone();
        assert_eq!(threads.len(), 12);
        assert!(threads.iter().all(|t| t == "ursula-cold"), "{threads:?}");
    }

    #[test]
    fn the_tier_may_be_dropped_inside_another_runtime() {
        let outer = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        outer.block_on(async {
            let io = ColdIo::start(2).expect("start");
            assert_eq!(io.run(async { Ok(1) }).await, Ok(1));
            drop(io);
        });
    }

    #[test]
    fn a_node_gets_a_cold_thread_per_four_cores() {
        assert_eq!(ColdIo::workers_for(1), 1);
        assert_eq!(ColdIo::workers_for(2), 1);
        assert_eq!(ColdIo::workers_for(8), 2);
        assert_eq!(ColdIo::workers_for(16), 4);
    }
}
