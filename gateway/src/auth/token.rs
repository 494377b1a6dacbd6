//! RFC 9068 JWT access tokens, validated with `jsonwebtoken`: `typ` says
//! `at+jwt`, the `kid` names one of the issuer's keys, the algorithm is an
//! asymmetric one on the allow-list and the key's own when it declares one,
//! and the claims name this issuer and audience. Validated tokens are
//! cached by digest until their `exp`, so a busy tenant pays one signature
//! check, not one per append.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde::Deserialize;

use super::keys::{KeySource, Lookup};
use super::policy::Principal;

/// Clock skew allowed on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: u64 = 60;
/// Never `none`, never HMAC: a public key must not double as a secret.
const ALLOWED: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];
/// Validated tokens kept at most.
const CACHE_ENTRIES: u64 = 100_000;

/// Why a credential was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    Invalid,
    Expired,
    /// No key could be had to check it.
    Unavailable,
}

/// A validated token: who it speaks for, and until when (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub principal: Principal,
    pub exp: u64,
}

/// The claims RFC 9068 §2.2 requires; `aud` and `exp` are checked by
/// `jsonwebtoken`, a missing one fails to deserialize.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Claims {
    iss: String,
    sub: String,
    client_id: String,
    iat: u64,
    exp: u64,
    jti: String,
}

pub struct Verifier {
    issuer: String,
    audience: String,
    pub keys: KeySource,
    cache: moka::sync::Cache<[u8; 32], Verified>,
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Verifier {
    pub fn new(issuer: String, audience: String, keys: KeySource) -> Verifier {
        let cache = moka::sync::Cache::builder()
            .max_capacity(CACHE_ENTRIES)
            // `exp` is checked on every hit; this only bounds how long a
            // long-lived token's entry stays without being used.
            .time_to_idle(Duration::from_secs(600))
            .build();
        Verifier { issuer, audience, keys, cache }
    }

    pub async fn verify(&self, token: &str) -> Result<Verified, TokenError> {
        let digest = *blake3::hash(token.as_bytes()).as_bytes();
        if let Some(hit) = self.cache.get(&digest) {
            return if now_secs() > hit.exp.saturating_add(LEEWAY_SECS) { Err(TokenError::Expired) } else { Ok(hit) };
        }
        let verified = self.check(token).await?;
        self.cache.insert(digest, verified.clone());
        Ok(verified)
    }

    async fn check(&self, token: &str) -> Result<Verified, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Invalid)?;
        let typ_ok = header
            .typ
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("application/at+jwt"));
        // Keys come from the issuer's JWKS only: a token that points
        // elsewhere for its key is refused, not followed.
        let points_elsewhere = header.jku.is_some() || header.x5u.is_some() || header.jwk.is_some();
        if !typ_ok || points_elsewhere || !ALLOWED.contains(&header.alg) {
            return Err(TokenError::Invalid);
        }
        let kid = header.kid.as_deref().ok_or(TokenError::Invalid)?;
        let jwk = match self.keys.lookup(kid).await {
            Lookup::Found(jwk) => jwk,
            Lookup::Unknown => return Err(TokenError::Invalid),
            Lookup::Unavailable => return Err(TokenError::Unavailable),
        };
        // No algorithm confusion: a key that names its algorithm takes no other.
        if jwk.common.key_algorithm.is_some_and(|declared| Algorithm::try_from(declared).ok() != Some(header.alg)) {
            return Err(TokenError::Invalid);
        }
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| TokenError::Invalid)?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        let claims = match jsonwebtoken::decode::<Claims>(token, &key, &validation) {
            Ok(data) => data.claims,
            Err(e) if matches!(e.kind(), ErrorKind::ExpiredSignature) => return Err(TokenError::Expired),
            Err(_) => return Err(TokenError::Invalid),
        };
        if claims.iat > now_secs().saturating_add(LEEWAY_SECS) {
            return Err(TokenError::Invalid);
        }
        Ok(Verified { principal: Principal { issuer: claims.iss, subject: claims.sub }, exp: claims.exp })
    }
}
