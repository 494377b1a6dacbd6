//! `ursulactl` against real voters (issue 21): a rolling restart of three
//! voters driven only by `drain`, a restart, `wait` and `undrain`, then
//! `verify-cluster`, under producers and SSE readers; the maintenance mark
//! that survives a restart; the gates' answers and exit codes; and the
//! admin routes the verbs use.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::Value;

use crate::cluster_leadership::{
    Load, client, converge, create, metrics, record, start_all, streams_in_distinct_groups,
};
use crate::support::cluster::{Layout, Planes};

const PATIENCE: Duration = Duration::from_secs(60);
const GROUPS: u32 = 8;

/// The `ursulactl` binary, next to `ursula`, built once per test run:
/// `cargo test` builds another package's binary only for that package's
/// own integration tests, so a stale one could be left from an earlier build.
fn ursulactl() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let ursula = PathBuf::from(env!("CARGO_BIN_EXE_ursula"));
        let ctl = ursula.with_file_name("ursulactl");
        let target = ursula.parent().and_then(|d| d.parent()).expect("the target directory");
        let status = Command::new(option_env!("CARGO").unwrap_or("cargo"))
            .args(["build", "--quiet", "-p", "ursula-ctl", "--bin", "ursulactl", "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
            .env("CARGO_TARGET_DIR", target)
            .status()
            .expect("running cargo build for ursulactl");
        assert!(status.success() && ctl.exists(), "building ursulactl failed");
        ctl
    })
}

/// Runs `ursulactl` with `args` off the runtime's threads.
pub(crate) async fn ctl(args: &[&str]) -> Output {
    ctl_env(args, &[]).await
}

/// Runs `ursulactl` with `args` and the environment variables `env`.
pub(crate) async fn ctl_env(args: &[&str], env: &[(&str, String)]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(ursulactl()).args(&args).envs(env).output().expect("running ursulactl")
    })
    .await
    .expect("ursulactl ran")
}

#[track_caller]
pub(crate) fn succeeded(out: &Output, what: &str) -> String {
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ursulactl {what}: {}\nstdout: {stdout}\nstderr: {stderr}", out.status);
    stdout.into_owned()
}

/// The manifest of `layout` (JSON): each node's admin plane and client plane.
pub(crate) fn manifest(layout: &Layout, name: &str) -> String {
    let nodes: Vec<Value> = (0..layout.voters())
        .map(|i| {
            serde_json::json!({
                "id": i + 1,
                "admin_url": layout.admin_url(i),
                "client_url": layout.client_url(i),
                "http_url": layout.client_url(i),
            })
        })
        .collect();
    let path = layout.dir.path().join(name);
    std::fs::write(&path, serde_json::json!({ "nodes": nodes }).to_string()).expect("manifest");
    path.display().to_string()
}

fn shed_of(m: &Value) -> &str {
    m["leadership_shed"].as_str().unwrap_or("")
}

fn led(m: &Value, node: u64) -> usize {
    let groups = m["raft_groups"].as_array().cloned().unwrap_or_default();
    groups.iter().filter(|g| g["current_leader"].as_u64() == Some(node)).count()
}

/// An SSE reader of `path` that goes round the voters: a session that ends
/// or a voter that is down sends it to the next one, from the offset of the
/// last control event; data counts only once its control event arrived, so
/// nothing is read twice. Returns what it read once `target` is reached.
async fn read_live(urls: Vec<String>, path: String, target: Arc<AtomicUsize>, sessions: Arc<AtomicUsize>) -> String {
    let http = client();
    let (mut text, mut next, mut turn) = (String::new(), "-1".to_string(), 0usize);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if text.len() >= target.load(Ordering::SeqCst) {
            return text;
        }
        assert!(Instant::now() < deadline, "the reader of {path} stalled at {next}");
        let url = &urls[turn % urls.len()];
        turn += 1;
        sessions.fetch_add(1, Ordering::SeqCst);
        let answer = http.get(format!("{url}{path}?offset={next}&live=sse")).send().await;
        let Some(answer) = answer.ok().filter(|a| a.status() == 200) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut body = answer.bytes_stream();
        let (mut buf, mut pending) = (Vec::<u8>::new(), String::new());
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(5), body.next()).await {
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = buf.drain(..end + 2).collect();
                let block = String::from_utf8(block).expect("SSE is UTF-8");
                let event = block.lines().find_map(|l| l.strip_prefix("event:")).map(str::trim).unwrap_or("");
                let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).collect();
                let data: Vec<&str> = data.iter().map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
                match event {
                    "data" => pending.push_str(&data.join("\n")),
                    "control" => {
                        let control: Value = serde_json::from_str(&data.join("\n")).expect("control JSON");
                        next = control["streamNextOffset"].as_str().expect("streamNextOffset").to_string();
                        text.push_str(&std::mem::take(&mut pending));
                    }
                    _ => {}
                }
            }
            if text.len() >= target.load(Ordering::SeqCst) {
                return text;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_driven_by_ursulactl_loses_nothing_and_readers_resume() {
    let layout = Layout::new(3, "ctl-rolling", GROUPS, Planes::Shared);
    let mut nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let m = manifest(&layout, "cluster.json");
    succeeded(
        &ctl(&["wait-ready", "--config", &m, "--expected-groups", "8", "--timeout-secs", "60"]).await,
        "wait-ready",
    );

    let streams = streams_in_distinct_groups("rolling-ctl", 3, GROUPS);
    for path in &streams {
        create(&http, &urls, path).await;
    }
    let load = Load::start(&urls, &streams);
    // Each reader's length to reach, known once the writers stopped.
    let targets: Vec<Arc<AtomicUsize>> = streams.iter().map(|_| Arc::new(AtomicUsize::new(usize::MAX))).collect();
    let sessions = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = streams
        .iter()
        .zip(&targets)
        .map(|(p, t)| tokio::spawn(read_live(urls.clone(), p.clone(), t.clone(), sessions.clone())))
        .collect();
    load.progress().await;

    #[allow(clippy::needless_range_loop)]
    for i in 0..layout.voters() {
        let id = (i + 1).to_string();
        let out = succeeded(&ctl(&["drain", "--config", &m, "--node", &id]).await, "drain");
        assert!(out.contains(&format!("node {id} drained")), "{out}");
        eprint!("rolling restart: {out}");
        let before = metrics(&http, &urls[i]).await.expect("metrics of the drained voter");
        assert_eq!((shed_of(&before), led(&before, i as u64 + 1)), ("maintenance-drain", 0), "{before}");

        let node = nodes[i].take().expect("running");
        let (status, stderr) = tokio::task::block_in_place(|| node.terminate());
        assert!(status.success(), "voter {id} after SIGTERM: {status}\n{stderr}");
        load.progress().await;
        nodes[i] = Some(layout.start(i));

        // The mark survived the restart: the voter takes no leadership back yet.
        let waited =
            succeeded(&ctl(&["wait", "--config", &m, "--node", &id, "--stall-timeout-secs", "60"]).await, "wait");
        eprint!("rolling restart: {waited}");
        let back = metrics(&http, &urls[i]).await.expect("metrics of the restarted voter");
        assert_eq!((shed_of(&back), led(&back, i as u64 + 1)), ("maintenance-drain", 0), "{back}");
        succeeded(&ctl(&["undrain", "--config", &m, "--node", &id]).await, "undrain");
        load.progress().await;
    }
    succeeded(&ctl(&["verify-cluster", "--config", &m, "--timeout-secs", "60"]).await, "verify-cluster");

    let acked = load.finish().await;
    for (path, acked) in streams.iter().zip(&acked) {
        converge(&http, &urls, path, *acked).await;
    }
    // Every reader reads each stream's final content, once and in order.
    let mut finals = Vec::new();
    for path in &streams {
        let body = http.get(format!("{}{path}?offset=-1", urls[0])).send().await.expect("read");
        finals.push(body.text().await.expect("text"));
    }
    for (((reader, target), expected), path) in readers.into_iter().zip(&targets).zip(&finals).zip(&streams) {
        target.store(expected.len(), Ordering::SeqCst);
        let text = tokio::time::timeout(PATIENCE, reader).await.expect("the reader finished").expect("reader");
        assert_eq!(&text, expected, "{path}: the SSE reader saw every record once, in order");
    }
    let rec = record(0);
    assert!(finals.iter().all(|f| f.starts_with(&rec)), "every stream took writes");
    eprintln!(
        "ctl rolling restart: {acked:?} writes acknowledged, {} SSE sessions over the restarts",
        sessions.load(Ordering::SeqCst)
    );
}

fn failed(out: &Output, code: i32, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "ursulactl {what}: stderr {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one machine-greppable line: {stderr}");
    assert!(stderr.starts_with("ursulactl: "), "{stderr}");
    stderr
}

pub(crate) async fn admin(
    http: &reqwest::Client,
    layout: &Layout,
    i: usize,
    method: reqwest::Method,
    path: &str,
) -> (u16, Value) {
    let base = layout.admin_url(i);
    let m = metrics(http, &base).await.expect("admin metrics");
    let incarnation = m["process_incarnation"].as_str().expect("process_incarnation").to_string();
    let answer = http
        .request(method, format!("{base}{path}"))
        .header("x-ursula-process-incarnation", incarnation)
        .send()
        .await
        .expect("admin");
    let status = answer.status().as_u16();
    let body = answer.bytes().await.unwrap_or_default();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verbs_report_gate_and_refuse_with_their_exit_codes() {
    let layout = Layout::new(3, "ctl-gates", 4, Planes::Shared);
    let mut nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let m = manifest(&layout, "cluster.json");
    succeeded(&ctl(&["--config", &m, "wait-ready", "--expected-groups", "4"]).await, "wait-ready");

    // `--config` before or after the verb; a table for people, JSON for programs.
    let table = succeeded(&ctl(&["status", "--config", &m]).await, "status");
    assert_eq!(table.lines().count(), 3, "{table}");
    // spec/34's sample line exactly: leaders by node id in number order, nothing after them.
    let shape = |l: &str| {
        let Some((head, leaders)) = l.split_once(": groups=4 leaders={") else { return false };
        let ids: Vec<u64> = leaders
            .strip_suffix('}')
            .map(|m| m.split(", ").filter_map(|kv| kv.split_once(": ")?.0.parse().ok()).collect())
            .unwrap_or_default();
        head.starts_with("node ") && head.ends_with(" (127.0.0.1)") && !ids.is_empty() && ids.is_sorted()
    };
    assert!(table.lines().all(shape), "{table}");
    let json: Value = serde_json::from_str(&succeeded(&ctl(&["--config", &m, "status", "--json"]).await, "status"))
        .expect("status --json");
    let leaderships: u64 =
        json["nodes"].as_array().expect("nodes").iter().map(|n| n["leaderships"].as_u64().unwrap_or(0)).sum();
    assert_eq!(leaderships, 4, "every group led once: {json}");

    // A dry run plans and changes nothing.
    let leader = json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["leaderships"].as_u64() > Some(0))
        .expect("a leader");
    let id = leader["id"].as_u64().expect("id");
    let plan = succeeded(&ctl(&["drain", "--config", &m, "--node", &id.to_string(), "--dry-run"]).await, "dry run");
    assert!(plan.starts_with(&format!("drain plan for node {id}: group ")), "{plan}");
    let after = metrics(&http, &urls[id as usize - 1]).await.expect("metrics");
    assert_eq!(shed_of(&after), "none", "a dry run sets no mark");

    // The admin routes the verbs use: the mark, a snapshot, a quorum proof.
    let (status, _) = admin(&http, &layout, 0, reqwest::Method::POST, "/__ursula/raft/9/snapshot").await;
    assert_eq!(status, 404, "no group 9");
    let (status, snap) = admin(&http, &layout, 0, reqwest::Method::POST, "/__ursula/raft/0/snapshot").await;
    assert_eq!(status, 200, "{snap}");
    assert!(snap["snapshot_index"].as_u64() > Some(0), "{snap}");
    let bare = http.post(format!("{}/__ursula/raft/0/snapshot", layout.admin_url(0))).send().await.expect("bare");
    assert_eq!(bare.status(), 428, "admin mutations need the process incarnation");
    let (status, mark) = admin(&http, &layout, 1, reqwest::Method::POST, "/__ursula/leadership-shed/maintenance").await;
    assert_eq!(status, 200);
    assert_eq!(
        mark,
        serde_json::json!({"bits": 1, "state": "maintenance-drain", "should_accept_transfer": false,
        "should_campaign": false, "should_shed_current_leaders": true})
    );
    let (_, lifted) = admin(&http, &layout, 1, reqwest::Method::DELETE, "/__ursula/leadership-shed/maintenance").await;
    assert_eq!(lifted["state"], "none");
    let m0 = metrics(&http, &urls[0]).await.expect("metrics");
    let follower_group = m0["raft_groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["current_leader"] != 1)
        .expect("a group node 1 follows");
    let g = follower_group["raft_group_id"].as_u64().expect("id");
    let (status, _) = admin(&http, &layout, 0, reqwest::Method::GET, &format!("/__ursula/raft/{g}/quorum")).await;
    assert_eq!(status, 409, "a quorum proof comes from the leader");
    assert_eq!(m0["raft_maintenance"]["group_issues"], serde_json::json!([]), "{m0}");

    // Pinned processes: verify-quorum proves every group; a restart breaks the pin.
    let pinned = succeeded(&ctl(&["pin-incarnations", "--config", &m]).await, "pin-incarnations");
    let pinned_path = layout.dir.path().join("pinned.json");
    std::fs::write(&pinned_path, &pinned).expect("pinned manifest");
    let pinned_path = pinned_path.display().to_string();
    let proof: Value = serde_json::from_str(&succeeded(
        &ctl(&["verify-quorum", "--config", &pinned_path, "--expected-groups", "4", "--timeout-secs", "60"]).await,
        "verify-quorum",
    ))
    .expect("verify-quorum JSON");
    assert_eq!(
        (proof["verified"].clone(), proof["groups"].as_array().map(Vec::len)),
        (Value::Bool(true), Some(4)),
        "{proof}"
    );
    // The same manifest with its nodes in another order proves the same.
    let mut reversed: Value = serde_json::from_str(&pinned).expect("pinned JSON");
    reversed["nodes"].as_array_mut().expect("nodes").reverse();
    let reversed_path = layout.dir.path().join("reversed.json");
    std::fs::write(&reversed_path, reversed.to_string()).expect("reversed manifest");
    let reversed_path = reversed_path.display().to_string();
    succeeded(
        &ctl(&["verify-quorum", "--config", &reversed_path, "--expected-groups", "4", "--timeout-secs", "60"]).await,
        "verify-quorum, nodes listed 3, 2, 1",
    );

    let third = nodes[2].take().expect("running");
    tokio::task::block_in_place(|| third.kill9());
    // A voter down: the cluster is not whole, and a wait on it stalls.
    let out = ctl(&["verify-cluster", "--config", &m, "--timeout-secs", "2"]).await;
    assert!(failed(&out, 2, "verify-cluster").contains("node 3: no metrics"));
    let out = ctl(&["wait", "--config", &m, "--node", "3", "--stall-timeout-secs", "2"]).await;
    assert!(failed(&out, 2, "wait").contains("no catch-up progress"));
    // The two left are a quorum: verify-survivors proves it, and says what it proves.
    let args = ["verify-survivors", "--config", &m, "--excluded-node-id", "3", "--expected-groups", "4"];
    let survivors: Value =
        serde_json::from_str(&succeeded(&ctl(&args).await, "verify-survivors")).expect("verify-survivors JSON");
    assert_eq!(survivors["scope"], "surviving_quorum", "{survivors}");
    assert_eq!(survivors["full_redundancy_restored"], false, "{survivors}");
    assert_eq!(survivors["configured_voters"], serde_json::json!([1, 2, 3]), "{survivors}");
    assert_eq!(survivors["observed_voters"], serde_json::json!([1, 2]), "{survivors}");
    assert_eq!(survivors["groups"].as_array().map(Vec::len), Some(4), "{survivors}");
    let out = ctl(&["verify-survivors", "--config", &m, "--excluded-node-id", "9", "--expected-groups", "4"]).await;
    assert!(failed(&out, 1, "an unknown exclusion").contains("not a voter"));
    nodes[2] = Some(layout.start(2));
    succeeded(&ctl(&["wait", "--config", &m, "--node", "3"]).await, "wait after the restart");
    let out = ctl(&["undrain", "--config", &pinned_path, "--node", "3"]).await;
    assert!(failed(&out, 1, "a mutation on a restarted process").contains("process changed"));

    // wait-ready observes every poll afresh (spec/34): a node restarted
    // while it waits is not a changed process unless the manifest pins one.
    let second = nodes[1].take().expect("running");
    tokio::task::block_in_place(|| second.kill9());
    let waiting = {
        let m = m.clone();
        tokio::spawn(async move {
            ctl(&["wait-ready", "--config", &m, "--expected-groups", "4", "--timeout-secs", "90"]).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let third = nodes[2].take().expect("running");
    tokio::task::block_in_place(|| third.kill9());
    nodes[2] = Some(layout.start(2));
    nodes[1] = Some(layout.start(1));
    succeeded(&waiting.await.expect("wait-ready ran"), "wait-ready across a restart of node 3");

    // Configuration errors: exit 1, one line.
    let bad = layout.dir.path().join("cluster.txt");
    std::fs::write(&bad, "nodes").expect("bad manifest");
    let out = ctl(&["status", "--config", &bad.display().to_string()]).await;
    assert!(failed(&out, 1, "a bad manifest").starts_with("ursulactl: config: "));
    let out = ctl(&["drain", "--config", &m, "--node", "7"]).await;
    assert!(failed(&out, 1, "an unknown node").contains("node 7 is not in the manifest"));
    let out = ctl(&["drain", "--config", &m]).await;
    let usage = failed(&out, 1, "a missing --node");
    assert!(usage.starts_with("ursulactl: config: ") && usage.contains("--node"), "{usage}");
    let help = succeeded(&ctl(&["drain", "--help"]).await, "help");
    assert!(help.contains("--dry-run") && help.contains("--node <ID>"), "{help}");
}

/// spec/35's `POST /__ursula/raft/{group}/purge?upto=N`: a group's log is
/// purged through N, at most through its snapshot; the route names what it
/// purged through, and refuses what it cannot do with its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_purge_route_purges_a_groups_log_through_its_snapshot() {
    let mut layout = Layout::new(1, "purge-route", 1, Planes::Shared);
    // Entries kept below a snapshot: the route purges what the snapshot left.
    layout.raft_extra = "max_in_snapshot_log_to_keep = 1000\n".into();
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    create(&http, &urls, "/purge/s").await;
    for n in 0..20 {
        let answer = http.post(format!("{}/purge/s", urls[0])).header("content-type", "text/plain").body(record(n));
        assert!(answer.send().await.expect("append").status().is_success());
    }
    let (status, snap) = admin(&http, &layout, 0, reqwest::Method::POST, "/__ursula/raft/0/snapshot").await;
    assert_eq!(status, 200, "{snap}");
    let snapshot = snap["snapshot_index"].as_u64().expect("snapshot_index");
    let purged = |m: &Value| m["raft_groups"][0]["purged_index"].as_u64();
    let before = metrics(&http, &urls[0]).await.expect("metrics");
    assert!(purged(&before) < Some(snapshot), "1000 entries kept below the snapshot: {before}");

    let (status, body) = admin(&http, &layout, 0, reqwest::Method::POST, "/__ursula/raft/0/purge").await;
    assert_eq!(status, 400, "no upto: {body}");
    let (status, body) = admin(&http, &layout, 0, reqwest::Method::POST, "/__ursula/raft/9/purge?upto=1").await;
    assert_eq!(status, 404, "no group 9: {body}");
    let path = format!("/__ursula/raft/0/purge?upto={}", snapshot + 50);
    let bare = http.post(format!("{}{path}", layout.admin_url(0))).send().await.expect("bare");
    assert_eq!(bare.status(), 428, "admin mutations need the process incarnation");
    let (status, asked) = admin(&http, &layout, 0, reqwest::Method::POST, &path).await;
    assert_eq!(status, 200, "{asked}");
    assert_eq!((asked["requested"].as_u64(), asked["purged_upto"].as_u64()), (Some(snapshot + 50), Some(snapshot)));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let m = metrics(&http, &urls[0]).await.expect("metrics");
        if purged(&m) >= Some(snapshot) {
            break;
        }
        assert!(Instant::now() < deadline, "the purge did not land: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// spec/35's membership route: on the group's leader it replaces the voter
/// set and names the log index it committed at; elsewhere `409` naming the
/// leader; `400` without voters or with a node `raft.peers` does not list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_membership_route_replaces_a_groups_voters_on_its_leader() {
    let layout = Layout::new(3, "membership-route", 1, Planes::Shared);
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    create(&http, &urls, "/members/s").await;
    let m = metrics(&http, &urls[0]).await.expect("metrics");
    let leader = m["raft_groups"][0]["current_leader"].as_u64().expect("a leader");
    let (at, other) = (leader as usize - 1, (leader as usize) % 3);
    let voters_of = |m: &Value| m["raft_groups"][0]["voters"].clone();

    let (status, body) =
        admin(&http, &layout, other, reqwest::Method::POST, "/__ursula/raft/0/membership?voters=1,2,3").await;
    assert_eq!((status, body["leader_id"].as_u64()), (409, Some(leader)), "{body}");
    assert_eq!(body["error"]["code"], "NOT_LEADER", "{body}");
    for bad in
        ["/__ursula/raft/0/membership", "/__ursula/raft/0/membership?voters=", "/__ursula/raft/0/membership?voters=1,9"]
    {
        let (status, body) = admin(&http, &layout, at, reqwest::Method::POST, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, _) = admin(&http, &layout, at, reqwest::Method::POST, "/__ursula/raft/7/membership?voters=1").await;
    assert_eq!(status, 404, "no group 7");

    // Drop a follower: the leader takes it back on its own (a learner
    // first, a voter once caught up), since raft.peers lists it.
    let dropped = (1..=3).find(|id| *id != leader).expect("a follower");
    let kept: Vec<String> = (1..=3).filter(|id| *id != dropped).map(|id| id.to_string()).collect();
    let path = format!("/__ursula/raft/0/membership?voters={}", kept.join(","));
    let (status, body) = admin(&http, &layout, at, reqwest::Method::POST, &path).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["log_index"].as_u64() > Some(0), "{body}");
    let after = metrics(&http, &urls[at]).await.expect("metrics");
    let expected: Vec<u64> = (1..=3).filter(|id| *id != dropped).collect();
    assert_eq!(voters_of(&after), serde_json::json!(expected), "{after}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let back = metrics(&http, &urls[at]).await.expect("metrics");
        // `voters` is every voter of a joint change; the change is done
        // once the one voter set is all three.
        if back["raft_groups"][0]["voter_configs"] == serde_json::json!([[1, 2, 3]]) {
            assert_eq!(voters_of(&back), serde_json::json!([1, 2, 3]), "{back}");
            break;
        }
        assert!(Instant::now() < deadline, "node {dropped} never rejoined the voters: {back}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The group still takes writes at its full voter set.
    let write = http.post(format!("{}/members/s", urls[at])).header("content-type", "text/plain").body("after");
    assert!(write.send().await.expect("append").status().is_success());
}
