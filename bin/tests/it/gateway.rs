//! `ursula gateway` in front of three voters (issue 8): the gateway speaks
//! the voters' private StreamService, follows their leader hints itself and
//! never hands a client a `307`. Two gateways carry a producer's writes
//! across a kill -9 of the groups' leader and of one gateway, and every
//! acknowledged append is present exactly once, in order, on every replica.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::support::Node;
use crate::support::cluster::{Layout, Planes, Target, Writer, gateway_args};

pub(crate) const S: &str = "/gateway/log";
pub(crate) const TEXT: &str = "text/plain";
const RECORDS: u64 = 60;
const PATIENCE: Duration = Duration::from_secs(60);

pub(crate) fn record(seq: u64) -> String {
    format!("g{seq:04}\n")
}

pub(crate) fn gateway(layout: &Layout) -> Node {
    Node::spawn(&gateway_args(layout, &[]), None)
}

pub(crate) fn no_redirects() -> reqwest::Client {
    let policy = reqwest::redirect::Policy::none();
    reqwest::Client::builder().no_proxy().redirect(policy).timeout(Duration::from_secs(15)).build().expect("client")
}

/// The producer `gw` of `S`, writing through gateways with `http`: after a
/// refusal it pauses 50 ms and goes on to the next gateway.
pub(crate) fn writer(http: reqwest::Client) -> Writer {
    Writer::new(http, S, "gw", record).pausing(Duration::from_millis(50)).patience(PATIENCE)
}

/// Sends producer write `seq` through the gateways in turn until one
/// acknowledges it (a repeat of an applied write is acknowledged too); a
/// gateway never answers with a redirect, only with a `5xx` while it cannot
/// reach a leader.
pub(crate) async fn write(writer: &mut Writer, gateways: &[impl Target], seq: u64) {
    writer
        .write(gateways, seq, |_, r| {
            assert_ne!(r.status(), 307, "a gateway client saw a redirect");
            assert!(r.status().is_server_error(), "write {seq}: {}", r.status());
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_carry_producer_writes_across_a_leader_kill_exactly_once() {
    let layout = Layout::new(3, "gateway-test", 4, Planes::Shared);
    let mut voters: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let mut gateways = vec![Some(gateway(&layout)), Some(gateway(&layout))];
    let urls = |g: &[Option<Node>]| g.iter().flatten().map(|n| n.base().to_string()).collect::<Vec<_>>();
    let http = no_redirects();
    let created = http.put(format!("{}{S}", urls(&gateways)[0])).header("content-type", TEXT).send().await;
    assert_eq!(created.expect("create").status(), 201);

    let mut producer = writer(http.clone());
    for seq in 0..RECORDS {
        if seq == 20 {
            // Node 1 goes, with the leaderships it holds.
            voters[0].take().expect("the leader").kill9();
        }
        if seq == 40 {
            gateways[0].take().expect("a gateway").kill9();
        }
        write(&mut producer, &gateways, seq).await;
    }

    let expected: String = (0..RECORDS).map(record).collect();
    let through = &urls(&gateways)[0];
    let read = http.get(format!("{through}{S}?offset=-1&consistency=leader")).send().await.expect("read");
    assert_eq!(read.status(), 200);
    assert_eq!(read.text().await.expect("text"), expected, "exactly once and in order through the gateway");
    // Every live replica holds the same history, and the killed one after it restarts.
    voters[0] = Some(layout.start(0));
    for v in voters.iter().flatten() {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let local = v.get(&format!("{S}?offset=-1")).send().await;
            if local.status == 200 && local.text() == expected {
                break;
            }
            assert!(Instant::now() < deadline, "a replica never converged: {:?}", local.text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let metrics = http.get(format!("{through}/__ursula/gateway/metrics")).send().await.expect("metrics");
    let metrics: serde_json::Value = serde_json::from_str(&metrics.text().await.expect("text")).expect("JSON");
    assert_eq!(metrics["engine"], "gateway", "{metrics}");
}

/// Issue 8, must-show 3: a marked chunk is answered from the gateway's
/// cache (`If-None-Match` too) after every voter stopped; an unmarked read
/// (the open tail) is never cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immutable_chunk_outlives_every_voter_in_the_gateway_cache() {
    let layout = Layout::new(3, "gateway-cache", 4, Planes::Shared);
    let mut voters: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let gw = gateway(&layout);
    let path = "/gateway/chunks";
    gw.put(path).content_type("application/octet-stream").send().await.expect(201);
    let body = crate::support::pattern(4 * 1024 * 1024 + 100);
    gw.post(path).content_type("application/octet-stream").body(body.clone()).send().await.expect(204);
    let token = gw.incarnation(path).await;
    let first = format!("{path}/incarnation/{token}/chunk/{}", crate::support::offset(0));
    let tail = format!("{path}/incarnation/{token}/chunk/{}", crate::support::offset(4 * 1024 * 1024));
    let full = gw.get(&first).send().await;
    full.expect(200).expect_header("stream-immutable", "true");
    assert_eq!(&full.body[..], &body[..4 * 1024 * 1024]);
    let etag = full.must("etag").to_string();
    let open = gw.get(&tail).send().await;
    open.expect(200).expect_no_header("stream-immutable");

    for v in voters.iter_mut() {
        v.take().expect("a voter").kill9();
    }
    let again = gw.get(&first).send().await;
    again.expect(200).expect_header("stream-immutable", "true").expect_header("etag", &etag);
    assert!(again.body == full.body, "the cached chunk is byte for byte the first answer");
    gw.get(&first).header("if-none-match", &etag).send().await.expect(304);
    // The open tail chunk was never kept: without voters it cannot be served.
    let gone = gw.get(&tail).send().await;
    assert!(gone.status.is_server_error(), "an unmarked answer came from the cache: {}", gone.status);
    let metrics = gw.get("/__ursula/gateway/metrics").send().await.json();
    assert!(metrics["immutable_cache_hits"].as_u64() >= Some(2), "{metrics}");
    assert!(metrics["immutable_cache_bytes"].as_u64() > Some(4 * 1024 * 1024), "{metrics}");
}

/// spec/08 "Cross-origin reads" and the gateway's request limit: CORS only
/// for listed origins, never credentials, one preflight for every path; a
/// lower `--max-request-body-bytes` is applied and advertised, and one above
/// the protocol's 32 MiB refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_answers_cors_for_listed_origins_and_applies_its_body_limit() {
    let layout = Layout::new(3, "gateway-cors", 4, Planes::Shared);
    let voters: Vec<Node> = (0..3).map(|i| layout.start(i)).collect();
    for v in &voters {
        wait_ready(v).await;
    }
    let app = "https://app.example.com";
    let listed =
        Node::spawn(&gateway_args(&layout, &["--cors-allowed-origin", app, "--max-request-body-bytes", "1000"]), None);
    let plain = gateway(&layout);
    let path = "/gateway/cors";
    listed.put(path).content_type(TEXT).send().await.expect(201);

    let from_app = listed.get(&format!("{path}?offset=-1")).header("origin", app).send().await;
    from_app
        .expect(200)
        .expect_header("access-control-allow-origin", app)
        .expect_header("access-control-expose-headers", "*");
    from_app.expect_no_header("access-control-allow-credentials");
    let elsewhere = listed.get(&format!("{path}?offset=-1")).header("origin", "https://evil.example").send().await;
    elsewhere.expect(200).expect_no_header("access-control-allow-origin");
    let unlisted = plain.get(&format!("{path}?offset=-1")).header("origin", app).send().await;
    unlisted.expect(200).expect_no_header("access-control-allow-origin");
    // The preflight never looks at the resource: the same for any path.
    let a = listed.request(reqwest::Method::OPTIONS, path).header("origin", app).send().await;
    let b = listed.request(reqwest::Method::OPTIONS, "/private/none").header("origin", app).send().await;
    assert_eq!(a.status, b.status);
    for name in ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"] {
        assert_eq!(a.header(name), b.header(name), "{name}");
    }
    a.expect_header("access-control-allow-origin", app).expect_no_header("access-control-allow-credentials");

    // The gateway's own limit: applied, named on the 413 and on HEAD.
    let big = listed.post(path).content_type(TEXT).body("x".repeat(1001)).send().await;
    big.expect(413).expect_header("ursula-max-request-bytes", "1000");
    listed.head(path).send().await.expect(200).expect_header("ursula-max-request-bytes", "1000");
    listed.post(path).content_type(TEXT).body("x".repeat(1000)).send().await.expect(204);

    // An immutable answer kept by the gateway's cache answers each origin as
    // a fresh one would: the first origin's CORS headers are not replayed.
    listed.close(path).await;
    let token = listed.incarnation(path).await;
    let chunk = format!("{path}/incarnation/{token}/chunk/{}", crate::support::offset(0));
    let kept = listed.get(&chunk).header("origin", app).send().await;
    kept.expect(200).expect_header("stream-immutable", "true").expect_header("access-control-allow-origin", app);
    let replayed = listed.get(&chunk).header("origin", "https://evil.example").send().await;
    replayed
        .expect(200)
        .expect_no_header("access-control-allow-origin")
        .expect_no_header("access-control-expose-headers");
    assert_eq!(replayed.headers.get_all("vary").iter().count(), 1, "one Vary: origin, not one per replay");
    listed.get(&chunk).header("origin", app).send().await.expect(200).expect_header("access-control-allow-origin", app);

    let (status, stderr) =
        crate::support::run_to_exit(&gateway_args(&layout, &["--max-request-body-bytes", "33554433"]));
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("LimitAboveProtocol"), "{stderr}");
}

/// Issue 17, finding 3: a gateway started before its voters serves at once
/// and is honest: ready `503`, its own `503 NO_UPSTREAM` with `Retry-After`,
/// `no-store` and no server identity (no voter answered); once a voter
/// answers it serves; malformed `--upstream` URLs and CORS origins refuse
/// the start.
#[tokio::test]
async fn a_gateway_started_before_its_voters_answers_503_no_upstream_then_serves() {
    let layout = Layout::new(3, "early-gateway", 2, Planes::Shared);
    let gateway = Node::spawn_logging(&gateway_args(&layout, &[]), None, "warn");
    gateway.get("/__ursula/ready").send().await.expect(503);
    let early = gateway.put(S).content_type(TEXT).send().await;
    early
        .expect_error(503, "NO_UPSTREAM")
        .expect_header("cache-control", "no-store")
        .expect_no_header("ursula-protocol")
        .expect_no_header("ursula-cluster-id");
    early.must("retry-after");

    let voters: Vec<Option<Node>> = (0..layout.voters()).map(|i| Some(layout.start(i))).collect();
    let deadline = Instant::now() + PATIENCE;
    while gateway.get("/__ursula/ready").send().await.status != 200 {
        assert!(Instant::now() < deadline, "the gateway never found its voters");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    gateway.put(S).content_type(TEXT).send().await.expect(201);
    gateway.append(S, TEXT, "hello").await;
    assert_eq!(gateway.read_all(S).await.text(), "hello");

    // Every voter gone: the gateway's own UPSTREAM_UNREACHABLE, then not ready.
    drop(voters);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = gateway.get(&format!("{S}?offset=-1")).send().await;
        if answer.status == 503 && answer.error_code() == "UPSTREAM_UNREACHABLE" {
            answer.expect_no_header("ursula-protocol").expect_no_header("ursula-cluster-id");
            answer.must("retry-after");
            break;
        }
        assert!(Instant::now() < deadline, "no UPSTREAM_UNREACHABLE: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + PATIENCE;
    while gateway.get("/__ursula/ready").send().await.status != 503 {
        assert!(Instant::now() < deadline, "the gateway stayed ready without voters");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for bad in [vec!["--upstream", "notaurl"], vec!["--upstream", "http://127.0.0.1:1", "--cors-allowed-origin", "app"]]
    {
        let mut args = vec!["gateway".to_string(), "--listen".into(), "127.0.0.1:0".into()];
        args.extend(bad.iter().map(|a| a.to_string()));
        let (status, stderr) = crate::support::run_to_exit(&args);
        assert_eq!(status.code(), Some(2), "{bad:?}: {stderr}");
    }
}
