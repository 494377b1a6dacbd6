//! Voter clusters on loopback: ports, WAL directories and config files.

use super::Node;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
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
    pub dir: tempfile::TempDir,
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
    /// Each voter's admin plane (`server.admin_listen`), when set.
    pub admin: Option<Vec<u16>>,
}

impl Layout {
    pub fn new(voters: usize, cluster_id: &str, group_count: u32, planes: Planes) -> Layout {
        let client: Vec<u16> = (0..voters).map(|_| free_port()).collect();
        let raft = match planes {
            Planes::Shared => client.clone(),
            Planes::Separate => (0..voters).map(|_| free_port()).collect(),
        };
        let dir = tempfile::tempdir().expect("tempdir");
        Layout {
            dir,
            cluster_id: cluster_id.into(),
            group_count,
            planes,
            client,
            raft,
            raft_extra: String::new(),
            sections: String::new(),
            admin: None,
        }
    }

    pub fn voters(&self) -> usize {
        self.client.len()
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
        Node::spawn(&self.args(i), None)
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
