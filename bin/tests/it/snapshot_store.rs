//! Raft snapshots on S3 (issue 7, `storage.snapshot.backend = "auto"` on a
//! cluster whose cold tier is S3): each voter writes its snapshot objects
//! under `snapshots/node-{id}/group-{gid}/`, a wiped voter rejoins by
//! copying the leader's object into its own directory, GC leaves each
//! directory with the object its snapshot names, and a full restart
//! restores every group from its object.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cluster::{S, append, converges, record, wait_ready};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::S3Server;

const PATIENCE: Duration = Duration::from_secs(60);

async fn metrics(node: &Node) -> serde_json::Value {
    node.get("/__ursula/metrics").send().await.expect(200).json()
}

/// The snapshot objects of voter `node_id` (1-based).
fn objects(s3: &S3Server, node_id: usize) -> Vec<PathBuf> {
    let dir = format!("it/snapshots/node-{node_id}/group-0/");
    s3.files_with("snap").into_iter().filter(|p| p.to_string_lossy().contains(&dir)).collect()
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voters_keep_raft_snapshots_in_their_own_s3_directories_and_a_wiped_voter_copies_one() {
    let s3 = S3Server::start().await;
    let mut layout = Layout::new(3, "snapshot-store", 1, Planes::Shared);
    // Snapshots every few entries; an install timeout the copy bound fits
    // (4 requests of 2 s, no retries), so sends pin objects for 10 s only.
    layout.raft_extra = "snapshot_backstop_logs = 10\ninstall_snapshot_timeout = \"10s\"\n".into();
    layout.sections = format!(
        "[storage.snapshot]\ns3_timeout = \"2s\"\ns3_max_retries = 0\n{}",
        s3.cold_section("flush_interval = \"100ms\"\n")
    );
    let mut nodes: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let first = nodes[0].as_ref().expect("node 1");
    until("no node created the stream", async || first.put(S).content_type("text/plain").send().await.status == 201)
        .await;
    let mut expected = String::new();
    for seq in 0..60 {
        append(&nodes, seq).await;
        expected.push_str(&record(seq));
    }
    let m = metrics(first).await;
    assert_eq!(m["snapshot_backend"], "s3", "{m}");
    until("node 1 wrote no snapshot object", async || !objects(&s3, 1).is_empty()).await;

    // Voter 3 loses everything; the leader's log moves past what it had.
    let wiped = 2;
    nodes[wiped].take().expect("running").kill9();
    std::fs::remove_dir_all(layout.wal(wiped)).expect("wipe the WAL");
    let mut leader = 0;
    for seq in 60..90 {
        leader = append(&nodes, seq).await;
        expected.push_str(&record(seq));
    }
    let purged = metrics(nodes[leader].as_ref().expect("leader")).await["raft_groups"][0]["purged_index"].as_u64();
    assert!(purged > Some(0), "the leader purged its log");
    nodes[wiped] = Some(layout.start(wiped));
    let back = nodes[wiped].as_ref().expect("restarted");
    converges(back, &expected).await;
    let m = metrics(back).await;
    assert!(m["snapshot_store_copies"].as_u64() >= Some(1), "installed from a copy: {m}");
    until("voter 3 holds no copy of its own", async || !objects(&s3, 3).is_empty()).await;

    // GC: once sends stop pinning them, each directory keeps one object.
    for id in 1..=3 {
        until(&format!("node {id}'s directory was not collected: {:?}", objects(&s3, id)), async || {
            objects(&s3, id).len() == 1
        })
        .await;
    }
    let deleted: u64 = {
        let mut sum = 0;
        for node in nodes.iter().flatten() {
            sum += metrics(node).await["snapshot_gc_deleted_objects"].as_u64().unwrap_or(0);
        }
        sum
    };
    assert!(deleted > 0, "GC deleted replaced objects");

    // A full restart restores each voter from its own object.
    for node in nodes.iter_mut() {
        node.take().expect("running").kill9();
    }
    for (i, node) in nodes.iter_mut().enumerate() {
        *node = Some(layout.start(i));
    }
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
        converges(node, &expected).await;
    }
    append(&nodes, 90).await;
    expected.push_str(&record(90));
    for node in nodes.iter().flatten() {
        converges(node, &expected).await;
    }
}

/// spec/07 "Cold storage": a voter whose S3 store stops answering sheds its
/// leaderships after `unhealthy_ticks` bad ticks (four handoffs per tick),
/// says so in its metrics and shed state, while the cluster keeps taking
/// writes; after `heal_ticks` good ticks it may lead again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_whose_snapshot_store_fails_sheds_its_leaderships_and_leads_again_once_healed() {
    use crate::support::proxy::link;
    let s3 = S3Server::start().await;
    let mut layout = Layout::new(3, "store-health", 8, Planes::Shared);
    layout.sections = format!(
        "[storage.snapshot]\ndrive_interval = \"200ms\"\ns3_timeout = \"1s\"\ns3_max_retries = 0\n{}\
         probe_timeout = \"500ms\"\nunhealthy_ticks = 3\nheal_ticks = 2\n",
        s3.cold_section("flush_interval = \"100ms\"\n")
    );
    // Node 1 reaches the store through a proxy the test cuts.
    let proxy = link(s3.addr.port()).await;
    let args = layout.args(0);
    let config = std::path::PathBuf::from(args.last().expect("the config path"));
    let text = std::fs::read_to_string(&config).expect("node 1's config");
    let text = text.replace(&s3.url(), &format!("http://127.0.0.1:{}", proxy.port));
    std::fs::write(&config, text).expect("node 1's config via the proxy");
    let mut nodes: Vec<Option<Node>> =
        vec![Some(Node::spawn(&args, None)), Some(layout.start(1)), Some(layout.start(2))];
    for node in nodes.iter().flatten() {
        wait_ready(node).await;
    }
    let first = nodes[0].as_ref().expect("node 1");
    let leaderships = async |node: &Node| metrics(node).await["raft_leaderships"].as_u64().unwrap_or(0);
    until("node 1 never led a group", async || leaderships(first).await > 0).await;
    until("no node created the stream", async || first.put(S).content_type("text/plain").send().await.status == 201)
        .await;

    proxy.set_cut(true);
    until("node 1 kept its leaderships with its store cut off", async || leaderships(first).await == 0).await;
    let m = metrics(first).await;
    assert_eq!(m["snapshot_store_health"]["gate"], "closed", "{m}");
    assert_eq!(m["snapshot_store_health"]["last_tick"], "bad", "{m}");
    assert_eq!(m["leadership_shed_state"]["state"], "snapshot-store-unhealthy", "{m}");
    assert_eq!(m["leadership_shed_state"]["should_campaign"], false, "{m}");
    assert!(m["snapshot_store_health"]["handoffs"].as_u64() >= Some(1), "{m}");
    // The others lead: writes through node 1 follow its redirects and land.
    for seq in 0..5 {
        append(&nodes, seq).await;
    }
    let ready = first.get("/__ursula/ready").send().await;
    assert_eq!(ready.json()["snapshot_store_health"]["gate"], "closed", "{ready:?}");

    proxy.set_cut(false);
    until("node 1's gate never opened", async || metrics(first).await["snapshot_store_health"]["gate"] == "open").await;
    let m = metrics(first).await;
    assert_eq!(m["leadership_shed_state"]["state"], "none", "{m}");
    // The balancer gives node 1 its share back.
    until("node 1 never led again", async || leaderships(first).await > 0).await;
    nodes.iter_mut().for_each(|n| drop(n.take()));
}
