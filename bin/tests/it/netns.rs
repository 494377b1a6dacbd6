//! Network partitions between real hosts (issue 25): three voters, each in
//! a network namespace of its own, joined by veth pairs to a bridge in a
//! fourth namespace; the test reaches them through one more veth from its
//! own namespace to that bridge, so nothing touches the host's network.
//! While a producer writes, the test cuts the leader off (its link down),
//! cuts one direction only (the leader's packets to its peers dropped by
//! `iptables` in its namespace), and slows a follower (a `tbf` rate limit
//! on its link), healing each; then every acknowledged append is on every
//! replica exactly once and in order. Without the privilege to make
//! namespaces (or without `ip`, `iptables` or `tc`), the test says so and
//! skips. The kernel here has no `netem`, so delay is a rate limit.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::Node;
use crate::support::cluster::Writer;

const VOTERS: usize = 3;
const S: &str = "/netns/log";
const PATIENCE: Duration = Duration::from_secs(60);

fn record(seq: u64) -> String {
    format!("n{seq:05}\n")
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The namespaces and links of one test; removed when dropped.
struct Net {
    /// A short prefix of this process's names (interface names stay under 16 bytes).
    id: String,
    subnet: String,
}

impl Net {
    fn switch(&self) -> String {
        format!("{}sw", self.id)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.id)
    }

    /// Voter `i`'s end of its link (in its namespace) and the bridge's end.
    fn link(&self, i: usize) -> (String, String) {
        (format!("{}{i}a", self.id), format!("{}{i}b", self.id))
    }

    fn ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, i + 1)
    }

    /// Builds the network, or says why it cannot.
    fn create() -> Result<Net, String> {
        let pid = std::process::id();
        let net = Net { id: format!("u{}", pid % 100_000), subnet: format!("10.213.{}", pid % 250) };
        let sw = net.switch();
        run(&["ip", "netns", "add", &sw])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "set", "lo", "up"])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "add", "br0", "type", "bridge"])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "set", "br0", "up"])?;
        for i in 0..VOTERS {
            let (ns, (a, b)) = (net.ns(i), net.link(i));
            run(&["ip", "netns", "add", &ns])?;
            run(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b])?;
            run(&["ip", "link", "set", &a, "netns", &ns])?;
            run(&["ip", "link", "set", &b, "netns", &sw])?;
            let address = format!("{}/24", net.ip(i));
            run(&["ip", "netns", "exec", &ns, "ip", "addr", "add", &address, "dev", &a])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", &a, "up"])?;
            run(&["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
            run(&["ip", "netns", "exec", &sw, "ip", "link", "set", &b, "master", "br0"])?;
            run(&["ip", "netns", "exec", &sw, "ip", "link", "set", &b, "up"])?;
        }
        // The test's own way in: one more veth to the bridge.
        let (a, b) = (format!("{}ha", net.id), format!("{}hb", net.id));
        run(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b])?;
        run(&["ip", "link", "set", &b, "netns", &sw])?;
        run(&["ip", "addr", "add", &format!("{}.100/24", net.subnet), "dev", &a])?;
        run(&["ip", "link", "set", &a, "up"])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "set", &b, "master", "br0"])?;
        run(&["ip", "netns", "exec", &sw, "ip", "link", "set", &b, "up"])?;
        // The fault tools must work in a namespace before the test relies on them.
        let ns = net.ns(0);
        run(&["ip", "netns", "exec", &ns, "iptables", "-L", "OUTPUT"])?;
        run(&["ip", "netns", "exec", &ns, "tc", "qdisc", "show"])?;
        Ok(net)
    }

    /// Cuts (or heals) voter `i`'s link in both directions.
    fn isolate(&self, i: usize, cut: bool) {
        let state = if cut { "down" } else { "up" };
        run(&["ip", "netns", "exec", &self.switch(), "ip", "link", "set", &self.link(i).1, state]).expect("link state");
    }

    /// Drops (or lets through again) what voter `i` sends to its peers; it still hears them.
    fn mute_towards_peers(&self, i: usize, on: bool) {
        let verb = if on { "-A" } else { "-D" };
        for j in (0..VOTERS).filter(|j| *j != i) {
            let peer = self.ip(j);
            run(&["ip", "netns", "exec", &self.ns(i), "iptables", verb, "OUTPUT", "-d", &peer, "-j", "DROP"])
                .expect("iptables");
        }
    }

    /// Slows (or restores) voter `i`'s link: a 512 kbit/s rate limit.
    fn throttle(&self, i: usize, on: bool) {
        let (ns, dev) = (self.ns(i), self.link(i).0);
        let mut args = vec!["ip", "netns", "exec", &ns, "tc", "qdisc"];
        if on {
            args.extend(["add", "dev", &dev, "root", "tbf", "rate", "512kbit", "burst", "16kbit", "latency", "500ms"]);
        } else {
            args.extend(["del", "dev", &dev, "root"]);
        }
        run(&args).expect("tc");
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for i in 0..VOTERS {
            let _ = run(&["ip", "netns", "del", &self.ns(i)]);
        }
        // The bridge's namespace takes the test's veth pair with it.
        let _ = run(&["ip", "netns", "del", &self.switch()]);
    }
}

fn config(net: &Net, dir: &std::path::Path, i: usize) -> Vec<String> {
    let mut text = format!(
        "[server]\nlisten = \"{}:4437\"\nadmin_listen = \"127.0.0.1:4438\"\ncluster_id = \"netns\"\n\
         [raft]\nnode_id = {}\ngroup_count = 4\ninit_membership_per_group = true\n[raft.wal]\npath = {:?}\n",
        net.ip(i),
        i + 1,
        dir.join(format!("n{}", i + 1)),
    );
    for j in 0..VOTERS {
        let ip = net.ip(j);
        text.push_str(&format!(
            "[[raft.peers]]\nnode_id = {}\nurl = \"http://{ip}:4437\"\nclient_url = \"http://{ip}:4437\"\n",
            j + 1
        ));
    }
    let path = dir.join(format!("n{}.toml", i + 1));
    std::fs::write(&path, text).expect("config");
    vec!["server".into(), "--config".into(), path.display().to_string()]
}

/// Waits until `more` appends past the count at the call were acknowledged.
async fn progress(acked: &AtomicU64, more: u64, what: &str) {
    let target = acked.load(Ordering::SeqCst) + more;
    let deadline = Instant::now() + PATIENCE;
    while acked.load(Ordering::SeqCst) < target {
        assert!(Instant::now() < deadline, "writes stalled {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The voter that leads the stream's group: the one that takes a write itself.
async fn leader_of(urls: &[String]) -> usize {
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let deadline = Instant::now() + PATIENCE;
    loop {
        for url in urls {
            if let Ok(head) = http.head(format!("{url}{S}")).send().await
                && let Some(id) = head.headers().get("x-ursula-raft-leader-id").and_then(|v| v.to_str().ok())
                && let Ok(id) = id.parse::<usize>()
            {
                return id - 1;
            }
        }
        assert!(Instant::now() < deadline, "no voter named the stream's leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_real_partitions_one_way_cuts_and_a_slow_follower() {
    let net = match Net::create() {
        Ok(net) => net,
        Err(why) => {
            eprintln!("SKIPPED netns partitions: this host cannot build the test network ({why})");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("a directory");
    let nodes: Vec<Node> =
        (0..VOTERS).map(|i| Node::spawn_in_netns(&net.ns(i), &config(&net, dir.path(), i))).collect();
    for node in &nodes {
        crate::cluster::wait_ready(node).await;
    }
    let urls: Vec<String> = nodes.iter().map(|n| n.base().to_owned()).collect();
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(3)).build().expect("client");

    let (acked, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    let writer = {
        let (acked, stop, urls, http) = (acked.clone(), stop.clone(), urls.clone(), http.clone());
        tokio::spawn(async move {
            let mut writer = Writer::new(http, S, "p", record).creating().patience(PATIENCE);
            let mut seq = 0;
            while !stop.load(Ordering::SeqCst) {
                writer.write(&urls, seq, |_, _| {}).await;
                seq += 1;
                acked.store(seq, Ordering::SeqCst);
            }
        })
    };
    progress(&acked, 10, "before any fault").await;

    // The leader cut off both ways: the others elect, writes go on.
    let leader = leader_of(&urls).await;
    net.isolate(leader, true);
    progress(&acked, 10, "with the leader cut off").await;
    net.isolate(leader, false);
    progress(&acked, 5, "after the cut healed").await;

    // One way only: the leader hears its peers but they never hear it.
    let leader = leader_of(&urls).await;
    net.mute_towards_peers(leader, true);
    progress(&acked, 10, "with the leader's packets to its peers dropped").await;
    net.mute_towards_peers(leader, false);
    progress(&acked, 5, "after the one-way cut healed").await;

    // A slow follower: the quorum of the other two commits.
    let leader = leader_of(&urls).await;
    let follower = (leader + 1) % VOTERS;
    net.throttle(follower, true);
    progress(&acked, 20, "with a follower slowed").await;
    net.throttle(follower, false);

    stop.store(true, Ordering::SeqCst);
    writer.await.expect("the writer");
    let total = acked.load(Ordering::SeqCst);
    let expected: String = (0..total).map(record).collect();
    for node in &nodes {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let read = node.get(&format!("{S}?offset=-1")).send().await;
            if read.status == 200 && read.text() == expected {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} never held the {total} acknowledged appends exactly once in order: {:?}",
                node.base(),
                read.text().lines().count()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!("netns partitions: {total} acknowledged appends, each once and in order on all {VOTERS} voters");
}
