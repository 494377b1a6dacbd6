//! Access control of an OAuth-protected gateway (spec/08 "Gateway access
//! control", extensions §10–11 for intermediaries): bearer RFC 9068 access
//! tokens, a bucket per tenant, and concealment, so a stranger learns
//! nothing of a private stream. It runs as the front door's `admit` hook,
//! after the CORS preflight and before the immutable cache.
//!
//! - `token`: validating an access token, and the cache of validated ones.
//! - `keys`: the issuer's signing keys (JWKS), discovery and refetching.
//! - `policy`: the bucket policy file and its reloads.

pub mod keys;
pub mod policy;
pub mod token;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::request::Parts;
use http::{HeaderMap, Method, header};
use tokio::time::Instant;
use ursula_http::Metrics;
use ursula_http::error::ApiError;

use keys::{KeyLocation, KeySource};
use policy::{PolicyHolder, Principal};
use token::{TokenError, Verifier};

/// `--auth-*`: the three first go together.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub issuer: String,
    pub audience: String,
    pub policy: PathBuf,
    pub jwks_url: Option<String>,
    pub public_metrics: bool,
    pub refresh: keys::Refresh,
}

/// What the gateway does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Serve it; a live read admitted with a credential ends at `ends_at`;
    /// `principal` is whom the credential speaks for.
    Serve {
        ends_at: Option<Instant>,
        principal: Option<Principal>,
    },
    Refuse(ApiError),
}

/// A request's bearer credential, as sent.
enum Bearer<'a> {
    None,
    Token(&'a str),
    /// Two `Authorization` headers, another scheme, or no token.
    Malformed,
}

fn bearer(headers: &HeaderMap) -> Bearer<'_> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else { return Bearer::None };
    if values.next().is_some() {
        return Bearer::Malformed;
    }
    let Ok(text) = value.to_str() else { return Bearer::Malformed };
    match text.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => {
            Bearer::Token(token.trim())
        }
        _ => Bearer::Malformed,
    }
}

/// Refusals by kind, for `/__ursula/gateway/metrics`.
#[derive(Default)]
struct Refusals {
    concealed: AtomicU64,
    invalid: AtomicU64,
    expired: AtomicU64,
    unavailable: AtomicU64,
}

pub struct Auth {
    policy: Arc<PolicyHolder>,
    verifier: Verifier,
    public_metrics: bool,
    refusals: Refusals,
}

/// A live read: `live=` (`sse`, `long-poll`) in the query.
fn is_live(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| q.split('&').any(|pair| pair.split('=').next() == Some("live")))
}

/// The instant of `exp` (Unix seconds) on the runtime's clock.
fn instant_of(exp: u64) -> Instant {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Instant::now() + Duration::from_secs(exp).saturating_sub(now)
}

impl Auth {
    /// Loads the policy (an invalid one refuses the start) and watches it.
    pub fn start(settings: AuthSettings) -> anyhow::Result<Auth> {
        let policy = policy::open(settings.policy.clone())?;
        policy.clone().watch();
        let location = match settings.jwks_url {
            Some(url) => KeyLocation::Jwks(url),
            None => KeyLocation::Issuer(settings.issuer.clone()),
        };
        let verifier = Verifier::new(settings.issuer, settings.audience, KeySource::new(location, settings.refresh)?);
        Ok(Auth { policy, verifier, public_metrics: settings.public_metrics, refusals: Refusals::default() })
    }

    /// Decides `request`: every refusal is an intermediary's own answer.
    pub async fn decide(&self, request: &Parts) -> Decision {
        let decision = self.decision(request).await;
        if let Decision::Refuse(e) = &decision {
            let counter = match e {
                ApiError::InvalidCredential => &self.refusals.invalid,
                ApiError::CredentialExpired => &self.refusals.expired,
                ApiError::AuthenticationUnavailable => &self.refusals.unavailable,
                _ => &self.refusals.concealed,
            };
            counter.fetch_add(1, Relaxed);
        }
        decision
    }

    async fn decision(&self, request: &Parts) -> Decision {
        let path = request.uri.path();
        if crate::target::is_operational(path) {
            // The gateway's counters show traffic volume: served only by choice.
            let metrics = matches!(path, "/__ursula/metrics" | "/__ursula/gateway/metrics");
            return if self.public_metrics && metrics {
                Decision::Serve { ends_at: None, principal: None }
            } else {
                Decision::Refuse(ApiError::Concealed)
            };
        }
        let verified = match bearer(&request.headers) {
            Bearer::None => None,
            Bearer::Malformed => return Decision::Refuse(ApiError::InvalidCredential),
            Bearer::Token(token) => match self.verifier.verify(token).await {
                Ok(verified) => Some(verified),
                Err(TokenError::Invalid) => return Decision::Refuse(ApiError::InvalidCredential),
                Err(TokenError::Expired) => return Decision::Refuse(ApiError::CredentialExpired),
                Err(TokenError::Unavailable) => return Decision::Refuse(ApiError::AuthenticationUnavailable),
            },
        };
        // Admission allows clock skew past `exp`, but a live read ends at
        // `exp` (spec/08): one opened after it would end at once, and a
        // client reconnecting with the same token would loop until the
        // leeway ran out. It is refused as expired instead.
        if let Some(v) = &verified
            && v.exp <= token::now_secs()
            && is_live(&request.uri)
        {
            return Decision::Refuse(ApiError::CredentialExpired);
        }
        let bucket = crate::target::bucket(path);
        let policy = self.policy.current();
        let Some(rules) = policy.bucket(bucket) else { return Decision::Refuse(ApiError::Concealed) };
        let owner = verified.as_ref().is_some_and(|v| rules.owners.contains(&v.principal));
        // `public_read` grants reads, heads, tails and snapshot reads: every
        // GET and HEAD of the surface, and nothing else.
        let read = request.method == Method::GET || request.method == Method::HEAD;
        if owner || (read && rules.public_read) {
            Decision::Serve {
                ends_at: verified.as_ref().map(|v| instant_of(v.exp)),
                principal: verified.map(|v| v.principal),
            }
        } else {
            Decision::Refuse(ApiError::Concealed)
        }
    }

    pub fn metrics(&self, m: &mut Metrics) {
        m.count("auth_refusals_concealed", self.refusals.concealed.load(Relaxed));
        m.count("auth_refusals_invalid_credential", self.refusals.invalid.load(Relaxed));
        m.count("auth_refusals_credential_expired", self.refusals.expired.load(Relaxed));
        m.count("auth_refusals_unavailable", self.refusals.unavailable.load(Relaxed));
        m.count("auth_jwks_fetches", self.verifier.keys.fetch_count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, v.parse().expect("a header value"));
        }
        h
    }

    #[test]
    fn a_bearer_credential_is_one_header_of_the_bearer_scheme() {
        assert!(matches!(bearer(&headers(&[])), Bearer::None));
        assert!(matches!(bearer(&headers(&["Bearer abc"])), Bearer::Token("abc")));
        assert!(matches!(bearer(&headers(&["bearer abc"])), Bearer::Token("abc")));
        for bad in [&["Basic abc"][..], &["Bearer"], &["Bearer  "], &["Bearer a", "Bearer b"]] {
            assert!(matches!(bearer(&headers(bad)), Bearer::Malformed), "{bad:?}");
        }
    }
}
