//! The "JSON Message Text" storage rule (extensions spec, "JSON Message Text";
//! base protocol section 7.1).
//!
//! Offsets, ETags, message boundaries and every read representation refer to
//! the stored bytes of a JSON message, so the stored form has to be a pure
//! function of the request text that loses nothing a client wrote. Earlier
//! releases re-serialized through a parsed value and so sorted members, merged
//! duplicates, rounded numbers through `f64` and refused lone surrogates. Here
//! we never build a value: we check the text against RFC 8259 and copy it with
//! only the insignificant whitespace left out, so what is stored is exactly
//! what was sent, minus bytes that carry no meaning. Because stored messages
//! then contain no LF, an LF terminator is an unambiguous message boundary.
//!
//! Bodies can be 32 MiB and arrive from untrusted clients, so the scanner makes
//! one pass with no allocation besides the output buffer (sized up front, it
//! never grows), and it keeps container state in a fixed array instead of the
//! call stack. The depth rule bounds that array, and a hostile `[[[[...` body
//! is refused as soon as it opens a 129th level, without parsing the rest.
//!
//! When a body is both malformed and not UTF-8 we report `InvalidUtf8`: whether
//! a body is UTF-8 is a property of the whole body, not of where the scan
//! happened to stop, so the answer does not depend on error order. That extra
//! check is one `std` UTF-8 pass over the body, on the error path only.

use std::fmt;

/// The deepest nesting a single message may have (a scalar is depth 0).
pub const MAX_DEPTH: usize = 127;

/// The normalized messages of one JSON request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonMessages {
    /// each message's stored text followed by one LF, concatenated
    pub text: Vec<u8>,
    /// The number of messages, equal to the number of LF bytes in `text`.
    pub count: usize,
}

/// Why a body was refused. Every variant is a `400 Bad Request`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonTextError {
    /// The body is not valid UTF-8 (checked over the whole body).
    InvalidUtf8,
    /// The body is not JSON text. `at` is the byte offset of the first byte
    /// that cannot continue valid JSON, or the body length when the body ends
    /// too early.
    Syntax { at: usize },
    /// A message nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for JsonTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonTextError::InvalidUtf8 => f.write_str("JSON body is not valid UTF-8"),
            JsonTextError::Syntax { at } => write!(f, "invalid JSON at byte {at}"),
            JsonTextError::TooDeep => {
                write!(f, "JSON message nests deeper than {MAX_DEPTH} levels")
            }
        }
    }
}

impl std::error::Error for JsonTextError {}

/// Validates a body and returns its messages: a top-level array is flattened one level (an empty array gives zero messages; the caller decides whether that is allowed).
///
/// # Errors
///
/// [`JsonTextError::InvalidUtf8`] if the body is not UTF-8 anywhere, else
/// [`JsonTextError::TooDeep`] or [`JsonTextError::Syntax`] for the first fault
/// in the body.
pub fn normalize_body(body: &[u8]) -> Result<JsonMessages, JsonTextError> {
    match scan_body(body) {
        Err(JsonTextError::Syntax { .. } | JsonTextError::TooDeep) if std::str::from_utf8(body).is_err() => {
            Err(JsonTextError::InvalidUtf8)
        }
        result => result,
    }
}

fn scan_body(body: &[u8]) -> Result<JsonMessages, JsonTextError> {
    // The output is the input minus whitespace plus one LF per message; a
    // flattened array also loses its brackets and commas (n + 1 bytes for n
    // LFs), so `len + 1` is always enough.
    let mut s = Scanner { b: body, i: 0, out: Vec::with_capacity(body.len().saturating_add(1)) };
    let mut count = 0;
    s.skip_ws();
    if s.peek() == Some(b'[') {
        s.i += 1;
        s.skip_ws();
        if s.peek() == Some(b']') {
            s.i += 1;
        } else {
            loop {
                s.message()?;
                s.out.push(b'\n');
                count += 1;
                s.skip_ws();
                match s.peek() {
                    Some(b',') => {
                        s.i += 1;
                        s.skip_ws();
                    }
                    Some(b']') => {
                        s.i += 1;
                        break;
                    }
                    _ => return Err(s.syntax()),
                }
            }
        }
    } else {
        s.message()?;
        s.out.push(b'\n');
        count = 1;
    }
    s.skip_ws();
    if s.i != body.len() {
        return Err(s.syntax());
    }
    Ok(JsonMessages { text: s.out, count })
}

/// Bytes that may appear unescaped in a string and are ASCII: everything from
/// U+0020 to U+007F except `"` and `\`.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x20;
    while c < 0x80 {
        t[c] = c != b'"' as usize && c != b'\\' as usize;
        c += 1;
    }
    t
};

struct Scanner<'a> {
    b: &'a [u8],
    /// Next unread byte; never beyond `b.len()`.
    i: usize,
    out: Vec<u8>,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn syntax(&self) -> JsonTextError {
        JsonTextError::Syntax { at: self.i }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Copies `c` if it is the next byte.
    fn expect(&mut self, c: u8) -> Result<(), JsonTextError> {
        if self.peek() == Some(c) {
            self.i += 1;
            self.out.push(c);
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    /// One JSON value of at most `MAX_DEPTH` levels, starting at a
    /// non-whitespace byte. Containers are tracked in a fixed array.
    fn message(&mut self) -> Result<(), JsonTextError> {
        // `true` for an object, `false` for an array.
        let mut stack = [false; MAX_DEPTH];
        let mut depth = 0usize;
        loop {
            // A value starts here.
            match self.peek() {
                Some(open @ (b'[' | b'{')) => {
                    if depth == MAX_DEPTH {
                        return Err(JsonTextError::TooDeep);
                    }
                    let is_object = open == b'{';
                    stack[depth] = is_object;
                    depth += 1;
                    self.i += 1;
                    self.out.push(open);
                    self.skip_ws();
                    let close = if is_object { b'}' } else { b']' };
                    if self.peek() == Some(close) {
                        self.i += 1;
                        self.out.push(close);
                        depth -= 1;
                    } else {
                        if is_object {
                            self.member_name()?;
                        }
                        continue;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return Err(self.syntax()),
            }
            // A value ended: close containers until another value is due.
            loop {
                let Some(top) = depth.checked_sub(1) else {
                    return Ok(());
                };
                let is_object = stack[top];
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.i += 1;
                        self.out.push(b',');
                        self.skip_ws();
                        if is_object {
                            self.member_name()?;
                        }
                        break;
                    }
                    Some(close @ b'}') if is_object => {
                        self.i += 1;
                        self.out.push(close);
                        depth = top;
                    }
                    Some(close @ b']') if !is_object => {
                        self.i += 1;
                        self.out.push(close);
                        depth = top;
                    }
                    _ => return Err(self.syntax()),
                }
            }
        }
    }

    /// A member name and its colon, leaving the scanner at the member value.
    fn member_name(&mut self) -> Result<(), JsonTextError> {
        if self.peek() != Some(b'"') {
            return Err(self.syntax());
        }
        self.string()?;
        self.skip_ws();
        self.expect(b':')?;
        self.skip_ws();
        Ok(())
    }

    /// A string literal, copied byte for byte, escapes included.
    fn string(&mut self) -> Result<(), JsonTextError> {
        let b = self.b;
        let start = self.i;
        let mut i = start + 1;
        loop {
            let Some(run) = b[i..].iter().position(|&c| !PLAIN[usize::from(c)]) else {
                return Err(JsonTextError::Syntax { at: b.len() });
            };
            i += run;
            let c = b[i];
            match c {
                b'"' => {
                    i += 1;
                    self.out.extend_from_slice(&b[start..i]);
                    self.i = i;
                    return Ok(());
                }
                b'\\' => match b.get(i + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(b'u') => {
                        // Any four hex digits, unpaired surrogates included.
                        for k in i + 2..i + 6 {
                            if !b.get(k).is_some_and(u8::is_ascii_hexdigit) {
                                return Err(JsonTextError::Syntax { at: k.min(b.len()) });
                            }
                        }
                        i += 6;
                    }
                    _ => {
                        return Err(JsonTextError::Syntax { at: (i + 1).min(b.len()) });
                    }
                },
                0x00..=0x1F => return Err(JsonTextError::Syntax { at: i }),
                _ => match utf8_sequence_len(b, i) {
                    Some(n) => i += n,
                    None => return Err(JsonTextError::InvalidUtf8),
                },
            }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, copied as written.
    fn number(&mut self) -> Result<(), JsonTextError> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = digits(b, i + 1),
            _ => return Err(JsonTextError::Syntax { at: i }),
        }
        if b.get(i) == Some(&b'.') {
            let end = digits(b, i + 1);
            if end == i + 1 {
                return Err(JsonTextError::Syntax { at: end });
            }
            i = end;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let end = digits(b, i);
            if end == i {
                return Err(JsonTextError::Syntax { at: end });
            }
            i = end;
        }
        self.out.extend_from_slice(&b[start..i]);
        self.i = i;
        Ok(())
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), JsonTextError> {
        for (k, w) in word.iter().enumerate() {
            if self.b.get(self.i + k) != Some(w) {
                return Err(JsonTextError::Syntax { at: self.i + k });
            }
        }
        self.i += word.len();
        self.out.extend_from_slice(word);
        Ok(())
    }
}

fn digits(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    i
}

/// The length of the well-formed UTF-8 sequence whose lead byte (0x80 or
/// above) is at `i`, per Unicode table 3-7: no overlongs, no encoded
/// surrogates, nothing above U+10FFFF.
fn utf8_sequence_len(b: &[u8], i: usize) -> Option<usize> {
    let (len, lo, hi) = match *b.get(i)? {
        0xC2..=0xDF => (2, 0x80, 0xBF),
        0xE0 => (3, 0xA0, 0xBF),
        0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80, 0xBF),
        0xED => (3, 0x80, 0x9F),
        0xF0 => (4, 0x90, 0xBF),
        0xF1..=0xF3 => (4, 0x80, 0xBF),
        0xF4 => (4, 0x80, 0x8F),
        _ => return None,
    };
    let second = *b.get(i + 1)?;
    if !(lo..=hi).contains(&second) {
        return None;
    }
    for k in i + 2..i + len {
        if *b.get(k)? & 0xC0 != 0x80 {
            return None;
        }
    }
    Some(len)
}

#[cfg(test)]
mod tests;
