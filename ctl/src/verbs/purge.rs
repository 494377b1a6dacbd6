//! `purge-bucket BUCKET` (spec/35 "Tenant offboarding"): asks one voter to
//! erase the bucket cluster-wide, repeats the request while a group has
//! no leader (`503`; the purge is idempotent), and prints the report. It
//! succeeds only with the proof: `cold_gc_complete`, no pending entries,
//! `bucket_prefix_absent` and no error.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::client::Cluster;
use crate::error::{CtlError, Result};
use crate::progress::Progress;

/// The first node of the manifest whose metrics answer.
async fn first_answering(cluster: &Cluster) -> Result<u64> {
    let mut last = None;
    for id in cluster.manifest.ids() {
        match cluster.metrics(id).await {
            Ok(_) => return Ok(id),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| CtlError::Config("the manifest lists no nodes".into())))
}

pub fn proven(report: &Value) -> bool {
    report["cold_gc_complete"] == Value::Bool(true)
        && report["cold_gc_pending_entries"].as_u64() == Some(0)
        && report["bucket_prefix_absent"] == Value::Bool(true)
        && report["cold_gc_error"].is_null()
}

pub async fn run(cluster: &Cluster, bucket: &str, node: Option<u64>, timeout: Duration) -> Result<()> {
    let node = match node {
        Some(id) => {
            cluster.manifest.node(id)?;
            id
        }
        None => first_answering(cluster).await?,
    };
    let progress = Progress::new();
    let deadline = Instant::now() + timeout;
    let path = format!("/__ursula/purge/{bucket}");
    loop {
        let answer = cluster.mutate(node, Method::DELETE, &path).await?;
        match answer.status {
            StatusCode::OK => {
                progress.done();
                println!("{}", answer.body);
                if proven(&answer.body) {
                    return Ok(());
                }
                return Err(CtlError::Abort(format!(
                    "bucket {bucket} is fenced and its streams are gone, but the erasure is not proven yet \
                     (cold_gc_error {}); run purge-bucket again",
                    answer.body["cold_gc_error"]
                )));
            }
            StatusCode::SERVICE_UNAVAILABLE if Instant::now() < deadline => {
                progress.say(&format!("purge {bucket}: {} from node {node}; retrying", answer.code()));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                progress.done();
                return Err(CtlError::Abort(format!(
                    "purge of {bucket}: still {} after {}s; the groups purged so far stay purged: run it again",
                    answer.code(),
                    timeout.as_secs()
                )));
            }
            status => {
                progress.done();
                return Err(CtlError::Refused(format!("DELETE {path} on node {node}: {status} {}", answer.code())));
            }
        }
    }
}
