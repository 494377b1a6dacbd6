//! The shape of a group's replication pipeline to one peer
//! (`stream_append`), apart from gRPC so that its two rules are tested on
//! their own:
//!
//! - A request the batcher sends on its lane for large requests travels
//!   beside the batches, so it could overtake a request queued before it,
//!   or be overtaken by one queued after it; the follower would then see a
//!   gap and answer a conflict for entries it is about to take. Such a
//!   request therefore goes alone: queued once every earlier one is
//!   answered, and nothing after it is queued before its answer.
//! - The pipeline ends right after an answer that does not go on (a
//!   failure, or a part taken), without waiting for the next request:
//!   openraft keeps polling after a part taken, and the next request may
//!   not come until the group writes again.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, Stream, StreamExt};
use tokio::sync::Semaphore;

/// Answers of `input`'s requests in order, at most `depth` awaited at
/// once. `prepare` makes a request ready to send, says whether it goes
/// alone, and gives the call that queues it (made only when its turn
/// comes); each answer says whether the pipeline goes on after it.
pub fn pipeline<'a, I, Q, F, T>(
    input: I,
    depth: usize,
    mut prepare: impl FnMut(I::Item) -> (bool, Q) + Send + 'a,
) -> impl Stream<Item = T> + Send + 'a
where
    I: Stream + Send + Unpin + 'a,
    Q: FnOnce() -> F + Send + 'static,
    F: Future<Output = (T, bool)> + Send + 'static,
    T: Send + 'static,
{
    let depth = depth.max(1);
    let turns = Arc::new(Semaphore::new(depth));
    let answers: BoxStream<'a, (T, bool)> = Box::pin(
        input
            .then(move |item| {
                let (alone, queue) = prepare(item);
                let turns = turns.clone();
                async move {
                    // Every turn when alone: the earlier requests have answered.
                    let wanted = if alone { depth as u32 } else { 1 };
                    let turn = turns.acquire_many_owned(wanted).await;
                    Queued(Box::pin(queue().map(move |answered| {
                        drop(turn);
                        answered
                    })))
                }
            })
            .map(|Queued(answer)| answer)
            .buffered(depth),
    );
    futures_util::stream::unfold(Some(answers), |answers| async move {
        let mut answers = answers?;
        let (answer, goes_on) = answers.next().await?;
        Some((answer, goes_on.then_some(answers)))
    })
}

/// A request queued in its turn: its answer to come, which keeps the turn.
struct Queued<'a, T>(BoxFuture<'a, T>);

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::oneshot;

    use super::*;

    /// A request: its name, whether it goes alone, whether its answer goes on.
    type Request = (&'static str, bool, bool);
    /// The requests queued and not yet answered, with their answer's trigger.
    type Unanswered = Arc<Mutex<Vec<(&'static str, oneshot::Sender<()>)>>>;

    /// Runs `requests` through a pipeline of `depth`, where the test answers
    /// each queued request with `answer(name)`; returns the log of what was
    /// queued and answered.
    struct Harness {
        queued: Arc<Mutex<Vec<&'static str>>>,
        answer: Unanswered,
    }

    impl Harness {
        fn start(
            requests: Vec<Request>,
            depth: usize,
        ) -> (Harness, impl Stream<Item = &'static str> + Send, tokio::sync::mpsc::UnboundedSender<Request>) {
            let queued = Arc::new(Mutex::new(Vec::new()));
            let answer = Arc::new(Mutex::new(Vec::new()));
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Request>();
            for r in requests {
                tx.send(r).expect("open");
            }
            let (q, a) = (queued.clone(), answer.clone());
            let input = tokio_stream_from(rx);
            let stream = pipeline(input, depth, move |(name, alone, goes_on): Request| {
                let (q, a) = (q.clone(), a.clone());
                let queue = move || {
                    let (done, answered) = oneshot::channel();
                    q.lock().expect("lock").push(name);
                    a.lock().expect("lock").push((name, done));
                    async move {
                        let _ = answered.await;
                        (name, goes_on)
                    }
                };
                (alone, queue)
            });
            (Harness { queued, answer }, stream, tx)
        }

        fn queued(&self) -> Vec<&'static str> {
            self.queued.lock().expect("lock").clone()
        }

        fn answer(&self, name: &str) {
            let mut waiting = self.answer.lock().expect("lock");
            let at = waiting.iter().position(|(n, _)| *n == name).expect("queued");
            let (_, done) = waiting.remove(at);
            let _ = done.send(());
        }
    }

    fn tokio_stream_from<T: Send + 'static>(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<T>,
    ) -> impl Stream<Item = T> + Send + Unpin + 'static {
        Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }

    /// Polls `stream` until it has nothing ready.
    async fn settle<S: Stream<Item = &'static str> + Unpin>(stream: &mut S) -> Vec<Option<&'static str>> {
        let mut out = Vec::new();
        for _ in 0..8 {
            tokio::task::yield_now().await;
            while let Some(item) = stream.next().now_or_never() {
                out.push(item);
                if item.is_none() {
                    return out;
                }
            }
        }
        out
    }

    #[tokio::test]
    async fn small_requests_are_queued_at_once_and_answered_in_order() {
        let (h, stream, _tx) = Harness::start(vec![("a", false, true), ("b", false, true), ("c", false, true)], 16);
        let mut stream = Box::pin(stream);
        assert!(settle(&mut stream).await.is_empty());
        assert_eq!(h.queued(), ["a", "b", "c"]);
        h.answer("b");
        assert!(settle(&mut stream).await.is_empty(), "b waits for a");
        h.answer("a");
        assert_eq!(settle(&mut stream).await, [Some("a"), Some("b")]);
    }

    #[tokio::test]
    async fn a_large_request_waits_for_the_earlier_answers_and_holds_the_later_ones() {
        let requests = vec![("a", false, true), ("big", true, true), ("c", false, true)];
        let (h, stream, _tx) = Harness::start(requests, 16);
        let mut stream = Box::pin(stream);
        settle(&mut stream).await;
        assert_eq!(h.queued(), ["a"], "the large one waits for a's answer");
        h.answer("a");
        assert_eq!(settle(&mut stream).await, [Some("a")]);
        assert_eq!(h.queued(), ["a", "big"], "c waits for the large one's answer");
        h.answer("big");
        assert_eq!(settle(&mut stream).await, [Some("big")]);
        assert_eq!(h.queued(), ["a", "big", "c"]);
        h.answer("c");
        assert_eq!(settle(&mut stream).await, [Some("c")]);
    }

    #[tokio::test]
    async fn the_pipeline_ends_right_after_an_answer_that_does_not_go_on() {
        // The input stays open and has nothing more: the end must not wait for it.
        let (h, stream, _tx) = Harness::start(vec![("a", false, true), ("part", false, false)], 16);
        let mut stream = Box::pin(stream);
        settle(&mut stream).await;
        h.answer("a");
        h.answer("part");
        assert_eq!(settle(&mut stream).await, [Some("a"), Some("part"), None]);
    }

    #[tokio::test]
    async fn at_most_depth_requests_are_out() {
        let requests = (0..5).map(|_| ("r", false, true)).collect();
        let (h, stream, _tx) = Harness::start(requests, 2);
        let mut stream = Box::pin(stream);
        settle(&mut stream).await;
        assert_eq!(h.queued().len(), 2);
        h.answer("r");
        settle(&mut stream).await;
        assert_eq!(h.queued().len(), 3);
    }
}
