//! The Raft network of a node without peers. A single-voter group never
//! sends an RPC; should openraft try (a membership naming another node),
//! the peer is reported unreachable. A cluster uses the gRPC transport of
//! `grpc` instead.

use openraft::BasicNode;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};

use super::types::{NodeId, TypeConfig};

#[derive(Clone, Copy, Default)]
pub struct NoPeers;

type Rpc<T, E = openraft::error::Infallible> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

fn unreachable<E: std::error::Error>() -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other("this node has no Raft peers")))
}

impl RaftNetworkFactory<TypeConfig> for NoPeers {
    type Network = NoPeers;

    async fn new_client(&mut self, _target: NodeId, _node: &BasicNode) -> NoPeers {
        NoPeers
    }
}

impl RaftNetwork<TypeConfig> for NoPeers {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>> {
        Err(unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        Err(unreachable())
    }

    async fn vote(&mut self, _rpc: VoteRequest<NodeId>, _option: RPCOption) -> Rpc<VoteResponse<NodeId>> {
        Err(unreachable())
    }
}
