//! Recovery plans (spec/35 "Recovering after a host crash"): every voter of
//! a three-voter cluster may have lost its journal's tail, as after a power
//! loss under `fsync = "never"`, so every group stalls at every gate; an
//! operator's plan, sent to the plan's leader first and then to the other
//! replicas, reopens each group under a new history.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::{S, append, converges, record, wait_ready};
use crate::cluster_recovery::started;
use crate::ctl::{ctl, manifest, succeeded};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes, free_port};

const GROUPS: usize = 2;

async fn metrics(node: &Node) -> Value {
    node.get("/__ursula/metrics").send().await.json()
}

/// Sends `plan` for `group` to voter `i`'s admin plane: the status and
/// the JSON body.
async fn send_plan(cluster: &Layout, i: usize, group: usize, plan: &Value) -> (u16, Value) {
    post_plan(&cluster.admin_url(i), group, plan).await
}

/// Sends `plan` for `group` to the admin plane at `admin`.
async fn post_plan(admin: &str, group: usize, plan: &Value) -> (u16, Value) {
    let http = reqwest::Client::builder().no_proxy().build().expect("client");
    let raw = http.get(format!("{admin}/__ursula/metrics")).send().await.expect("metrics").bytes().await;
    let m: Value = serde_json::from_slice(&raw.expect("a body")).expect("json");
    let incarnation = m["process_incarnation"].as_str().expect("incarnation").to_string();
    let answer = http
        .post(format!("{admin}/__ursula/raft/{group}/recovery/accept-unsynced-loss"))
        .header("x-ursula-process-incarnation", incarnation)
        .header("content-type", "application/json")
        .body(plan.to_string())
        .send()
        .await
        .expect("the admin plane answers");
    let status = answer.status().as_u16();
    let body = answer.bytes().await.expect("a body");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// What replica `g` (a group's entry of the metrics) reports as `expected`.
fn expected(g: &Value) -> Value {
    json!({ "last_log_index": g["last_log_index"], "last_log_term": g["last_log_term"], "current_term": g["current_term"] })
}

/// spec/35's plan without a cut: the replica with the longest log leads.
/// Returns the plan's point.
async fn accept_loss(cluster: &Layout, nodes: &[Option<Node>], group: usize) -> u64 {
    let mut replicas = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let node = node.as_ref().expect("a voter");
        replicas.push((i, metrics(node).await["raft_groups"][group].clone()));
    }
    let rank = |g: &Value| (g["last_log_term"].as_u64(), g["last_log_index"].as_u64());
    let (leader, on_leader) = replicas.iter().max_by_key(|(_, g)| rank(g)).expect("replicas").clone();
    let highest = replicas.iter().filter_map(|(_, g)| g["current_term"].as_u64()).max().expect("terms");
    let point = on_leader["last_log_index"].as_u64().expect("the leader holds entries");
    let plan = |step: Value, g: &Value| json!({ "leader": leader + 1, "point": point, "cut": false, "step": step, "expected": expected(g) });
    let (status, led) =
        send_plan(cluster, leader, group, &plan(json!({ "lead": { "highest_term": highest } }), &on_leader)).await;
    assert_eq!(status, 200, "the plan's leader refused: {led}");
    assert_eq!(led["outcome"], "leads", "{led}");
    let term = led["leader_term"].as_u64().expect("plan term");
    assert!(term >= highest, "{led}");
    for (i, g) in replicas.iter().filter(|(i, _)| *i != leader) {
        let (status, followed) =
            send_plan(cluster, *i, group, &plan(json!({ "follow": { "leader_term": term } }), g)).await;
        assert_eq!(status, 200, "a replica refused: {followed}");
        assert_eq!(followed["outcome"], "follows", "{followed}");
    }
    point
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_reopens_every_group_after_every_voter_may_have_lost_its_tail() {
    let cluster = Layout::new(3, "recovery-plan", GROUPS as u32, Planes::Shared);
    let mut nodes = started(&cluster).await;
    let mut expected_bytes = String::new();
    for seq in 0..10 {
        append(&nodes, seq).await;
        expected_bytes.push_str(&record(seq));
    }
    let before = nodes[0].as_ref().expect("node 1").head(S).send().await;
    let token = before.header("stream-incarnation").expect("a token").to_string();
    let tail = before.header("stream-next-offset").expect("a tail").to_string();

    // A power loss: every voter dies at once, and no run state says its
    // journal was synced (the page cache kept everything here, so nothing
    // is lost, but no voter can tell).
    for (i, node) in nodes.iter_mut().enumerate() {
        node.take().expect("a voter").kill9();
        std::fs::remove_file(cluster.wal(i).join("run-state")).expect("removing a run state");
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        *node = Some(cluster.start(i));
    }
    let first = nodes[0].as_ref().expect("node 1");
    let deadline = Instant::now() + Duration::from_secs(20);
    let gated = loop {
        let m = metrics(first).await;
        if m["recovery_gates"]["closed"].as_array().is_some_and(|c| c.len() == GROUPS) {
            break m;
        }
        assert!(Instant::now() < deadline, "the gates never closed: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Before the gates stall, a replica refuses a plan: a barrier could still open them.
    let g0 = &gated["raft_groups"][0];
    let early = json!({ "leader": 1, "point": g0["last_log_index"], "cut": false,
        "step": { "lead": { "highest_term": g0["current_term"] } }, "expected": expected(g0) });
    let (status, refused) = send_plan(&cluster, 0, 0, &early).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["refusal"]["reason"], "not_stalled", "{refused}");
    assert_eq!((&refused["raft_group_id"], &refused["node_id"]), (&json!(0), &json!(1)), "{refused}");
    assert!(refused["message"].is_string(), "{refused}");
    // A body of another form is `422`.
    let (status, older) = send_plan(&cluster, 0, 0, &json!({ "leader": 1, "point": 3 })).await;
    assert_eq!(status, 422, "{older}");

    // No group elects a leader: after 30 s every gate reports it stalled.
    for node in nodes.iter().flatten() {
        let m = stalls(node).await;
        // A vote restored from disk may still name a leader; none leads.
        for g in 0..GROUPS {
            assert_eq!(m["raft_groups"][g]["leads_live"], false, "group {g} elected: {m}");
        }
    }
    // The wrong step for a replica changes nothing.
    let m1 = metrics(first).await;
    let g0 = &m1["raft_groups"][0];
    let wrong = json!({ "leader": 2, "point": g0["last_log_index"], "cut": false,
        "step": { "lead": { "highest_term": g0["current_term"] } }, "expected": expected(g0) });
    let (status, refused) = send_plan(&cluster, 0, 0, &wrong).await;
    assert_eq!((status, &refused["refusal"]["reason"]), (409, &json!("step_mismatch")), "{refused}");
    assert_eq!(metrics(first).await["raft_groups"][0]["recovery"], Value::Null);

    // Group 0 by hand, as spec/35's script does; group 1 by `ursulactl`,
    // which first explains its plan and sends nothing.
    let mut points = vec![accept_loss(&cluster, &nodes, 0).await];
    let manifest = manifest(&cluster, "recovery-plan.json");
    let out = ctl(&["recover-group", "--config", &manifest, "--group", "1"]).await;
    let explained: Value = serde_json::from_str(&succeeded(&out, "recover-group")).expect("a plan");
    assert_eq!((&explained["cut"], &explained["unanswered"]), (&json!(false), &json!([])), "{explained}");
    let point = explained["point"].as_u64().expect("a point");
    assert_eq!(metrics(first).await["raft_groups"][1]["recovery"], Value::Null, "explaining sent nothing");
    let out = ctl(&["recover-group", "--config", &manifest, "--group", "1", "--accept-loss"]).await;
    let done: Value = serde_json::from_str(&succeeded(&out, "recover-group --accept-loss")).expect("a report");
    assert_eq!(
        (&done["recovered"], &done["point"], &done["plans"]),
        (&json!(true), &json!(point), &json!(1)),
        "{done}"
    );
    points.push(point);
    // Each group serves again, every byte kept, under a new token that
    // names the old one and the tail it inherited.
    let deadline = Instant::now() + Duration::from_secs(60);
    for node in nodes.iter().flatten() {
        while node.get("/__ursula/ready").send().await.status != 200 {
            if Instant::now() > deadline {
                let mut groups = Vec::new();
                for node in nodes.iter().flatten() {
                    groups.push(metrics(node).await["raft_groups"].clone());
                }
                panic!("a voter never became ready; each voter's groups: {groups:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        converges(node, &expected_bytes).await;
    }
    let after = nodes[0].as_ref().expect("node 1").head(S).send().await;
    let now = after.header("stream-incarnation").expect("a token");
    assert_ne!(now, token, "the history changed");
    assert_eq!(after.header("stream-previous-incarnation"), Some(token.as_str()));
    assert_eq!(after.header("stream-inherited-offset"), Some(tail.as_str()));
    // The writer's epoch closed with the old history.
    let deadline = Instant::now() + Duration::from_secs(30);
    let closed = loop {
        let mut answer = None;
        for node in nodes.iter().flatten() {
            let a = node.post(S).content_type("text/plain").producer("w", 0, 10).body(record(10)).send().await;
            if a.status == 403 {
                answer = Some(a);
                break;
            }
        }
        if let Some(a) = answer {
            break a;
        }
        assert!(Instant::now() < deadline, "no voter answered the closed epoch");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(closed.header("producer-outcome"), Some("epoch-closed;by=history"), "{}", closed.text());
    assert_eq!(closed.header("producer-closed-seq"), Some("9"), "{}", closed.text());
    // Every replica applied its group's history event and forgot its plan.
    for node in nodes.iter().flatten() {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = metrics(node).await;
            let done = (0..GROUPS).all(|g| {
                let on = &m["raft_groups"][g];
                on["recovery"].is_null() && on["history"]["event_index"].as_u64() > Some(points[g])
            });
            if done && m["recovery_gates"]["closed"] == json!([]) {
                break;
            }
            assert!(Instant::now() < deadline, "a replica kept its plan: {m}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Waits until `node` reports every group's gate `stalled`.
async fn stalls(node: &Node) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let m = metrics(node).await;
        if m["recovery_gates"]["stalled"].as_array().is_some_and(|s| s.len() == GROUPS) {
            return m;
        }
        assert!(Instant::now() < deadline, "the gates never stalled: {m}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// spec/35: a single voter (no peers) has no replica to recover from, so
/// after a host crash under `never` its groups wait at their gates, elect
/// no one and stall; a plan it leads alone reopens each under a new history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_voter_that_may_have_lost_its_tail_serves_again_only_under_a_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, admin) = (free_port(), free_port());
    let config = dir.path().join("ursula.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:{client}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n\
         [raft]\ngroup_count = {GROUPS}\n[raft.wal]\npath = {:?}\n",
        dir.path().join("wal")
    );
    std::fs::write(&config, text).expect("config");
    let args = vec!["server".to_string(), "--config".to_string(), config.display().to_string()];
    let admin = format!("http://127.0.0.1:{admin}");

    let mut nodes = [Some(Node::spawn(&args, None))];
    nodes[0].as_ref().expect("the node").put(S).content_type("text/plain").send().await.expect(201);
    let mut expected_bytes = String::new();
    for seq in 0..5 {
        append(&nodes, seq).await;
        expected_bytes.push_str(&record(seq));
    }
    let before = nodes[0].as_ref().expect("the node").head(S).send().await;
    let token = before.must("stream-incarnation").to_string();
    let tail = before.must("stream-next-offset").to_string();

    // A process crash on the same boot loses nothing: no gate.
    nodes[0].take().expect("the node").kill9();
    let node = Node::spawn(&args, None);
    wait_ready(&node).await;
    assert_eq!(metrics(&node).await["recovery_gates"]["closed"], json!([]));
    // A host crash: the run state no longer says the journal was synced.
    node.kill9();
    std::fs::remove_file(dir.path().join("wal").join("run-state")).expect("removing the run state");
    let node = Node::spawn(&args, None);
    let m = metrics(&node).await;
    assert_eq!(m["recovery_gates"]["closed"], json!([0, 1]), "{m}");
    assert_eq!(m["wal_recovery"]["lost_tail_possible"], true, "{m}");
    let ready = node.get("/__ursula/ready").send().await;
    assert_eq!(
        (ready.status.as_u16(), &ready.json()["reason"]),
        (503, &json!("recovery_gate_closed")),
        "{}",
        ready.text()
    );
    // It elects no one over what it may have lost: reads and writes answer 503.
    node.get(&format!("{S}?offset=-1")).send().await.expect(503);
    let write = node.post(S).content_type("text/plain").producer("w", 0, 5).body(record(5)).send().await;
    assert_eq!(write.status, 503, "{}", write.text());

    let m = stalls(&node).await;
    let ready = node.get("/__ursula/ready").send().await;
    assert_eq!((ready.status.as_u16(), &ready.json()["reason"]), (503, &json!("recovery_stalled")), "{}", ready.text());
    // Group 0 by hand: the lone voter leads its own plan.
    let g0 = &m["raft_groups"][0];
    let point = g0["last_log_index"].as_u64().expect("a log");
    let plan = json!({ "leader": 1, "point": point, "cut": false,
        "step": { "lead": { "highest_term": g0["current_term"] } }, "expected": expected(g0) });
    let (status, led) = post_plan(&admin, 0, &plan).await;
    assert_eq!((status, &led["outcome"]), (200, &json!("leads")), "{led}");
    // Group 1 by `ursulactl`, over a manifest that names the one node.
    let manifest = dir.path().join("lone.json");
    let nodes_json =
        json!({ "nodes": [{ "id": 1, "admin_url": admin, "client_url": node.base(), "http_url": node.base() }] });
    std::fs::write(&manifest, nodes_json.to_string()).expect("manifest");
    let manifest = manifest.display().to_string();
    let out = ctl(&["recover-group", "--config", &manifest, "--group", "1", "--accept-loss"]).await;
    let done: Value = serde_json::from_str(&succeeded(&out, "recover-group --accept-loss")).expect("a report");
    assert_eq!((&done["recovered"], &done["plans"], &done["leader"]), (&json!(true), &json!(1), &json!(1)), "{done}");

    // Both groups serve again, every byte kept, under a new token naming
    // the old one and the tail it inherited; the producer's epoch closed.
    wait_ready(&node).await;
    converges(&node, &expected_bytes).await;
    let after = node.head(S).send().await;
    assert_ne!(after.must("stream-incarnation"), token, "the history changed");
    assert_eq!(after.header("stream-previous-incarnation"), Some(token.as_str()));
    assert_eq!(after.header("stream-inherited-offset"), Some(tail.as_str()));
    let closed = node.post(S).content_type("text/plain").producer("w", 0, 5).body(record(5)).send().await;
    assert_eq!(closed.status, 403, "{}", closed.text());
    assert_eq!(closed.header("producer-outcome"), Some("epoch-closed;by=history"), "{}", closed.text());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = metrics(&node).await;
        let plans_done = (0..GROUPS).all(|g| m["raft_groups"][g]["recovery"].is_null());
        if plans_done && m["recovery_gates"] == json!({ "closed": [], "stalled": [] }) {
            break;
        }
        assert!(Instant::now() < deadline, "a plan or gate stayed: {m}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A clean stop and start keeps the new history and needs no gate.
    let (status, stderr) = node.terminate();
    assert!(status.success(), "{stderr}");
    let node = Node::spawn(&args, None);
    wait_ready(&node).await;
    assert_eq!(node.head(S).send().await.must("stream-previous-incarnation"), token);
    converges(&node, &expected_bytes).await;
}
