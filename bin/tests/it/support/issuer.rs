//! A real OAuth-style issuer for the access-control tests: RSA and EC keys
//! generated here (aws-lc-rs), its JWKS and RFC 8414 metadata served over
//! HTTP on `127.0.0.1:0`, keys rotated or the issuer taken down mid-test,
//! and RFC 9068 access tokens minted with jsonwebtoken.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use bytes::Bytes;
use http_body_util::Full;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    pub jwk: Value,
    /// The public key's DER, what an HMAC confusion attack signs with.
    pub public_der: Vec<u8>,
}

/// The children of a DER SEQUENCE's content: (tag, content) pairs.
fn der_children(mut der: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while der.len() >= 2 {
        let tag = der[0];
        let (len, header) = match der[1] {
            n if n < 0x80 => (n as usize, 2),
            n => {
                let bytes = (n & 0x7f) as usize;
                (der[2..2 + bytes].iter().fold(0usize, |acc, b| acc << 8 | *b as usize), 2 + bytes)
            }
        };
        out.push((tag, &der[header..header + len]));
        der = &der[header + len..];
    }
    out
}

impl SigningKey {
    /// An RSA 2048 key; its JWK declares `alg` unless `declare_alg` is false.
    pub fn rsa(kid: &str, declare_alg: bool) -> SigningKey {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("an RSA key");
        let pkcs8 = pair.as_der().expect("PKCS#8").as_ref().to_vec();
        // jsonwebtoken signs RSA with a PKCS#1 key: the OCTET STRING inside
        // PKCS#8's PrivateKeyInfo.
        let info = der_children(&pkcs8);
        let inner = der_children(info[0].1);
        let pkcs1 = inner.iter().find(|(tag, _)| *tag == 0x04).expect("the private key").1.to_vec();
        let public = pair.public_key();
        let mut jwk = json!({
            "kty": "RSA",
            "kid": kid,
            "use": "sig",
            "n": B64.encode(public.modulus().big_endian_without_leading_zero()),
            "e": B64.encode(public.exponent().big_endian_without_leading_zero()),
        });
        if declare_alg {
            jwk["alg"] = json!("RS256");
        }
        let public_der = public.as_der().expect("the public key").as_ref().to_vec();
        SigningKey {
            kid: kid.into(),
            alg: Algorithm::RS256,
            encoding: EncodingKey::from_rsa_der(&pkcs1),
            jwk,
            public_der,
        }
    }

    /// A P-256 key (ES256).
    pub fn ec(kid: &str) -> SigningKey {
        let alg = &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pair = aws_lc_rs::signature::EcdsaKeyPair::generate(alg).expect("an EC key");
        let pkcs8 = pair.to_pkcs8v1().expect("PKCS#8").as_ref().to_vec();
        let point = pair.public_key().as_ref().to_vec();
        let jwk = json!({
            "kty": "EC",
            "crv": "P-256",
            "kid": kid,
            "alg": "ES256",
            "use": "sig",
            "x": B64.encode(&point[1..33]),
            "y": B64.encode(&point[33..65]),
        });
        SigningKey {
            kid: kid.into(),
            alg: Algorithm::ES256,
            encoding: EncodingKey::from_ec_der(&pkcs8),
            jwk,
            public_der: point,
        }
    }
}

pub fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

/// The issuer: its URL, the keys it publishes, and whether it answers.
pub struct Issuer {
    pub url: String,
    pub audience: String,
    published: Arc<Mutex<Vec<Value>>>,
    up: Arc<AtomicBool>,
    fetches: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Issuer {
    /// Serves metadata at `/.well-known/oauth-authorization-server/tenant`
    /// and the JWKS at `/tenant/jwks`, publishing `keys`.
    pub async fn start(keys: &[&SigningKey]) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding the issuer");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let url = format!("{base}/tenant");
        let published = Arc::new(Mutex::new(keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()));
        let up = Arc::new(AtomicBool::new(true));
        let fetches = Arc::new(AtomicU64::new(0));
        let (p, u, f, issuer) = (published.clone(), up.clone(), fetches.clone(), url.clone());
        let server = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                if !u.load(Ordering::SeqCst) {
                    // Taken down: every connection is dropped at once.
                    drop(tcp);
                    continue;
                }
                let (p, f, issuer, u) = (p.clone(), f.clone(), issuer.clone(), u.clone());
                let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    // A connection opened before the issuer went down fails too.
                    let up = u.load(Ordering::SeqCst);
                    let body = match req.uri().path() {
                        _ if !up => None,
                        "/.well-known/oauth-authorization-server/tenant" => {
                            Some(json!({ "issuer": issuer, "jwks_uri": format!("{issuer}/jwks") }))
                        }
                        "/tenant/jwks" => {
                            f.fetch_add(1, Ordering::SeqCst);
                            Some(json!({ "keys": *p.lock().expect("the key list") }))
                        }
                        _ => None,
                    };
                    let response = match body {
                        Some(v) => http::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(v.to_string()))),
                        None => {
                            let status = if up { 404 } else { 503 };
                            http::Response::builder().status(status).body(Full::new(Bytes::new()))
                        }
                    };
                    std::future::ready(Ok::<_, Infallible>(response.expect("a response")))
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        Issuer { url, audience: "https://streams.example".into(), published, up, fetches, server }
    }

    /// Publishes exactly `keys` from now on.
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.published.lock().expect("the key list") = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// Takes the issuer down (every connection dropped) or brings it back.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    /// JWKS fetches served so far.
    pub fn jwks_fetches(&self) -> u64 {
        self.fetches.load(Ordering::SeqCst)
    }

    /// The claims of a valid token for `subject`, expiring in `ttl` seconds.
    pub fn claims(&self, subject: &str, ttl: i64) -> serde_json::Map<String, Value> {
        let now = now_secs();
        let claims = json!({
            "iss": self.url,
            "aud": self.audience,
            "sub": subject,
            "client_id": "test-client",
            "iat": now,
            "exp": now + ttl,
            "jti": format!("jti-{}", fastrand::u64(..)),
        });
        claims.as_object().expect("an object").clone()
    }

    /// A valid access token for `subject` signed with `key`, for `ttl` seconds.
    pub fn token(&self, key: &SigningKey, subject: &str, ttl: i64) -> String {
        sign(key, &at_jwt_header(key), &self.claims(subject, ttl))
    }
}

/// The RFC 9068 header of `key`'s tokens.
pub fn at_jwt_header(key: &SigningKey) -> Header {
    let mut header = Header::new(key.alg);
    header.typ = Some("at+jwt".into());
    header.kid = Some(key.kid.clone());
    header
}

pub fn sign(key: &SigningKey, header: &Header, claims: &serde_json::Map<String, Value>) -> String {
    jsonwebtoken::encode(header, claims, &key.encoding).expect("a signed token")
}

/// A token signed with HS256 whose secret is `key`'s public key (the
/// algorithm-confusion attack).
pub fn hmac_with_public_key(key: &SigningKey, claims: &serde_json::Map<String, Value>) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.typ = Some("at+jwt".into());
    header.kid = Some(key.kid.clone());
    let secret = EncodingKey::from_secret(&key.public_der).expect("an HMAC key");
    jsonwebtoken::encode(&header, claims, &secret).expect("an HS256 token")
}

/// An unsigned token (`alg: none`).
pub fn unsigned(kid: &str, claims: &serde_json::Map<String, Value>) -> String {
    let header = json!({ "alg": "none", "typ": "at+jwt", "kid": kid });
    format!("{}.{}.", B64.encode(header.to_string()), B64.encode(Value::Object(claims.clone()).to_string()))
}
