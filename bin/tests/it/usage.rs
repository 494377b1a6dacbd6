//! `GET /__ursula/usage` (spec/35 "Usage export", issue 19): a voter's
//! committed usage per bucket from its replicated state. A gateway holds
//! no streams and answers `404`; each voter reports its own.

use crate::support::Node;

const TEXT: &str = "text/plain";

#[tokio::test]
async fn usage_counts_committed_writes_per_bucket() {
    let node = Node::start();
    if crate::support::through_gateway() {
        node.get("/__ursula/usage").send().await.expect_error(404, "NOT_FOUND");
        return;
    }
    node.put("/tenant-a/s").content_type(TEXT).body("hello").send().await.expect(201);
    for _ in 0..2 {
        // The second is a producer retry: it counts nothing.
        let append = node.post("/tenant-a/s").content_type(TEXT).producer("p", 0, 0).body("x".repeat(12_000));
        append.send().await;
    }
    node.put("/tenant-b/s").content_type("application/json").body(r#"[{"a":1},{"b":2}]"#).send().await.expect(201);
    node.delete("/tenant-b/s").send().await.expect(204);
    let usage = node.get("/__ursula/usage").send().await;
    usage.expect(200).expect_header("cache-control", "no-store");
    let usage = usage.json();
    assert_eq!(usage["version"], 1);
    assert_eq!(usage["write_unit_bytes"], 10240);
    assert_eq!(
        usage["buckets"]["tenant-a"],
        serde_json::json!({
            "committed_append_bytes": 12_005,
            "committed_records": 2,
            "committed_write_units": 1 + 2,
            "retained_bytes": 12_005,
            "stream_count": 1,
        })
    );
    assert_eq!(
        usage["buckets"]["tenant-b"],
        serde_json::json!({
            "committed_append_bytes": 16,
            "committed_records": 2,
            "committed_write_units": 1,
            "retained_bytes": 0,
            "stream_count": 0,
        }),
        "a deleted stream's writes stay counted"
    );
    assert!(usage["node_id"].as_u64().is_some() && usage["raft_group_count"].as_u64().is_some(), "{usage}");
    assert_eq!(usage["staged_snapshot_parts"], serde_json::json!([]), "no cold store: nothing staged");
}
