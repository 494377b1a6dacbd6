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
    pub cors: Cors,
    /// A gateway's `--max-request-body-bytes`; else the protocol's 32 MiB.
    pub max_request_bytes: Option<u64>,
    /// A gateway's body budget and slow-body rules; a node has none.
    pub uploads: Option<crate::uploads::UploadLimits>,
}

impl HttpOptions {
    /// The largest request body taken (and advertised on `HEAD`).
    pub fn request_limit(&self) -> u64 {
        self.max_request_bytes.unwrap_or(crate::limits::MAX_REQUEST_BYTES)
    }
}

/// Which origins may read cross-origin (spec/08-security.md, "Cross-origin
/// reads"). Credentials are never allowed, whatever the policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Cors {
    /// `Access-Control-Allow-Origin: *` (a node, and `--cors-allowed-origin '*'`).
    #[default]
    AnyOrigin,
    /// Only these origins, echoed back with `Vary: Origin`.
    Origins(Vec<String>),
    /// Nothing is sent: a gateway without `--cors-allowed-origin`.
    Off,
}

impl Cors {
    /// The policy of `--cors-allowed-origin` values (repeatable, or `*`).
    pub fn from_flags(origins: &[String]) -> Cors {
        if origins.is_empty() {
            Cors::Off
        } else if origins.iter().any(|o| o == "*") {
            Cors::AnyOrigin
        } else {
            Cors::Origins(origins.iter().map(|o| o.trim_end_matches('/').to_string()).collect())
        }
    }

    /// The `Access-Control-Allow-Origin` for a request from `origin`.
    pub fn allow(&self, origin: Option<&str>) -> Option<String> {
        match self {
            Cors::AnyOrigin => Some("*".into()),
            Cors::Origins(list) => origin.filter(|o| list.iter().any(|l| l == o)).map(str::to_string),
            Cors::Off => None,
        }
    }
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
