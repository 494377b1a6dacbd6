//! Observability (spec/37-observability.md): OTLP export to a collector
//! the test runs, one trace across a gateway, a follower and the leader,
//! the metrics with the process's resource, and nothing exported without
//! the variables.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::support::Node;
use crate::support::cluster::{Layout, Planes, gateway_args};
use crate::support::otlp::{Collector, SeenSpan};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PATIENCE: Duration = Duration::from_secs(30);

fn traceparent(span: &str) -> String {
    format!("00-{TRACE}-{span}-01")
}

fn exporting_to(collector: &Collector) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.clone()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "300".into()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test".into()),
        // The on-core spans are `debug`, scoped to our crate as spec/37 advises.
        ("RUST_LOG", "info,openraft=off,ursula_core=debug".into()),
    ]
}

/// The voter that leads `path`'s group and one that follows: a follower
/// answers `HEAD` with `307` to the leader.
async fn roles(voters: &[Node], path: &str) -> (usize, usize) {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("a client");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut leader = None;
        let mut follower = None;
        for (i, v) in voters.iter().enumerate() {
            match client.head(v.url(path)).send().await.map(|r| r.status().as_u16()) {
                Ok(200) => leader = Some(i),
                Ok(307) => follower = Some(i),
                _ => {}
            }
        }
        if let (Some(l), Some(f)) = (leader, follower) {
            return (l, f);
        }
        assert!(Instant::now() < deadline, "no leader and follower of {path}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn find<'a>(spans: &'a [SeenSpan], service: &str, instance: Option<&str>, name: &str) -> Option<&'a SeenSpan> {
    spans.iter().find(|s| {
        s.trace_id == TRACE
            && s.service == service
            && s.name == name
            && instance.is_none_or(|i| s.instance.as_deref() == Some(i))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_spans_gateway_follower_and_leader_and_the_metrics_arrive() {
    let collector = Collector::start().await;
    let env = exporting_to(&collector);
    let layout = Layout::new(3, "otel-test", 4, Planes::Shared);
    let voters: Vec<Node> = (0..layout.voters()).map(|i| Node::spawn_env(&layout.args(i), None, "", &env)).collect();
    for v in &voters {
        wait_ready(v).await;
    }
    let gateway = Node::spawn_env(&gateway_args(&layout, &[]), None, "", &env);
    wait_ready(&gateway).await;

    const PATH: &str = "/otel/run-1";
    // A client that decided not to sample: nothing of its request is exported.
    const UNSAMPLED: &str = "0af7651916cd43dd8448eb211c80319c";
    gateway
        .put("/otel/unsampled")
        .content_type("text/plain")
        .header("traceparent", format!("00-{UNSAMPLED}-b7ad6b7169203331-00"))
        .send()
        .await
        .expect(201);
    gateway
        .put(PATH)
        .content_type("text/plain")
        .header("traceparent", traceparent("00f067aa0ba902b1"))
        .send()
        .await
        .expect(201);
    let appended = gateway
        .post(PATH)
        .content_type("text/plain")
        .header("traceparent", traceparent("00f067aa0ba902b2"))
        .body("secret-payload")
        .send()
        .await;
    assert!(appended.status.is_success(), "{appended:?}");
    let (leader, follower) = roles(&voters, PATH).await;
    let read = voters[follower]
        .get(&format!("{PATH}?offset=-1"))
        .header("traceparent", traceparent("00f067aa0ba902b3"))
        .send()
        .await;
    read.expect(200);
    assert_eq!(read.text(), "secret-payload");

    let (leader_id, follower_id) = ((leader + 1).to_string(), (follower + 1).to_string());
    let (l, f) = (Some(leader_id.as_str()), Some(follower_id.as_str()));
    let wanted: [(&str, Option<&str>, &str); 7] = [
        ("ursula-gateway", None, "http.append"),
        ("ursula", l, "ursula.stream.v1.StreamService/Append"),
        ("ursula", l, "core.append"),
        ("ursula", l, "raft.propose"),
        ("ursula", f, "http.read"),
        ("ursula", f, "raft.read_barrier"),
        ("ursula", l, "ursula.raft.v1.RaftService/ReadBarrier"),
    ];
    let deadline = Instant::now() + PATIENCE;
    let spans = loop {
        let spans = collector.spans();
        let missing: Vec<_> = wanted.iter().filter(|(s, i, n)| find(&spans, s, *i, n).is_none()).collect();
        if missing.is_empty() {
            break spans;
        }
        assert!(Instant::now() < deadline, "spans missing: {missing:?}\nreceived: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let trace: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == TRACE)
        .map(|s| format!("{} {:?} {} {} <- {}", s.service, s.instance, s.name, s.span_id, s.parent_id))
        .collect();
    let trace = trace.join("\n");
    // The span named `name` under `parent`, sent by `instance` (`None`: the gateway).
    let child = |parent: &str, instance: Option<&str>, name: &str| -> SeenSpan {
        spans
            .iter()
            .find(|s| {
                s.trace_id == TRACE && s.parent_id == parent && s.name == name && s.instance.as_deref() == instance
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {name} of {instance:?} under {parent} in the trace:\n{trace}"))
    };
    // The gateway's boundary span: a child of the client's, named by stream, never the payload.
    let append = child("00f067aa0ba902b2", None, "http.append");
    assert_eq!(append.service, "ursula-gateway");
    assert_eq!(append.attributes.get("bucket").map(String::as_str), Some("otel"));
    assert_eq!(append.attributes.get("stream").map(String::as_str), Some("run-1"));
    assert_eq!(append.attributes.get("http.response.status_code").map(String::as_str), Some(appended.status.as_str()));
    // The leader's work hangs under the gateway's span, over gRPC metadata.
    let call = child(&append.span_id, l, "ursula.stream.v1.StreamService/Append");
    let core = child(&call.span_id, l, "core.append");
    child(&core.span_id, l, "raft.propose");
    // The follower's read asks the leader for a barrier: same trace, parent to child.
    let read = child("00f067aa0ba902b3", f, "http.read");
    assert_eq!(read.attributes.get("stream").map(String::as_str), Some("run-1"));
    let barrier = child(&read.span_id, f, "raft.read_barrier");
    child(&barrier.span_id, l, "ursula.raft.v1.RaftService/ReadBarrier");
    assert!(!spans.iter().any(|s| s.trace_id == UNSAMPLED), "an unsampled request was traced:\n{trace}");
    let barriers = spans.iter().filter(|s| s.parent_id == barrier.span_id).count();
    assert_eq!(barriers, 1, "one barrier call, one span:\n{trace}");
    for s in spans.iter().filter(|s| s.trace_id == TRACE) {
        assert!(!format!("{:?}", s.attributes).contains("secret-payload"), "a payload in {s:?}");
        if s.service == "ursula" {
            assert!(s.instance.is_some(), "a voter's span without service.instance.id: {s:?}");
        }
    }

    // The metrics: every voter's, with its resource, and the gateway's.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let metrics = collector.metrics();
        let has = |service: &str, instance: Option<&str>, name: &str| {
            metrics.iter().any(|m| {
                m.service == service
                    && m.name == name
                    && !m.points.is_empty()
                    && instance.is_none_or(|i| m.instance.as_deref() == Some(i))
            })
        };
        let value = |instance: &str, name: &str| {
            metrics
                .iter()
                .filter(|m| m.name == name && m.instance.as_deref() == Some(instance))
                .flat_map(|m| m.points.iter().map(|p| p.1))
                .fold(0.0_f64, f64::max)
        };
        let voter_names = [
            "ursula.appends.accepted",
            "ursula.mutations.applied",
            "ursula.raft_apply.ns",
            "ursula.wal.records",
            "ursula.wal.segments",
            "ursula.wal.rewritten_bytes",
            "ursula.ttl_expiry.sweeps",
            "ursula.raft.apply_stopped",
            "ursula.raft.recovery_gates",
            "ursula.wal.recovering",
            "ursula.raft.peer_cluster_refusals",
            "ursula.raft.group.leader",
            "ursula.raft.group.apply_lag",
        ];
        let voters_done = (1..=3).all(|i| voter_names.iter().all(|n| has("ursula", Some(&i.to_string()), n)));
        let cluster_info = metrics.iter().any(|m| {
            m.name == "ursula.cluster.info"
                && m.points.iter().any(|p| p.0.get("cluster_id").map(String::as_str) == Some("otel-test"))
        });
        let gateway_done = ["ursula.http.requests", "ursula.gateway.upstream_calls", "ursula.append.duration"]
            .iter()
            .all(|n| has("ursula-gateway", None, n));
        if voters_done && cluster_info && gateway_done && value(&leader_id, "ursula.appends.accepted") >= 1.0 {
            break;
        }
        let names: std::collections::BTreeSet<_> =
            metrics.iter().map(|m| format!("{} {:?} {}", m.service, m.instance, m.name)).collect();
        assert!(Instant::now() < deadline, "metrics missing; received: {names:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(collector.other().is_empty(), "not OTLP: {:?}", collector.other());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_exported_without_the_variables() {
    // A collector on the exporters' default endpoint must hear nothing.
    let Ok(collector) = Collector::start_on("127.0.0.1:4318".parse().expect("an address")).await else {
        eprintln!("SKIPPED: 127.0.0.1:4318 is taken, so the default endpoint cannot be watched");
        return;
    };
    let env = [("OTEL_SERVICE_NAME", "quiet".to_string()), ("OTEL_METRIC_EXPORT_INTERVAL", "100".into())];
    let args: Vec<String> = ["server", "--listen", "127.0.0.1:0"].map(String::from).to_vec();
    let node = Node::spawn_env(&args, None, "", &env);
    node.put("/quiet/s")
        .content_type("text/plain")
        .header("traceparent", traceparent("00f067aa0ba902b1"))
        .send()
        .await
        .expect(201);
    node.append("/quiet/s", "text/plain", "x").await;
    node.get("/quiet/s?offset=-1").header("traceparent", traceparent("00f067aa0ba902b2")).send().await.expect(200);
    // The JSON metrics work without export.
    let metrics = node.get("/__ursula/metrics").send().await.json();
    assert_eq!(metrics["appends_accepted"], 1);
    assert_eq!(metrics["sse_streams_opened"], 0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(collector.is_empty(), "exported without OTEL_EXPORTER_OTLP_*: {:?}", collector.spans());
}
