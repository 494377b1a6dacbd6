//! Gateway access control (spec/08 "Gateway access control", extensions
//! §10–11 for intermediaries, issue 18): a gateway with `--auth-*` in front
//! of three real voters, and a real issuer served by the test (RSA and EC
//! keys, a JWKS, RFC 8414 metadata) minting RFC 9068 access tokens.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cluster::{Layout, Planes, gateway_args};
use crate::support::issuer::{self, Issuer, SigningKey, now_secs};
use crate::support::{Answer, Checks, Node, run_to_exit};

const TEXT: &str = "text/plain";
const ALICE: &str = "alice";
const BOB: &str = "bob";

/// Three voters, an issuer, a policy file, and gateways in front of them.
struct Setup {
    issuer: Issuer,
    rsa: SigningKey,
    ec: SigningKey,
    layout: Layout,
    _voters: Vec<Node>,
    dir: tempfile::TempDir,
}

fn policy_text(issuer: &str, extra: &str) -> String {
    format!(
        r#"
[[bucket]]
id = "tenant-a"
owners = [{{ issuer = "{issuer}", subject = "{ALICE}" }}]

[[bucket]]
id = "tenant-pub"
public_read = true
owners = [{{ issuer = "{issuer}", subject = "{ALICE}" }}]

[[bucket]]
id = "tenant-empty"
owners = [{{ issuer = "{issuer}", subject = "{ALICE}" }}]
{extra}"#
    )
}

impl Setup {
    async fn new() -> Setup {
        let rsa = SigningKey::rsa("rsa-1", true);
        let ec = SigningKey::ec("ec-1");
        let issuer = Issuer::start(&[&rsa, &ec]).await;
        let layout = Layout::new(3, "auth-suite", 4, Planes::Shared);
        let voters: Vec<Node> = (0..layout.voters()).map(|i| layout.start(i)).collect();
        let dir = tempfile::tempdir().expect("a directory");
        std::fs::write(dir.path().join("policy.toml"), policy_text(&issuer.url, "")).expect("the policy");
        Setup { issuer, rsa, ec, layout, _voters: voters, dir }
    }

    fn policy(&self) -> String {
        self.dir.path().join("policy.toml").display().to_string()
    }

    fn args(&self, extra: &[&str]) -> Vec<String> {
        let policy = self.policy();
        let mut flags =
            vec!["--auth-issuer", &self.issuer.url, "--auth-audience", &self.issuer.audience, "--auth-policy", &policy];
        flags.extend_from_slice(extra);
        gateway_args(&self.layout, &flags)
    }

    /// A gateway with access control, once it serves (its ready route is
    /// concealed like every `/__ursula/` path, so an owner's request tells).
    async fn gateway(&self, extra: &[&str]) -> Node {
        let gateway = Node::spawn_logging(&self.args(extra), None, "");
        let token = self.token(ALICE);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let probe = bearer(gateway.head("/tenant-empty/probe"), &token).send().await;
            if probe.status != 503 {
                break;
            }
            assert!(Instant::now() < deadline, "the gateway never served:\n{probe:?}\n{}", gateway.stderr_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        gateway
    }

    /// A valid token for `subject`, for ten minutes.
    fn token(&self, subject: &str) -> String {
        self.issuer.token(&self.rsa, subject, 600)
    }
}

fn bearer(req: crate::support::Req, token: &str) -> crate::support::Req {
    req.header("authorization", format!("Bearer {token}"))
}

/// Status, headers (sorted) and body of an answer.
type Comparable = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

/// The answer with `Date` left out: what must be identical byte for byte.
fn comparable(answer: &Answer) -> Comparable {
    let mut headers: Vec<(String, Vec<u8>)> = answer
        .headers
        .iter()
        .filter(|(name, _)| name.as_str() != "date")
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    headers.sort();
    (answer.status.as_u16(), headers, answer.body.to_vec())
}

/// An intermediary's own answer: no server identity (extensions §10).
fn expect_intermediary(answer: &Answer) {
    answer.expect_no_header("ursula-protocol").expect_no_header("ursula-cluster-id");
    answer.expect_header("cache-control", "no-store");
}

/// Must-show 2: an unknown bucket, a private stream read by a stranger and
/// without a token, a stranger's write, and a non-owner's write to a
/// `public_read` bucket get one answer, byte for byte: the node's answer
/// for a bucket that does not exist, without its identity. Every
/// `/__ursula/` path answers it too; the preflight is the same everywhere.
#[tokio::test]
async fn concealment_is_one_answer_byte_for_byte() {
    let setup = Setup::new().await;
    let gateway = setup.gateway(&[]).await;
    let (alice, bob) = (setup.token(ALICE), setup.token(BOB));
    bearer(gateway.put("/tenant-a/private"), &alice).content_type(TEXT).send().await.expect(201);
    bearer(gateway.put("/tenant-pub/open"), &alice).content_type(TEXT).send().await.expect(201);

    let answers = [
        ("unknown bucket", bearer(gateway.get("/tenant-zz/s?offset=-1"), &alice).send().await),
        ("private read by a stranger", bearer(gateway.get("/tenant-a/private?offset=-1"), &bob).send().await),
        ("private read without a token", gateway.get("/tenant-a/private?offset=-1").send().await),
        ("stranger's write", bearer(gateway.post("/tenant-a/private"), &bob).content_type(TEXT).body("x").send().await),
        ("non-owner's write to a public bucket", {
            bearer(gateway.post("/tenant-pub/open"), &bob).content_type(TEXT).body("x").send().await
        }),
        ("anonymous create in a public bucket", gateway.put("/tenant-pub/new").content_type(TEXT).send().await),
        ("stranger's delete", bearer(gateway.delete("/tenant-a/private"), &bob).send().await),
        ("node metrics", bearer(gateway.get("/__ursula/metrics"), &alice).send().await),
        ("gateway metrics", gateway.get("/__ursula/gateway/metrics").send().await),
        ("ready", gateway.get("/__ursula/ready").send().await),
        ("unknown operational path", gateway.get("/__ursula/nothing").send().await),
    ];
    let first = comparable(&answers[0].1);
    let mut checks = Checks::new();
    for (label, answer) in &answers {
        checks.run(label, || {
            answer.expect_error(404, "BUCKET_NOT_FOUND");
            expect_intermediary(answer);
            assert!(comparable(answer) == first, "not the same answer as an unknown bucket's:\n{answer:?}");
        });
    }
    checks.finish();
    // The same status and body as the node's own answer for a bucket
    // nothing created (which adds the node's identity).
    let node = bearer(gateway.get("/tenant-empty/s?offset=-1"), &alice).send().await;
    node.expect_error(404, "BUCKET_NOT_FOUND").expect_header("ursula-protocol", "2");
    assert_eq!(node.body, answers[0].1.body, "the node's body");
    // A HEAD is concealed the same way, whoever asks.
    let heads = [
        bearer(gateway.head("/tenant-zz/s"), &alice).send().await,
        bearer(gateway.head("/tenant-a/private"), &bob).send().await,
        gateway.head("/tenant-a/private").send().await,
    ];
    for head in &heads {
        head.expect(404);
        expect_intermediary(head);
        assert!(comparable(head) == comparable(&heads[0]), "{head:?}");
    }
    // Nothing a stranger sent reached the stream.
    let read = bearer(gateway.get("/tenant-a/private?offset=-1"), &alice).send().await;
    read.expect(200);
    assert_eq!(read.text(), "");
    // The preflight runs before any check, the same for every path, and
    // names `authorization` (the Fetch standard's `*` never covers it).
    let preflights = [
        gateway.request(reqwest::Method::OPTIONS, "/tenant-a/private").send().await,
        gateway.request(reqwest::Method::OPTIONS, "/tenant-zz/s").send().await,
        gateway.request(reqwest::Method::OPTIONS, "/__ursula/metrics").send().await,
    ];
    for preflight in &preflights {
        preflight.expect(204);
        assert!(preflight.must("access-control-allow-headers").contains("authorization"), "{preflight:?}");
        assert!(comparable(preflight) == comparable(&preflights[0]), "{preflight:?}");
    }
}

/// Owners may do everything in their bucket; `public_read` grants reads,
/// heads, tails and snapshot reads to anyone, never a write.
#[tokio::test]
async fn owners_do_everything_and_public_read_grants_reads_only() {
    let setup = Setup::new().await;
    let gateway = setup.gateway(&[]).await;
    let (alice, bob) = (setup.token(ALICE), setup.token(BOB));
    let ec_alice = setup.issuer.token(&setup.ec, ALICE, 600);
    // An owner, with an RSA or an EC token.
    bearer(gateway.put("/tenant-a/s"), &alice).content_type(TEXT).send().await.expect(201);
    bearer(gateway.post("/tenant-a/s"), &ec_alice).content_type(TEXT).body("hello").send().await.expect(204);
    let snap = crate::support::offset(5);
    let published = bearer(gateway.put(&format!("/tenant-a/s/snapshot/{snap}")), &alice).content_type(TEXT);
    published.body("state").send().await.expect(204);
    bearer(gateway.get("/tenant-a/s?offset=-1"), &alice).send().await.expect(200);
    bearer(gateway.head("/tenant-a/s"), &alice).send().await.expect(200);
    bearer(gateway.delete("/tenant-a/s"), &alice).send().await.expect(204);

    bearer(gateway.put("/tenant-pub/s"), &alice).content_type(TEXT).send().await.expect(201);
    bearer(gateway.post("/tenant-pub/s"), &alice).content_type(TEXT).body("hello").send().await.expect(204);
    bearer(gateway.put(&format!("/tenant-pub/s/snapshot/{snap}")), &alice)
        .content_type(TEXT)
        .body("state")
        .send()
        .await
        .expect(204);
    let mut checks = Checks::new();
    for who in [None, Some(&bob)] {
        let by = if who.is_some() { "a stranger" } else { "anyone" };
        let with = |req: crate::support::Req| match who {
            Some(token) => bearer(req, token),
            None => req,
        };
        let reads = [
            ("read", with(gateway.get("/tenant-pub/s?offset=-1")).send().await, 200),
            ("head", with(gateway.head("/tenant-pub/s")).send().await, 200),
            (
                "long-poll",
                with(gateway.get(&format!("/tenant-pub/s?offset={snap}&live=long-poll&timeout_ms=1"))).send().await,
                204,
            ),
            ("snapshot read", with(gateway.get(&format!("/tenant-pub/s/snapshot/{snap}"))).send().await, 200),
            ("bootstrap", with(gateway.get("/tenant-pub/s/bootstrap")).send().await, 200),
        ];
        for (label, answer, status) in &reads {
            checks.run(format!("{label} by {by}"), || {
                answer.expect(*status);
            });
        }
        let writes = [
            ("append", with(gateway.post("/tenant-pub/s")).content_type(TEXT).body("x").send().await),
            ("close", with(gateway.post("/tenant-pub/s")).closed().send().await),
            ("create", with(gateway.put("/tenant-pub/t")).content_type(TEXT).send().await),
            ("delete", with(gateway.delete("/tenant-pub/s")).send().await),
            ("publish", with(gateway.put(&format!("/tenant-pub/s/snapshot/{snap}"))).body("y").send().await),
            ("retention", with(gateway.put(&format!("/tenant-pub/s/retention/{snap}"))).send().await),
            ("parts", with(gateway.delete("/tenant-pub/s/snapshot/parts")).send().await),
            ("bucket create", with(gateway.put("/tenant-pub")).send().await),
        ];
        for (label, answer) in &writes {
            checks.run(format!("{label} by {by}"), || {
                answer.expect_error(404, "BUCKET_NOT_FOUND");
            });
        }
    }
    checks.finish();
    let read = gateway.get("/tenant-pub/s?offset=-1").send().await;
    assert_eq!(read.text(), "hello", "no write of a non-owner applied");
}

/// Bad input: each refused with the right status and code, `WWW-Authenticate`,
/// no server identity, none reaching a voter.
#[tokio::test]
async fn bad_credentials_are_refused_before_any_voter() {
    let setup = Setup::new().await;
    let gateway = setup.gateway(&[]).await;
    let issuer = &setup.issuer;
    let alice = setup.token(ALICE);
    bearer(gateway.put("/tenant-a/s"), &alice).content_type(TEXT).send().await.expect(201);
    let key = &setup.rsa;
    let header = issuer::at_jwt_header(key);
    let claims = issuer.claims(ALICE, 600);
    let edited = |edit: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut c = claims.clone();
        edit(&mut c);
        issuer::sign(key, &header, &c)
    };
    let with_header = |edit: &dyn Fn(&mut jsonwebtoken::Header)| {
        let mut h = header.clone();
        edit(&mut h);
        issuer::sign(key, &h, &claims)
    };
    let valid = issuer::sign(key, &header, &claims);
    let mut parts: Vec<&str> = valid.split('.').collect();
    let forged_payload = issuer::sign(key, &header, &issuer.claims("mallory", 600));
    let forged: Vec<&str> = forged_payload.split('.').collect();
    parts[1] = forged[1];
    let tampered_payload = parts.join(".");
    let tampered_signature = {
        let mut t = valid.clone();
        let last = t.pop().expect("a signature");
        t.push(if last == 'A' { 'B' } else { 'A' });
        t
    };
    let mut rows: Vec<(String, String, &str)> = vec![
        (
            "expired".into(),
            edited(&|c| {
                c.insert("exp".into(), json!(now_secs() - 120));
                c.insert("iat".into(), json!(now_secs() - 700));
            }),
            "CREDENTIAL_EXPIRED",
        ),
        (
            "not yet valid".into(),
            edited(&|c| drop(c.insert("nbf".into(), json!(now_secs() + 600)))),
            "INVALID_CREDENTIAL",
        ),
        (
            "issued in the future".into(),
            edited(&|c| drop(c.insert("iat".into(), json!(now_secs() + 600)))),
            "INVALID_CREDENTIAL",
        ),
        (
            "wrong audience".into(),
            edited(&|c| drop(c.insert("aud".into(), json!("https://other.example")))),
            "INVALID_CREDENTIAL",
        ),
        (
            "wrong issuer".into(),
            edited(&|c| drop(c.insert("iss".into(), json!("https://other.example")))),
            "INVALID_CREDENTIAL",
        ),
        ("typ JWT".into(), with_header(&|h| h.typ = Some("JWT".into())), "INVALID_CREDENTIAL"),
        ("no typ".into(), with_header(&|h| h.typ = None), "INVALID_CREDENTIAL"),
        ("no kid".into(), with_header(&|h| h.kid = None), "INVALID_CREDENTIAL"),
        ("unknown kid".into(), with_header(&|h| h.kid = Some("nobody".into())), "INVALID_CREDENTIAL"),
        (
            "a jku to follow".into(),
            with_header(&|h| h.jku = Some("http://127.0.0.1:9/jwks".into())),
            "INVALID_CREDENTIAL",
        ),
        ("alg none".into(), issuer::unsigned(&key.kid, &claims), "INVALID_CREDENTIAL"),
        ("HS256 signed with the public key".into(), issuer::hmac_with_public_key(key, &claims), "INVALID_CREDENTIAL"),
        (
            "PS256 with a key declared RS256".into(),
            with_header(&|h| h.alg = jsonwebtoken::Algorithm::PS256),
            "INVALID_CREDENTIAL",
        ),
        ("tampered signature".into(), tampered_signature, "INVALID_CREDENTIAL"),
        ("tampered payload".into(), tampered_payload, "INVALID_CREDENTIAL"),
        ("not a JWT".into(), "abc".into(), "INVALID_CREDENTIAL"),
        ("64 KiB".into(), "a".repeat(64 * 1024), "INVALID_CREDENTIAL"),
    ];
    for claim in ["iss", "aud", "sub", "client_id", "iat", "exp", "jti"] {
        rows.push((format!("without {claim}"), edited(&|c| drop(c.remove(claim))), "INVALID_CREDENTIAL"));
    }
    let mut checks = Checks::new();
    for (label, token, code) in &rows {
        let answer = bearer(gateway.post("/tenant-a/s"), token).content_type(TEXT).body("x").send().await;
        checks.run(label, || {
            answer.expect_error(401, code).expect_header("www-authenticate", r#"Bearer error="invalid_token""#);
            expect_intermediary(&answer);
        });
    }
    let other_schemes = [
        ("basic", gateway.post("/tenant-a/s").header("authorization", "Basic YWxpY2U6eA==")),
        ("two credentials", bearer(bearer(gateway.post("/tenant-a/s"), &alice), &alice)),
    ];
    for (label, req) in other_schemes {
        let answer = req.content_type(TEXT).body("x").send().await;
        checks.run(label, || {
            answer.expect_error(401, "INVALID_CREDENTIAL");
        });
    }
    checks.finish();
    // None reached a voter; the valid token still writes.
    let read = bearer(gateway.get("/tenant-a/s?offset=-1"), &alice).send().await;
    assert_eq!(read.text(), "", "a refused write applied");
    bearer(gateway.post("/tenant-a/s"), &valid).content_type(TEXT).body("ok").send().await.expect(204);
}

/// Keys rotate (a new `kid` is taken after one refetch, a removed key is
/// refused once the set is refreshed), the issuer may be down (no key yet:
/// `503`; later the last good keys keep working and unknown keys get
/// `503`), and a burst of unknown `kid`s fetches at most once per gap.
#[tokio::test]
async fn keys_rotate_the_issuer_may_fail_and_unknown_kids_do_not_hammer_it() {
    let setup = Setup::new().await;
    let issuer = &setup.issuer;
    issuer.set_up(false);
    let quick = setup.args(&["--auth-jwks-max-age", "2s", "--auth-jwks-retry-gap", "1s"]);
    let gateway = Node::spawn_logging(&quick, None, "");
    let alice = setup.token(ALICE);
    let deadline = Instant::now() + Duration::from_secs(60);
    // No key can be had yet: 503 (once the gateway found its voters).
    loop {
        let answer = bearer(gateway.get("/tenant-empty/s"), &alice).send().await;
        if answer.status == 503 && answer.error_code() == "AUTHENTICATION_UNAVAILABLE" {
            answer.must("retry-after");
            expect_intermediary(&answer);
            break;
        }
        assert!(Instant::now() < deadline, "no 503 while no key can be had:\n{answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    issuer.set_up(true);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    bearer(gateway.head("/tenant-empty/s"), &alice).send().await.expect(404);

    // Rotation: a new key is published and taken after one refetch (once
    // the retry gap since the last fetch passed).
    let fresh = SigningKey::ec("ec-2");
    issuer.publish(&[&setup.rsa, &setup.ec, &fresh]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = issuer.jwks_fetches();
    let token = issuer.token(&fresh, ALICE, 600);
    bearer(gateway.head("/tenant-empty/s"), &token).send().await.expect(404);
    assert_eq!(issuer.jwks_fetches(), before + 1, "one refetch for the new kid");
    // The old RSA key is withdrawn: refused once the set is refreshed.
    issuer.publish(&[&setup.ec, &fresh]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let old = setup.token(ALICE);
    bearer(gateway.head("/tenant-empty/s"), &old).send().await.expect(401);

    // The issuer goes down: the last good keys keep working, unknown ones get 503.
    issuer.set_up(false);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    bearer(gateway.head("/tenant-empty/s"), &issuer.token(&fresh, ALICE, 600)).send().await.expect(404);
    let unknown = issuer.token(&SigningKey::ec("ec-3"), ALICE, 600);
    let answer = bearer(gateway.get("/tenant-empty/s"), &unknown).send().await;
    answer.expect_error(503, "AUTHENTICATION_UNAVAILABLE");
    issuer.set_up(true);

    // A burst of unknown kids through a gateway with the default 30 s gap.
    let patient = setup.gateway(&["--auth-public-metrics"]).await;
    let before = issuer.jwks_fetches();
    let mut burst = Vec::new();
    for round in 0..20 {
        let requests = (0..50).map(|i| {
            let key = &setup.ec;
            let mut header = issuer::at_jwt_header(key);
            header.kid = Some(format!("random-{round}-{i}"));
            let token = issuer::sign(key, &header, &issuer.claims(ALICE, 600));
            bearer(patient.head("/tenant-empty/s"), &token).send()
        });
        burst.extend(futures_util::future::join_all(requests).await);
    }
    assert!(burst.iter().all(|a| a.status == 401), "every unknown kid refused");
    assert!(issuer.jwks_fetches() <= before + 1, "{} fetches for 1,000 unknown kids", issuer.jwks_fetches() - before);
    // `--auth-public-metrics`: the counters for anyone, a token unchecked.
    let metrics = patient.get("/__ursula/gateway/metrics").send().await;
    metrics.expect(200);
    assert!(metrics.json()["auth_refusals_invalid_credential"].as_u64() >= Some(1000), "{metrics:?}");
    bearer(patient.get("/__ursula/metrics"), "garbage").send().await.expect(200);
    patient.get("/__ursula/ready").send().await.expect_error(404, "BUCKET_NOT_FOUND");
}

/// Must-show 3: an SSE read with a token receives every event appended
/// before `exp`, then `event: credential-expired`; a long-poll returns by
/// `exp`; an anonymous tail of a public bucket has no deadline.
#[tokio::test]
async fn live_reads_end_with_their_credential() {
    let setup = Setup::new().await;
    let gateway = setup.gateway(&[]).await;
    let alice = setup.token(ALICE);
    bearer(gateway.put("/tenant-a/live"), &alice).content_type(TEXT).send().await.expect(201);
    bearer(gateway.put("/tenant-pub/live"), &alice).content_type(TEXT).send().await.expect(201);
    let short = setup.issuer.token(&setup.rsa, ALICE, 5);
    let opened = Instant::now();
    let mut sse = crate::support::Sse::open(bearer(gateway.get("/tenant-a/live?offset=-1&live=sse"), &short)).await;
    let mut public = gateway.sse("/tenant-pub/live?offset=-1&live=sse").await;
    sse.until_control().await;
    public.until_control().await;
    let mut sent = String::new();
    for word in ["one ", "two ", "three"] {
        bearer(gateway.post("/tenant-a/live"), &alice).content_type(TEXT).body(word).send().await.expect(204);
        sent.push_str(word);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let events = sse.until(|e| e.is("credential-expired")).await;
    let received: String = events.iter().filter(|e| e.is("data")).map(|e| e.data.as_str()).collect();
    assert_eq!(received, sent, "every event appended before exp");
    let last = events.last().expect("the last event");
    assert_eq!(last.json(), json!({"reason": "credential_expired"}));
    assert!(opened.elapsed() >= Duration::from_secs(3), "ended before exp: {:?}", opened.elapsed());
    sse.expect_end().await;

    // A long-poll never waits past exp: it answers as its timeout would.
    let short = setup.issuer.token(&setup.rsa, ALICE, 3);
    let tail = bearer(gateway.head("/tenant-a/live"), &alice).send().await.must("stream-next-offset").to_string();
    let started = Instant::now();
    let poll = bearer(gateway.get(&format!("/tenant-a/live?offset={tail}&live=long-poll&timeout_ms=25000")), &short);
    poll.send().await.expect(204);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the long-poll outlived its credential: {:?}",
        started.elapsed()
    );

    // A token past its exp but within the admission leeway (60 s) still
    // reads, but opens no live read: that would end at once.
    let stale = setup.issuer.token(&setup.rsa, ALICE, -10);
    bearer(gateway.get("/tenant-a/live?offset=-1"), &stale).send().await.expect(200);
    for live in ["sse", "long-poll"] {
        let path = format!("/tenant-a/live?offset=-1&live={live}");
        bearer(gateway.get(&path), &stale).send().await.expect_error(401, "CREDENTIAL_EXPIRED");
    }

    // The anonymous public tail outlived both credentials and still gets news.
    bearer(gateway.post("/tenant-pub/live"), &alice).content_type(TEXT).body("later").send().await.expect(204);
    let events = public.until(|e| e.is("data")).await;
    assert_eq!(events.last().map(|e| e.data.as_str()), Some("later"));
}

/// A SaaS adds tenants without a restart: the policy file is reloaded when
/// it changes and on `SIGHUP`; an invalid file keeps the policy in force.
#[tokio::test]
async fn the_policy_reloads_and_a_bad_file_keeps_the_old_one() {
    let setup = Setup::new().await;
    let gateway = setup.gateway(&[]).await;
    let alice = setup.token(ALICE);
    let path = setup.policy();
    bearer(gateway.put("/tenant-new/s"), &alice).content_type(TEXT).send().await.expect_error(404, "BUCKET_NOT_FOUND");
    let added = format!(
        "[[bucket]]\nid = \"tenant-new\"\nowners = [{{ issuer = \"{}\", subject = \"{ALICE}\" }}]\n",
        setup.issuer.url
    );
    std::fs::write(&path, policy_text(&setup.issuer.url, &added)).expect("the new policy");
    gateway.hangup();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let create = bearer(gateway.put("/tenant-new/s"), &alice).content_type(TEXT).send().await;
        if create.status == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "the new tenant never came:\n{create:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A broken file: one line, and the policy in force stays.
    std::fs::write(&path, "[[bucket]]\nid = \"tenant-new\"\nownerz = []\n").expect("a broken policy");
    gateway.hangup();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gateway.stderr_text().contains("kept the access policy in force") {
        assert!(Instant::now() < deadline, "no line for the broken policy:\n{}", gateway.stderr_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gateway.stderr_text().contains("ownerz"), "the line names the problem:\n{}", gateway.stderr_text());
    bearer(gateway.post("/tenant-new/s"), &alice).content_type(TEXT).body("x").send().await.expect(204);
}

/// The three flags go together; a bad policy refuses the start; each with
/// one line naming the problem.
#[test]
fn a_partial_or_broken_access_setup_refuses_to_start() {
    let dir = tempfile::tempdir().expect("a directory");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[bucket]]\nid = \"Tenant\"\n").expect("a policy");
    let bad = bad.display().to_string();
    let base = ["gateway", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9"];
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--auth-issuer", "https://issuer.example"], &["--auth-audience", "--auth-policy"]),
        (&["--auth-audience", "aud", "--auth-policy", "/nonexistent"], &["--auth-issuer"]),
        (&["--auth-public-metrics"], &["--auth-issuer"]),
        (&["--auth-issuer", "https://i.example", "--auth-audience", "a", "--auth-policy", &bad], &["Tenant"]),
    ];
    for (flags, named) in cases {
        let args: Vec<String> = base.iter().chain(flags.iter()).map(|s| s.to_string()).collect();
        let (status, stderr) = run_to_exit(&args);
        assert_eq!(status.code(), Some(2), "{flags:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        for name in named {
            assert!(stderr.contains(name), "{flags:?}: the line names {name}: {stderr}");
        }
    }
}
