//! The gateway's cache of immutable reads (spec/44-immutable-reads.md,
//! extensions §4): a `200` marked `Stream-Immutable: true` (a full chunk
//! below the tail, a closed tail, a snapshot) never changes at its URL, so
//! the gateway keeps it in a bounded cache weighed in bytes and answers
//! it again, `304` to a matching `If-None-Match` included, without asking
//! a voter. Nothing unmarked is ever stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode, Uri};
use http_body_util::BodyExt;

use ursula_http::headers::names;
use ursula_http::render::{self, Answer};

/// Answers larger than this are served but not kept.
const MAX_ENTRY_BYTES: usize = 16 * 1024 * 1024;

struct Entry {
    headers: HeaderMap,
    body: Bytes,
}

pub struct ImmutableCache {
    entries: moka::sync::Cache<String, Arc<Entry>>,
    cache_control: Option<HeaderValue>,
    pub read_origin: Option<HeaderValue>,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

fn weight(key: &str, entry: &Entry) -> u32 {
    let headers: usize = entry.headers.iter().map(|(k, v)| k.as_str().len() + v.len() + 32).sum();
    u32::try_from(key.len() + headers + entry.body.len()).unwrap_or(u32::MAX)
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

/// The cache key: the path (immutable routes take no query).
fn key_of(uri: &Uri) -> String {
    uri.path().to_string()
}

impl ImmutableCache {
    pub fn new(options: &CacheOptions) -> ImmutableCache {
        let entries = moka::sync::Cache::builder()
            .max_capacity(options.max_bytes)
            .weigher(|k: &String, e: &Arc<Entry>| weight(k, e))
            .build();
        let value = |v: &Option<String>| v.as_deref().and_then(|v| HeaderValue::from_str(v).ok());
        ImmutableCache {
            entries,
            cache_control: value(&options.cache_control),
            read_origin: value(&options.read_origin),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached answer to a `GET` or `HEAD` of an immutable URL.
    pub fn lookup(&self, req: &Parts) -> Option<Answer> {
        let head = req.method == Method::HEAD;
        // A range is answered (206) by the voters: the cache keeps whole bodies.
        if !(head || req.method == Method::GET) || req.uri.query().is_some() || req.headers.contains_key(header::RANGE)
        {
            return None;
        }
        let Some(entry) = self.entries.get(&key_of(&req.uri)) else {
            self.misses.fetch_add(1, Relaxed);
            return None;
        };
        self.hits.fetch_add(1, Relaxed);
        let tag = entry.headers.get(header::ETAG).and_then(|t| t.to_str().ok()).unwrap_or_default();
        let not_modified = ursula_http::handlers::read::none_match(&req.headers, tag);
        let mut b = render::builder(if not_modified { StatusCode::NOT_MODIFIED } else { StatusCode::OK });
        for (name, value) in &entry.headers {
            if not_modified && (name == header::CONTENT_TYPE || name == header::CONTENT_LENGTH) {
                continue;
            }
            b = b.header(name, value);
        }
        let body = if head || not_modified { render::empty() } else { render::full(entry.body.clone()) };
        Some(render::finish(b, body))
    }

    /// Keeps `answer` when it is a marked `200` of a `GET`, and hands it on.
    pub async fn store(&self, key: String, answer: Answer) -> Answer {
        let marked = answer.headers().get(names::STREAM_IMMUTABLE).is_some_and(|v| v == "true");
        if answer.status() != StatusCode::OK || !marked {
            return answer;
        }
        let (mut parts, body) = answer.into_parts();
        if let Some(cc) = &self.cache_control {
            parts.headers.insert(header::CACHE_CONTROL, cc.clone());
        }
        let Ok(collected) = body.collect().await;
        let body = collected.to_bytes();
        if body.len() <= MAX_ENTRY_BYTES {
            let mut headers = parts.headers.clone();
            render::remove_cors_headers(&mut headers);
            self.entries.insert(key, Arc::new(Entry { headers, body: body.clone() }));
        }
        Answer::from_parts(parts, render::full(body))
    }

    /// The key a `GET` answer would be stored under, if it may be.
    pub fn storable(method: &Method, uri: &Uri) -> Option<String> {
        (method == Method::GET && uri.query().is_none()).then(|| key_of(uri))
    }

    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }
}
