//! The batcher against a peer on loopback that answers every AppendEntries
//! with success and counts how the batches arrived: on one stream, as calls
//! when the peer has no stream, and on a new stream after one stalled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tonic::{Request, Response, Status, Streaming};
use ursula_proto::raft::v1 as pb;
use ursula_proto::raft::v1::raft_service_client::RaftServiceClient;
use ursula_proto::raft::v1::raft_service_server::{RaftService, RaftServiceServer};

use super::batcher::{BatchStats, Batcher};
use super::peer_error::PeerError;

#[derive(Default)]
struct Seen {
    streams: AtomicUsize,
    stream_batches: AtomicUsize,
    calls: AtomicUsize,
    /// Requests in the batches that came on a stream.
    stream_requests: AtomicUsize,
}

struct FakePeer {
    serves_stream: bool,
    /// The first stream never answers its first batch.
    stall_first: AtomicBool,
    seen: Arc<Seen>,
}

fn successes(batch: &pb::AppendEntriesBatchRequest) -> pb::AppendEntriesBatchReply {
    let success = || pb::AppendEntriesReply { result: Some(pb::append_entries_reply::Result::Success(pb::Success {})) };
    pb::AppendEntriesBatchReply { replies: batch.requests.iter().map(|_| success()).collect() }
}

type Replies = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<pb::AppendEntriesBatchReply, Status>> + Send>>;

fn absent<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl RaftService for FakePeer {
    async fn append_entries(
        &self,
        _: Request<pb::AppendEntriesRequest>,
    ) -> Result<Response<pb::AppendEntriesReply>, Status> {
        absent()
    }

    async fn append_entries_batch(
        &self,
        request: Request<pb::AppendEntriesBatchRequest>,
    ) -> Result<Response<pb::AppendEntriesBatchReply>, Status> {
        self.seen.calls.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(successes(request.get_ref())))
    }

    type AppendEntriesStreamStream = Replies;

    async fn append_entries_stream(
        &self,
        request: Request<Streaming<pb::AppendEntriesBatchRequest>>,
    ) -> Result<Response<Replies>, Status> {
        if !self.serves_stream {
            return absent();
        }
        self.seen.streams.fetch_add(1, Ordering::SeqCst);
        let stall = self.stall_first.swap(false, Ordering::SeqCst);
        let seen = self.seen.clone();
        let replies = futures_util::stream::unfold(request.into_inner(), move |mut batches| {
            let seen = seen.clone();
            async move {
                let batch = batches.message().await.ok().flatten()?;
                if stall {
                    std::future::pending::<()>().await;
                }
                seen.stream_batches.fetch_add(1, Ordering::SeqCst);
                seen.stream_requests.fetch_add(batch.requests.len(), Ordering::SeqCst);
                Some((Ok(successes(&batch)), batches))
            }
        });
        Ok(Response::new(Box::pin(replies)))
    }

    async fn vote(&self, _: Request<pb::VoteRequest>) -> Result<Response<pb::VoteReply>, Status> {
        absent()
    }
    async fn install_snapshot(
        &self,
        _: Request<pb::InstallSnapshotRequest>,
    ) -> Result<Response<pb::InstallSnapshotReply>, Status> {
        absent()
    }
    async fn probe_group(&self, _: Request<pb::ProbeGroupRequest>) -> Result<Response<pb::ProbeGroupReply>, Status> {
        absent()
    }
    async fn read_barrier(&self, _: Request<pb::ReadBarrierRequest>) -> Result<Response<pb::ReadBarrierReply>, Status> {
        absent()
    }
    async fn transfer_leader(
        &self,
        _: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        absent()
    }
    async fn format_probe(&self, _: Request<pb::FormatProbeRequest>) -> Result<Response<pb::FormatProbeReply>, Status> {
        absent()
    }
    async fn leadership_shed(
        &self,
        _: Request<pb::LeadershipShedRequest>,
    ) -> Result<Response<pb::LeadershipShedReply>, Status> {
        absent()
    }
    async fn forward_command(
        &self,
        _: Request<pb::ForwardCommandRequest>,
    ) -> Result<Response<pb::ForwardCommandReply>, Status> {
        absent()
    }
}

/// A fake peer on an ephemeral port and a batcher sending to it.
async fn start(serves_stream: bool, stall_first: bool) -> (Batcher, Arc<Seen>, Arc<BatchStats>) {
    let seen = Arc::new(Seen::default());
    let peer = FakePeer { serves_stream, stall_first: AtomicBool::new(stall_first), seen: seen.clone() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tokio::spawn(
        tonic::transport::Server::builder().add_service(RaftServiceServer::new(peer)).serve_with_incoming(incoming),
    );
    let channel = tonic::transport::Endpoint::from_shared(url.clone()).expect("a url").connect_lazy();
    let stats = Arc::new(BatchStats::default());
    let budget = super::transport_budget::TransportBudget::new(128 << 20).outbound.clone();
    (Batcher::start(RaftServiceClient::new(channel), url, stats.clone(), budget), seen, stats)
}

fn request(group: u32) -> pb::AppendEntriesRequest {
    pb::AppendEntriesRequest {
        preamble: Some(pb::Preamble { cluster_id: "test".into(), node_id: 1, group, format_epoch: 5 }),
        ..Default::default()
    }
}

async fn send_many(batcher: &Batcher, groups: u32) -> Vec<Result<pb::AppendEntriesReply, PeerError>> {
    futures_util::future::join_all((0..groups).map(|g| batcher.send(request(g), None))).await
}

fn succeeded(replies: &[Result<pb::AppendEntriesReply, PeerError>]) -> bool {
    replies
        .iter()
        .all(|r| matches!(r, Ok(pb::AppendEntriesReply { result: Some(pb::append_entries_reply::Result::Success(_)) })))
}

#[tokio::test]
async fn batches_travel_on_one_stream_per_peer() {
    let (batcher, seen, stats) = start(true, false).await;
    for _ in 0..5 {
        assert!(succeeded(&send_many(&batcher, 8).await));
    }
    assert_eq!(seen.streams.load(Ordering::SeqCst), 1, "one stream carried every batch");
    assert_eq!(seen.calls.load(Ordering::SeqCst), 0, "no batch went as a call");
    let batches = stats.calls.load(Ordering::SeqCst);
    assert_eq!(seen.stream_batches.load(Ordering::SeqCst) as u64, batches);
    assert_eq!(stats.requests.load(Ordering::SeqCst), 40);
    assert!(batches < 40, "requests that queued together went in one batch ({batches} batches)");
}

#[tokio::test]
async fn a_peer_without_the_stream_gets_its_batches_as_calls() {
    let (batcher, seen, _) = start(false, false).await;
    for _ in 0..3 {
        assert!(succeeded(&send_many(&batcher, 4).await));
    }
    assert_eq!(seen.streams.load(Ordering::SeqCst), 0);
    assert!(seen.calls.load(Ordering::SeqCst) >= 3, "every batch was a call");
}

#[tokio::test]
async fn a_stalled_stream_fails_its_batch_and_the_next_batch_opens_another() {
    let (batcher, seen, _) = start(true, true).await;
    let stalled = batcher.send(request(0), None).await;
    assert!(matches!(stalled, Err(PeerError::StreamLost { .. })), "{stalled:?}");
    assert!(succeeded(&send_many(&batcher, 4).await));
    assert_eq!(seen.streams.load(Ordering::SeqCst), 2, "a second stream replaced the stalled one");
}

/// A request of group 9 that continues the one ending at `prev`.
fn chained(prev: u64, entries: usize) -> (pb::AppendEntriesRequest, Option<pb::LogId>) {
    let id = |index| pb::LogId { term: 2, node_id: 1, index };
    let request = pb::AppendEntriesRequest {
        vote: Some(pb::Vote { term: 2, node_id: 1, committed: true }),
        prev_log_id: Some(id(prev)),
        entries: vec![bytes::Bytes::from_static(b"entry"); entries],
        leader_commit: Some(id(prev)),
        ..request(9)
    };
    (request, Some(id(prev + entries as u64)))
}

#[tokio::test]
async fn a_groups_requests_queued_together_reach_the_peer_as_one() {
    let (batcher, seen, stats) = start(true, false).await;
    // A commit update, then two writes: queued before the batcher runs.
    let pending: Vec<_> = [(10, 0), (10, 2), (12, 1)]
        .into_iter()
        .map(|(prev, n)| {
            let (request, last) = chained(prev, n);
            batcher.enqueue(request, last)
        })
        .collect();
    for p in pending {
        let reply = p.reply().await;
        assert!(succeeded(std::slice::from_ref(&reply)), "{reply:?}");
    }
    assert_eq!(seen.stream_requests.load(Ordering::SeqCst), 1, "one request carried all three");
    assert_eq!(stats.joined_requests.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_large_request_whose_waiter_is_gone_is_not_sent() {
    let (batcher, seen, _) = start(true, false).await;
    let large = || pb::AppendEntriesRequest { entries: vec![bytes::Bytes::from(vec![0u8; 2 << 20])], ..request(3) };
    // Both queued before the batcher runs; the second's waiter leaves at once.
    let kept = batcher.enqueue(large(), None);
    drop(batcher.enqueue(large(), None));
    let reply = kept.reply().await;
    assert!(succeeded(std::slice::from_ref(&reply)), "{reply:?}");
    // Time for a wrongly sent second call to arrive.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(seen.calls.load(Ordering::SeqCst), 1, "only the large request still awaited went");
}
