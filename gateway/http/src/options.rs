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

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub json_reads: JsonReads,
    /// `Ursula-Cluster-Id`: names the deployment (extensions §10).
    pub cluster_id: String,
    /// Worker threads serving connections (`runtime.core_count`).
    pub workers: usize,
    pub cors: Cors,
    /// The largest request body taken (and advertised on `HEAD`): the
    /// protocol's 32 MiB, or a gateway's `--max-request-body-bytes`.
    pub max_request_bytes: u64,
    /// Header-read and idle timeouts of every client connection.
    pub connections: crate::connection::ConnectionLimits,
}

impl HttpOptions {
    /// The largest request body taken (and advertised on `HEAD`).
    pub fn request_limit(&self) -> u64 {
        self.max_request_bytes
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
    pub fn allow(&self, origin: Option<&str>) -> Option<http::HeaderValue> {
        match self {
            Cors::AnyOrigin => Some(http::HeaderValue::from_static("*")),
            Cors::Origins(list) => {
                origin.filter(|o| list.iter().any(|l| l == o)).and_then(|o| http::HeaderValue::from_str(o).ok())
            }
            Cors::Off => None,
        }
    }
}

/// A duration as the config file and the flags write it: `30s`, `250ms`,
/// `2m`, `1h`, or bare seconds.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    use std::time::Duration;
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    match unit {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5h"), Some(Duration::from_secs(5 * 3600)));
        assert_eq!(parse_duration("5d"), None);
    }
}
