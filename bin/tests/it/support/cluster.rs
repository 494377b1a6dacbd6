//! Voter clusters on loopback: ports, WAL directories and config files,
//! and the producer that writes through a cluster's nodes (`Writer`).

use std::time::{Duration, Instant};

use super::Node;

/// A free port for a node to bind later, below the kernel's ephemeral
/// range: a port from that range, once released, can become the local port
/// of one of the many outbound connections the parallel tests open before
/// the node binds it ("Address already in use" in a CI run). Never handed
/// out twice in one test process.
pub fn free_port() -> u16 {
    static HANDED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let range = if ephemeral_low > 12_000 { 10_000..ephemeral_low } else { 1024..ephemeral_low.max(1025) };
    let mut handed = HANDED.lock().unwrap_or_else(|p| p.into_inner());
    for _ in 0..10_000 {
        let port = fastrand::u16(range.clone());
        if !handed.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed.push(port);
            return port;
        }
    }
    panic!("no free port below the ephemeral range {ephemeral_low}");
}

/// Where Raft runs (spec/07, `server.cluster_listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planes {
    /// Raft gRPC on `server.listen`, beside the client plane.
    Shared,
    /// Raft gRPC on its own `server.cluster_listen` port.
    Separate,
}

pub struct Layout {
    /// Shared with every node started from the layout, so that dropping
    /// the layout first never removes a running node's directory.
    pub dir: std::sync::Arc<tempfile::TempDir>,
    pub cluster_id: String,
    pub group_count: u32,
    pub planes: Planes,
    /// Each voter's client plane (`server.listen`).
    pub client: Vec<u16>,
    /// Each voter's cluster listener (the client port with shared planes).
    pub raft: Vec<u16>,
    /// More `[raft]` keys, one `key = value` per line.
    pub raft_extra: String,
    /// More sections, after the peers (e.g. `[storage.cold]`).
    pub sections: String,
    /// Each voter's admin plane (`server.admin_listen`): a port of its own
    /// from `new`, so voters never contend for the default 127.0.0.1:4438.
    pub admin: Option<Vec<u16>>,
}

impl Layout {
    pub fn new(voters: usize, cluster_id: &str, group_count: u32, planes: Planes) -> Layout {
        let client: Vec<u16> = (0..voters).map(|_| free_port()).collect();
        let raft = match planes {
            Planes::Shared => client.clone(),
            Planes::Separate => (0..voters).map(|_| free_port()).collect(),
        };
        let admin = (0..voters).map(|_| free_port()).collect();
        let dir = std::sync::Arc::new(tempfile::tempdir().expect("tempdir"));
        Layout {
            dir,
            cluster_id: cluster_id.into(),
            group_count,
            planes,
            client,
            raft,
            raft_extra: String::new(),
            sections: String::new(),
            admin: Some(admin),
        }
    }

    pub fn voters(&self) -> usize {
        self.client.len()
    }

    /// Voter `i`'s client plane, `http://127.0.0.1:PORT`.
    pub fn client_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.client[i])
    }

    /// Every voter's client plane, in voter order (node id `i + 1` at `i`).
    pub fn client_urls(&self) -> Vec<String> {
        (0..self.voters()).map(|i| self.client_url(i)).collect()
    }

    /// Voter `i`'s admin plane, `http://127.0.0.1:PORT`.
    pub fn admin_url(&self, i: usize) -> String {
        let ports = self.admin.as_ref().expect("a layout with admin planes");
        format!("http://127.0.0.1:{}", ports[i])
    }

    /// Writes voter `i`'s config, where it dials peer `j` at
    /// `peer_port(j)` (its cluster listener, or a proxy in front of it),
    /// and returns the `ursula` arguments that start it.
    pub fn args_via(&self, i: usize, peer_port: &dyn Fn(usize) -> u16) -> Vec<String> {
        let cluster_listen = match self.planes {
            Planes::Shared => String::new(),
            Planes::Separate => format!("cluster_listen = \"127.0.0.1:{}\"\n", self.raft[i]),
        };
        let admin = match &self.admin {
            Some(ports) => format!("admin_listen = \"127.0.0.1:{}\"\n", ports[i]),
            None => String::new(),
        };
        let mut text = format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\n{admin}{cluster_listen}cluster_id = {:?}\n\
             [raft]\nnode_id = {}\ngroup_count = {}\ninit_membership_per_group = true\n{}[raft.wal]\npath = {:?}\n",
            self.client[i],
            self.cluster_id,
            i + 1,
            self.group_count,
            self.raft_extra,
            self.wal(i),
        );
        for j in 0..self.voters() {
            text.push_str(&format!(
                "[[raft.peers]]\nnode_id = {}\nurl = \"http://127.0.0.1:{}\"\nclient_url = \"http://127.0.0.1:{}\"\n",
                j + 1,
                peer_port(j),
                self.client[j]
            ));
        }
        text.push_str(&self.sections);
        let path = self.dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, text).expect("config");
        vec!["server".into(), "--config".into(), path.display().to_string()]
    }

    pub fn args(&self, i: usize) -> Vec<String> {
        self.args_via(i, &|j| self.raft[j])
    }

    pub fn wal(&self, i: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("n{}", i + 1))
    }

    pub fn start(&self, i: usize) -> Node {
        let mut node = Node::spawn(&self.args(i), None);
        node.share_dir(self.dir.clone());
        node
    }
}

/// An `ursula gateway` started with `extra`, in front of three fresh voters
/// (the voters live as long as the returned node), answering once the
/// gateway reports ready.
pub fn gateway_over_voters(extra: &[&str]) -> Node {
    let layout = Layout::new(3, "gateway-suite", 4, Planes::Shared);
    let voters: Vec<Node> = (0..layout.voters()).map(|i| layout.start(i)).collect();
    let mut gateway = Node::spawn(&gateway_args(&layout, extra), None);
    gateway.wait_ready_blocking();
    gateway.keep_voters(voters, layout);
    gateway
}

/// `ursula gateway` arguments with one `--upstream` per voter of `layout`.
pub fn gateway_args(layout: &Layout, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["gateway".to_string(), "--listen".into(), "127.0.0.1:0".into()];
    for port in &layout.client {
        args.extend(["--upstream".into(), format!("http://127.0.0.1:{port}")]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// A node a [`Writer`] writes through: its base URL, or `None` while it is
/// down (a killed voter in a `[Option<Node>]`).
pub trait Target {
    fn base_url(&self) -> Option<&str>;
}

impl Target for String {
    fn base_url(&self) -> Option<&str> {
        Some(self)
    }
}

impl Target for Option<Node> {
    fn base_url(&self) -> Option<&str> {
        self.as_ref().map(Node::base)
    }
}

/// The writer loop of the cluster, fault and gateway tests: one producer
/// (`Producer-Id: id`, `Producer-Epoch: 0`) appending to the stream `path`
/// through whichever node of a cluster (a voter or a gateway) takes the
/// write. Write `seq` is a `text/plain` `POST` of `record(seq)` with
/// `Producer-Seq: seq`, so repeating it is safe; it goes out on the client
/// the test gives, which follows redirects or not as the test needs.
///
/// [`Writer::attempt`] sends write `seq` once, to the node whose turn it is;
/// [`Writer::write`] repeats it until it is acknowledged: `200`, or `204`
/// for the repeat of a write that applied. Every other answer goes to the
/// caller's `refused` check with the node's index, which asserts what the
/// test allows (a well-formed `307`, a `503` ...). After a refusal, and
/// after a node that is down or does not answer, the turn moves on to the
/// next node. By default the writer pauses 50 ms after each refusal, starts
/// a write at the node that took the last one, and never gives up.
pub struct Writer {
    http: reqwest::Client,
    path: String,
    id: String,
    record: fn(u64) -> String,
    /// The node of the next attempt: an index into the nodes, modulo their number.
    turn: usize,
    pause: Duration,
    /// Each write sweeps the nodes from the first and pauses after a whole round.
    rounds: bool,
    patience: Option<Duration>,
    /// `PUT` the stream before each attempt.
    creates: bool,
}

impl Writer {
    pub fn new(http: reqwest::Client, path: &str, id: &str, record: fn(u64) -> String) -> Writer {
        Writer {
            http,
            path: path.into(),
            id: id.into(),
            record,
            turn: 0,
            pause: Duration::from_millis(50),
            rounds: false,
            patience: None,
            creates: false,
        }
    }

    /// Pauses `pause` after each refusal.
    pub fn pausing(self, pause: Duration) -> Writer {
        Writer { pause, rounds: false, ..self }
    }

    /// Starts each write at the first node and pauses `pause` only after a
    /// round of all of them: the leader takes a write at once, and every
    /// node before it answers (and is checked) on the way.
    pub fn in_rounds(self, pause: Duration) -> Writer {
        Writer { pause, rounds: true, ..self }
    }

    /// `write` panics when a write is not acknowledged within `patience`.
    pub fn patience(self, patience: Duration) -> Writer {
        Writer { patience: Some(patience), ..self }
    }

    /// `PUT`s the stream (`text/plain`, whatever the answer) before each
    /// attempt, so the first write creates it on the node that leads.
    pub fn creating(self) -> Writer {
        Writer { creates: true, ..self }
    }

    /// Sends write `seq` once, to the next of `nodes` that is up. Returns
    /// that node's index when it acknowledged the write; otherwise moves the
    /// turn on, pauses, and returns `None`.
    pub async fn attempt(
        &mut self,
        nodes: &[impl Target],
        seq: u64,
        mut refused: impl FnMut(usize, &reqwest::Response),
    ) -> Option<usize> {
        assert!(nodes.iter().any(|n| n.base_url().is_some()), "no node is up to take write {seq} of {}", self.path);
        while nodes[self.turn % nodes.len()].base_url().is_none() {
            self.move_on(nodes.len()).await;
        }
        let i = self.turn % nodes.len();
        let url = format!("{}{}", nodes[i].base_url().expect("a node that is up"), self.path);
        if self.creates {
            let _ = self.http.put(&url).header("content-type", "text/plain").send().await;
        }
        let sent = self
            .http
            .post(&url)
            .header("content-type", "text/plain")
            .header("producer-id", &self.id)
            .header("producer-epoch", "0")
            .header("producer-seq", seq.to_string())
            .body((self.record)(seq))
            .send()
            .await;
        match sent {
            Ok(answer) if matches!(answer.status().as_u16(), 200 | 204) => return Some(i),
            Ok(answer) => refused(i, &answer),
            Err(_) => {}
        }
        self.move_on(nodes.len()).await;
        if !self.rounds {
            tokio::time::sleep(self.pause).await;
        }
        None
    }

    /// Repeats write `seq` until one of `nodes` acknowledges it; returns
    /// that node's index.
    pub async fn write(
        &mut self,
        nodes: &[impl Target],
        seq: u64,
        mut refused: impl FnMut(usize, &reqwest::Response),
    ) -> usize {
        if self.rounds {
            self.turn = 0;
        }
        let deadline = self.patience.map(|patience| (Instant::now() + patience, patience));
        loop {
            if let Some(i) = self.attempt(nodes, seq, &mut refused).await {
                return i;
            }
            if let Some((deadline, patience)) = deadline {
                assert!(Instant::now() < deadline, "no node took write {seq} of {} within {patience:?}", self.path);
            }
        }
    }

    /// Moves the turn to the next node; in rounds, pauses once all had theirs.
    async fn move_on(&mut self, nodes: usize) {
        self.turn += 1;
        if self.rounds && self.turn.is_multiple_of(nodes) {
            tokio::time::sleep(self.pause).await;
        }
    }
}
