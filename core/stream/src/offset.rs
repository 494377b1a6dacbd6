//! Offsets: byte positions in a stream's stored representation, rendered as
//! 20-character zero-padded decimal tokens so that lexicographic order is
//! numeric order (spec/15-offsets.md).

use std::fmt;

/// A position in a stream: the number of stored bytes before it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub u64);

/// Width of the wire form of an offset.
pub const OFFSET_WIDTH: usize = 20;

impl Offset {
    pub const ZERO: Offset = Offset(0);

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// The offset `len` bytes after this one.
    pub fn advance(self, len: u64) -> Offset {
        Offset(self.0.saturating_add(len))
    }

    /// Parses the wire form: exactly 20 ASCII digits.
    pub fn parse_token(token: &str) -> Option<Offset> {
        if token.len() != OFFSET_WIDTH || !token.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        token.parse::<u64>().ok().map(Offset)
    }

    /// The wire form: `OFFSET_WIDTH` decimal digits, zero-padded so that
    /// tokens compare as strings the way offsets compare as numbers.
    pub fn digits(self) -> [u8; OFFSET_WIDTH] {
        let mut digits = [b'0'; OFFSET_WIDTH];
        let mut rest = self.0;
        for d in digits.iter_mut().rev() {
            // `rest % 10` is a single digit.
            *d = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        digits
    }
}

impl fmt::Display for Offset {
    /// One write of the whole token: `{:020}` pads digit by digit, and a
    /// `to_string` per answer then grows its string several times.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.digits();
        f.write_str(std::str::from_utf8(&digits).map_err(|_| fmt::Error)?)
    }
}

/// Where a read starts, as a client names it (`offset=` query parameter).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// `-1` or no offset: the stream's first readable byte.
    Start,
    /// `now`: the current tail.
    Tail,
    /// A token the server returned earlier.
    At(Offset),
}

impl ReadFrom {
    /// Parses an `offset=` value; `None` means the value is malformed.
    pub fn parse(value: &str) -> Option<ReadFrom> {
        match value {
            "-1" => Some(ReadFrom::Start),
            "now" => Some(ReadFrom::Tail),
            other => Offset::parse_token(other).map(ReadFrom::At),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_twenty_zero_padded_digits() {
        assert_eq!(Offset(0).to_string(), "00000000000000000000");
        assert_eq!(Offset(42).to_string(), "00000000000000000042");
        assert_eq!(Offset(u64::MAX).to_string(), "18446744073709551615");
    }

    #[test]
    fn lexicographic_order_is_numeric_order() {
        let a = Offset(9).to_string();
        let b = Offset(10).to_string();
        assert!(a < b);
    }

    #[test]
    fn parses_only_its_own_tokens_and_the_sentinels() {
        let table: &[(&str, Option<ReadFrom>)] = &[
            ("-1", Some(ReadFrom::Start)),
            ("now", Some(ReadFrom::Tail)),
            ("00000000000000000042", Some(ReadFrom::At(Offset(42)))),
            ("42", None),
            ("", None),
            ("-2", None),
            ("NOW", None),
            ("0000000000000000004a", None),
            ("99999999999999999999", None),
            ("+0000000000000000042", None),
            ("000000000000000000042", None),
        ];
        for (input, expected) in table {
            assert_eq!(ReadFrom::parse(input), *expected, "input {input:?}");
        }
    }
}
