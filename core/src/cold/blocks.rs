//! Per-block digests of cold spans, so a read fetches only the blocks it
//! needs (ranged GETs) and still checks every byte against the span's
//! BLAKE3 digest the log recorded.
//!
//! BLAKE3 is a tree hash: a span's digest is the root over its 1 KiB
//! chunks, and every aligned run of `BLOCK` bytes (a power of two of
//! chunks) is a subtree with a chaining value of its own. An object written
//! by the flusher starts with a table of those values for each span of two
//! blocks or more. A reader merges a span's values up to the root and
//! compares it with the recorded digest: then the table is as trusted as
//! the digest, and each fetched block is checked against its own value.
//! An object without a table (written before it existed), or a table that
//! does not verify, is read whole as before.
//!
//! Layout: `MAGIC`, the table's length (u64 LE), the table (per span:
//! object offset u64 LE, length u64 LE, count u32 LE, count × 32 bytes),
//! then the spans' bytes.

use std::collections::HashMap;

use blake3::hazmat::{ChainingValue, HasherExt, Mode, left_subtree_len, merge_subtrees_non_root, merge_subtrees_root};

/// The block size: 64 chunks of 1 KiB.
pub const BLOCK: u64 = 64 * 1024;
pub const MAGIC: &[u8; 8] = b"ursblk1\n";
/// The magic and the table's length.
pub const HEADER: u64 = 16;

/// The chaining value of each `BLOCK` of `data`, a whole span hashed from
/// its first byte. Empty for a span of one block or less (its digest is
/// the block's own root hash: it is only ever read whole).
pub fn block_values(data: &[u8]) -> Vec<ChainingValue> {
    if data.len() as u64 <= BLOCK {
        return Vec::new();
    }
    data.chunks(BLOCK as usize).enumerate().map(|(i, block)| block_value(block, i as u64)).collect()
}

/// The chaining value of block `index` of a span of more than one block.
pub fn block_value(block: &[u8], index: u64) -> ChainingValue {
    blake3::Hasher::new().set_input_offset(index * BLOCK).update(block).finalize_non_root()
}

/// The BLAKE3 digest of a span of `len` bytes (more than one block) whose
/// blocks have `values`; `None` when the count does not fit the length.
pub fn root(values: &[ChainingValue], len: u64) -> Option<[u8; 32]> {
    if len <= BLOCK || values.len() as u64 != len.div_ceil(BLOCK) {
        return None;
    }
    let left = left_subtree_len(len);
    let hash = merge_subtrees_root(&subtree(values, 0, left), &subtree(values, left, len), Mode::Hash);
    Some(*hash.as_bytes())
}

/// The chaining value of bytes `[start, end)`, a subtree of the span's
/// tree: one block, or the merge of its left and right subtrees (whose
/// split, a power of two of at least a block, keeps blocks whole).
fn subtree(values: &[ChainingValue], start: u64, end: u64) -> ChainingValue {
    if end - start <= BLOCK {
        return values[(start / BLOCK) as usize];
    }
    let mid = start + left_subtree_len(end - start);
    merge_subtrees_non_root(&subtree(values, start, mid), &subtree(values, mid, end), Mode::Hash)
}

/// One span's entry of an object's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanBlocks {
    pub len: u64,
    /// Shared with every read of the span.
    pub values: std::sync::Arc<Vec<ChainingValue>>,
}

/// An object's table: per span, by its offset in the object.
pub type Table = HashMap<u64, SpanBlocks>;

/// The header and table of an object whose spans (object offset relative
/// to the first span byte, length, values) are `spans`; the spans' offsets
/// in the object are then theirs plus the returned length.
pub fn encode_table(spans: &[(u64, u64, Vec<ChainingValue>)]) -> Vec<u8> {
    let listed: Vec<_> = spans.iter().filter(|(_, _, v)| !v.is_empty()).collect();
    let table_len: usize = listed.iter().map(|(_, _, v)| 20 + 32 * v.len()).sum();
    let mut out = Vec::with_capacity(HEADER as usize + table_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(table_len as u64).to_le_bytes());
    let shift = HEADER + table_len as u64;
    for (offset, len, values) in listed {
        out.extend_from_slice(&(offset + shift).to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(values.len() as u32).to_le_bytes());
        for v in values {
            out.extend_from_slice(v);
        }
    }
    out
}

/// The table's length when `head` (an object's first bytes) starts with a
/// header; `None` for an object without one.
pub fn table_len(head: &[u8]) -> Option<u64> {
    let magic = head.get(..8)?;
    let len = head.get(8..16)?;
    (magic == MAGIC).then(|| u64::from_le_bytes(len.try_into().unwrap_or([0xff; 8])))
}

/// The bytes of the header and table of an object whose spans are `lens`
/// long: what `encode_table` writes for them.
pub fn table_size(lens: &[u64]) -> usize {
    let listed: usize = lens.iter().filter(|l| **l > BLOCK).map(|l| 20 + 32 * l.div_ceil(BLOCK) as usize).sum();
    HEADER as usize + listed
}

/// Parses a table; `None` when it is damaged (the object is then read whole).
pub fn decode_table(mut raw: &[u8]) -> Option<Table> {
    fn take(n: usize, raw: &mut &[u8]) -> Option<Vec<u8>> {
        let (head, rest) = raw.split_at_checked(n)?;
        *raw = rest;
        Some(head.to_vec())
    }
    let mut table = Table::new();
    while !raw.is_empty() {
        let offset = u64::from_le_bytes(take(8, &mut raw)?.try_into().ok()?);
        let len = u64::from_le_bytes(take(8, &mut raw)?.try_into().ok()?);
        let count = u32::from_le_bytes(take(4, &mut raw)?.try_into().ok()?) as usize;
        let bytes = take(count.checked_mul(32)?, &mut raw)?;
        let values = bytes.chunks_exact(32).map(|c| c.try_into().unwrap_or([0; 32])).collect();
        table.insert(offset, SpanBlocks { len, values: std::sync::Arc::new(values) });
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Vec<u8> {
        let mut rng = fastrand::Rng::with_seed(len as u64);
        (0..len).map(|_| rng.u8(..)).collect()
    }

    #[test]
    fn the_block_values_merge_to_the_spans_blake3_digest() {
        let b = BLOCK as usize;
        for len in [b + 1, 2 * b, 2 * b + 1, 3 * b, 5 * b + 17, 64 * b, 64 * b + 1000, 4 * 1024 * 1024 + 3] {
            let d = data(len);
            let values = block_values(&d);
            assert_eq!(values.len(), len.div_ceil(b), "{len}");
            assert_eq!(root(&values, len as u64), Some(*blake3::hash(&d).as_bytes()), "{len}");
            // A changed byte changes its block's value and the root.
            let mut bad = d.clone();
            bad[len / 2] ^= 1;
            let i = len / 2 / b;
            assert_ne!(block_value(&bad[i * b..((i + 1) * b).min(len)], i as u64), values[i]);
            assert_ne!(root(&block_values(&bad), len as u64), root(&values, len as u64));
        }
        assert!(block_values(&data(b)).is_empty(), "a span of one block is read whole");
        assert_eq!(root(&block_values(&data(3 * b)), 3 * BLOCK + 1), None, "the count must fit the length");
    }

    #[test]
    fn a_table_round_trips_and_damage_is_refused() {
        let spans = vec![
            (0, 10, Vec::new()),
            (10, 3 * BLOCK, vec![[1; 32], [2; 32], [3; 32]]),
            (3 * BLOCK + 10, 2 * BLOCK, vec![[4; 32], [5; 32]]),
        ];
        let raw = encode_table(&spans);
        assert_eq!(raw.len(), table_size(&[10, 3 * BLOCK, 2 * BLOCK]), "its size is known from the lengths");
        let len = table_len(&raw).expect("a header");
        assert_eq!(len as usize, raw.len() - HEADER as usize);
        let table = decode_table(&raw[HEADER as usize..]).expect("a table");
        let shift = raw.len() as u64;
        assert_eq!(table.len(), 2, "a one-block span is not listed");
        assert_eq!(
            table[&(10 + shift)],
            SpanBlocks { len: 3 * BLOCK, values: std::sync::Arc::new(vec![[1; 32], [2; 32], [3; 32]]) }
        );
        assert_eq!(table[&(3 * BLOCK + 10 + shift)].values.len(), 2);
        assert_eq!(decode_table(&raw[HEADER as usize..raw.len() - 1]), None, "a truncated table");
        assert_eq!(table_len(b"not a header...."), None);
    }
}
