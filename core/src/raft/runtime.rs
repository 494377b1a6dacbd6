//! The async runtime of our Raft groups: openraft's Tokio runtime with one
//! change, a random generator a simulation can seed. openraft draws its
//! election timeouts and tick phases from `thread_rng`; a thread that set a
//! seed (`seed_this_thread`) gets the same draws on every run, any other
//! gets fresh entropy as before, and blocking work (snapshot files) runs
//! inline on a seeded thread instead of on Tokio's pool. Its watch channel
//! wakes receivers in a fixed order (`watch`).

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use futures_util::future::Either;
use openraft::async_runtime::{AsyncRuntime, Select2, Select3, Select4};
use openraft::{OptionalSend, TokioRuntime};
use rand::SeedableRng;
use rand::rngs::SmallRng;

thread_local! {
    /// The next seed on this thread, when a simulation set one.
    static SEED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Makes this thread's openraft draws follow `seed` (`None`: entropy again).
pub fn seed_this_thread(seed: Option<u64>) {
    SEED.with(|s| s.set(seed));
}

/// The next seed of this thread's sequence, advanced past.
fn next_seed() -> Option<u64> {
    SEED.with(|s| {
        let seed = s.get()?;
        s.set(Some(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407)));
        Some(seed)
    })
}

#[derive(Debug)]
pub struct SeedableRuntime(TokioRuntime);

impl AsyncRuntime for SeedableRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = SmallRng;
    type Mpsc = <TokioRuntime as AsyncRuntime>::Mpsc;
    type Watch = super::watch::OrderedWatch;
    type Oneshot = <TokioRuntime as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::Mutex<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F>(duration: Duration, future: F) -> Self::Timeout<R, F>
    where
        F: Future<Output = R> + OptionalSend,
    {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F>
    where
        F: Future<Output = R> + OptionalSend,
    {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn select2<A, B>(a: A, b: B) -> impl Future<Output = Select2<A::Output, B::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
    {
        TokioRuntime::select2(a, b)
    }

    fn select3<A, B, C>(
        a: A,
        b: B,
        c: C,
    ) -> impl Future<Output = Select3<A::Output, B::Output, C::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
    {
        TokioRuntime::select3(a, b, c)
    }

    fn select4<A, B, C, D>(
        a: A,
        b: B,
        c: C,
        d: D,
    ) -> impl Future<Output = Select4<A::Output, B::Output, C::Output, D::Output>> + OptionalSend
    where
        A: Future + OptionalSend,
        B: Future + OptionalSend,
        C: Future + OptionalSend,
        D: Future + OptionalSend,
    {
        TokioRuntime::select4(a, b, c, d)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> SmallRng {
        match next_seed() {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_rng(&mut rand::rng()),
        }
    }

    /// Tokio's pool, not a thread per call. On a seeded (simulating)
    /// thread the work runs inline, so when it ends is part of the run.
    fn spawn_blocking<F, T>(f: F) -> impl Future<Output = Result<T, std::io::Error>> + Send
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if SEED.with(|s| s.get().is_some()) {
            return Either::Left(std::future::ready(Ok(f())));
        }
        let handle = tokio::task::spawn_blocking(f);
        Either::Right(async move { handle.await.map_err(std::io::Error::other) })
    }

    fn new(threads: usize) -> Self {
        SeedableRuntime(TokioRuntime::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;

    fn draws() -> Vec<u64> {
        (0..4).map(|_| SeedableRuntime::thread_rng().random_range(0..1_000_000)).collect()
    }

    /// openraft's own checks of a runtime: spawning, time, selects,
    /// channels and our watch.
    #[test]
    fn the_runtime_passes_openrafts_runtime_suite() {
        openraft_rt::testing::Suite::<SeedableRuntime>::test_all();
    }

    #[test]
    fn a_seeded_thread_draws_the_same_sequence_again() {
        seed_this_thread(Some(42));
        let first = draws();
        seed_this_thread(Some(42));
        assert_eq!(draws(), first);
        seed_this_thread(Some(43));
        assert_ne!(draws(), first);
        seed_this_thread(None);
        assert_ne!(draws(), draws(), "unseeded draws come from entropy");
    }
}
