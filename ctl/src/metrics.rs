//! The fields of `/__ursula/metrics` this tool reads (spec/35 "Metrics"),
//! typed; everything else in the snapshot is ignored.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeMetrics {
    #[serde(default)]
    pub process_incarnation: Option<String>,
    #[serde(default)]
    pub raft_groups: Vec<GroupMetrics>,
    /// `none`, `maintenance-drain` or `shutdown`.
    #[serde(default)]
    pub leadership_shed: Option<String>,
    #[serde(default)]
    pub raft_maintenance: Option<Maintenance>,
    /// Groups waiting at this node's crash-recovery gate (spec/35).
    #[serde(default, deserialize_with = "closed_gates")]
    pub recovery_gates: Vec<u32>,
}

/// `recovery_gates` is `{"closed": [...], "stalled": [...]}`; a node of an
/// earlier build sent the closed groups as a bare list.
fn closed_gates<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Gates {
        Closed(Vec<u32>),
        Report { closed: Vec<u32> },
    }
    Ok(match Gates::deserialize(d)? {
        Gates::Closed(closed) | Gates::Report { closed } => closed,
    })
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GroupMetrics {
    pub raft_group_id: u32,
    #[serde(default)]
    pub current_leader: Option<u64>,
    #[serde(default)]
    pub current_term: u64,
    #[serde(default)]
    pub committed_index: Option<u64>,
    #[serde(default)]
    pub last_applied_index: u64,
    #[serde(default)]
    pub voters: Vec<u64>,
    #[serde(default)]
    pub learners: Vec<u64>,
    // What spec/35's recovery runbook reads.
    #[serde(default)]
    pub recovery_gate: Option<String>,
    #[serde(default)]
    pub last_log_term: Option<u64>,
    #[serde(default)]
    pub last_log_index: Option<u64>,
    #[serde(default)]
    pub committed_term: Option<u64>,
    #[serde(default)]
    pub committed_node: Option<u64>,
    /// The recovery plan the replica holds, if any.
    #[serde(default)]
    pub recovery: Option<serde_json::Value>,
    #[serde(default)]
    pub leads_live: bool,
    #[serde(default)]
    pub voter_configs: Vec<Vec<u64>>,
    #[serde(default)]
    pub committed_voter_configs: Vec<Vec<u64>>,
    #[serde(default)]
    pub maintenance: Option<GroupRunning>,
    #[serde(default)]
    pub history: Option<History>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GroupRunning {
    #[serde(default)]
    pub running: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct History {
    #[serde(default)]
    pub event_index: Option<u64>,
}

impl GroupMetrics {
    /// Whether the group runs on the replica (no failed apply stopped it).
    pub fn running(&self) -> bool {
        self.maintenance.as_ref().is_none_or(|m| m.running)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Maintenance {
    #[serde(default)]
    pub node_issues: Vec<String>,
    #[serde(default)]
    pub group_issues: Vec<GroupIssue>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct GroupIssue {
    pub raft_group_id: u32,
    pub issue: String,
}

impl NodeMetrics {
    pub fn group(&self, group: u32) -> Option<&GroupMetrics> {
        self.raft_groups.iter().find(|g| g.raft_group_id == group)
    }

    /// The groups this node says it leads.
    pub fn led_by(&self, node: u64) -> Vec<u32> {
        self.raft_groups.iter().filter(|g| g.current_leader == Some(node)).map(|g| g.raft_group_id).collect()
    }

    /// Whether the node takes leaderships (not drained, not stopping).
    pub fn accepts_leadership(&self) -> bool {
        self.leadership_shed.as_deref().is_none_or(|s| s == "none")
    }
}
