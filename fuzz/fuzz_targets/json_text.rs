//! The JSON message-text rule (`ursula_stream::json_text::normalize_body`):
//! whatever the body, the rule either refuses it with a consistent reason
//! or stores exactly the body's text minus its insignificant whitespace,
//! one message per LF, and storing a stored message again changes nothing.
//! Bodies of modest nesting are also checked against serde_json, an
//! independent RFC 8259 parser.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use ursula_stream::json_text::{JsonMessages, JsonTextError, MAX_DEPTH, normalize_body};

/// Below this many `[`/`{` bytes a body's nesting is certainly within both
/// our depth rule and serde_json's recursion limit (128), so the two parsers
/// must agree on it.
const DIFFERENTIAL_BRACKETS: usize = 100;

fuzz_target!(|body: &[u8]| check(body));

fn check(body: &[u8]) {
    let result = normalize_body(body);
    let utf8 = std::str::from_utf8(body).is_ok();
    // `InvalidUtf8` exactly when the body is not UTF-8, whatever else is wrong.
    assert_eq!(matches!(result, Err(JsonTextError::InvalidUtf8)), !utf8, "UTF-8 verdict of {body:?}: {result:?}");
    let brackets = body.iter().filter(|b| matches!(b, b'[' | b'{')).count();
    match &result {
        Ok(messages) => accepted(body, messages),
        Err(JsonTextError::Syntax { at }) => assert!(*at <= body.len(), "syntax error at {at} of {}", body.len()),
        Err(JsonTextError::TooDeep) => assert!(brackets > MAX_DEPTH, "too deep with {brackets} brackets"),
        Err(JsonTextError::InvalidUtf8) => {}
    }
    if utf8 && brackets < DIFFERENTIAL_BRACKETS {
        let serde_ok = serde_json::from_slice::<IgnoredAny>(body).is_ok();
        assert_eq!(result.is_ok(), serde_ok, "normalize_body and serde_json disagree on {body:?}: {result:?}");
    }
}

fn accepted(body: &[u8], m: &JsonMessages) {
    assert!(std::str::from_utf8(body).is_ok(), "a non-UTF-8 body was accepted");
    assert!(std::str::from_utf8(&m.text).is_ok(), "stored text is not UTF-8");
    let lfs = m.text.iter().filter(|b| **b == b'\n').count();
    assert_eq!(m.count, lfs, "count is the number of LFs");
    assert!(m.text.is_empty() || m.text.ends_with(b"\n"), "text ends with its last message's LF");
    let messages: Vec<&[u8]> =
        if m.text.is_empty() { Vec::new() } else { m.text[..m.text.len() - 1].split(|b| *b == b'\n').collect() };
    assert_eq!(messages.len(), m.count);
    // Nothing but insignificant whitespace is lost, and a top-level array
    // loses only its brackets and commas.
    let stripped = strip_whitespace(body);
    if stripped.first() == Some(&b'[') {
        let mut rebuilt = vec![b'['];
        rebuilt.extend_from_slice(&messages.join(&b","[..]));
        rebuilt.push(b']');
        assert_eq!(rebuilt, stripped, "flattened messages rebuild the array");
    } else {
        assert_eq!(m.count, 1, "a non-array body is one message");
        assert_eq!(messages[0], &stripped[..], "the message is the body without whitespace");
    }
    // Stored text is a fixed point: storing a message again (as the only
    // element of an array, which is flattened) gives the same message.
    for message in messages {
        assert!(!message.is_empty(), "an empty message");
        let mut again = vec![b'['];
        again.extend_from_slice(message);
        again.push(b']');
        let mut expected = message.to_vec();
        expected.push(b'\n');
        assert_eq!(
            normalize_body(&again),
            Ok(JsonMessages { text: expected, count: 1 }),
            "a stored message normalizes to itself"
        );
    }
}

/// The body without the whitespace outside strings (an independent,
/// deliberately naive model; only called on accepted bodies).
fn strip_whitespace(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in body {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
            in_string = b == b'"';
        }
    }
    out
}
