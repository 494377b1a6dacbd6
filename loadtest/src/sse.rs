//! A minimal Server-Sent Events parser and the payload format of the fan-out
//! scenario: `#SEQ,TS;` records (TS in microseconds of [`crate::stats::now_us`]),
//! padded with `.` to the requested size.

/// Incremental SSE parser: feed it body chunks, it calls back once per event
/// with the event's name and its `data:` lines joined by `\n`.
#[derive(Default)]
pub struct Parser {
    buf: Vec<u8>,
    event: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl Parser {
    pub fn feed(&mut self, chunk: &[u8], mut on_event: impl FnMut(&[u8], &[u8])) {
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl;
            let mut line = &self.buf[start..end];
            if let Some(l) = line.strip_suffix(b"\r") {
                line = l;
            }
            if line.is_empty() {
                if self.has_data || !self.event.is_empty() {
                    let name: &[u8] = if self.event.is_empty() { b"message" } else { &self.event };
                    on_event(name, &self.data);
                }
                self.event.clear();
                self.data.clear();
                self.has_data = false;
            } else if line[0] != b':' {
                let (field, value) = match line.iter().position(|b| *b == b':') {
                    Some(i) => (&line[..i], strip_space(&line[i + 1..])),
                    None => (line, &[][..]),
                };
                match field {
                    b"event" => {
                        self.event.clear();
                        self.event.extend_from_slice(value);
                    }
                    b"data" => {
                        if self.has_data {
                            self.data.push(b'\n');
                        }
                        self.data.extend_from_slice(value);
                        self.has_data = true;
                    }
                    _ => {}
                }
            }
            start = end + 1;
        }
        self.buf.drain(..start);
    }
}

fn strip_space(v: &[u8]) -> &[u8] {
    v.strip_prefix(b" ").unwrap_or(v)
}

/// Calls `f(seq, ts)` for every `#SEQ,TS;` record in `data`, ignoring the
/// padding and any line breaks the server put between `data:` lines.
pub fn records(data: &[u8], mut f: impl FnMut(u64, u64)) {
    let mut i = 0;
    while i < data.len() {
        if data[i] != b'#' {
            i += 1;
            continue;
        }
        i += 1;
        let Some((seq, after_seq)) = number(data, i, b',') else { continue };
        let Some((ts, after_ts)) = number(data, after_seq, b';') else { continue };
        f(seq, ts);
        i = after_ts;
    }
}

/// Parses decimal digits from `i` up to `end`; returns the value and the index
/// after the terminator. Line breaks inside the number are skipped.
fn number(data: &[u8], mut i: usize, end: u8) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut digits = 0;
    while i < data.len() {
        match data[i] {
            b'0'..=b'9' => {
                v = v.checked_mul(10)?.checked_add(u64::from(data[i] - b'0'))?;
                digits += 1;
            }
            b'\n' | b'\r' => {}
            c if c == end && digits > 0 => return Some((v, i + 1)),
            _ => return None,
        }
        i += 1;
    }
    None
}

/// One fan-out payload: the record, padded with `.` to at least `size` bytes.
pub fn payload(seq: u64, ts: u64, size: usize) -> Vec<u8> {
    let mut p = format!("#{seq},{ts};").into_bytes();
    if p.len() < size {
        p.resize(size, b'.');
    }
    p
}

/// The value of a string field in a flat JSON object (the control event),
/// without a JSON parser: `"name":"value"`.
pub fn json_str<'a>(json: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let key = format!("\"{name}\"");
    let at = find(json, key.as_bytes())? + key.len();
    let rest = trim_start(&json[at..]);
    let rest = trim_start(rest.strip_prefix(b":")?);
    let rest = rest.strip_prefix(b"\"")?;
    let end = rest.iter().position(|b| *b == b'"')?;
    Some(&rest[..end])
}

/// Whether a flat JSON object has `"name": true`.
pub fn json_true(json: &[u8], name: &str) -> bool {
    let key = format!("\"{name}\"");
    let Some(at) = find(json, key.as_bytes()) else { return false };
    let rest = trim_start(&json[at + key.len()..]);
    rest.strip_prefix(b":").is_some_and(|r| trim_start(r).starts_with(b"true"))
}

fn trim_start(v: &[u8]) -> &[u8] {
    let n = v.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &v[n..]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut p = Parser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, |name, data| {
                out.push((String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(data).into_owned()))
            });
        }
        out
    }

    #[test]
    fn events_split_across_chunks() {
        let text = b"event: data\ndata: #1,2;\n\nevent: control\ndata: {\"streamNextOffset\":\"5\"}\n\n";
        let whole = parse_all(&[text]);
        for cut in 0..text.len() {
            assert_eq!(parse_all(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
        assert_eq!(
            whole,
            vec![
                ("data".to_string(), "#1,2;".to_string()),
                ("control".to_string(), "{\"streamNextOffset\":\"5\"}".to_string())
            ]
        );
    }

    #[test]
    fn multi_line_data_crlf_and_comments() {
        let got = parse_all(&[b": keep-alive\r\nevent:data\r\ndata:a\r\ndata: b\r\n\r\ndata: plain\n\n"]);
        assert_eq!(got, vec![("data".into(), "a\nb".into()), ("message".into(), "plain".into())]);
    }

    #[test]
    fn records_in_batched_and_wrapped_data() {
        let mut got = Vec::new();
        let mut data = payload(7, 123_456, 32);
        data.extend_from_slice(&payload(8, 123_999, 0));
        data.extend_from_slice(b"\n#9,1\n00;junk#x;#10,;#11,5;");
        records(&data, |s, t| got.push((s, t)));
        assert_eq!(got, vec![(7, 123_456), (8, 123_999), (9, 100), (11, 5)]);
        assert_eq!(payload(1, 2, 20).len(), 20);
        assert_eq!(payload(123, 456, 0), b"#123,456;");
        let mut none = 0;
        records(b"#99999999999999999999999,1;", |_, _| none += 1);
        assert_eq!(none, 0);
    }

    #[test]
    fn control_fields() {
        let c = br#"{"streamNextOffset": "0000_0042","streamCursor":"9","upToDate":true}"#;
        assert_eq!(json_str(c, "streamNextOffset"), Some(&b"0000_0042"[..]));
        assert_eq!(json_str(c, "missing"), None);
        assert!(json_true(c, "upToDate"));
        assert!(!json_true(c, "streamClosed"));
        assert!(json_true(br#"{"streamClosed" : true}"#, "streamClosed"));
        assert!(!json_true(br#"{"streamClosed":false}"#, "streamClosed"));
    }
}
