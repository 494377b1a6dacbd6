//! A fetched run of bytes kept as the pieces the HTTP client read it in:
//! joining them copies every cold byte once more, which cost a cold
//! catch-up a tenth of its CPU (BENCHMARKS.md, issue 24). Pure.

use bytes::Bytes;

/// One buffer of `pieces`; a copy only when there are several.
pub fn join(pieces: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(pieces) {
        Ok([one]) => one,
        Err(many) => many.concat().into(),
    }
}

/// `pieces` cut into blocks of `block` bytes (the last may be shorter): a
/// block inside one piece is a slice of it, only one across pieces is joined.
pub fn cut_blocks(pieces: Vec<Bytes>, block: usize) -> Vec<Bytes> {
    let block = block.max(1);
    let mut blocks = Vec::new();
    let mut pending: Vec<Bytes> = Vec::new();
    let mut pending_len = 0;
    for mut piece in pieces {
        while !piece.is_empty() {
            let take = (block - pending_len).min(piece.len());
            pending.push(piece.split_to(take));
            pending_len += take;
            if pending_len == block {
                blocks.push(join(std::mem::take(&mut pending)));
                pending_len = 0;
            }
        }
    }
    if pending_len > 0 {
        blocks.push(join(pending));
    }
    blocks
}

/// Bytes `[lo, hi)` of the run `pieces` make, as slices of them.
pub fn slice(pieces: &[Bytes], lo: usize, hi: usize) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    for piece in pieces {
        let end = at + piece.len();
        let (from, to) = (lo.max(at), hi.min(end));
        if from < to {
            out.push(piece.slice(from - at..to - at));
        }
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lens: &[usize]) -> (Vec<u8>, Vec<Bytes>) {
        let whole: Vec<u8> = (0..lens.iter().sum::<usize>()).map(|i| (i * 7 % 251) as u8).collect();
        let mut at = 0;
        let pieces = lens
            .iter()
            .map(|n| {
                at += n;
                Bytes::copy_from_slice(&whole[at - n..at])
            })
            .collect();
        (whole, pieces)
    }

    #[test]
    fn blocks_cut_across_pieces_hold_the_same_bytes() {
        for lens in [&[10][..], &[4, 4, 2], &[3, 7], &[1; 10], &[9, 1], &[2, 9, 9]] {
            let (whole, pieces) = run(lens);
            let firsts: Vec<*const u8> = pieces.iter().map(|p| p.as_ptr()).collect();
            let blocks = cut_blocks(pieces, 4);
            let expected: Vec<&[u8]> = whole.chunks(4).collect();
            assert_eq!(blocks.iter().map(|b| &b[..]).collect::<Vec<_>>(), expected, "{lens:?}");
            // A block that starts a piece of at least a block is that piece's own memory.
            if lens[0] >= 4 {
                assert_eq!(blocks[0].as_ptr(), firsts[0], "{lens:?}");
            }
        }
        assert!(cut_blocks(Vec::new(), 4).is_empty());
    }

    #[test]
    fn a_slice_sees_the_pieces_as_one_run() {
        let (whole, pieces) = run(&[5, 1, 8, 3]);
        for (lo, hi) in [(0, 17), (0, 0), (4, 6), (5, 6), (6, 14), (13, 17), (2, 3)] {
            let got: Vec<u8> = slice(&pieces, lo, hi).concat();
            assert_eq!(got, &whole[lo..hi], "{lo}..{hi}");
        }
        assert_eq!(&join(pieces)[..], &whole[..]);
    }
}
