//! Leadership on voter clusters (openraft 0.10): the admin route that
//! transfers a group's leadership, leaderships spread over the voters (and
//! back to a restarted one), the hand-off of a voter's leaderships on
//! SIGTERM during a rolling restart, how soon writes resume after `kill -9`
//! of a leader, and five voters losing two at once. Throughout, every
//! acknowledged write is present exactly once on every replica.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::task::JoinHandle;

use crate::cluster::wait_ready;
use crate::support::Node;
use crate::support::cluster::{Layout, Planes, Writer};

const TEXT: &str = "text/plain";
const PATIENCE: Duration = Duration::from_secs(60);
/// How soon a fresh cluster spreads its leaderships over the voters.
const SPREAD: Duration = Duration::from_secs(20);
/// How soon a restarted voter leads its share again.
const RESPREAD: Duration = Duration::from_secs(30);
/// How soon every voter sees a transferred leadership.
const HANDOVER: Duration = Duration::from_secs(10);
/// How long a voter may take to hand off, drain and exit after SIGTERM.
const SHUTDOWN: Duration = Duration::from_secs(20);
/// A generous bound on writes resuming after a leader's `kill -9`: the
/// machines are shared and noisy, so the figures are printed, not held tight.
const FAILOVER: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_route_transfers_a_groups_leadership_and_refuses_what_it_cannot() {
    const S: &str = "/admin/log";
    let layout = Layout::new(3, "leadership-admin", 4, Planes::Shared);
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let group = group_of(S, layout.group_count);
    create(&http, &urls, S).await;
    // Settled first, so the balancer moves nothing while the refusals are checked.
    let leaders = wait_leaders(&http, &urls, SPREAD, "leaderships spread", |l| balanced(l, 3)).await;
    let from = leaders[group];
    let to = (1..=3).find(|id| *id != from).expect("another voter");
    let other = (1..=3).find(|id| *id != from && *id != to).expect("a third voter");

    // Both planes report the groups; the admin plane names the node and the process.
    let admin = wait_metrics(&http, &layout.admin_url(index(from))).await;
    assert_eq!(admin["raft_node_id"].as_u64(), Some(from), "{admin}");
    assert_eq!(admin["raft_groups"].as_array().map(Vec::len), Some(4), "{admin}");
    assert_eq!(admin["raft_groups"][group]["current_leader"].as_u64(), Some(from), "{admin}");
    let plane = wait_metrics(&http, &urls[index(from)]).await;
    assert_eq!(plane["raft_groups"].as_array().map(Vec::len), Some(4), "{plane}");
    // spec/35: each plane's metrics and readiness name the deployment.
    assert!(admin["cluster_id"].is_string() && admin["cluster_id"] == plane["cluster_id"], "{admin}");
    let ready =
        http.get(format!("{}/__ursula/ready", layout.admin_url(index(from)))).send().await.expect("admin ready");
    let ready: serde_json::Value =
        serde_json::from_slice(&ready.bytes().await.expect("body")).expect("admin ready JSON");
    assert_eq!(ready["cluster_id"], plane["cluster_id"], "{ready}");
    let incarnation = incarnation_of(&http, &layout, from).await;

    let (status, body) = transfer(&http, &layout, from, group, to, None).await;
    assert_eq!(status, 428, "a transfer without the process incarnation: {body}");
    let (status, body) = transfer(&http, &layout, from, group, to, Some("0")).await;
    assert_eq!(status, 412, "a transfer naming another process: {body}");
    let theirs = incarnation_of(&http, &layout, other).await;
    let (status, body) = transfer(&http, &layout, other, group, to, Some(&theirs)).await;
    assert_eq!(status, 409, "voter {other} does not lead group {group}: {body}");
    assert!(body["error"]["code"].is_string(), "a JSON error body with a code: {body}");
    for (target, what) in [(from, "the leader itself"), (99, "no voter")] {
        let (status, body) = transfer(&http, &layout, from, group, target, Some(&incarnation)).await;
        assert_eq!(status, 400, "a transfer to {what}: {body}");
    }
    let (status, body) = transfer(&http, &layout, from, 4, to, Some(&incarnation)).await;
    assert_eq!(status, 404, "group 4 of 4: {body}");
    // A voter marked for maintenance takes no leadership: 409, until the mark is lifted.
    let lay = &layout;
    let mark = |method: reqwest::Method| {
        let (http, url) = (http.clone(), format!("{}/__ursula/leadership-shed/maintenance", lay.admin_url(index(to))));
        async move {
            let theirs = incarnation_of(&http, lay, to).await;
            let answer = http.request(method, url).header("x-ursula-process-incarnation", theirs).send().await;
            answer.expect("the maintenance mark").status().as_u16()
        }
    };
    assert_eq!(mark(reqwest::Method::POST).await, 200);
    let (status, body) = transfer(&http, &layout, from, group, to, Some(&incarnation)).await;
    assert_eq!(status, 409, "a transfer to a voter in maintenance: {body}");
    assert_eq!(mark(reqwest::Method::DELETE).await, 200);

    let (status, body) = transfer(&http, &layout, from, group, to, Some(&incarnation)).await;
    assert_eq!(status, 200, "{body}");
    check_triggered(&body, group, from, to);
    wait_leaders(&http, &urls, HANDOVER, "every voter sees the new leader", |l| l[group] == to).await;
    // The old leader now redirects a write of the group to the new one.
    let write = no_redirects().post(format!("{}{S}", urls[index(from)])).header("content-type", TEXT).body("x");
    let write = write.send().await.expect("a write through the old leader");
    assert_eq!(write.status(), 307, "{:?}", write.headers());
    let header = |name: &str| write.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(header("x-ursula-raft-leader-id"), Some(to.to_string()));
    let location = header("location").expect("a 307 has a Location");
    assert!(location.starts_with(&urls[index(to)]), "{location} is not on voter {to}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaderships_spread_over_the_voters_and_return_to_a_restarted_one() {
    let layout = Layout::new(3, "leadership-balance", 12, Planes::Shared);
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    let (http, urls) = (client(), layout.client_urls());
    let leaders = wait_leaders(&http, &urls, SPREAD, "leaderships spread over 3 voters", |l| balanced(l, 3)).await;
    eprintln!("balance: groups led per voter after a fresh start: {:?}", counts(&leaders, 3));

    // kill -9 the voter that leads most: the other two take its groups.
    let busiest = (1..=3).max_by_key(|id| led_by(&leaders, *id)).expect("a voter");
    nodes[index(busiest)].take().expect("running").kill9();
    let survivors: Vec<String> = (1..=3).filter(|id| *id != busiest).map(|id| urls[index(id)].clone()).collect();
    let without = |l: &[u64]| !l.contains(&busiest);
    let taken = wait_leaders(&http, &survivors, PATIENCE, "the survivors lead every group", without).await;
    eprintln!("balance: groups led per voter with voter {busiest} down: {:?}", counts(&taken, 3));

    // Restarted on its WAL, it leads its share again.
    nodes[index(busiest)] = Some(layout.start(index(busiest)));
    let back = |l: &[u64]| balanced(l, 3) && led_by(l, busiest) > 0;
    let leaders = wait_leaders(&http, &urls, RESPREAD, "leaderships back on the restarted voter", back).await;
    eprintln!("balance: groups led per voter after voter {busiest} restarted: {:?}", counts(&leaders, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_hands_leaderships_off_and_loses_no_acknowledged_write() {
    rolling_restart_under_load("leadership-rolling", false).await;
}

/// The same through a gateway, whose small appends travel on one
/// `AppendStream` per voter: a stopping voter tells the stream, the
/// gateway ends it once its appends are answered and opens another, and
/// its clients see no answer but successes and retried `503`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_through_a_gateway_answers_only_successes_and_retried_503s() {
    rolling_restart_under_load("leadership-rolling-gw", true).await;
}

/// Stops each voter of a three-voter cluster with SIGTERM and starts it
/// again, under producers writing to the voters (or `through_gateway`, to
/// a gateway in front of them): every voter hands its leaderships off and
/// exits in time, and every acknowledged write is held once.
async fn rolling_restart_under_load(cluster_id: &str, through_gateway: bool) {
    let layout = Layout::new(3, cluster_id, 8, Planes::Shared);
    let mut nodes = start_all(&layout).await;
    let gateway = through_gateway.then(|| Node::spawn(&crate::support::cluster::gateway_args(&layout, &[]), None));
    let (http, urls) = (client(), layout.client_urls());
    let streams = streams_in_distinct_groups("rolling", 4, layout.group_count);
    for path in &streams {
        create(&http, &urls, path).await;
    }
    let load = match &gateway {
        Some(gateway) => Load::start(&[gateway.base().to_string()], &streams),
        None => Load::start(&urls, &streams),
    };
    load.progress().await;
    // Voter `i` is stopped and restarted in place, so `nodes` is indexed.
    #[allow(clippy::needless_range_loop)]
    for i in 0..layout.voters() {
        let id = i as u64 + 1;
        let node = nodes[i].take().expect("running");
        let asked = Instant::now();
        // `terminate` waits for the exit on this thread; the writers go on on the other.
        let (status, stderr) = tokio::task::block_in_place(|| node.terminate());
        let took = asked.elapsed();
        assert!(status.success(), "voter {id} exited with {status} after SIGTERM:\n{stderr}");
        assert!(took < SHUTDOWN, "voter {id} took {took:?} to exit after SIGTERM:\n{stderr}");
        eprintln!("rolling restart ({cluster_id}): voter {id} exited {} ms after SIGTERM", took.as_millis());
        // Every leadership moved before it stopped (it says so otherwise).
        assert!(!stderr.contains("leaderships no peer took"), "voter {id} stopped still leading:\n{stderr}");
        // It handed its leaderships off before it went.
        let others: Vec<String> = urls.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, u)| u.clone()).collect();
        wait_leaders(&http, &others, PATIENCE, "the others lead every group", |l| !l.contains(&id)).await;
        load.progress().await;

        nodes[i] = Some(layout.start(i));
        wait_ready(nodes[i].as_ref().expect("restarted")).await;
        wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await;
        wait_caught_up(&http, &urls, i).await;
        load.progress().await;
    }
    let acked = load.finish().await;
    for (path, acked) in streams.iter().zip(acked) {
        converge(&http, &urls, path, acked).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_resume_soon_after_kill_9_of_the_leader() {
    const S: &str = "/failover/log";
    let layout = Layout::new(3, "leadership-failover", 4, Planes::Shared);
    let mut nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let group = group_of(S, layout.group_count);
    create(&http, &urls, S).await;
    let load = Load::start(&urls, &[S.to_string()]);
    let mut figures = Vec::new();
    // Five kills: the median is the figure (BENCHMARKS.md).
    for _ in 0..5 {
        load.progress().await;
        let leader = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await[group];
        let i = index(leader);
        nodes[i].take().expect("running").kill9();
        let killed_at = Instant::now();
        let deadline = killed_at + PATIENCE;
        let resumed = loop {
            if let Some(at) = load.resumed_after(killed_at) {
                break at.duration_since(killed_at);
            }
            assert!(Instant::now() < deadline, "no write acknowledged {PATIENCE:?} after kill -9 of voter {leader}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        eprintln!("failover: writes resumed {} ms after kill -9 of the leader", resumed.as_millis());
        figures.push(resumed);

        nodes[i] = Some(layout.start(i));
        wait_ready(nodes[i].as_ref().expect("restarted")).await;
        wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await;
        wait_caught_up(&http, &urls, i).await;
    }
    let acked = load.finish().await;
    converge(&http, &urls, S, acked[0]).await;
    figures.sort();
    let median = figures[figures.len() / 2];
    eprintln!("failover: median {} ms over {} kills of the leader", median.as_millis(), figures.len());
    for figure in &figures {
        assert!(*figure < FAILOVER, "writes resumed only {figure:?} after kill -9 of the leader");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfers_under_load_lose_and_repeat_no_acknowledged_write() {
    const S: &str = "/transfer/log";
    let mut layout = Layout::new(3, "leadership-transfer", 8, Planes::Shared);
    // Moves by hand only: the balancer would hand node 2's surplus back.
    layout.sections = "[governance.leadership_balance]\nenabled = false\n".into();
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let group = group_of(S, layout.group_count);
    create(&http, &urls, S).await;
    let load = Load::start(&urls, &[S.to_string()]);
    load.progress().await;

    // The stream's group goes to each other voter in turn.
    let first = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await[group];
    for to in (1..=3).filter(|id| *id != first) {
        transfer_to(&http, &layout, &urls, group, to).await;
        load.progress().await;
    }
    // Then every group node 1 leads goes to node 2, until node 1 leads none.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let leaders = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await;
        let mine: Vec<usize> = (0..leaders.len()).filter(|g| leaders[*g] == 1).collect();
        if mine.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "node 1 still leads groups {mine:?}");
        for g in mine {
            transfer_to(&http, &layout, &urls, g, 2).await;
        }
    }
    load.progress().await;
    let acked = load.finish().await;
    converge(&http, &urls, S, acked[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_write_on_after_two_are_killed_at_once() {
    const S: &str = "/five/log";
    const RECORDS: u64 = 40;
    let layout = Layout::new(5, "leadership-five", 8, Planes::Shared);
    let mut nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let group = group_of(S, layout.group_count);
    create(&http, &urls, S).await;
    let mut writer = Writer::new(client(), S, "five", record).pausing(Duration::from_millis(50)).patience(PATIENCE);
    for seq in 0..RECORDS / 2 {
        writer.write(&nodes, seq, check_refusal).await;
    }

    // The stream's leader and the voter after it go at once; three of five remain a majority.
    let leaders = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await;
    let killed = [index(leaders[group]), (index(leaders[group]) + 1) % 5];
    for i in killed {
        nodes[i].take().expect("running").kill9();
    }
    for seq in RECORDS / 2..RECORDS {
        writer.write(&nodes, seq, check_refusal).await;
    }
    let survivors: Vec<String> = nodes.iter().flatten().map(|n| n.base().to_string()).collect();
    let dead: Vec<u64> = killed.iter().map(|i| *i as u64 + 1).collect();
    let led = |l: &[u64]| l.iter().all(|id| !dead.contains(id));
    wait_leaders(&http, &survivors, PATIENCE, "the survivors lead every group", led).await;
    converge(&http, &survivors, S, RECORDS).await;
}

pub(crate) fn record(seq: u64) -> String {
    format!("l{seq:05}\n")
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(3)).build().expect("client")
}

fn no_redirects() -> reqwest::Client {
    let policy = reqwest::redirect::Policy::none();
    reqwest::Client::builder().no_proxy().redirect(policy).timeout(Duration::from_secs(10)).build().expect("client")
}

/// The index in a layout of the voter with Raft node id `node`.
pub(crate) fn index(node: u64) -> usize {
    usize::try_from(node).expect("a node id") - 1
}

/// A writer's refusal check: a write may only be answered with `2xx`,
/// a redirect, or `503` while a group has no leader or the node drains.
fn check_refusal(voter: usize, answer: &reqwest::Response) {
    let status = answer.status();
    assert!(status.is_success() || matches!(status.as_u16(), 307 | 503), "a write on voter {}: {status}", voter + 1);
}

/// The group of the stream `/{bucket}/{stream}` among `group_count`, as the servers route it.
pub(crate) fn group_of(path: &str, group_count: u32) -> usize {
    let (bucket, stream) = path.trim_start_matches('/').split_once('/').expect("/bucket/stream");
    let key = ursula_stream::StreamKey::parse(bucket, stream).expect("a valid stream key");
    ursula_stream::routing::group_of(&key, group_count).0 as usize
}

/// `n` streams of `bucket`, each in a group of its own.
pub(crate) fn streams_in_distinct_groups(bucket: &str, n: usize, group_count: u32) -> Vec<String> {
    let mut groups = BTreeSet::new();
    (0..).map(|i| format!("/{bucket}/s{i}")).filter(|p| groups.insert(group_of(p, group_count))).take(n).collect()
}

/// Starts every voter of `layout` and waits until each is ready.
pub(crate) async fn start_all(layout: &Layout) -> Vec<Option<Node>> {
    let nodes: Vec<Option<Node>> = (0..layout.voters()).map(|i| Some(layout.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    nodes
}

/// Creates the `text/plain` stream `path` through whichever voter takes it.
pub(crate) async fn create(http: &reqwest::Client, urls: &[String], path: &str) {
    let deadline = Instant::now() + PATIENCE;
    let mut last = String::from("none");
    loop {
        for url in urls {
            match http.put(format!("{url}{path}")).header("content-type", TEXT).send().await {
                Ok(answer) if answer.status().is_success() => return,
                Ok(answer) => last = format!("{url}: {} {}", answer.status(), answer.text().await.unwrap_or_default()),
                Err(e) => last = format!("{url}: {e}"),
            }
        }
        assert!(Instant::now() < deadline, "no voter created {path}; the last answer: {last}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `GET {base}/__ursula/metrics`, when it answers `200` with JSON.
pub(crate) async fn metrics(http: &reqwest::Client, base: &str) -> Option<Value> {
    let answer = http.get(format!("{base}/__ursula/metrics")).send().await.ok()?;
    if answer.status() != 200 {
        return None;
    }
    serde_json::from_slice(&answer.bytes().await.ok()?).ok()
}

/// The metrics of `base`, waiting until it answers.
async fn wait_metrics(http: &reqwest::Client, base: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(metrics) = metrics(http, base).await {
            return metrics;
        }
        assert!(Instant::now() < deadline, "{base}/__ursula/metrics never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Voter `node`'s process incarnation, which its admin mutations must name.
pub(crate) async fn incarnation_of(http: &reqwest::Client, layout: &Layout, node: u64) -> String {
    let admin = wait_metrics(http, &layout.admin_url(index(node))).await;
    let incarnation = admin["process_incarnation"].as_str();
    incarnation.unwrap_or_else(|| panic!("no process_incarnation in voter {node}'s admin metrics: {admin}")).to_owned()
}

/// The leader each voter at `urls` sees for every group, when they all
/// answer, agree, and every group has one.
pub(crate) async fn agreed_leaders(http: &reqwest::Client, urls: &[String]) -> Option<Vec<u64>> {
    let mut agreed: Option<Vec<Option<u64>>> = None;
    for url in urls {
        let groups = metrics(http, url).await?["raft_groups"].as_array()?.clone();
        let view: Vec<Option<u64>> = groups.iter().map(|g| g["current_leader"].as_u64()).collect();
        match &agreed {
            Some(seen) if *seen != view => return None,
            _ => agreed = Some(view),
        }
    }
    agreed.filter(|view| !view.is_empty())?.into_iter().collect()
}

/// Waits until the voters at `urls` agree on a leader for every group and
/// the leaders `fit`; returns them (node ids, by group).
pub(crate) async fn wait_leaders(
    http: &reqwest::Client,
    urls: &[String],
    within: Duration,
    what: &str,
    fit: impl Fn(&[u64]) -> bool,
) -> Vec<u64> {
    let deadline = Instant::now() + within;
    let mut last = None;
    loop {
        if let Some(leaders) = agreed_leaders(http, urls).await {
            if fit(&leaders) {
                return leaders;
            }
            last = Some(leaders);
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}; the last agreed leaders: {last:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many groups voter `node` leads.
fn led_by(leaders: &[u64], node: u64) -> usize {
    leaders.iter().filter(|id| **id == node).count()
}

/// How many groups each of `voters` voters leads, by node id.
fn counts(leaders: &[u64], voters: usize) -> Vec<usize> {
    (1..=voters as u64).map(|id| led_by(leaders, id)).collect()
}

/// Every group is led by one of `voters` voters, none leading more than
/// its share rounded up, plus one.
fn balanced(leaders: &[u64], voters: usize) -> bool {
    let share = leaders.len().div_ceil(voters) + 1;
    leaders.iter().all(|id| (1..=voters as u64).contains(id)) && counts(leaders, voters).iter().all(|n| *n <= share)
}

/// Each group's `last_applied_index` in a node's metrics.
fn applied(metrics: &Value) -> Vec<u64> {
    let groups = metrics["raft_groups"].as_array().map(Vec::as_slice).unwrap_or_default();
    groups.iter().map(|g| g["last_applied_index"].as_u64().unwrap_or(0)).collect()
}

/// Waits until voter `i` applied, in every group, what the other voters had
/// applied when this was called.
async fn wait_caught_up(http: &reqwest::Client, urls: &[String], i: usize) {
    let mut target: Vec<u64> = Vec::new();
    for (_, url) in urls.iter().enumerate().filter(|(j, _)| *j != i) {
        let theirs = applied(&wait_metrics(http, url).await);
        target.resize(target.len().max(theirs.len()), 0);
        for (g, applied_index) in theirs.into_iter().enumerate() {
            target[g] = target[g].max(applied_index);
        }
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mine = metrics(http, &urls[i]).await.map(|m| applied(&m)).unwrap_or_default();
        if mine.len() == target.len() && mine.iter().zip(&target).all(|(m, t)| m >= t) {
            return;
        }
        assert!(Instant::now() < deadline, "voter {} never caught up: applied {mine:?}, the others {target:?}", i + 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `POST /__ursula/raft/{group}/leader/transfer/{to}` on voter `on`'s admin
/// plane, naming `incarnation` (`None`: without the header); returns the
/// status and the JSON body (`Null` without one).
pub(crate) async fn transfer(
    http: &reqwest::Client,
    layout: &Layout,
    on: u64,
    group: usize,
    to: u64,
    incarnation: Option<&str>,
) -> (u16, Value) {
    let url = format!("{}/__ursula/raft/{group}/leader/transfer/{to}", layout.admin_url(index(on)));
    let mut request = http.post(url);
    if let Some(incarnation) = incarnation {
        request = request.header("x-ursula-process-incarnation", incarnation);
    }
    let answer = request.send().await.expect("the admin plane answers");
    let status = answer.status().as_u16();
    let body = answer.bytes().await.expect("the answer's body");
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The body of a `200` transfer of `group` from voter `from` to voter `to`.
pub(crate) fn check_triggered(body: &Value, group: usize, from: u64, to: u64) {
    assert_eq!(body["raft_group_id"].as_u64(), Some(group as u64), "{body}");
    assert_eq!(body["from"].as_u64(), Some(from), "{body}");
    assert_eq!(body["to"].as_u64(), Some(to), "{body}");
    assert!(body["term"].as_u64().is_some(), "{body}");
    assert_eq!(body["status"], "triggered", "{body}");
}

/// Moves `group`'s leadership to voter `to` through the admin route of the
/// voter that leads it (asking again when the leadership moved between the
/// metrics and the request: `409`), then waits until every voter sees `to` lead.
pub(crate) async fn transfer_to(http: &reqwest::Client, layout: &Layout, urls: &[String], group: usize, to: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let from = wait_leaders(http, urls, PATIENCE, "every group led", |_| true).await[group];
        if from == to {
            eprintln!("transfer: group {group} moved to voter {to} before it was asked to");
            break;
        }
        let incarnation = incarnation_of(http, layout, from).await;
        let (status, body) = transfer(http, layout, from, group, to, Some(&incarnation)).await;
        if status == 200 {
            check_triggered(&body, group, from, to);
            break;
        }
        assert!(status == 409, "transfer of group {group} from {from} to {to}: {status} {body}");
        assert!(Instant::now() < deadline, "group {group} never transferred to {to}: {status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_leaders(http, urls, HANDOVER, &format!("group {group} led by voter {to}"), |l| l[group] == to).await;
}

/// Waits until every voter at `urls` serves, from its own replica, exactly
/// the `acked` acknowledged records of `path`, or one more: the writer's
/// last in-flight attempt may have applied after it stopped.
pub(crate) async fn converge(http: &reqwest::Client, urls: &[String], path: &str, acked: u64) {
    let expected: String = (0..acked).map(record).collect();
    let with_last_attempt = format!("{expected}{}", record(acked));
    for url in urls {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let body = match http.get(format!("{url}{path}?offset=-1")).send().await {
                Ok(answer) if answer.status() == 200 => answer.text().await.unwrap_or_default(),
                _ => String::new(),
            };
            if body == expected || body == with_last_attempt {
                break;
            }
            let (got, want) = (body.len(), expected.len());
            assert!(Instant::now() < deadline, "{url}{path} never held the {acked} records: {got} of {want} bytes");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What one stream's producer met.
#[derive(Default)]
struct Tally {
    /// Each acknowledged write in order: when its acknowledged attempt started, and when it was acknowledged.
    acks: Mutex<Vec<(Instant, Instant)>>,
    /// Attempts answered otherwise (`503`s, a `307` at the end of a redirect chain).
    refusals: AtomicU64,
    /// Attempts with no answer: a voter down, restarting, or too slow.
    transport_errors: AtomicU64,
}

/// One producer per stream, appending through every voter (following
/// redirects) until `finish`; each write's refusals go to `check_refusal`.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    tallies: Vec<Arc<Tally>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Load {
    pub(crate) fn start(urls: &[String], streams: &[String]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut tallies, mut tasks) = (Vec::new(), Vec::new());
        for path in streams {
            let tally = Arc::new(Tally::default());
            let (urls, path, stop, tally_of_task) = (urls.to_vec(), path.clone(), stop.clone(), tally.clone());
            tasks.push(tokio::spawn(async move {
                let mut writer = Writer::new(client(), &path, "load", record).pausing(Duration::from_millis(20));
                let mut seq = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let started = Instant::now();
                    let mut answered = false;
                    let refused = |voter: usize, answer: &reqwest::Response| {
                        answered = true;
                        check_refusal(voter, answer);
                    };
                    let acknowledged = writer.attempt(&urls, seq, refused).await.is_some();
                    if acknowledged {
                        tally_of_task.acks.lock().expect("acks").push((started, Instant::now()));
                        seq += 1;
                    } else if answered {
                        tally_of_task.refusals.fetch_add(1, Ordering::SeqCst);
                    } else {
                        tally_of_task.transport_errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
            tallies.push(tally);
        }
        Load { stop, tallies, tasks }
    }

    /// Each stream's acknowledged writes so far.
    fn acked(&self) -> Vec<u64> {
        self.tallies.iter().map(|t| t.acks.lock().expect("acks").len() as u64).collect()
    }

    /// Waits until every stream has three more acknowledged writes.
    pub(crate) async fn progress(&self) {
        let before = self.acked();
        let deadline = Instant::now() + PATIENCE;
        while self.acked().iter().zip(&before).any(|(now, then)| *now < then + 3) {
            assert!(!self.tasks.iter().any(JoinHandle::is_finished), "a writer stopped: its panic is above");
            let now = self.acked();
            assert!(Instant::now() < deadline, "writes stalled {PATIENCE:?}: {before:?}, then {now:?} acknowledged");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// When the first stream's first write sent after `at` was acknowledged.
    fn resumed_after(&self, at: Instant) -> Option<Instant> {
        let acks = self.tallies[0].acks.lock().expect("acks");
        acks.iter().find(|(started, _)| *started > at).map(|(_, acknowledged)| *acknowledged)
    }

    /// Stops the producers; returns each stream's acknowledged writes.
    pub(crate) async fn finish(self) -> Vec<u64> {
        self.stop.store(true, Ordering::SeqCst);
        for task in self.tasks {
            task.await.expect("a writer panicked");
        }
        let mut acked = Vec::new();
        for (k, tally) in self.tallies.iter().enumerate() {
            let n = tally.acks.lock().expect("acks").len() as u64;
            let refusals = tally.refusals.load(Ordering::SeqCst);
            let transport = tally.transport_errors.load(Ordering::SeqCst);
            eprintln!("load: stream {k}: {n} writes acknowledged, {refusals} refusals, {transport} transport errors");
            acked.push(n);
        }
        acked
    }
}
