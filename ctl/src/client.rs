//! Talking to the nodes of a manifest over HTTP: metrics and readiness
//! from each node's metrics address, mutations on its admin plane. An
//! invocation pins the process it first observes on each node (or the one
//! a pinned manifest names) and stops when another answers: a plan made
//! against one process must not be carried out against its successor.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::error::{CtlError, Result};
use crate::manifest::{Manifest, NodeEntry};
use crate::metrics::NodeMetrics;

const INCARNATION_HEADER: &str = "x-ursula-process-incarnation";

pub struct Cluster {
    pub manifest: Manifest,
    http: reqwest::Client,
    pins: Mutex<HashMap<u64, String>>,
}

/// A node's answer to a mutation: its status and JSON body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// The `error.code` of a refusal.
    pub fn code(&self) -> &str {
        self.body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
    }
}

impl Cluster {
    pub fn new(manifest: Manifest, timeout: Duration) -> Result<Cluster> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .build()
            .map_err(|e| CtlError::Config(format!("building the HTTP client: {e}")))?;
        let pins = Mutex::new(Self::manifest_pins(&manifest));
        Ok(Cluster { manifest, http, pins })
    }

    /// The processes a pinned manifest names (`expected_process_incarnation`).
    fn manifest_pins(manifest: &Manifest) -> HashMap<u64, String> {
        manifest.nodes.iter().filter_map(|n| n.expected_process_incarnation.clone().map(|p| (n.id, p))).collect()
    }

    /// Forgets the processes this invocation pinned as it observed them,
    /// keeping the manifest's: a gate that polls (`wait-ready`) observes
    /// each node afresh, and only a manifest pin stops it (spec/34).
    pub fn repin_from_manifest(&self) {
        *self.pins.lock().unwrap_or_else(|e| e.into_inner()) = Self::manifest_pins(&self.manifest);
    }

    fn entry(&self, id: u64) -> Result<&NodeEntry> {
        self.manifest.node(id)
    }

    async fn get_json(&self, url: &str) -> Result<(StatusCode, Value)> {
        let answer = self.http.get(url).send().await.map_err(|e| CtlError::Transport(format!("GET {url}: {e}")))?;
        let status = answer.status();
        let bytes = answer.bytes().await.map_err(|e| CtlError::Transport(format!("GET {url}: {e}")))?;
        let body = serde_json::from_slice(&bytes)
            .map_err(|e| CtlError::Transport(format!("GET {url}: {status} with a body that is not JSON: {e}")))?;
        Ok((status, body))
    }

    /// Node `id`'s metrics; pins its process on the first answer.
    pub async fn metrics(&self, id: u64) -> Result<NodeMetrics> {
        let url = format!("{}/__ursula/metrics", self.entry(id)?.metrics_url());
        let (status, body) = self.get_json(&url).await?;
        if !status.is_success() {
            return Err(CtlError::Transport(format!("GET {url}: {status}")));
        }
        let metrics: NodeMetrics = serde_json::from_value(body)
            .map_err(|e| CtlError::Transport(format!("GET {url}: unexpected metrics: {e}")))?;
        if let Some(seen) = &metrics.process_incarnation {
            self.pin(id, seen)?;
        }
        Ok(metrics)
    }

    fn pin(&self, id: u64, seen: &str) -> Result<()> {
        let mut pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        match pins.get(&id) {
            Some(pinned) if pinned != seen => Err(CtlError::ProcessChanged(format!(
                "node {id} now runs process {seen}, not the pinned {pinned}: it restarted; observe again"
            ))),
            Some(_) => Ok(()),
            None => {
                pins.insert(id, seen.to_string());
                Ok(())
            }
        }
    }

    /// Forgets node `id`'s pinned process: for a verb that waits on a
    /// node's restart (`wait`), which observes whichever process answers.
    pub fn unpin(&self, id: u64) {
        self.pins.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    pub fn pinned(&self, id: u64) -> Option<String> {
        self.pins.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
    }

    /// Every node's metrics, asked at once; a node that fails is in the
    /// map with its error.
    pub async fn observe_all(&self) -> BTreeMap<u64, Result<NodeMetrics>> {
        let ids = self.manifest.ids();
        let answers = futures_util::future::join_all(ids.iter().map(|id| self.metrics(*id))).await;
        ids.into_iter().zip(answers).collect()
    }

    /// `/__ursula/ready` of node `id`: whether it serves, and its body.
    pub async fn ready(&self, id: u64) -> Result<(bool, Value)> {
        let url = format!("{}/__ursula/ready", self.entry(id)?.metrics_url());
        let (status, body) = self.get_json(&url).await?;
        Ok((status == StatusCode::OK, body))
    }

    /// A `GET` on node `id`'s admin plane: its status, headers and body.
    pub async fn admin_get(
        &self,
        id: u64,
        path: &str,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, bytes::Bytes)> {
        let url = format!("{}{path}", self.entry(id)?.admin_url());
        let answer = self.http.get(&url).send().await.map_err(|e| CtlError::Transport(format!("GET {url}: {e}")))?;
        let (status, headers) = (answer.status(), answer.headers().clone());
        let body = answer.bytes().await.map_err(|e| CtlError::Transport(format!("GET {url}: {e}")))?;
        Ok((status, headers, body))
    }

    /// A mutation on node `id`'s admin plane, under its pinned process.
    pub async fn mutate(&self, id: u64, method: Method, path: &str) -> Result<Answer> {
        self.mutate_with(id, method, path, None).await
    }

    /// A mutation that sends `body` with the named headers.
    pub async fn mutate_with(
        &self,
        id: u64,
        method: Method,
        path: &str,
        body: Option<(bytes::Bytes, &[(&str, String)])>,
    ) -> Result<Answer> {
        if self.pinned(id).is_none() {
            self.metrics(id).await?;
        }
        let incarnation =
            self.pinned(id).ok_or_else(|| CtlError::Transport(format!("node {id} reports no process_incarnation")))?;
        let url = format!("{}{path}", self.entry(id)?.admin_url());
        let mut request = self.http.request(method.clone(), &url).header(INCARNATION_HEADER, incarnation);
        if let Some((body, headers)) = body {
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            request = request.body(body);
        }
        let answer = request.send().await.map_err(|e| CtlError::Transport(format!("{method} {url}: {e}")))?;
        let status = answer.status();
        let bytes = answer.bytes().await.map_err(|e| CtlError::Transport(format!("{method} {url}: {e}")))?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let answer = Answer { status, body };
        match status {
            StatusCode::PRECONDITION_FAILED | StatusCode::PRECONDITION_REQUIRED => Err(CtlError::ProcessChanged(
                format!("{method} {url}: {status} {}: node {id} restarted since it was observed", answer.code()),
            )),
            _ => Ok(answer),
        }
    }
}
