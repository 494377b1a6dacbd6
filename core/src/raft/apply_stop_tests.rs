//! spec/38 "`503` with `APPLY_STOPPED` from one group": a committed command
//! that fails to apply stops its group on this replica alone; the node
//! stays ready and serves its other groups, and its maintenance report
//! names the stopped group.

use bytes::Bytes;
use ursula_stream::routing::group_of;
use ursula_stream::{Body, Command, ContentType, CreateStream, Lifetime, StreamKey};

use super::apply_fault as fault;
use crate::engine::{EngineError, GroupEngine};

const GROUPS: u32 = 4;

fn create(key: &StreamKey) -> Command {
    let text = ContentType::parse("text/plain").expect("a content type");
    Command::Create(CreateStream {
        key: key.clone(),
        body: Body::prepare(Some(&text), Bytes::new()),
        content_type: text,
        lifetime: Lifetime::Forever,
        closed: false,
        stream_seq: None,
        expect: None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_apply_stops_its_group_alone_and_the_node_serves_the_others() {
    let (_dir, node) = super::lone_voter(GROUPS).await;
    let engine = node.engine.clone();

    fault::fail_bucket("apply-fault");
    let broken = StreamKey::parse("apply-fault", "s").expect("a key");
    let stopped = group_of(&broken, GROUPS);
    let healthy = (0..)
        .map(|i| StreamKey::parse("healthy", &format!("s{i}")).expect("a key"))
        .find(|k| group_of(k, GROUPS) != stopped)
        .expect("a stream in another group");
    let other = group_of(&healthy, GROUPS);

    let refused = engine.propose(stopped, create(&broken)).await.expect_err("the apply fails");
    assert!(matches!(refused, EngineError::ApplyStopped(g) if g == stopped), "{refused:?}");
    assert_eq!(engine.apply_stopped_groups(), vec![stopped.0]);
    // Everything of the stopped group answers APPLY_STOPPED on this replica.
    let again = engine.propose(stopped, create(&StreamKey::parse("elsewhere", "x").expect("key"))).await;
    assert!(matches!(again, Err(EngineError::ApplyStopped(_))), "{again:?}");
    let read = engine.query(stopped, |store, _| store.len());
    assert!(matches!(read, Err(EngineError::ApplyStopped(_))), "{read:?}");
    assert!(matches!(engine.linearize(stopped).await, Err(EngineError::ApplyStopped(_))));

    // The other groups serve, and the node stays ready.
    engine.propose(other, create(&healthy)).await.expect("another group applies");
    assert_eq!(engine.query(other, |store, _| store.len()).expect("a read"), 1);
    assert_eq!(engine.unready_reason(), None);
    let metrics = engine.metrics();
    assert_eq!(metrics["apply_stopped_groups"], serde_json::json!([stopped.0]));
    let issues = metrics["raft_maintenance"]["group_issues"].as_array().expect("issues").clone();
    let named = serde_json::json!({ "raft_group_id": stopped.0, "issue": "apply_stopped" });
    assert!(issues.contains(&named), "{issues:?}");
    node.shutdown().await.expect("a clean stop");
}
