//! Building answers: the body type, error answers, and the headers every
//! answer of the protocol surface carries.

use std::convert::Infallible;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full};

use crate::error::ApiError;
use crate::headers::names;
use crate::options::Cors;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;
pub type Answer = Response<Body>;

/// An SSE answer: `no-cache` for the base protocol (no proxy buffering),
/// `no-store` as every node answer (0.8 release notes).
pub const SSE_CACHE_CONTROL: &str = "no-cache, no-store";

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A body sent as the given chunks, in order, without joining them.
pub fn chunks(chunks: Vec<Bytes>) -> Body {
    match <[Bytes; 1]>::try_from(chunks) {
        Ok([one]) => full(one),
        Err(many) => {
            let frames = futures_util::stream::iter(many.into_iter().map(|c| Ok(http_body::Frame::data(c))));
            http_body_util::StreamBody::new(frames).boxed_unsync()
        }
    }
}

/// A body of `chunks`, then `rest` as it arrives. A rest that breaks off
/// ends the body short of its `Content-Length`, which closes the
/// connection: the client never takes a cut answer for a whole one.
pub fn streamed(chunks: Vec<Bytes>, rest: crate::backend::ReadRest) -> Body {
    use futures_util::StreamExt;
    let rest = rest.take_while(|piece| std::future::ready(piece.is_ok())).filter_map(|piece| async { piece.ok() });
    let frames = futures_util::stream::iter(chunks).chain(rest).map(|c| Ok(http_body::Frame::data(c)));
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

pub fn empty() -> Body {
    Empty::new().boxed_unsync()
}

/// Headers an answer has room for from the start: an append's own, then
/// the common ones and the server's identity, which grew the map (and
/// moved its entries) twice per answer.
const ANSWER_HEADERS: usize = 16;

/// A response with `status` and no body yet.
pub fn builder(status: StatusCode) -> http::response::Builder {
    let mut builder = Response::builder().status(status);
    if let Some(headers) = builder.headers_mut() {
        headers.reserve(ANSWER_HEADERS);
    }
    builder
}

/// An answer with `status`, no body and room for `ANSWER_HEADERS`, whose
/// headers are inserted in place: `http::response::Builder` moves its parts
/// once per header, which the busiest answer (an append's) should not pay.
pub fn answer(status: StatusCode) -> Answer {
    let mut answer = Response::new(empty());
    *answer.status_mut() = status;
    answer.headers_mut().reserve(ANSWER_HEADERS);
    answer
}

/// An offset as a header value, without a `String` on the way.
pub fn offset_value(offset: ursula_stream::Offset) -> HeaderValue {
    // Decimal digits are always a valid value; the fallback is never taken.
    HeaderValue::from_bytes(&offset.digits()).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

/// Finishes a builder; a builder only fails on invalid header values, which
/// the handlers never produce from client input.
pub fn finish(builder: http::response::Builder, body: Body) -> Answer {
    builder.body(body).unwrap_or_else(|_| {
        let mut r = Response::new(self::empty());
        *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// The JSON error answer of a refusal; `HEAD` gets the headers and no body.
pub fn error(err: &ApiError, head: bool) -> Answer {
    let answer = err.answer();
    // A redirect is no error answer (extensions §11): no body, no code.
    if answer.status.is_redirection() {
        let mut response = finish(builder(answer.status).header(header::CACHE_CONTROL, "no-store"), empty());
        response.headers_mut().extend(answer.headers);
        return response;
    }
    let body = if head { empty() } else { full(answer.body()) };
    let mut response = finish(
        builder(answer.status)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-store"),
        body,
    );
    response.headers_mut().extend(answer.headers);
    if err.is_intermediary() {
        response.extensions_mut().insert(IntermediaryAnswer);
    }
    response
}

/// Marks an intermediary's own refusal, which carries no server identity
/// (extensions §10, §11).
#[derive(Debug, Clone, Copy)]
pub struct IntermediaryAnswer;

const CROSS_ORIGIN_RESOURCE_POLICY: header::HeaderName =
    header::HeaderName::from_static("cross-origin-resource-policy");

/// Headers on every answer: browser security (base protocol §10.7) and the
/// node's permissive CORS.
///
/// CORS headers go on answers to requests that carry `Origin` (a browser
/// always sends it on a cross-origin request) and on every answer a cache
/// may keep, which a browser may later be served without its request
/// reaching us. A `no-store` answer to a request without `Origin` (a
/// server-side client's append) needs none: two headers fewer on the
/// answer the busiest clients parse most.
pub fn add_common_headers(response: &mut Answer, cors: &Cors, origin: Option<&str>) {
    let h = response.headers_mut();
    // Every answer is `no-store` unless its handler said more (SSE adds
    // `no-cache`); a gateway may relax marked immutable answers.
    let no_store = HeaderValue::from_static("no-store");
    let storable = *h.entry(header::CACHE_CONTROL).or_insert(no_store.clone()) != no_store;
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CROSS_ORIGIN_RESOURCE_POLICY, HeaderValue::from_static("cross-origin"));
    let wanted = origin.is_some() || storable;
    if wanted && let Some(allowed) = cors.allow(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
        // Continuations travel in headers; `*` holds only without credentials.
        h.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("*"));
    }
    if matches!(cors, Cors::Origins(_)) {
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
}

/// The headers `add_common_headers` chose for one request's `Origin`,
/// taken off an answer kept to be served again (the gateway's immutable
/// cache): each later request gets its own from `add_common_headers`.
pub fn remove_cors_headers(headers: &mut http::HeaderMap) {
    headers.remove(header::ACCESS_CONTROL_ALLOW_ORIGIN);
    headers.remove(header::ACCESS_CONTROL_EXPOSE_HEADERS);
    let others: Vec<HeaderValue> = headers.get_all(header::VARY).iter().filter(|v| *v != "origin").cloned().collect();
    headers.remove(header::VARY);
    for value in others {
        headers.append(header::VARY, value);
    }
}

/// `Ursula-Protocol` and `Ursula-Cluster-Id`, on every answer of the
/// server: `HEAD`s, `404`s, redirects and `503`s included (extensions §10).
/// `cluster_id` is the header's value, made once (`cluster_id_header`).
pub fn add_server_identity(response: &mut Answer, cluster_id: Option<&HeaderValue>) {
    let h = response.headers_mut();
    h.insert(names::URSULA_PROTOCOL, HeaderValue::from_static("2"));
    if let Some(v) = cluster_id {
        h.insert(names::URSULA_CLUSTER_ID, v.clone());
    }
}

/// The `Ursula-Cluster-Id` value of a deployment; `None` for an id no
/// header can carry.
pub fn cluster_id_header(cluster_id: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(cluster_id).ok()
}

/// The answer to a CORS preflight, the same for every path.
pub fn preflight() -> Answer {
    finish(
        builder(StatusCode::NO_CONTENT)
            .header(header::ACCESS_CONTROL_ALLOW_METHODS, "GET, HEAD, POST, PUT, DELETE, OPTIONS")
            // `*` never covers `authorization` (the Fetch standard): a page
            // that sends its own bearer token needs it named.
            .header(header::ACCESS_CONTROL_ALLOW_HEADERS, "*, authorization")
            .header(header::ACCESS_CONTROL_MAX_AGE, "86400"),
        empty(),
    )
}

/// `answer` with a body that keeps `holds` until it is finished or dropped.
pub fn holding(answer: Answer, holds: crate::front::Holds) -> Answer {
    answer.map(|body| HoldingBody { body, holds }.boxed_unsync())
}

/// A body that keeps what a request was admitted with, and counts the
/// bytes it hands to the connection.
struct HoldingBody {
    body: Body,
    holds: crate::front::Holds,
}

impl http_body::Body for HoldingBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        if let (std::task::Poll::Ready(Some(Ok(frame))), Some(sent)) = (&polled, &self.holds.sent)
            && let Some(data) = frame.data_ref()
        {
            sent.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::BodyExt;

    use crate::backend::ReadRest;

    #[tokio::test]
    async fn a_streamed_body_ends_where_its_rest_broke_off() {
        let piece = |s: &'static str| Ok(Bytes::from_static(s.as_bytes()));
        let whole: ReadRest = Box::pin(futures_util::stream::iter(vec![piece("b"), piece("c")]));
        let body = super::streamed(vec![Bytes::from_static(b"a")], whole);
        assert_eq!(body.collect().await.expect("a body").to_bytes(), "abc");
        let broken: ReadRest = Box::pin(futures_util::stream::iter(vec![piece("b"), Err(()), piece("c")]));
        let body = super::streamed(vec![Bytes::from_static(b"a")], broken);
        assert_eq!(body.collect().await.expect("a body").to_bytes(), "ab", "nothing after the break");
    }

    #[test]
    fn cors_headers_go_where_a_browser_may_read_the_answer() {
        use http::HeaderValue;

        use crate::Cors;
        let app = "https://app.example";
        let origins = Cors::Origins(vec![app.to_string()]);
        // (policy, request Origin, the handler's Cache-Control, Access-Control-Allow-Origin sent)
        let cases = [
            (&Cors::AnyOrigin, Some(app), None, Some("*")),
            // A server-side client's no-store answer: no CORS at all.
            (&Cors::AnyOrigin, None, None, None),
            (&Cors::AnyOrigin, None, Some("no-store"), None),
            // A cache may hand this answer to a browser later.
            (&Cors::AnyOrigin, None, Some("public, max-age=31536000, immutable"), Some("*")),
            (&Cors::AnyOrigin, None, Some("no-cache"), Some("*")),
            (&origins, Some(app), None, Some(app)),
            (&origins, Some("https://elsewhere.example"), None, None),
            (&Cors::Off, Some(app), Some("no-cache"), None),
        ];
        for (policy, origin, cache_control, expected) in cases {
            let mut answer = super::finish(super::builder(http::StatusCode::NO_CONTENT), super::empty());
            if let Some(value) = cache_control {
                answer.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static(value));
            }
            super::add_common_headers(&mut answer, policy, origin);
            let h = answer.headers();
            let case = format!("{origin:?} {cache_control:?}");
            assert_eq!(h.get("access-control-allow-origin").and_then(|v| v.to_str().ok()), expected, "{case}");
            assert_eq!(h.contains_key("access-control-expose-headers"), expected.is_some(), "{case}");
            assert_eq!(h.get("cache-control").and_then(|v| v.to_str().ok()), Some(cache_control.unwrap_or("no-store")));
            assert_eq!(h.get("x-content-type-options").and_then(|v| v.to_str().ok()), Some("nosniff"), "{case}");
        }
    }

    #[test]
    fn a_kept_answer_loses_only_the_cors_headers_of_its_request() {
        use http::HeaderValue;
        let mut answer = super::finish(super::builder(http::StatusCode::OK), super::empty());
        answer.headers_mut().insert(http::header::VARY, HeaderValue::from_static("accept-encoding"));
        let origins = crate::Cors::Origins(vec!["https://app.example".to_string()]);
        super::add_common_headers(&mut answer, &origins, Some("https://app.example"));
        let h = answer.headers_mut();
        assert_eq!(h.get_all(http::header::VARY).iter().count(), 2);
        super::remove_cors_headers(h);
        assert!(!h.contains_key("access-control-allow-origin") && !h.contains_key("access-control-expose-headers"));
        let vary: Vec<_> = h.get_all(http::header::VARY).iter().collect();
        assert_eq!(vary, ["accept-encoding"]);
        assert_eq!(h.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]));
    }
}
