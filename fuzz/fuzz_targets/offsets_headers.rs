//! Offset tokens (`ursula_stream::offset`) and the typed request headers
//! (`ursula_http::headers`), plus the value parsers behind them
//! (`ContentType`, `Incarnation`, `StreamSeq`): every parser either refuses
//! a value or gives one whose rendering parses back to itself, and every
//! refusal renders as a 4xx answer.
//!
//! Input: the first line is an offset token (and text for the value
//! parsers), each later line a header `name: value`.

#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use ursula_http::error::ApiError;
use ursula_http::headers;
use ursula_http::names;
use ursula_stream::lifetime::Lifetime;
use ursula_stream::producer::{MAX_PRODUCER_ID_BYTES, MAX_PRODUCER_NUMBER};
use ursula_stream::stream_seq::MAX_STREAM_SEQ_BYTES;
use ursula_stream::{ContentType, Incarnation, Offset, ReadFrom, StreamSeq};

fuzz_target!(|data: &[u8]| {
    // The first line is an offset token (and any text for the value
    // parsers); each later line is a header `name: value`. The first 16
    // bytes also give two offsets to render, parse back and compare.
    let mut word = [0u8; 16];
    for (w, b) in word.iter_mut().zip(data) {
        *w = *b;
    }
    let (n, m) = word.split_at(8);
    let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
    let m = u64::from_le_bytes(m.try_into().expect("8 bytes"));
    let mut lines = data.split(|b| *b == b'\n');
    let token = String::from_utf8_lossy(lines.next().unwrap_or_default());
    offsets(&token, n, m);
    standalone(&token);
    let mut map = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        let value = &line[colon + 1..];
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(value)) {
            map.append(name, value);
        }
    }
    header_parsers(&map);
});

fn offsets(token: &str, n: u64, m: u64) {
    match Offset::parse_token(token) {
        Some(o) => assert_eq!(o.to_string(), token, "an accepted token renders as itself"),
        None => assert!(
            token.len() != 20 || !token.bytes().all(|b| b.is_ascii_digit()) || token.parse::<u64>().is_err(),
            "20 digits within u64 refused: {token:?}"
        ),
    }
    let rendered = Offset(n).to_string();
    assert_eq!(rendered.len(), ursula_stream::offset::OFFSET_WIDTH);
    assert_eq!(Offset::parse_token(&rendered), Some(Offset(n)));
    assert_eq!(ReadFrom::parse(&rendered), Some(ReadFrom::At(Offset(n))));
    // Lexicographic order of tokens is numeric order.
    assert_eq!(rendered.cmp(&Offset(m).to_string()), n.cmp(&m));
    assert_eq!(Offset(n).advance(m).bytes(), n.saturating_add(m));
    match ReadFrom::parse(token) {
        Some(ReadFrom::Start) => assert_eq!(token, "-1"),
        Some(ReadFrom::Tail) => assert_eq!(token, "now"),
        Some(ReadFrom::At(o)) => assert_eq!(Some(o), Offset::parse_token(token)),
        None => assert!(token != "-1" && token != "now" && Offset::parse_token(token).is_none()),
    }
}

fn refused(e: &ApiError) {
    let answer = ursula_http::render::error(e, false);
    assert!(answer.status().is_client_error(), "{e:?} answers {}", answer.status());
}

fn one(name: HeaderName, value: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.append(name, HeaderValue::from_str(value).expect("a rendered header value"));
    map
}

fn header_parsers(map: &HeaderMap) {
    let _ = headers::stream_closed(map);
    let _ = headers::accepts_gzip(map);
    let _ = headers::content_length(map);
    for r in [
        headers::refuse_encoded_body(map),
        headers::refuse_duplicates(map),
        headers::refuse_removed_append_headers(map),
    ] {
        if let Err(e) = r {
            refused(&e);
        }
    }
    if map.keys_len() == map.len() {
        assert!(headers::refuse_duplicates(map).is_ok(), "no header repeats, yet a duplicate");
    }

    match headers::content_type(map) {
        Ok(Some(ct)) => {
            assert_eq!(ContentType::parse(ct.as_str()).as_ref(), Some(&ct), "normalizing is idempotent");
            assert_eq!(ct.essence(), ct.essence().to_ascii_lowercase());
            assert_eq!(ct.is_json(), ct.essence() == "application/json");
            // Normalizing can lengthen a value (`; ` between parameters)
            // past the request limit; below it, the stored form is accepted.
            if ct.as_str().len() <= headers::MAX_CONTENT_TYPE_BYTES {
                assert_eq!(headers::content_type(&one(http::header::CONTENT_TYPE, ct.as_str())), Ok(Some(ct)));
            }
        }
        Ok(None) => {}
        Err(e) => refused(&e),
    }

    match headers::lifetime(map) {
        Ok(Lifetime::Forever) => {
            assert!(map.get(names::STREAM_TTL).is_none() && map.get(names::STREAM_EXPIRES_AT).is_none());
        }
        Ok(Lifetime::Ttl { secs }) => {
            assert_eq!(headers::lifetime(&one(names::STREAM_TTL, &secs.to_string())), Ok(Lifetime::Ttl { secs }));
        }
        Ok(Lifetime::ExpiresAt { at_ms }) => {
            let nanos = i128::from(at_ms) * 1_000_000;
            let at = time::OffsetDateTime::from_unix_timestamp_nanos(nanos).expect("an accepted instant");
            // Years past 9999 have no RFC 3339 form (a far offset can carry one there).
            if let Ok(text) = at.format(&time::format_description::well_known::Rfc3339) {
                assert_eq!(
                    headers::lifetime(&one(names::STREAM_EXPIRES_AT, &text)),
                    Ok(Lifetime::ExpiresAt { at_ms }),
                    "{text}"
                );
            }
        }
        Err(e) => refused(&e),
    }

    match headers::stream_seq(map) {
        Ok(Some(seq)) => {
            let raw = map.get(names::STREAM_SEQ).expect("a stream-seq header").as_bytes();
            assert_eq!(seq.as_str().as_bytes(), raw, "stored as sent");
        }
        Ok(None) => {
            if let Some(raw) = map.get(names::STREAM_SEQ) {
                let raw = raw.as_bytes();
                assert!(raw.is_empty() || raw.iter().any(|b| !(0x20..0x7f).contains(b)));
            }
        }
        Err(e) => {
            let raw = map.get(names::STREAM_SEQ).expect("a stream-seq header").as_bytes();
            assert!(raw.len() > MAX_STREAM_SEQ_BYTES);
            refused(&e);
        }
    }

    match headers::producer(map) {
        Ok(Some(p)) => {
            assert!(!p.id.is_empty() && p.id.len() <= MAX_PRODUCER_ID_BYTES);
            assert!(p.epoch <= MAX_PRODUCER_NUMBER && p.seq <= MAX_PRODUCER_NUMBER);
            let mut again = HeaderMap::new();
            for (name, value) in [
                (names::PRODUCER_ID, p.id.clone()),
                (names::PRODUCER_EPOCH, p.epoch.to_string()),
                (names::PRODUCER_SEQ, p.seq.to_string()),
            ] {
                again.append(name, HeaderValue::from_str(&value).expect("rendered"));
            }
            assert_eq!(headers::producer(&again), Ok(Some(p)));
        }
        Ok(None) => {}
        Err(e) => refused(&e),
    }

    match headers::producer_digest(map) {
        Ok(Some(digest)) => {
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            let raw = map.get(names::PRODUCER_DIGEST).expect("a digest header").to_str().expect("ASCII");
            assert_eq!(hex, raw.trim());
        }
        Ok(None) => {}
        Err(e) => refused(&e),
    }

    match headers::incarnation(map) {
        Ok(Some(i)) => {
            assert_eq!(Incarnation::from_value(i.value()), Some(i));
            assert_eq!(headers::incarnation(&one(names::STREAM_INCARNATION, &i.to_string())), Ok(Some(i)));
        }
        Ok(None) => {}
        Err(e) => refused(&e),
    }
}

fn standalone(text: &str) {
    if let Some(ct) = ContentType::parse(text) {
        assert_eq!(ContentType::parse(ct.as_str()).as_ref(), Some(&ct), "normalizing {text:?} is idempotent");
    }
    if let Some(i) = Incarnation::parse(text) {
        assert_eq!(i.to_string(), text, "an incarnation token is canonical");
    }
    match StreamSeq::parse(text.as_bytes()) {
        Ok(Some(s)) => assert_eq!(s.as_str(), text),
        Ok(None) => {}
        Err(_) => assert!(text.len() > MAX_STREAM_SEQ_BYTES),
    }
}
