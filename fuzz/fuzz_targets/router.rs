//! The request router (`ursula_http::route::route`) and the read query
//! (`ursula_http::query::ReadParams::parse`), fed a method and a request
//! target: whatever they accept holds only valid ids, and rendering an
//! accepted route or query back into a request and routing it again gives
//! the same value; whatever they refuse renders as a 4xx answer.

#![no_main]

use std::fmt::Write;

use http::{Method, Uri};
use libfuzzer_sys::fuzz_target;
use ursula_http::error::ApiError;
use ursula_http::limits::{MAX_LONG_POLL_MS, MAX_RESPONSE_BYTES};
use ursula_http::query::{LiveMode, ReadParams};
use ursula_http::route::{Route, Sub, route};
use ursula_http::telemetry::Op;
use ursula_stream::{BucketId, ReadFrom, StreamKey};

const METHODS: &[Method] =
    &[Method::GET, Method::HEAD, Method::PUT, Method::POST, Method::DELETE, Method::OPTIONS, Method::PATCH];

fuzz_target!(|data: &[u8]| {
    let Some((&m, target)) = data.split_first() else { return };
    let method = METHODS[usize::from(m) % METHODS.len()].clone();
    // As hyper hands it over: a request target that parses as a URI.
    if let Ok(uri) = Uri::try_from(target) {
        request(&method, uri.path(), uri.query());
    }
    // Any text at all as a path or a query.
    let text = String::from_utf8_lossy(target);
    request(&method, &text, Some(&text));
});

fn request(method: &Method, path: &str, query: Option<&str>) {
    let routed = route(path);
    let op = Op::of(method, routed.as_ref().ok());
    let _ = op.span_name();
    if method == Method::OPTIONS && routed.is_ok() {
        assert_eq!(op, Op::Other);
    }
    match routed {
        Ok(r) => accepted_route(path, &r),
        Err(e) => {
            assert!(
                matches!(e, ApiError::NotFound | ApiError::InvalidId(_) | ApiError::InvalidRequest(_)),
                "route({path:?}) refused with {e:?}"
            );
            refused(&e);
        }
    }
    match ReadParams::parse(query) {
        Ok(p) => accepted_query(&p),
        Err(e) => {
            assert!(
                matches!(e, ApiError::InvalidOffset | ApiError::InvalidQuery(_) | ApiError::Unsupported(_)),
                "ReadParams::parse({query:?}) refused with {e:?}"
            );
            refused(&e);
        }
    }
}

fn refused(e: &ApiError) {
    for head in [false, true] {
        let answer = ursula_http::render::error(e, head);
        assert!(answer.status().is_client_error(), "{e:?} answers {}", answer.status());
    }
}

fn accepted_route(path: &str, r: &Route) {
    match r {
        Route::Ops(rest) => {
            assert_eq!(path.strip_prefix("/__ursula/"), Some(rest.as_str()));
        }
        Route::Bucket(b) => {
            assert!(!path.starts_with("/__ursula/"));
            assert!(BucketId::is_valid(b.as_str()), "bucket {b:?}");
        }
        Route::Stream(key) | Route::Sub(key, _) => {
            assert!(!path.starts_with("/__ursula/"));
            assert_eq!(StreamKey::parse(key.bucket.as_str(), key.stream.as_str()).as_ref(), Ok(key), "key {key:?}");
            assert_eq!(key.to_string(), format!("{}/{}", key.bucket.as_str(), key.stream.as_str()));
        }
    }
    let rendered = render_route(r);
    assert_eq!(route(&rendered).as_ref(), Ok(r), "{path:?} routes to {r:?}, which renders as {rendered:?}");
}

/// Every byte of a variable segment percent-encoded, so no value can be
/// mistaken for a literal segment (`parts`, `snapshot`) or a separator.
fn enc(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len() * 3);
    for b in segment.bytes() {
        let _ = write!(out, "%{b:02X}");
    }
    out
}

fn render_route(r: &Route) -> String {
    let key = |k: &StreamKey| format!("/{}/{}", enc(k.bucket.as_str()), enc(k.stream.as_str()));
    match r {
        Route::Ops(rest) => format!("/__ursula/{rest}"),
        Route::Bucket(b) => format!("/{}", enc(b.as_str())),
        Route::Stream(k) => key(k),
        Route::Sub(k, sub) => {
            let tail = match sub {
                Sub::Snapshot(o) => format!("snapshot/{}", enc(o)),
                Sub::SnapshotLatest => "snapshot".to_string(),
                Sub::SnapshotParts(o) => format!("snapshot/{}/parts", enc(o)),
                Sub::DiscardParts => "snapshot/parts".to_string(),
                Sub::Retention(o) => format!("retention/{}", enc(o)),
                Sub::Bootstrap => "bootstrap".to_string(),
                Sub::Chunk { token, offset } => format!("incarnation/{}/chunk/{}", enc(token), enc(offset)),
                Sub::ImmutableSnapshot { token, offset } => {
                    format!("incarnation/{}/snapshot/{}", enc(token), enc(offset))
                }
            };
            format!("{}/{tail}", key(k))
        }
    }
}

fn accepted_query(p: &ReadParams) {
    assert!(p.live == LiveMode::CatchUp || p.offset.is_some(), "a live read without an offset: {p:?}");
    assert!(!p.consistency_leader || p.live == LiveMode::CatchUp, "a leader read that is live: {p:?}");
    assert!((1..=MAX_LONG_POLL_MS).contains(&p.timeout_ms), "{p:?}");
    assert!((1..=MAX_RESPONSE_BYTES).contains(&p.max_bytes), "{p:?}");
    let mut q = Vec::new();
    match p.offset {
        Some(ReadFrom::Start) => q.push("offset=-1".to_string()),
        Some(ReadFrom::Tail) => q.push("offset=now".to_string()),
        Some(ReadFrom::At(o)) => q.push(format!("offset={o}")),
        None => {}
    }
    match p.live {
        LiveMode::CatchUp => {}
        LiveMode::LongPoll => q.push("live=long-poll".to_string()),
        LiveMode::Sse => q.push("live=sse".to_string()),
    }
    if let Some(c) = &p.cursor {
        q.push(format!("cursor={}", enc(c)));
    }
    q.push(format!("timeout_ms={}", p.timeout_ms));
    q.push(format!("max_bytes={}", p.max_bytes));
    q.push(format!("consistency={}", if p.consistency_leader { "leader" } else { "local" }));
    let rendered = q.join("&");
    assert_eq!(ReadParams::parse(Some(&rendered)).as_ref(), Ok(p), "{p:?} renders as {rendered:?}");
}
