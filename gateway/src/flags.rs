//! The flags of `ursula gateway` (spec/44 and the 0.8 release notes), and
//! their checks into a `GatewayConfig`.

use std::time::Duration;

use crate::auth::AuthSettings;

use clap::Args;
use ursula_http::{ConnectionLimits, Cors, JsonReads};

use crate::GatewayConfig;
use crate::immutable_cache::CacheOptions;
use crate::uploads::{DEFAULT_SMALL_BODY_HEADROOM_BYTES, DEFAULT_SMALL_BODY_MAX_BYTES, UploadLimits};

#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// A voter's client plane, e.g. `http://10.0.0.1:4437`; one per voter.
    #[arg(long = "upstream", required = true)]
    pub upstreams: Vec<String>,
    /// Check the flags and the policy files they name as a start would,
    /// print the effective settings and exit: 0, or 2 with the refusal.
    #[arg(long)]
    pub check: bool,
    /// Where clients connect; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:4437")]
    pub listen: String,
    /// How JSON streams are read back: ndjson (the spec) or array (older clients).
    #[arg(long, value_name = "ndjson|array", default_value = "ndjson")]
    pub json_reads: String,
    /// Bytes of immutable answers (full chunks, closed tails, snapshots)
    /// kept and served without asking a voter; 0 turns the cache off.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub immutable_cache_bytes: u64,
    /// `Cache-Control` for marked immutable answers, for a CDN in front
    /// (e.g. "public, max-age=31536000, immutable"); else `no-store`.
    #[arg(long)]
    pub immutable_cache_control: Option<String>,
    /// Sent as `Stream-Read-Origin` on HEAD answers (extensions §4.4).
    #[arg(long)]
    pub read_origin: Option<String>,
    /// An origin browsers may read from (repeatable), or `*`; none: no CORS headers.
    #[arg(long = "cors-allowed-origin")]
    pub cors_allowed_origins: Vec<String>,
    /// The largest request body taken, at most the protocol's 32 MiB.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    pub max_request_body_bytes: u64,
    /// Request body bytes buffered at once across requests; unset: 256 MiB
    /// or the request limit plus the small-body headroom, the larger.
    #[arg(long)]
    pub body_budget_bytes: Option<u64>,
    /// Bodies up to this size may use the headroom; a body without a
    /// length reserves this much at first.
    #[arg(long, default_value_t = DEFAULT_SMALL_BODY_MAX_BYTES)]
    pub small_body_max_bytes: u64,
    /// Budget kept for small bodies, so they never wait behind large uploads.
    #[arg(long, default_value_t = DEFAULT_SMALL_BODY_HEADROOM_BYTES)]
    pub small_body_headroom_bytes: u64,
    /// How long a body waits for budget before `503 UPLOAD_BUDGET_EXHAUSTED`.
    #[arg(long, default_value_t = 1000)]
    pub body_budget_wait_ms: u64,
    /// A body with no byte for this long (or below the minimum rate over
    /// one such window) is cut with `408 BODY_TOO_SLOW`, e.g. `30s`.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub body_stall_timeout: Duration,
    /// The slowest body rate taken over one stall window.
    #[arg(long, default_value_t = 1024)]
    pub body_min_bytes_per_sec: u64,
    /// How long a request head may take to arrive after the accept or the
    /// previous answer before the connection is closed (slow clients; an
    /// HTTP/1.1 keep-alive connection idles no longer), e.g. `10s`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// How long an HTTP/2 connection may stay open with no request in
    /// flight; a live read (SSE, long-poll) is never idle.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Access control (spec/08): the OAuth issuer whose RFC 9068 access
    /// tokens are accepted. With `--auth-audience` and `--auth-policy`.
    #[arg(long)]
    pub auth_issuer: Option<String>,
    /// The audience (`aud`) a token must name.
    #[arg(long)]
    pub auth_audience: Option<String>,
    /// The bucket policy file (TOML; see `policies/access.toml`).
    #[arg(long)]
    pub auth_policy: Option<std::path::PathBuf>,
    /// The issuer's JWKS; else found by RFC 8414 metadata discovery.
    #[arg(long)]
    pub auth_jwks_url: Option<String>,
    /// Serve the gateway's metrics to anyone while access control is on.
    #[arg(long)]
    pub auth_public_metrics: bool,
    /// Tenant quotas (TOML; see `policies/quotas.toml`), with or without
    /// access control.
    #[arg(long)]
    pub quota_policy: Option<std::path::PathBuf>,
    /// The usage log: one JSON line per window of per-tenant counts.
    #[arg(long)]
    pub usage_log: Option<std::path::PathBuf>,
    /// Seconds per usage window (at least 1).
    #[arg(long, default_value_t = 30)]
    pub usage_flush_secs: u64,
    /// Count appends in units of this many bytes (`chunks`, at least one per append).
    #[arg(long)]
    pub usage_chunk_bytes: Option<u64>,
    /// How old the issuer's key set may grow before it is fetched again.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub auth_jwks_max_age: Duration,
    /// The least time between two key fetches caused by unknown `kid`s.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub auth_jwks_retry_gap: Duration,
    /// How long a connection to a voter may take to open, e.g. `2s`.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// How long a voter may take to send an answer's headers before the
    /// request answers `504 UPSTREAM_TIMEOUT` (the voter stays in use).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub response_header_timeout: Duration,
    /// On Linux, a connection to a voter with data unacknowledged this
    /// long is given up (`TCP_USER_TIMEOUT`); idle ones are probed after
    /// 2/5 of it and then every 1/5, each at least 1 s. At least `1s`.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub upstream_tcp_user_timeout: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    ursula_http::options::parse_duration(text).ok_or_else(|| format!("{text:?} is not a duration like 30s or 500ms"))
}

/// `http(s)://host[:port]` and nothing more: what a voter's client plane
/// (`--upstream`) and a browser's `Origin` (RFC 6454) look like.
fn is_base_url(text: &str) -> bool {
    let trimmed = text.trim_end_matches('/');
    trimmed.parse::<http::Uri>().is_ok_and(|u| {
        matches!(u.scheme_str(), Some("http" | "https"))
            && u.host().is_some_and(|h| !h.is_empty())
            && matches!(u.path(), "" | "/")
            && u.query().is_none()
            && !trimmed.contains('@')
    })
}

/// A CORS origin is `*` or a base URL; anything else would never match.
fn check_origin(origin: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        origin == "*" || is_base_url(origin),
        "--cors-allowed-origin {origin:?} must be * or scheme://host[:port], e.g. https://app.example.com"
    );
    Ok(())
}

/// An upstream is a voter's client plane.
fn check_upstream(url: &str) -> anyhow::Result<()> {
    anyhow::ensure!(is_base_url(url), "--upstream {url:?} must be http(s)://host[:port], a voter's client plane");
    Ok(())
}

/// `--auth-*`: the issuer, audience and policy go together, or none is set.
fn auth_settings(args: &GatewayArgs) -> anyhow::Result<Option<AuthSettings>> {
    let (issuer, audience, policy) = (&args.auth_issuer, &args.auth_audience, &args.auth_policy);
    if issuer.is_none() && audience.is_none() && policy.is_none() {
        anyhow::ensure!(
            args.auth_jwks_url.is_none() && !args.auth_public_metrics,
            "--auth-jwks-url and --auth-public-metrics need access control: add --auth-issuer, --auth-audience and --auth-policy"
        );
        return Ok(None);
    }
    let missing: Vec<&str> = [
        ("--auth-issuer", issuer.is_none()),
        ("--auth-audience", audience.is_none()),
        ("--auth-policy", policy.is_none()),
    ]
    .into_iter()
    .filter_map(|(flag, absent)| absent.then_some(flag))
    .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "--auth-issuer, --auth-audience and --auth-policy go together: missing {}",
        missing.join(", ")
    );
    let (Some(issuer), Some(audience), Some(policy)) = (issuer.clone(), audience.clone(), policy.clone()) else {
        anyhow::bail!("access control needs --auth-issuer, --auth-audience and --auth-policy");
    };
    for (flag, url) in [("--auth-issuer", Some(&issuer)), ("--auth-jwks-url", args.auth_jwks_url.as_ref())] {
        let Some(url) = url else { continue };
        anyhow::ensure!(
            url.starts_with("https://") || url.starts_with("http://"),
            "{flag} {url:?} must be an http(s) URL"
        );
    }
    anyhow::ensure!(!audience.is_empty(), "--auth-audience must not be empty");
    // Refuse a bad policy now, with the problem named, rather than serve.
    crate::auth::policy::Policy::load(&policy)?;
    Ok(Some(AuthSettings {
        issuer,
        audience,
        policy,
        jwks_url: args.auth_jwks_url.clone(),
        public_metrics: args.auth_public_metrics,
        refresh: crate::auth::keys::Refresh {
            max_age: args.auth_jwks_max_age,
            unknown_kid_gap: args.auth_jwks_retry_gap,
        },
    }))
}

impl GatewayArgs {
    /// The checked settings; an error is the one line the binary prints
    /// before it exits with status 2.
    pub fn config(self) -> anyhow::Result<GatewayConfig> {
        let Some(json_reads) = JsonReads::parse(&self.json_reads) else {
            anyhow::bail!("--json-reads must be ndjson or array, not {:?}", self.json_reads);
        };
        for origin in &self.cors_allowed_origins {
            check_origin(origin)?;
        }
        for url in &self.upstreams {
            check_upstream(url)?;
        }
        let uploads = UploadLimits::new(
            self.max_request_body_bytes,
            self.body_budget_bytes,
            self.small_body_max_bytes,
            self.small_body_headroom_bytes,
            Duration::from_millis(self.body_budget_wait_ms),
            self.body_stall_timeout,
            self.body_min_bytes_per_sec,
        )?;
        let auth = auth_settings(&self)?;
        if let Some(path) = &self.quota_policy {
            // Refuse a bad policy now, with the problem named.
            crate::quotas::QuotaPolicy::load(path)?;
        }
        anyhow::ensure!(self.usage_flush_secs >= 1, "--usage-flush-secs must be at least 1");
        anyhow::ensure!(
            self.upstream_tcp_user_timeout >= Duration::from_secs(1),
            "--upstream-tcp-user-timeout must be at least 1s"
        );
        anyhow::ensure!(!self.connect_timeout.is_zero(), "--connect-timeout must be more than 0");
        anyhow::ensure!(!self.response_header_timeout.is_zero(), "--response-header-timeout must be more than 0");
        anyhow::ensure!(self.usage_chunk_bytes != Some(0), "--usage-chunk-bytes must be at least 1");
        anyhow::ensure!(
            self.usage_log.is_some() || self.usage_chunk_bytes.is_none(),
            "--usage-chunk-bytes needs --usage-log"
        );
        let usage = self.usage_log.clone().map(|path| crate::UsageSettings {
            path,
            flush: Duration::from_secs(self.usage_flush_secs),
            chunk_bytes: self.usage_chunk_bytes,
        });
        let config = GatewayConfig {
            usage,
            auth,
            quota_policy: self.quota_policy,
            upstreams: self.upstreams,
            upstream_timeouts: crate::upstream::UpstreamTimeouts {
                connect: self.connect_timeout,
                response_headers: self.response_header_timeout,
                tcp_user: self.upstream_tcp_user_timeout,
            },
            listen: self.listen,
            json_reads,
            workers: connection_workers(std::thread::available_parallelism().map_or(1, |n| n.get())),
            cache: CacheOptions {
                max_bytes: self.immutable_cache_bytes,
                cache_control: self.immutable_cache_control,
                read_origin: self.read_origin,
            },
            cors: Cors::from_flags(&self.cors_allowed_origins),
            max_request_bytes: self.max_request_body_bytes,
            uploads,
            connections: ConnectionLimits {
                header_read_timeout: self.header_read_timeout,
                idle_timeout: self.idle_timeout,
            },
        };
        config.validate()?;
        Ok(config)
    }
}

/// Threads serving client connections on a host with `cpus`: one fewer than
/// its CPUs, which leaves one to the main runtime, where most of the
/// upstream side runs (append batchers, the other calls to the voters,
/// probes; each lane reads bulk bytes on connections of its own). On two
/// CPUs one lane gave 1.12-1.14x the appends of two at 32 writers, in A/Bs
/// in one run.
fn connection_workers(cpus: usize) -> usize {
    cpus.saturating_sub(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::{check_origin, check_upstream, connection_workers};

    #[test]
    fn cors_origins_are_checked_at_start() {
        for good in ["*", "https://app.example.com", "http://localhost:5173", "https://app.example.com/"] {
            assert!(check_origin(good).is_ok(), "{good}");
        }
        for bad in ["app.example.com", "https://", "https://app.example.com/path", "ftp://x", "https://u@x", "**"] {
            assert!(check_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn upstream_urls_are_checked_at_start() {
        for good in ["http://10.0.0.1:4437", "https://voter-1.internal", "http://127.0.0.1:4437/"] {
            assert!(check_upstream(good).is_ok(), "{good}");
        }
        for bad in ["notaurl", "10.0.0.1:4437", "ftp://host", "http://", "http://host/path", "http://host?x=1"] {
            assert!(check_upstream(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_cpu_is_left_to_the_upstream_side() {
        assert_eq!([1, 2, 4, 8].map(connection_workers), [1, 1, 3, 7]);
    }
}
