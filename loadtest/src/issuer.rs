//! `ursula-loadtest issuer`: a minimal OAuth-style issuer for benchmarking a
//! gateway with access control: an EC P-256 key made at start, its JWKS
//! and RFC 8414 metadata on loopback, an access token for one subject and
//! a policy file that makes it the owner of one bucket, written to a
//! directory the benchmark script reads.

use std::convert::Infallible;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::json;

/// The audience the token names (pass it as `--auth-audience`).
pub const AUDIENCE: &str = "bench";

/// Serves until killed; writes `policy.toml` and `token` under `dir`.
pub async fn serve(dir: &str, bucket: &str, listen: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let issuer = format!("http://{}/bench", listener.local_addr()?);
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).map_err(|_| anyhow::anyhow!("an EC key"))?;
    let pkcs8 = pair.to_pkcs8v1().map_err(|_| anyhow::anyhow!("PKCS#8"))?;
    let point = pair.public_key().as_ref().to_vec();
    let jwks = json!({ "keys": [{
        "kty": "EC", "crv": "P-256", "kid": "bench-1", "alg": "ES256", "use": "sig",
        "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
    }] });
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.typ = Some("at+jwt".into());
    header.kid = Some("bench-1".into());
    let claims = json!({
        "iss": issuer, "aud": AUDIENCE, "sub": "bench", "client_id": "loadtest",
        "iat": now, "exp": now + 6 * 3600, "jti": format!("bench-{now}"),
    });
    let token = jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()))?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(format!("{dir}/token"), &token)?;
    std::fs::write(
        format!("{dir}/policy.toml"),
        format!("[[bucket]]\nid = \"{bucket}\"\nowners = [{{ issuer = \"{issuer}\", subject = \"bench\" }}]\n"),
    )?;
    println!("issuer listening on {issuer}");
    std::io::stdout().flush()?;
    let metadata = json!({ "issuer": issuer, "jwks_uri": format!("{issuer}/jwks") }).to_string();
    let jwks = jwks.to_string();
    loop {
        let (tcp, _) = listener.accept().await?;
        let (metadata, jwks) = (metadata.clone(), jwks.clone());
        let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let body = match req.uri().path() {
                "/.well-known/oauth-authorization-server/bench" => Some(metadata.clone()),
                "/bench/jwks" => Some(jwks.clone()),
                _ => None,
            };
            let response = match body {
                Some(text) => http::Response::builder()
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(text))),
                None => http::Response::builder().status(404).body(Full::new(Bytes::new())),
            };
            std::future::ready(Ok::<_, Infallible>(response.unwrap_or_else(|_| unreachable_response())))
        });
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}

/// An empty `500`, for a response that could not be built.
fn unreachable_response() -> http::Response<Full<Bytes>> {
    let mut r = http::Response::new(Full::new(Bytes::new()));
    *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
    r
}
