//! The HTTP/1.1 client: one hyper connection per worker, kept alive and
//! reopened only when the server closed it, so no pool is shared between
//! workers and a request costs one header map and a reference-counted body.

use std::net::SocketAddr;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One server under test: where it listens, how its stream paths look, and
/// optionally its process id for CPU and memory readings.
#[derive(Clone, Debug)]
pub struct Target {
    pub label: String,
    pub url: String,
    pub template: String,
    pub pid: Option<u32>,
    addr: SocketAddr,
    host: HeaderValue,
    /// The URL's path prefix (before the template), without a trailing `/`.
    prefix: String,
}

impl Target {
    /// The server's socket address, for raw connections.
    pub fn socket_addr(&self) -> SocketAddr {
        self.addr
    }

    pub async fn resolve(url: &str, template: &str, label: &str, pid: Option<u32>) -> anyhow::Result<Target> {
        let uri: Uri = url.parse().with_context(|| format!("parsing --url {url}"))?;
        if uri.scheme_str() != Some("http") {
            bail!("--url {url}: only http:// URLs are supported");
        }
        let authority = uri.authority().ok_or_else(|| anyhow!("--url {url} has no host"))?.clone();
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .with_context(|| format!("resolving {url}"))?
            .next()
            .ok_or_else(|| anyhow!("{url} resolves to no address"))?;
        if !template.contains("{name}") {
            bail!("--path-template {template} has no {{name}} placeholder");
        }
        Ok(Target {
            label: label.to_string(),
            url: url.to_string(),
            template: template.to_string(),
            pid,
            addr,
            host: HeaderValue::from_str(authority.as_str())?,
            prefix: uri.path().trim_end_matches('/').to_string(),
        })
    }

    #[cfg(test)]
    pub fn for_tests(label: &str) -> Target {
        Target {
            label: label.to_string(),
            url: "http://127.0.0.1:1".to_string(),
            template: "/t/{name}".to_string(),
            pid: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            host: HeaderValue::from_static("127.0.0.1:1"),
            prefix: String::new(),
        }
    }

    /// The request URI of stream `name`, with an optional query string.
    pub fn uri(&self, name: &str, query: &str) -> Uri {
        let mut path = format!("{}{}", self.prefix, self.template.replace("{name}", name));
        if !query.is_empty() {
            path.push('?');
            path.push_str(query);
        }
        // Names and queries come from this program and are URI-safe.
        Uri::from_maybe_shared(Bytes::from(path)).expect("stream names are URI-safe")
    }

    pub fn conn(&self) -> Conn {
        Conn::to(&self.placement())
    }

    /// The target's own address.
    pub fn placement(&self) -> Placement {
        Placement { addr: self.addr, host: self.host.clone() }
    }
}

/// Where a stream's requests go: the target itself, or the group leader
/// a `307` of a cluster named.
#[derive(Clone, Debug)]
pub struct Placement {
    pub addr: SocketAddr,
    pub host: HeaderValue,
}

/// `PUT` a stream with a content type (Ok: created, 201, or already there
/// with the same configuration, 200), following up to three leader
/// redirects (`307` with `Location`), and returns where it was created, so
/// a writer can send its appends straight to the stream's leader.
pub async fn create_at_leader(
    t: &Target,
    uri: Uri,
    content_type: &HeaderValue,
) -> anyhow::Result<(StatusCode, Placement)> {
    let mut placement = t.placement();
    for _ in 0..4 {
        let mut conn = Conn::to(&placement);
        let mut req = conn.request(Method::PUT, uri.clone(), Bytes::new());
        req.headers_mut().insert(CONTENT_TYPE, content_type.clone());
        let (status, headers, _) = conn.call(req).await?;
        if status != StatusCode::TEMPORARY_REDIRECT {
            return Ok((status, placement));
        }
        placement = redirected(&headers).await?;
    }
    bail!("{}: creating {uri} was redirected more than three times", t.label)
}

/// Where a leader's `307` sends the request (its `Location`'s host).
pub async fn redirected(headers: &HeaderMap) -> anyhow::Result<Placement> {
    let location = header_str(headers, "location").ok_or_else(|| anyhow!("a 307 without Location"))?;
    let to: Uri = location.parse().with_context(|| format!("parsing Location {location}"))?;
    let authority = to.authority().ok_or_else(|| anyhow!("Location {location} names no host"))?.clone();
    let addr = tokio::net::lookup_host((authority.host(), authority.port_u16().unwrap_or(80)))
        .await?
        .next()
        .ok_or_else(|| anyhow!("{location} resolves to no address"))?;
    Ok(Placement { addr, host: HeaderValue::from_str(authority.as_str())? })
}

/// A kept-alive HTTP/1.1 connection, reopened on demand.
pub struct Conn {
    addr: SocketAddr,
    host: HeaderValue,
    sender: Option<SendRequest<Full<Bytes>>>,
    pub connects: u64,
}

/// `--header`s, sent with every request.
static EXTRA_HEADERS: std::sync::OnceLock<Vec<(http::HeaderName, http::HeaderValue)>> = std::sync::OnceLock::new();

/// Parses and keeps the `--header` values ("Name: value").
pub fn set_extra_headers(raw: &[String]) -> anyhow::Result<()> {
    let mut parsed = Vec::new();
    for header in raw {
        let (name, value) = header.split_once(':').ok_or_else(|| anyhow!("--header {header:?} is not Name: value"))?;
        parsed.push((http::HeaderName::try_from(name.trim())?, http::HeaderValue::try_from(value.trim())?));
    }
    let _ = EXTRA_HEADERS.set(parsed);
    Ok(())
}

impl Conn {
    pub fn to(placement: &Placement) -> Conn {
        Conn { addr: placement.addr, host: placement.host.clone(), sender: None, connects: 0 }
    }

    /// Opens the connection now, if it is not open.
    pub async fn ensure(&mut self) -> anyhow::Result<()> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            let tcp = TcpStream::connect(self.addr).await.with_context(|| format!("connecting to {}", self.addr))?;
            tcp.set_nodelay(true)?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.sender = Some(sender);
            self.connects += 1;
        }
        Ok(())
    }

    /// A request with the `Host` header set, and the `--header`s.
    pub fn request(&self, method: Method, uri: Uri, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        req.headers_mut().insert(HOST, self.host.clone());
        for (name, value) in EXTRA_HEADERS.get().into_iter().flatten() {
            req.headers_mut().insert(name.clone(), value.clone());
        }
        req
    }

    /// Sends a request. A request that never left (the server had closed the
    /// idle connection) is retried once on a new connection; one that may have
    /// reached the server is not.
    pub async fn send(&mut self, mut req: Request<Full<Bytes>>) -> anyhow::Result<Response<Incoming>> {
        for _ in 0..2 {
            self.ensure().await?;
            let Some(sender) = self.sender.as_mut() else { continue };
            if sender.ready().await.is_err() {
                self.sender = None;
                continue;
            }
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok(resp),
                Err(mut e) => {
                    self.sender = None;
                    match e.take_message() {
                        Some(back) => req = back,
                        None => return Err(e.into_error().into()),
                    }
                }
            }
        }
        bail!("connection to {} keeps closing", self.addr)
    }

    /// Sends a request and reads its whole body, counting the bytes.
    pub async fn call(&mut self, req: Request<Full<Bytes>>) -> anyhow::Result<(StatusCode, HeaderMap, u64)> {
        let resp = self.send(req).await?;
        let (parts, body) = resp.into_parts();
        let n = drain(body).await?;
        Ok((parts.status, parts.headers, n))
    }
}

/// Reads a body to its end without keeping it; returns its length.
pub async fn drain(mut body: Incoming) -> anyhow::Result<u64> {
    let mut n = 0;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            n += data.len() as u64;
        }
    }
    Ok(n)
}

/// A header as text, if present and readable.
pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Incompressible bytes for request bodies, built once.
pub fn random_body(len: usize) -> Bytes {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    Bytes::from(v)
}
