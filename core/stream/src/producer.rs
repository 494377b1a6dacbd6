//! Idempotent producers (spec/17-exactly-once-writes.md, base protocol
//! §5.2.1, extensions §5.3): per-stream `(Producer-Id, epoch, seq)` state
//! and the decision for each incoming write.

use crate::offset::Offset;

/// Largest epoch or seq: 2^53 − 1, so values survive JSON.
pub const MAX_PRODUCER_NUMBER: u64 = (1 << 53) - 1;
/// Longest `Producer-Id`.
pub const MAX_PRODUCER_ID_BYTES: usize = 256;

/// The producer headers of one write, validated by the HTTP layer.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProducerHeaders {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
    /// `Producer-Digest`: part of the write's identity (extensions §5.2).
    pub digest: Option<WriteDigest>,
}

/// A write's `Producer-Digest` and whether the body matched it. The
/// proposer hashes the body once; the state machine decides when a
/// mismatch matters (only for a write that would apply).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteDigest {
    pub claimed: [u8; 32],
    pub matches_body: bool,
}

impl ProducerHeaders {
    fn identity(&self) -> Option<[u8; 32]> {
        self.digest.map(|d| d.claimed)
    }
}

/// Where one applied write's bytes landed.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub start: Offset,
    pub next: Offset,
    pub closed: bool,
}

/// The epoch a claim replaced, and the last seq of it that applied.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedEpoch {
    pub epoch: u64,
    pub seq: u64,
}

/// What a stream remembers of one producer.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ProducerState {
    pub epoch: u64,
    pub last_seq: u64,
    /// The receipt of the newest write only.
    pub newest: Receipt,
    /// Set by the claim of the current epoch when it replaced an earlier one.
    pub closed_epoch: Option<ClosedEpoch>,
    pub last_seen_ms: u64,
    /// Identity (`Producer-Digest`) of the newest write.
    pub newest_identity: Option<[u8; 32]>,
    /// Identity of the claim (seq 0) of the current epoch, held for the epoch's lifetime.
    pub claim_identity: Option<[u8; 32]>,
    /// Opened by a claim above the stream's epoch floor (extensions §5.4).
    pub opened_above_floor: bool,
}

/// How the producer rules decide a write, before anything else is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerDecision {
    /// Go on with the write; `claim` when it opens an epoch.
    Proceed { claim: bool },
    /// Already applied; answer with the receipt when it is the newest write.
    Duplicate { receipt: Option<Receipt> },
    /// An older epoch than the current one.
    StaleEpoch { current: u64, closed_by_claim: Option<ClosedEpoch> },
    /// A later epoch must start at seq 0.
    EpochNotClaimed,
    /// A seq that skips ahead.
    SeqGap { expected: u64, received: u64 },
    /// The key applied with another identity.
    KeyConflict { current: u64 },
}

/// Decides a write against the producer's state (`None`: never seen).
pub fn decide(state: Option<&ProducerState>, write: &ProducerHeaders) -> ProducerDecision {
    let Some(state) = state else {
        // No state: a claim opens the producer; anything else is a gap from 0.
        return if write.seq == 0 {
            ProducerDecision::Proceed { claim: true }
        } else {
            ProducerDecision::SeqGap { expected: 0, received: write.seq }
        };
    };
    if write.epoch < state.epoch {
        let closed_by_claim = state.closed_epoch.filter(|c| c.epoch == write.epoch);
        return ProducerDecision::StaleEpoch { current: state.epoch, closed_by_claim };
    }
    if write.epoch > state.epoch {
        return if write.seq == 0 {
            ProducerDecision::Proceed { claim: true }
        } else {
            ProducerDecision::EpochNotClaimed
        };
    }
    if write.seq <= state.last_seq {
        let held = if write.seq == state.last_seq {
            Some(state.newest_identity)
        } else if write.seq == 0 {
            Some(state.claim_identity)
        } else {
            None
        };
        if held.is_some_and(|identity| identity != write.identity()) {
            return ProducerDecision::KeyConflict { current: state.epoch };
        }
        let receipt = (write.seq == state.last_seq).then_some(state.newest);
        return ProducerDecision::Duplicate { receipt };
    }
    let expected = state.last_seq.saturating_add(1);
    if write.seq == expected {
        ProducerDecision::Proceed { claim: false }
    } else {
        ProducerDecision::SeqGap { expected, received: write.seq }
    }
}

/// The state after a write that `decide` let proceed has applied. A claim
/// that replaces state opened at or below the epoch floor reports no
/// closure: the epoch it replaces may be one the stream forgot.
pub fn record(
    previous: Option<&ProducerState>,
    write: &ProducerHeaders,
    receipt: Receipt,
    now_ms: u64,
    floor: Option<u64>,
) -> ProducerState {
    let above_floor = floor.is_none_or(|f| write.epoch > f);
    let (closed_epoch, opened_above_floor) = match previous {
        Some(prev) if prev.epoch < write.epoch => {
            let closed = prev.opened_above_floor.then_some(ClosedEpoch { epoch: prev.epoch, seq: prev.last_seq });
            (closed, prev.opened_above_floor || above_floor)
        }
        Some(prev) => (prev.closed_epoch, prev.opened_above_floor),
        None => (None, above_floor),
    };
    let claim_identity = match previous {
        Some(prev) if prev.epoch == write.epoch => prev.claim_identity,
        _ => write.identity(),
    };
    ProducerState {
        epoch: write.epoch,
        last_seq: write.seq,
        newest: receipt,
        closed_epoch,
        last_seen_ms: now_ms,
        newest_identity: write.identity(),
        claim_identity,
        opened_above_floor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(epoch: u64, seq: u64) -> ProducerHeaders {
        ProducerHeaders { id: "p".into(), epoch, seq, digest: None }
    }

    fn with_digest(mut write: ProducerHeaders, byte: u8) -> ProducerHeaders {
        write.digest = Some(WriteDigest { claimed: [byte; 32], matches_body: true });
        write
    }

    fn state(epoch: u64, last_seq: u64) -> ProducerState {
        ProducerState {
            epoch,
            last_seq,
            newest: Receipt { start: Offset(10), next: Offset(20), closed: false },
            closed_epoch: None,
            last_seen_ms: 0,
            newest_identity: None,
            claim_identity: None,
            opened_above_floor: true,
        }
    }

    #[test]
    fn validation_table_of_base_protocol_5_2_1() {
        use ProducerDecision::*;
        let s = state(2, 5);
        let receipt = Some(s.newest);
        let table = [
            (w(1, 0), StaleEpoch { current: 2, closed_by_claim: None }),
            (w(3, 0), Proceed { claim: true }),
            (w(3, 1), EpochNotClaimed),
            (w(2, 5), Duplicate { receipt }),
            (w(2, 4), Duplicate { receipt: None }),
            (w(2, 6), Proceed { claim: false }),
            (w(2, 8), SeqGap { expected: 6, received: 8 }),
        ];
        for (write, expected) in table {
            assert_eq!(decide(Some(&s), &write), expected, "{write:?}");
        }
    }

    #[test]
    fn unknown_producer_must_start_at_seq_zero() {
        assert_eq!(decide(None, &w(7, 0)), ProducerDecision::Proceed { claim: true });
        assert_eq!(decide(None, &w(0, 3)), ProducerDecision::SeqGap { expected: 0, received: 3 });
    }

    #[test]
    fn the_digest_is_part_of_the_identity_of_the_newest_write_and_the_claim() {
        let receipt = Receipt { start: Offset(0), next: Offset(1), closed: false };
        let claim = record(None, &with_digest(w(0, 0), 1), receipt, 0, None);
        assert_eq!(
            decide(Some(&claim), &with_digest(w(0, 0), 1)),
            ProducerDecision::Duplicate { receipt: Some(receipt) }
        );
        assert_eq!(decide(Some(&claim), &with_digest(w(0, 0), 2)), ProducerDecision::KeyConflict { current: 0 });
        assert_eq!(decide(Some(&claim), &w(0, 0)), ProducerDecision::KeyConflict { current: 0 });
        let second = record(Some(&claim), &w(0, 1), receipt, 0, None);
        // The claim's identity is held for the epoch; older writes are not.
        assert_eq!(decide(Some(&second), &w(0, 0)), ProducerDecision::KeyConflict { current: 0 });
        let third = record(Some(&second), &w(0, 2), receipt, 0, None);
        assert_eq!(decide(Some(&third), &with_digest(w(0, 1), 9)), ProducerDecision::Duplicate { receipt: None });
        assert_eq!(decide(Some(&third), &with_digest(w(0, 2), 9)), ProducerDecision::KeyConflict { current: 0 });
    }

    #[test]
    fn a_claim_remembers_the_epoch_it_closed() {
        let prev = state(1, 9);
        let receipt = Receipt { start: Offset(0), next: Offset(1), closed: false };
        let next = record(Some(&prev), &w(2, 0), receipt, 5, None);
        assert_eq!(next.closed_epoch, Some(ClosedEpoch { epoch: 1, seq: 9 }));
        assert_eq!(
            decide(Some(&next), &w(1, 3)),
            ProducerDecision::StaleEpoch { current: 2, closed_by_claim: Some(ClosedEpoch { epoch: 1, seq: 9 }) }
        );
        assert_eq!(decide(Some(&next), &w(0, 3)), ProducerDecision::StaleEpoch { current: 2, closed_by_claim: None });
    }
}
