//! How fast a group notices a lost leader (`[raft]` timing keys), and how
//! leaderships are spread over the voters (`[governance.leadership_balance]`,
//! spec/07).

use std::time::Duration;

use super::ConfigError;
use super::cold::duration;
use super::file::{LeadershipBalanceSection, RaftSection};

/// openraft's timers for every group of the node. Chosen for a LAN: a
/// follower that hears nothing for `election_timeout_min..max` campaigns
/// (after a pre-vote), and its peers grant votes once they have not heard
/// the old leader for `election_timeout_max` (openraft's leader lease), so
/// writes resume about a second after a leader dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    pub heartbeat_interval: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
}

impl RaftTiming {
    pub const DEFAULT: RaftTiming = RaftTiming {
        heartbeat_interval: Duration::from_millis(100),
        election_timeout_min: Duration::from_millis(400),
        election_timeout_max: Duration::from_millis(800),
    };
}

/// `[governance.leadership_balance]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeadershipBalance {
    pub enabled: bool,
    /// Between two balancer ticks.
    pub interval: Duration,
    /// How long a peer's leadership-shed state may take to arrive.
    pub peer_timeout: Duration,
    /// Leaderships one tick moves off this node.
    pub max_per_tick: usize,
}

impl LeadershipBalance {
    pub const DEFAULT: LeadershipBalance = LeadershipBalance {
        enabled: true,
        interval: Duration::from_secs(1),
        peer_timeout: Duration::from_millis(500),
        max_per_tick: 4,
    };
}

pub(super) fn timing(raft: &RaftSection) -> Result<RaftTiming, ConfigError> {
    let d = RaftTiming::DEFAULT;
    let heartbeat_interval =
        duration("raft.heartbeat_interval", raft.heartbeat_interval.clone(), d.heartbeat_interval)?;
    let min = duration("raft.election_timeout_min", raft.election_timeout_min.clone(), d.election_timeout_min)?;
    let max = duration("raft.election_timeout_max", raft.election_timeout_max.clone(), d.election_timeout_max)?;
    let refuse = |key, message: &str| Err(ConfigError::Refused { key, message: message.to_string() });
    if heartbeat_interval.is_zero() {
        return refuse("raft.heartbeat_interval", "must be non-zero");
    }
    if min <= heartbeat_interval {
        return refuse("raft.election_timeout_min", "must be longer than raft.heartbeat_interval");
    }
    if max <= min {
        return refuse("raft.election_timeout_max", "must be longer than raft.election_timeout_min");
    }
    Ok(RaftTiming { heartbeat_interval, election_timeout_min: min, election_timeout_max: max })
}

pub(super) fn balance(section: LeadershipBalanceSection) -> Result<LeadershipBalance, ConfigError> {
    let d = LeadershipBalance::DEFAULT;
    let interval = duration("governance.leadership_balance.interval", section.interval, d.interval)?;
    let peer_timeout = duration("governance.leadership_balance.peer_timeout", section.peer_timeout, d.peer_timeout)?;
    let refuse = |key, message: &str| Err(ConfigError::Refused { key, message: message.to_string() });
    if interval.is_zero() {
        return refuse("governance.leadership_balance.interval", "must be non-zero");
    }
    if peer_timeout.is_zero() {
        return refuse("governance.leadership_balance.peer_timeout", "must be non-zero");
    }
    let max_per_tick = section.max_per_tick.unwrap_or(d.max_per_tick);
    if max_per_tick == 0 {
        return refuse("governance.leadership_balance.max_per_tick", "must be at least 1");
    }
    Ok(LeadershipBalance { enabled: section.enabled.unwrap_or(true), interval, peer_timeout, max_per_tick })
}
