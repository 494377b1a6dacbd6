//! Tests of the JSON Message Text rule: valid and invalid bodies, depth, UTF-8.
#![allow(clippy::unwrap_used, reason = "test code")]

use super::*;
use std::fmt::Write as _;

/// The messages of a body, without their LF terminators.
fn messages(body: &[u8]) -> Result<Vec<String>, JsonTextError> {
    let m = normalize_body(body)?;
    let text = String::from_utf8(m.text.clone()).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), m.count, "count matches LFs for {text:?}");
    assert_eq!(text.matches('\n').count(), m.count);
    Ok(lines)
}

fn nested(open: &str, close: &str, levels: usize, inner: &str) -> String {
    let mut s = open.repeat(levels);
    s.push_str(inner);
    s.push_str(&close.repeat(levels));
    s
}

#[test]
fn normalizes_valid_bodies() {
    let table: &[(&str, &[&str])] = &[
        // Whitespace outside strings goes, inside strings it stays.
        (" \t\r\n{ \"a b\" : \" x \" ,\n\t\"c\" :\r[ 1 , 2 ] } \n", &[r#"{"a b":" x ","c":[1,2]}"#]),
        ("{\"k\":\"  \"}", &[r#"{"k":"  "}"#]),
        ("[ \" [ , ] \" , \"{ : }\" ]", &[r#"" [ , ] ""#, r#""{ : }""#]),
        // Escapes are kept byte for byte.
        (r#""a\u00e9\n\"\/\\\b\f\r\t\u00E9""#, &[r#""a\u00e9\n\"\/\\\b\f\r\t\u00E9""#]),
        (r#"{"\u0061":1}"#, &[r#"{"\u0061":1}"#]),
        // Lone and paired surrogate escapes are valid.
        (r#""\ud800""#, &[r#""\ud800""#]),
        (r#""\uDC00x\uD83D\uDE00""#, &[r#""\uDC00x\uD83D\uDE00""#]),
        // Raw non-ASCII text and DEL are kept.
        ("\"é€😀\u{7f}\"", &["\"é€😀\u{7f}\""]),
        // Member order and duplicate members are kept.
        (r#"{"b":1, "a":2, "b":3}"#, &[r#"{"b":1,"a":2,"b":3}"#]),
        (r#"{"a":{"z":0,"a":0},"a":[]}"#, &[r#"{"a":{"z":0,"a":0},"a":[]}"#]),
        // Number spelling is kept.
        ("1.50e3", &["1.50e3"]),
        ("1e400", &["1e400"]),
        ("-0", &["-0"]),
        (
            "[-0.0, 0, 10, 1E+2, 1e-2, 2.5E-07, 123456789012345678901234567890]",
            &["-0.0", "0", "10", "1E+2", "1e-2", "2.5E-07", "123456789012345678901234567890"],
        ),
        // Scalars at the top level are one message.
        ("\"x\"", &["\"x\""]),
        ("1", &["1"]),
        ("true", &["true"]),
        ("false", &["false"]),
        (" null ", &["null"]),
        ("\"\"", &["\"\""]),
        // Objects at the top level are one message.
        ("{}", &["{}"]),
        ("{ }", &["{}"]),
        // A top-level array is flattened exactly one level.
        (r#"{"event": "created"}"#, &[r#"{"event":"created"}"#]),
        (r#"[{"event": "a"}, {"event": "b"}]"#, &[r#"{"event":"a"}"#, r#"{"event":"b"}"#]),
        ("[[1,2], [3,4]]", &["[1,2]", "[3,4]"]),
        ("[[[1,2,3]]]", &["[[1,2,3]]"]),
        ("[[]]", &["[]"]),
        ("[{}, [], \"\", 0]", &["{}", "[]", "\"\"", "0"]),
        ("[ 1 ]", &["1"]),
        // An empty array is zero messages.
        ("[]", &[]),
        (" [ \n ] ", &[]),
    ];
    for (body, want) in table {
        let got = messages(body.as_bytes());
        let want: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(got, Ok(want), "body {body:?}");
    }
}

#[test]
fn output_is_text_then_lf() {
    let m = normalize_body(b" [ {\"a\" : 1} , 2 ] ").unwrap();
    assert_eq!(m.text, b"{\"a\":1}\n2\n");
    assert_eq!(m.count, 2);
    let m = normalize_body(b"{\"a\" : 1}").unwrap();
    assert_eq!(m.text, b"{\"a\":1}\n");
    assert_eq!(m.count, 1);
    let m = normalize_body(b"[]").unwrap();
    assert_eq!(m.text, b"");
    assert_eq!(m.count, 0);
}

#[test]
fn rejects_invalid_bodies() {
    use JsonTextError::{InvalidUtf8, Syntax};
    let table: &[(&[u8], JsonTextError)] = &[
        // Empty and whitespace-only bodies.
        (b"", Syntax { at: 0 }),
        (b" \t\r\n", Syntax { at: 4 }),
        // Trailing commas and other structure faults.
        (b"[1,]", Syntax { at: 3 }),
        (b"[1, ]", Syntax { at: 4 }),
        (b"[[1,]]", Syntax { at: 4 }),
        (b"{\"a\":1,}", Syntax { at: 7 }),
        (b"[,1]", Syntax { at: 1 }),
        (b"[1 2]", Syntax { at: 3 }),
        (b"[1", Syntax { at: 2 }),
        (b"[", Syntax { at: 1 }),
        (b"]", Syntax { at: 0 }),
        (b"{", Syntax { at: 1 }),
        (b"}", Syntax { at: 0 }),
        (b"[1}", Syntax { at: 2 }),
        (b"{\"a\":1]", Syntax { at: 6 }),
        (b"{\"a\"}", Syntax { at: 4 }),
        (b"{\"a\":}", Syntax { at: 5 }),
        (b"{\"a\" 1}", Syntax { at: 5 }),
        (b"{1:2}", Syntax { at: 1 }),
        (b"{a:2}", Syntax { at: 1 }),
        (b"{'a':2}", Syntax { at: 1 }),
        (b"[[1,2],[3,4]", Syntax { at: 12 }),
        // Two values.
        (b"1 2", Syntax { at: 2 }),
        (b"{} {}", Syntax { at: 3 }),
        (b"[] []", Syntax { at: 3 }),
        (b"\"a\"\"b\"", Syntax { at: 3 }),
        // Bare words, comments and non-JSON literals.
        (b"abc", Syntax { at: 0 }),
        (b"tru", Syntax { at: 3 }),
        (b"trux", Syntax { at: 3 }),
        (b"truex", Syntax { at: 4 }),
        (b"True", Syntax { at: 0 }),
        (b"nul", Syntax { at: 3 }),
        (b"NaN", Syntax { at: 0 }),
        (b"Infinity", Syntax { at: 0 }),
        (b"-Infinity", Syntax { at: 1 }),
        (b"undefined", Syntax { at: 0 }),
        (b"// c\n1", Syntax { at: 0 }),
        (b"/* c */ 1", Syntax { at: 0 }),
        (b"1 // c", Syntax { at: 2 }),
        (b"'a'", Syntax { at: 0 }),
        // Number faults.
        (b"01", Syntax { at: 1 }),
        (b"-01", Syntax { at: 2 }),
        (b"00", Syntax { at: 1 }),
        (b"[01]", Syntax { at: 2 }),
        (b"-", Syntax { at: 1 }),
        (b"[-]", Syntax { at: 2 }),
        (b"- 1", Syntax { at: 1 }),
        (b"+1", Syntax { at: 0 }),
        (b"1.", Syntax { at: 2 }),
        (b"1.e3", Syntax { at: 2 }),
        (b".5", Syntax { at: 0 }),
        (b"1e", Syntax { at: 2 }),
        (b"1e+", Syntax { at: 3 }),
        (b"1E-x", Syntax { at: 3 }),
        (b"0x10", Syntax { at: 1 }),
        (b"1_000", Syntax { at: 1 }),
        // String faults.
        (b"\"abc", Syntax { at: 4 }),
        (b"\"abc\\", Syntax { at: 5 }),
        (b"[\"abc]", Syntax { at: 6 }),
        (b"\"a\x00b\"", Syntax { at: 2 }),
        (b"\"a\tb\"", Syntax { at: 2 }),
        (b"\"a\nb\"", Syntax { at: 2 }),
        (b"\"\x1f\"", Syntax { at: 1 }),
        (b"\"\\x41\"", Syntax { at: 2 }),
        (b"\"\\a\"", Syntax { at: 2 }),
        (b"\"\\'\"", Syntax { at: 2 }),
        (b"\"\\u12\"", Syntax { at: 5 }),
        (b"\"\\u12G4\"", Syntax { at: 5 }),
        (b"\"\\U0041\"", Syntax { at: 2 }),
        (b"\"\\u00", Syntax { at: 5 }),
        // Whitespace outside RFC 8259's four, and a byte order mark.
        (b"\x0c1", Syntax { at: 0 }),
        (b"[1,\x0b2]", Syntax { at: 3 }),
        ("\u{a0}1".as_bytes(), Syntax { at: 0 }),
        ("\u{feff}1".as_bytes(), Syntax { at: 0 }),
        // Invalid UTF-8, inside and outside strings.
        (b"\"\xff\"", InvalidUtf8),
        (b"\"\xc3\"", InvalidUtf8),
        (b"\"\xc3", InvalidUtf8),
        (b"\"\xc0\xaf\"", InvalidUtf8),
        (b"\"\xe0\x80\xaf\"", InvalidUtf8),
        (b"\"\xed\xa0\x80\"", InvalidUtf8),
        (b"\"\xf4\x90\x80\x80\"", InvalidUtf8),
        (b"\"\xf8\x88\x80\x80\x80\"", InvalidUtf8),
        (b"\xff", InvalidUtf8),
        (b"[1,\xff]", InvalidUtf8),
        (b"1\xff", InvalidUtf8),
        (b"{\"a\xff\":1}", InvalidUtf8),
        // Invalid UTF-8 wins over an earlier syntax fault.
        (b"1 2 \"\xff\"", InvalidUtf8),
        (b"[1,] \xc3", InvalidUtf8),
    ];
    for (body, want) in table {
        assert_eq!(normalize_body(body), Err(*want), "body {:?}", String::from_utf8_lossy(body));
    }
}

/// Raw UTF-8 inside a string is accepted exactly when std accepts it.
#[test]
fn utf8_agrees_with_std() {
    let tails: [u8; 8] = [0x00, 0x22, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xff];
    let check = |seq: &[u8]| {
        let mut body = vec![b'"'];
        body.extend_from_slice(seq);
        body.push(b'"');
        let got = normalize_body(&body);
        match std::str::from_utf8(seq) {
            // Escapes are covered elsewhere.
            Ok(s) if s.contains('\\') => {}
            Ok(s) if !s.contains(|c: char| c < ' ' || c == '"') => {
                assert_eq!(got.map(|m| m.text), Ok([&body[..], b"\n"].concat()), "{seq:x?}");
            }
            Ok(_) => assert!(got.is_err(), "{seq:x?}"),
            Err(_) => assert_eq!(got, Err(JsonTextError::InvalidUtf8), "{seq:x?}"),
        }
    };
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            check(&[a, b]);
        }
    }
    for a in 0xc0..=0xffu8 {
        for b in 0..=255u8 {
            for &c in &tails {
                check(&[a, b, c]);
                for &d in &tails {
                    check(&[a, b, c, d]);
                }
            }
        }
    }
}

#[test]
fn depth_limit_for_a_bare_message() {
    // A top-level array is always flattened, so a bare message that can
    // reach the limit is an object (or a string, which has depth 0).
    let at_limit = format!("{{\"a\":{}}}", nested("[", "]", MAX_DEPTH - 1, "1"));
    assert_eq!(messages(at_limit.as_bytes()), Ok(vec![at_limit.clone()]));
    let over = format!("{{\"a\":{}}}", nested("[", "]", MAX_DEPTH, "1"));
    assert_eq!(normalize_body(over.as_bytes()), Err(JsonTextError::TooDeep));

    // Objects only.
    let at_limit = nested("{\"a\":", "}", MAX_DEPTH, "1");
    assert_eq!(messages(at_limit.as_bytes()), Ok(vec![at_limit.clone()]));
    let over = nested("{\"a\":", "}", MAX_DEPTH + 1, "1");
    assert_eq!(normalize_body(over.as_bytes()), Err(JsonTextError::TooDeep));

    // An empty container counts as one level.
    let at_limit = format!("{{\"a\":{}}}", nested("[", "]", MAX_DEPTH - 2, "{}"));
    assert!(normalize_body(at_limit.as_bytes()).is_ok());
    let over = format!("{{\"a\":{}}}", nested("[", "]", MAX_DEPTH - 1, "{}"));
    assert_eq!(normalize_body(over.as_bytes()), Err(JsonTextError::TooDeep));

    // The limit is on the deepest path, not on the sum of siblings.
    let deep = nested("{\"a\":", "}", MAX_DEPTH - 1, "1");
    let wide = format!("{{\"x\":{deep},\"y\":{deep},\"z\":[]}}");
    assert!(normalize_body(wide.as_bytes()).is_ok());
}

#[test]
fn depth_limit_inside_a_top_level_array() {
    // Body depth 128: each message is 127 deep, which is allowed.
    let msg = nested("[", "]", MAX_DEPTH, "");
    let body = format!("[{msg}, {msg}]");
    assert_eq!(messages(body.as_bytes()), Ok(vec![msg.clone(), msg.clone()]));
    // A bare 128-deep array body is the same: one 127-deep message.
    let body = nested("[", "]", MAX_DEPTH + 1, "");
    assert_eq!(messages(body.as_bytes()), Ok(vec![msg]));
    let msg = nested("{\"a\":", "}", MAX_DEPTH, "null");
    let body = format!("[1,{msg}]");
    assert_eq!(messages(body.as_bytes()), Ok(vec!["1".to_owned(), msg]));

    // Body depth 129: a 128-deep message is refused.
    let body = nested("[", "]", MAX_DEPTH + 2, "");
    assert_eq!(normalize_body(body.as_bytes()), Err(JsonTextError::TooDeep));
    let msg = nested("{\"a\":", "}", MAX_DEPTH + 1, "null");
    let body = format!("[1,{msg}]");
    assert_eq!(normalize_body(body.as_bytes()), Err(JsonTextError::TooDeep));
}

#[test]
fn hostile_nesting_fails_fast_without_deep_recursion() {
    // Run on a small stack: a recursive scanner would overflow it.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(|| {
            let n = 1_000_000;
            for body in [
                "[".repeat(n),
                nested("[", "]", n, ""),
                "{\"a\":".repeat(n),
                format!("{{\"a\":{}", "[{\"a\":".repeat(n)),
            ] {
                assert_eq!(normalize_body(body.as_bytes()), Err(JsonTextError::TooDeep));
            }
            // Invalid UTF-8 after the depth fault is still reported as such.
            let mut body = "[".repeat(n).into_bytes();
            body.push(0xff);
            assert_eq!(normalize_body(&body), Err(JsonTextError::InvalidUtf8));
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn large_flat_body() {
    let n = 200_000;
    let mut body = String::from("[");
    for k in 0..n {
        if k > 0 {
            body.push_str(", ");
        }
        write!(body, "{{ \"k\" : {k}, \"s\" : \"a b\\n\" }}").unwrap();
    }
    body.push(']');
    let m = normalize_body(body.as_bytes()).unwrap();
    assert_eq!(m.count, n);
    assert!(m.text.len() <= body.len() + 1);
    assert!(m.text.starts_with(b"{\"k\":0,\"s\":\"a b\\n\"}\n{\"k\":1,"));
}

#[test]
fn error_messages_do_not_echo_input() {
    assert_eq!(JsonTextError::InvalidUtf8.to_string(), "JSON body is not valid UTF-8");
    assert_eq!(JsonTextError::Syntax { at: 7 }.to_string(), "invalid JSON at byte 7");
    assert_eq!(JsonTextError::TooDeep.to_string(), "JSON message nests deeper than 127 levels");
    let e = normalize_body(b"{\"secret\": oops}").unwrap_err();
    assert!(!e.to_string().contains("secret") && !e.to_string().contains("oops"));
}

/// Pseudo-random JSON-ish bodies: no panics, and every accepted body's
/// messages are stable when stored again.
#[test]
fn fuzz_invariants() {
    const ALPHABET: &[u8] = b"[]{},:\"\\ \t\n\r0123456789-+.eEtrufalsn\x01\x7f\xc3\xa9\xff/u";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state >> 40).unwrap()
    };
    let seeds: &[&[u8]] = &[
        b"[{\"a\": [1, 2.5e3, \"x\\u00e9\"]}, {\"b\": null}, true]",
        b"{\"a\": {\"b\": [[], {}, -0]}}",
        b"\"str\\\"ing\"",
    ];
    let mut accepted = 0;
    for round in 0..20_000 {
        let mut body = seeds[round % seeds.len()].to_vec();
        for _ in 0..(next() % 4) {
            let pos = next() % (body.len() + 1);
            let byte = ALPHABET[next() % ALPHABET.len()];
            match next() % 3 {
                0 => body.insert(pos, byte),
                1 if pos < body.len() => {
                    body.remove(pos);
                }
                _ if pos < body.len() => body[pos] = byte,
                _ => {}
            }
        }
        let Ok(m) = normalize_body(&body) else {
            continue;
        };
        accepted += 1;
        assert!(std::str::from_utf8(&body).is_ok());
        for msg in m.text.split(|&c| c == b'\n').take(m.count) {
            let again = normalize_body(&[b"[", msg, b"]"].concat()).unwrap();
            assert_eq!(again.text, [msg, b"\n"].concat());
            assert_eq!(again.count, 1);
        }
    }
    assert!(accepted > 1000, "fuzz accepted only {accepted}");
}
