//! `pin-incarnations`: the manifest again, each node carrying the process
//! it runs now as `expected_process_incarnation`, so later invocations
//! act on exactly these processes (spec/34 "Process identity").

use crate::client::Cluster;
use crate::error::{CtlError, Result};

pub async fn run(cluster: &Cluster, replace: Option<u64>) -> Result<()> {
    if let Some(id) = replace {
        cluster.manifest.node(id)?;
        cluster.unpin(id);
    }
    let mut manifest = cluster.manifest.clone();
    for node in &mut manifest.nodes {
        let metrics = cluster.metrics(node.id).await?;
        let seen = metrics.process_incarnation.ok_or_else(|| {
            CtlError::Transport(format!("node {} reports no process_incarnation: it cannot be pinned", node.id))
        })?;
        node.expected_process_incarnation = Some(seen);
    }
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| CtlError::Config(e.to_string()))?;
    println!("{text}");
    Ok(())
}
