//! The calls on a peer outside openraft's network: the per-group bootstrap
//! probe, read barriers, forwarded commands and the leadership-shed state.

use ursula_proto::raft::v1 as pb;

use super::grpc_client::{BARRIER_WAIT, FORWARD_WAIT, PROBE_WAIT, Peers};
use super::peer_error::PeerError;
use super::types::NodeId;

impl Peers {
    /// What peer `node` holds of `group` (the per-group bootstrap).
    pub async fn probe(&self, node: NodeId, group: u32) -> Result<pb::GroupHolding, PeerError> {
        use pb::probe_group_reply::Result as R;
        let request = pb::ProbeGroupRequest { preamble: Some(self.preamble(group)) };
        let (url, reply) = self.ask(node, PROBE_WAIT, |mut c| async move { c.probe_group(request).await }).await?;
        match reply.result {
            Some(R::Holding(h)) => Ok(h),
            Some(R::Refusal(r)) => Err(self.refused_by(url, &r)),
            None => Err(PeerError::Empty { url: url.to_owned() }),
        }
    }

    /// Asks `leader` for a read barrier of `group`: the log index to apply
    /// before a local read is as fresh as a leader read.
    pub async fn read_barrier(&self, leader: NodeId, group: u32) -> Result<u64, PeerError> {
        use pb::read_barrier_reply::Result as R;
        let request = ursula_http::telemetry::traced(pb::ReadBarrierRequest { preamble: Some(self.preamble(group)) });
        let (url, reply) = self.ask(leader, BARRIER_WAIT, |mut c| async move { c.read_barrier(request).await }).await?;
        match reply.result {
            Some(R::Index(index)) => Ok(index),
            Some(R::NotLeader(_)) => Err(PeerError::NotLeader { url: url.to_owned(), group }),
            Some(R::Refusal(r)) => Err(self.refused_by(url, &r)),
            None => Err(PeerError::Empty { url: url.to_owned() }),
        }
    }

    /// Has `leader` propose `command` in `group`: what it counted.
    pub async fn forward(
        &self,
        leader: NodeId,
        group: u32,
        command: &ursula_stream::Command,
    ) -> Result<u64, PeerError> {
        use pb::forward_command_reply::Result as R;
        match self.forward_command(leader, group, command).await? {
            (_, R::Count(count)) => Ok(count),
            (url, _) => Err(PeerError::Empty { url }),
        }
    }

    /// Has `leader` apply a fork step in `group` and answer its outcome.
    pub async fn forward_fork_step(
        &self,
        leader: NodeId,
        group: u32,
        command: &ursula_stream::Command,
    ) -> Result<ursula_stream::ForkStep, PeerError> {
        use pb::forward_command_reply::Result as R;
        match self.forward_command(leader, group, command).await? {
            (url, R::ForkStep(step)) => ursula_http::wire::decode("a fork step", &step)
                .map_err(|e| PeerError::Malformed { url, detail: e.to_string() }),
            (url, _) => Err(PeerError::Empty { url }),
        }
    }

    /// `ForwardCommand` to `leader`: the answer's value with the peer's
    /// URL; a leader that moved, a refusal or no answer is an error.
    async fn forward_command(
        &self,
        leader: NodeId,
        group: u32,
        command: &ursula_stream::Command,
    ) -> Result<(String, pb::forward_command_reply::Result), PeerError> {
        use pb::forward_command_reply::Result as R;
        let bytes = super::codec::encode_command(command)?;
        let request = ursula_http::telemetry::traced(pb::ForwardCommandRequest {
            preamble: Some(self.preamble(group)),
            command: bytes.to_vec(),
        });
        let (url, reply) =
            self.ask(leader, FORWARD_WAIT, |mut c| async move { c.forward_command(request).await }).await?;
        match reply.result {
            Some(R::NotLeader(_)) => Err(PeerError::NotLeader { url: url.to_owned(), group }),
            Some(R::Refusal(r)) => Err(self.refused_by(url, &r)),
            None => Err(PeerError::Empty { url: url.to_owned() }),
            Some(value) => Ok((url.to_owned(), value)),
        }
    }

    /// Whether peer `node` may take leaderships now; of `group`, when named.
    pub async fn shed_state(
        &self,
        node: NodeId,
        group: Option<u32>,
        wait: std::time::Duration,
    ) -> Result<pb::ShedState, PeerError> {
        use pb::leadership_shed_reply::Result as R;
        let request =
            pb::LeadershipShedRequest { preamble: Some(self.preamble(group.unwrap_or(0))), for_group: group.is_some() };
        let (url, reply) = self.ask(node, wait, |mut c| async move { c.leadership_shed(request).await }).await?;
        match reply.result {
            Some(R::State(state)) => Ok(state),
            Some(R::Refusal(r)) => Err(self.refused_by(url, &r)),
            None => Err(PeerError::Empty { url: url.to_owned() }),
        }
    }
}
