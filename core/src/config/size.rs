//! Byte sizes in the config file: an integer of bytes, or a string with a
//! binary (`KiB`, `MiB`, `GiB`, `TiB`) or decimal (`KB`, `MB`, `GB`) unit.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const KIB: u64 = 1024;
    pub const MIB: u64 = 1024 * 1024;
    pub const GIB: u64 = 1024 * 1024 * 1024;

    pub fn parse(text: &str) -> Option<ByteSize> {
        let text = text.trim();
        let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let n: u64 = digits.parse().ok()?;
        let scale: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => Self::KIB,
            "MiB" => Self::MIB,
            "GiB" => Self::GIB,
            "TiB" => Self::GIB * 1024,
            "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            _ => return None,
        };
        n.checked_mul(scale).map(ByteSize)
    }
}

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}B", self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Text(t) => ByteSize::parse(&t).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "{t:?} is not a size: use bytes or e.g. \"64MiB\", \"4KiB\", \"1GiB\""
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;

    #[test]
    fn units() {
        assert_eq!(ByteSize::parse("64MiB"), Some(ByteSize(64 << 20)));
        assert_eq!(ByteSize::parse("4KiB"), Some(ByteSize(4096)));
        assert_eq!(ByteSize::parse("1GiB"), Some(ByteSize(1 << 30)));
        assert_eq!(ByteSize::parse("512"), Some(ByteSize(512)));
        assert_eq!(ByteSize::parse("2 MB"), Some(ByteSize(2_000_000)));
        assert_eq!(ByteSize::parse("MiB"), None);
        assert_eq!(ByteSize::parse("12parsecs"), None);
        assert_eq!(ByteSize::parse("99999999999999TiB"), None);
    }
}
