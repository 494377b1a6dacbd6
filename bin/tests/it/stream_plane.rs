//! `StreamService`, the private gRPC data plane a gateway calls (issue 6):
//! served on each node's client plane beside HTTP, over the same state,
//! with typed failures, leader routing and live watches.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tonic::transport::Channel;
use ursula_http::BackendError;
use ursula_http::wire::{self, Refused, pb};
use ursula_proto::stream::v1::stream_service_client::StreamServiceClient;
use ursula_stream::{
    AppendOk, AppendStream, Body, Boundary, ContentType, CreateOk, CreateStream, Lifetime, ReadFrom, ReadQuery,
    Rejection, StreamInfo, StreamKey,
};

use crate::cluster::{append, wait_ready};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};

type Client = StreamServiceClient<Channel>;

async fn client(url: &str) -> Client {
    StreamServiceClient::connect(url.to_string()).await.expect("a gRPC channel to the client plane")
}

fn target(cluster_id: &str, key: &StreamKey) -> Option<pb::Target> {
    Some(pb::Target {
        cluster_id: cluster_id.into(),
        bucket: key.bucket.as_str().into(),
        stream: key.stream.as_str().into(),
    })
}

fn text() -> ContentType {
    ContentType::parse("text/plain").expect("a content type")
}

fn create_command(key: &StreamKey) -> CreateStream {
    CreateStream {
        key: key.clone(),
        content_type: text(),
        lifetime: Lifetime::Forever,
        closed: false,
        stream_seq: None,
        body: Body::prepare(Some(&text()), Bytes::new()),
        expect: None,
    }
}

fn append_command(key: &StreamKey, body: &'static str) -> AppendStream {
    AppendStream {
        key: key.clone(),
        content_type: Some(text()),
        body: Body::prepare(Some(&text()), Bytes::from_static(body.as_bytes())),
        close: false,
        stream_seq: None,
        producer: None,
        expect: None,
    }
}

fn whole(from: ReadFrom) -> ReadQuery {
    ReadQuery { from, max_bytes: 1 << 20, boundary: Boundary::Byte, whole_json_messages: false }
}

/// Creates `/cluster/log` through node 1 (Raft runs on the client ports
/// here; the HTTP helper finds the leader) and appends record 0: the index
/// of the group's leader.
async fn create_and_append(nodes: &[Option<Node>]) -> usize {
    let first = nodes[0].as_ref().expect("running");
    let deadline = Instant::now() + Duration::from_secs(30);
    while first.put(crate::cluster::S).content_type("text/plain").send().await.status != 201 {
        assert!(Instant::now() < deadline, "no create");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    append(nodes, 0).await
}

/// A `Read` of all of `key` through the tonic client.
async fn read_whole(c: &mut Client, cluster_id: &str, key: &StreamKey, leader: bool) -> pb::ReadReply {
    let encoded_query = wire::encode(&whole(ReadFrom::Start));
    let request = pb::ReadRequest { target: target(cluster_id, key), leader, encoded_query };
    c.read(request).await.expect("read").into_inner()
}

/// The reply's outcome, or how it was refused.
fn outcome<T: serde::de::DeserializeOwned>(reply: pb::WriteReply) -> Result<T, Refused> {
    match reply.result.expect("a result") {
        pb::write_reply::Result::EncodedOutcome(bytes) => Ok(wire::decode("an outcome", &bytes).expect("decodes")),
        pb::write_reply::Result::Failure(f) => Err(wire::refused(f)),
    }
}

async fn send_append(c: &mut Client, cluster_id: &str, cmd: &AppendStream) -> Result<AppendOk, Refused> {
    let req = pb::WriteRequest { target: target(cluster_id, &cmd.key), encoded_command: wire::encode(cmd) };
    outcome(c.append(req).await.expect("an answer").into_inner())
}

#[tokio::test]
async fn a_node_serves_the_stream_plane_beside_http_over_the_same_state() {
    let node = Node::start();
    let mut c = client(node.base()).await;
    let described = c.describe(pb::DescribeRequest::default()).await.expect("describe").into_inner();
    let cluster_id = described.cluster_id.clone();
    assert!(cluster_id.starts_with('u'), "{cluster_id}");
    assert_eq!(described.groups.len(), described.group_count as usize);
    for g in &described.groups {
        let leader = g.leader.as_ref().expect("a single node leads every group");
        assert_eq!((leader.node_id, leader.client_url.as_str()), (1, node.base()));
    }

    let key = StreamKey::parse("plane", "one").expect("key");
    let req =
        pb::WriteRequest { target: target(&cluster_id, &key), encoded_command: wire::encode(&create_command(&key)) };
    let created: CreateOk = outcome(c.create(req).await.expect("create").into_inner()).expect("created");
    assert!(created.created);
    send_append(&mut c, &cluster_id, &append_command(&key, "hello ")).await.expect("appended");
    let ok = send_append(&mut c, &cluster_id, &append_command(&key, "world")).await.expect("appended");
    assert_eq!(ok.info.tail.bytes(), 11);
    // The HTTP surface on the same port sees the same stream.
    assert_eq!(node.read_all("/plane/one").await.text(), "hello world");

    let read = read_whole(&mut c, &cluster_id, &key, true).await;
    let Some(pb::read_reply::Result::View(chunk)) = read.result else { panic!("a view: {read:?}") };
    let view = wire::read_view(chunk).expect("a view");
    assert_eq!(view.chunks.concat(), b"hello world");
    // The node writes a read's answer by hand (no copy of its chunks); a
    // refusal too is the reply tonic's `Read` would send.
    let missing = StreamKey::parse("plane", "nothing").expect("key");
    let read = read_whole(&mut c, &cluster_id, &missing, false).await;
    assert!(matches!(read.result, Some(pb::read_reply::Result::Failure(_))), "{read:?}");
    let head = c.head(pb::HeadRequest { target: target(&cluster_id, &key), leader: false }).await.expect("head");
    let Some(pb::head_reply::Result::EncodedInfo(info)) = head.into_inner().result else { panic!("an info") };
    let info: StreamInfo = wire::decode("info", &info).expect("info");
    assert_eq!(info.tail, view.next);

    // A watch at the tail carries each append as it commits, then the close.
    let watch = pb::WatchRequest {
        positions_only: false,
        target: target(&cluster_id, &key),
        incarnation: info.incarnation.value(),
        offset: info.tail.bytes(),
        encoded_query: wire::encode(&whole(ReadFrom::Start)),
        timeout_ms: 20_000,
    };
    let mut events = c.watch(watch).await.expect("watch").into_inner();
    node.append("/plane/one", "text/plain", "!").await.expect(204);
    let first = events.message().await.expect("an event").expect("not ended");
    let Some(pb::watch_event::Event::Data(data)) = first.event else { panic!("data: {first:?}") };
    assert_eq!(wire::read_view(data).expect("view").chunks.concat(), b"!");
    node.close("/plane/one").await.expect(204);
    let closed = events.message().await.expect("an event").expect("not ended");
    let Some(pb::watch_event::Event::Data(data)) = closed.event else { panic!("data: {closed:?}") };
    assert!(wire::read_view(data).expect("view").closed_at_end);
    assert!(events.message().await.expect("a clean end").is_none(), "the watch ends at the close");

    // Typed refusals: another cluster, a state machine refusal, garbage.
    let refused = send_append(&mut c, "u-someone-else", &append_command(&key, "x")).await;
    assert_eq!(refused, Err(Refused::ClusterMismatch { cluster_id: cluster_id.clone(), node_id: 1 }));
    let missing = StreamKey::parse("plane", "missing").expect("key");
    let refused = send_append(&mut c, &cluster_id, &append_command(&missing, "x")).await;
    assert_eq!(refused, Err(Refused::Backend(BackendError::Rejected(Rejection::StreamNotFound))));
    let garbage =
        pb::WriteRequest { target: target(&cluster_id, &key), encoded_command: Bytes::from_static(b"\xff\xff") };
    let refused = outcome::<AppendOk>(c.append(garbage).await.expect("an answer").into_inner());
    assert!(matches!(refused, Err(Refused::Invalid(_))), "{refused:?}");
    let other = pb::DescribeRequest { cluster_id: "u-someone-else".into() };
    assert!(c.describe(other).await.expect("describe").into_inner().failure.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_answers_a_typed_not_leader_naming_the_leaders_client_plane() {
    let layout = Layout::new(3, "plane-cluster", 4, Planes::Shared);
    let nodes: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let key = StreamKey::parse("cluster", "log").expect("key");
    let leader = create_and_append(&nodes).await;
    let leader_url = nodes[leader].as_ref().expect("leader").base().to_string();
    let follower = (0..3).find(|i| *i != leader).expect("a follower");
    let mut c = client(nodes[follower].as_ref().expect("follower").base()).await;
    let refused = send_append(&mut c, "plane-cluster", &append_command(&key, "x")).await;
    let Err(Refused::NotLeader { leader: Some(hint), .. }) = refused else { panic!("not_leader: {refused:?}") };
    assert_eq!((hint.leader_id, hint.client_url.as_str()), (leader as u64 + 1, leader_url.as_str()));
    // The leader's Describe agrees, and the write lands there.
    let mut c = client(&leader_url).await;
    let described = c.describe(pb::DescribeRequest { cluster_id: "plane-cluster".into() }).await.expect("describe");
    let leaders = described.into_inner().groups.iter().filter(|g| g.leader.is_some()).count();
    assert_eq!(leaders, 4, "every group has a leader");
    send_append(&mut c, "plane-cluster", &append_command(&key, "x")).await.expect("the leader appends");
}

/// `server.http_inflight_body_size` counts a gateway's writes as it counts
/// a client's: an append over the stream plane that does not fit beside
/// the bodies held now answers the typed `INGRESS_BODY_BYTES_LIMIT_REACHED`.
#[tokio::test]
async fn a_stream_plane_write_shares_the_nodes_inflight_body_budget() {
    use tokio::io::AsyncWriteExt;
    let node = Node::in_process_with("[server]\nhttp_inflight_body_size = \"1MiB\"\n");
    let mut c = client(node.base()).await;
    let cluster_id = c.describe(pb::DescribeRequest::default()).await.expect("describe").into_inner().cluster_id;
    let key = StreamKey::parse("plane", "budget").expect("key");
    let req =
        pb::WriteRequest { target: target(&cluster_id, &key), encoded_command: wire::encode(&create_command(&key)) };
    let _: CreateOk = outcome(c.create(req).await.expect("create").into_inner()).expect("created");
    // A client's body of 700,000 declared bytes holds its share while it trickles in.
    let addr = node.base().trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.expect("connect");
    let head = format!(
        "POST /plane/budget HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: 700000\r\n\r\nab"
    );
    slow.write_all(head.as_bytes()).await.expect("head");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = node.get("/__ursula/metrics").send().await.json();
        if metrics["ingress_body_bytes_inflight"].as_u64() >= Some(700_000) {
            break;
        }
        assert!(Instant::now() < deadline, "the slow body never took its share");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let large: &'static str = "x".repeat(400_000).leak();
    let refused = send_append(&mut c, &cluster_id, &append_command(&key, large)).await.expect_err("refused");
    assert!(
        matches!(
            refused,
            Refused::Backend(BackendError::Unavailable { reason: ursula_http::Unavailable::IngressBodyBytes, .. })
        ),
        "{refused:?}"
    );
    send_append(&mut c, &cluster_id, &append_command(&key, "small")).await.expect("a small one fits");
}

/// `AppendStream`: each numbered append answered by its number, refusals
/// included, answers of one message possibly in several, and the stream
/// ends once the caller stops sending and everything is answered.
#[tokio::test]
async fn a_node_answers_each_numbered_append_of_its_append_stream() {
    let node = Node::start();
    let mut c = client(node.base()).await;
    let cluster_id = c.describe(pb::DescribeRequest::default()).await.expect("describe").into_inner().cluster_id;
    let keys: Vec<StreamKey> = (0..4).map(|i| StreamKey::parse("numbered", &format!("s{i}")).expect("key")).collect();
    for key in &keys {
        let req =
            pb::WriteRequest { target: target(&cluster_id, key), encoded_command: wire::encode(&create_command(key)) };
        outcome::<CreateOk>(c.create(req).await.expect("create").into_inner()).expect("created");
    }
    let missing = StreamKey::parse("numbered", "missing").expect("key");
    let write = |id: u64, key: &StreamKey, body: &'static str| pb::NumberedWrite {
        id,
        request: Some(pb::WriteRequest {
            target: target(&cluster_id, key),
            encoded_command: wire::encode(&append_command(key, body)),
        }),
    };
    let first =
        pb::NumberedWrites { writes: vec![write(7, &keys[0], "a"), write(8, &keys[1], "bb"), write(9, &missing, "x")] };
    let second = pb::NumberedWrites { writes: vec![write(10, &keys[2], "ccc"), write(11, &keys[3], "dddd")] };
    let mut replies =
        c.append_stream(futures_util::stream::iter([first, second])).await.expect("the stream opens").into_inner();
    let mut answered = std::collections::BTreeMap::new();
    while let Some(message) = replies.message().await.expect("a message") {
        for numbered in message.replies {
            let reply = numbered.reply.expect("a reply");
            assert!(answered.insert(numbered.id, reply).is_none(), "{} answered twice", numbered.id);
        }
    }
    assert_eq!(answered.keys().copied().collect::<Vec<_>>(), [7, 8, 9, 10, 11]);
    for (id, bytes) in [(7, 1), (8, 2), (10, 3), (11, 4)] {
        let ok: AppendOk = outcome(answered[&id].clone()).expect("appended");
        assert_eq!(ok.info.tail.bytes(), bytes, "append {id}");
    }
    let refused = outcome::<AppendOk>(answered[&9].clone());
    assert_eq!(refused, Err(Refused::Backend(BackendError::Rejected(Rejection::StreamNotFound))));
    assert_eq!(node.read_all("/numbered/s3").await.text(), "dddd");
}

/// A stopping node says so on an open `AppendStream` (`closing`), answers
/// what it is sent until the caller ends its side, and then exits: the
/// stream does not hold the connection, and the node's stop, for the
/// drain's whole wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_node_tells_its_append_streams_and_answers_until_they_end() {
    // A durable node as a process of its own, to be stopped with SIGTERM.
    let dir = tempfile::tempdir().expect("a WAL directory");
    let config = dir.path().join("ursula.toml");
    std::fs::write(&config, format!("[raft.wal]\npath = {:?}\n", dir.path().join("wal"))).expect("a config");
    let args: Vec<String> =
        ["server", "--listen", "127.0.0.1:0", "--config", &config.display().to_string()].map(String::from).into();
    let node = Node::spawn(&args, Some(dir));
    let mut c = client(node.base()).await;
    let cluster_id = c.describe(pb::DescribeRequest::default()).await.expect("describe").into_inner().cluster_id;
    let key = StreamKey::parse("closing", "s").expect("key");
    let req =
        pb::WriteRequest { target: target(&cluster_id, &key), encoded_command: wire::encode(&create_command(&key)) };
    outcome::<CreateOk>(c.create(req).await.expect("create").into_inner()).expect("created");
    let write = |id: u64, body: &'static str| pb::NumberedWrites {
        writes: vec![pb::NumberedWrite {
            id,
            request: Some(pb::WriteRequest {
                target: target(&cluster_id, &key),
                encoded_command: wire::encode(&append_command(&key, body)),
            }),
        }],
    };
    let (sender, outbound) = tokio::sync::mpsc::unbounded_channel();
    let outbound = futures_util::stream::unfold(outbound, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut replies = c.append_stream(outbound).await.expect("the stream opens").into_inner();
    sender.send(write(1, "a")).expect("sent");
    let first = replies.message().await.expect("a message").expect("an answer");
    assert_eq!(first.replies.iter().map(|r| r.id).collect::<Vec<_>>(), [1]);

    let stopped = tokio::task::spawn_blocking(move || node.terminate());
    let told = tokio::time::timeout(Duration::from_secs(15), replies.message())
        .await
        .expect("the node told its stream it stops")
        .expect("a message")
        .expect("not ended");
    assert!(told.closing, "{told:?}");
    // Sent after the notice: still read and answered.
    sender.send(write(2, "b")).expect("sent");
    let second = replies.message().await.expect("a message").expect("an answer");
    assert_eq!(second.replies.iter().map(|r| r.id).collect::<Vec<_>>(), [2]);
    drop(sender);
    assert!(replies.message().await.expect("a clean end").is_none(), "the stream ends with the caller's side");
    let (status, stderr) = stopped.await.expect("terminate");
    assert!(status.success(), "the node exited with {status}:\n{stderr}");
}

/// A gateway reads where it last saw a group's leader, with `leader`
/// unset; a replica that does not lead answers history from its own state
/// but confirms through its leader what that state may not show yet (no
/// such stream, its tail), as an HTTP read does: with no leader to ask it
/// answers "no leader", never a 404 its leader might contradict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_confirms_no_such_stream_and_its_tail_through_its_leader() {
    let layout = Layout::new(3, "plane-confirm", 1, Planes::Shared);
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let key = StreamKey::parse("cluster", "log").expect("key");
    let missing = StreamKey::parse("cluster", "not-yet").expect("key");
    let leader = create_and_append(&nodes).await;
    append(&nodes, 1).await;
    let follower = (0..3).find(|i| *i != leader).expect("a follower");
    let mut c = client(nodes[follower].as_ref().expect("follower").base()).await;
    // With its leader up, a follower's "no such stream" is the leader's.
    let read = read_whole(&mut c, "plane-confirm", &missing, false).await;
    let Some(pb::read_reply::Result::Failure(failure)) = read.result else { panic!("a failure: {read:?}") };
    assert!(matches!(failure.kind, Some(pb::failure::Kind::Rejected(_))), "{failure:?}");

    // The leader and the other follower go: nothing can confirm.
    let other = (0..3).find(|i| *i != leader && *i != follower).expect("another follower");
    nodes[leader].take().expect("running").kill9();
    nodes[other].take().expect("running").kill9();
    let unconfirmed = |read: pb::ReadReply| match read.result {
        Some(pb::read_reply::Result::Failure(f)) => {
            matches!(f.kind, Some(pb::failure::Kind::NoLeader(_) | pb::failure::Kind::Unavailable(_)))
        }
        _ => false,
    };
    let read = read_whole(&mut c, "plane-confirm", &missing, false).await;
    assert!(unconfirmed(read.clone()), "no such stream, unconfirmed: {read:?}");
    let read = read_whole(&mut c, "plane-confirm", &key, false).await;
    assert!(unconfirmed(read.clone()), "a read to the tail, unconfirmed: {read:?}");
    // History below the tail is served from the replica's own state.
    let encoded_query = wire::encode(&ReadQuery { max_bytes: 1, ..whole(ReadFrom::Start) });
    let request = pb::ReadRequest { target: target("plane-confirm", &key), leader: false, encoded_query };
    let read = c.read(request).await.expect("read").into_inner();
    let Some(pb::read_reply::Result::View(chunk)) = read.result else { panic!("a view: {read:?}") };
    assert_eq!(wire::read_view(chunk).expect("a view").chunks.concat().len(), 1);
}
