//! Settings of the HTTP layer.

/// How a JSON stream is read back (issue #2: the spec and today's clients disagree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonReads {
    /// The spec's form: `application/x-ndjson`, one message per line
    /// (base protocol §7.1, extensions §9.4).
    #[default]
    Ndjson,
    /// The older form of conformance suite 0.3.6 and the 0.2 clients:
    /// `application/json` and a JSON array of the messages.
    Array,
}

impl JsonReads {
    pub fn parse(s: &str) -> Option<JsonReads> {
        match s {
            "ndjson" => Some(JsonReads::Ndjson),
            "array" => Some(JsonReads::Array),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    pub json_reads: JsonReads,
    /// `Ursula-Cluster-Id`: names the deployment (extensions §10).
    pub cluster_id: String,
    /// Worker threads serving connections (`runtime.core_count`).
    pub workers: usize,
    /// The gateway's immutable-read cache; `None` on a node.
    pub immutable_cache: Option<CacheOptions>,
}

/// `ursula gateway --immutable-cache-bytes ...` (spec/44, extensions §4.4).
#[derive(Debug, Clone, Default)]
pub struct CacheOptions {
    /// Bytes of answers kept (bodies and headers); 0 keeps none.
    pub max_bytes: u64,
    /// Replaces `Cache-Control` on marked answers, for a CDN in front.
    pub cache_control: Option<String>,
    /// Sent as `Stream-Read-Origin` on `HEAD` answers of streams.
    pub read_origin: Option<String>,
}
