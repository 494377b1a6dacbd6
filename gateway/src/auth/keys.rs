//! The issuer's signing keys (its JWKS), fetched with `reqwest` and held by
//! `kid`. The set is refreshed once it is `max_age` old; a token naming an
//! unknown `kid` triggers one refetch, single-flight and at most one per
//! `unknown_kid_gap`, so random `kid`s cannot make the gateway hammer the
//! issuer. A failed fetch keeps the last good set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// How often the key set is fetched, and how soon again for an unknown `kid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh {
    /// How old the key set may grow before it is fetched again (10 min).
    pub max_age: Duration,
    /// The least time between two fetches for unknown `kid`s (30 s).
    pub unknown_kid_gap: Duration,
}

impl Default for Refresh {
    fn default() -> Refresh {
        Refresh { max_age: Duration::from_secs(600), unknown_kid_gap: Duration::from_secs(30) }
    }
}
/// How long one request to the issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the key set is.
#[derive(Debug, Clone)]
pub enum KeyLocation {
    /// `--auth-jwks-url`.
    Jwks(String),
    /// RFC 8414 metadata discovery at the issuer.
    Issuer(String),
}

/// What a lookup of a `kid` found.
pub enum Lookup {
    Found(Arc<Jwk>),
    /// The issuer answered and has no such key.
    Unknown,
    /// No key set could be had (never fetched, or the issuer failed the
    /// fetch that looked for this `kid`).
    Unavailable,
}

#[derive(Default)]
struct Held {
    keys: HashMap<String, Arc<Jwk>>,
    /// When the held set was fetched; `None` before the first success.
    fetched: Option<Instant>,
    /// The last attempt, and whether it failed.
    attempted: Option<Instant>,
    failed: bool,
    /// The JWKS URL that discovery found.
    jwks_url: Option<String>,
}

pub struct KeySource {
    http: reqwest::Client,
    location: KeyLocation,
    refresh: Refresh,
    /// Held across a fetch: one fetch at a time, the others wait for it.
    held: Mutex<Held>,
    /// Fetches made, for the metrics.
    fetches: std::sync::atomic::AtomicU64,
}

impl KeySource {
    pub fn new(location: KeyLocation, refresh: Refresh) -> anyhow::Result<KeySource> {
        let http = reqwest::Client::builder().timeout(FETCH_TIMEOUT).build()?;
        Ok(KeySource { http, location, refresh, held: Mutex::new(Held::default()), fetches: Default::default() })
    }

    /// The key `kid`, fetching the set when it is stale, or when the `kid`
    /// is unknown and no fetch ran within `unknown_kid_gap`.
    pub async fn lookup(&self, kid: &str) -> Lookup {
        let mut held = self.held.lock().await;
        let now = Instant::now();
        let stale = held.fetched.is_none_or(|at| now.duration_since(at) >= self.refresh.max_age);
        let known = held.keys.contains_key(kid);
        let may_retry = held.attempted.is_none_or(|at| now.duration_since(at) >= self.refresh.unknown_kid_gap);
        if (stale && (may_retry || held.fetched.is_some())) || (!known && may_retry) {
            self.refresh(&mut held).await;
        }
        match held.keys.get(kid) {
            Some(key) => Lookup::Found(key.clone()),
            None if held.fetched.is_none() || held.failed => Lookup::Unavailable,
            None => Lookup::Unknown,
        }
    }

    /// Fetches the set; a failure keeps the held one.
    async fn refresh(&self, held: &mut Held) {
        held.attempted = Some(Instant::now());
        self.fetches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.fetch(held).await {
            Ok(keys) => {
                held.keys = keys;
                held.fetched = Some(Instant::now());
                held.failed = false;
            }
            Err(e) => {
                held.failed = true;
                tracing::warn!("fetching the issuer's signing keys failed; the last good set stays in use: {e:#}");
            }
        }
    }

    async fn fetch(&self, held: &mut Held) -> anyhow::Result<HashMap<String, Arc<Jwk>>> {
        let url = match (&self.location, &held.jwks_url) {
            (KeyLocation::Jwks(url), _) | (KeyLocation::Issuer(_), Some(url)) => url.clone(),
            (KeyLocation::Issuer(issuer), None) => {
                let url = self.discover(issuer).await?;
                held.jwks_url = Some(url.clone());
                url
            }
        };
        let answer = self.http.get(&url).send().await?.error_for_status()?;
        let set: JwkSet = serde_json::from_slice(&answer.bytes().await?)?;
        // A key without a `kid` cannot be chosen by a token: it is left out.
        Ok(set.keys.into_iter().filter_map(|k| Some((k.common.key_id.clone()?, Arc::new(k)))).collect())
    }

    /// RFC 8414 §3: the metadata of `issuer` names its `jwks_uri`.
    async fn discover(&self, issuer: &str) -> anyhow::Result<String> {
        #[derive(serde::Deserialize)]
        struct Metadata {
            issuer: String,
            jwks_uri: String,
        }
        let url = metadata_url(issuer)?;
        let answer = self.http.get(&url).send().await?.error_for_status()?;
        let metadata: Metadata = serde_json::from_slice(&answer.bytes().await?)?;
        anyhow::ensure!(metadata.issuer == issuer, "{url} names issuer {:?}, not {issuer:?}", metadata.issuer);
        Ok(metadata.jwks_uri)
    }

    /// The number of fetches made so far.
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// RFC 8414 §3.1: the well-known suffix goes between the host and the
/// issuer's path (`https://a.example/t1` → `https://a.example/.well-known/oauth-authorization-server/t1`).
pub fn metadata_url(issuer: &str) -> anyhow::Result<String> {
    let (scheme, rest) =
        issuer.split_once("://").ok_or_else(|| anyhow::anyhow!("issuer {issuer:?} is not an http(s) URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    Ok(format!("{scheme}://{authority}/.well-known/oauth-authorization-server{}", path.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_sits_between_the_host_and_the_issuers_path() {
        for (issuer, url) in [
            ("https://a.example", "https://a.example/.well-known/oauth-authorization-server"),
            ("https://a.example/", "https://a.example/.well-known/oauth-authorization-server"),
            ("http://127.0.0.1:9/t1", "http://127.0.0.1:9/.well-known/oauth-authorization-server/t1"),
        ] {
            assert_eq!(metadata_url(issuer).expect("a URL"), url);
        }
        assert!(metadata_url("issuer").is_err());
    }
}
