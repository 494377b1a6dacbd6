//! Idempotent producers (spec/17-exactly-once-writes.md, base protocol
//! §5.2.1, extensions §5.3): per-stream `(Producer-Id, epoch, seq)` state
//! and the decision for each incoming write.

use crate::offset::Offset;

/// Largest epoch or seq: 2^53 − 1, so values survive JSON.
pub const MAX_PRODUCER_NUMBER: u64 = (1 << 53) - 1;
/// Longest `Producer-Id`.
pub const MAX_PRODUCER_ID_BYTES: usize = 256;

/// The producer headers of one write, validated by the HTTP layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerHeaders {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// Where one applied write's bytes landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub start: Offset,
    pub next: Offset,
    pub closed: bool,
}

/// The epoch a claim replaced, and the last seq of it that applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedEpoch {
    pub epoch: u64,
    pub seq: u64,
}

/// What a stream remembers of one producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerState {
    pub epoch: u64,
    pub last_seq: u64,
    /// The receipt of the newest write only.
    pub newest: Receipt,
    /// Set by the claim of the current epoch when it replaced an earlier one.
    pub closed_epoch: Option<ClosedEpoch>,
    pub last_seen_ms: u64,
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
}

/// Decides a write against the producer's state (`None`: never seen).
pub fn decide(state: Option<&ProducerState>, write: &ProducerHeaders) -> ProducerDecision {
    let Some(state) = state else {
        return if write.seq == 0 {
            ProducerDecision::Proceed { claim: true }
        } else {
            ProducerDecision::EpochNotClaimed
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

/// The state after a write that `decide` let proceed has applied.
pub fn record(
    previous: Option<&ProducerState>,
    write: &ProducerHeaders,
    receipt: Receipt,
    now_ms: u64,
) -> ProducerState {
    let closed_epoch = match previous {
        Some(prev) if prev.epoch < write.epoch => Some(ClosedEpoch { epoch: prev.epoch, seq: prev.last_seq }),
        Some(prev) => prev.closed_epoch,
        None => None,
    };
    ProducerState { epoch: write.epoch, last_seq: write.seq, newest: receipt, closed_epoch, last_seen_ms: now_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(epoch: u64, seq: u64) -> ProducerHeaders {
        ProducerHeaders { id: "p".into(), epoch, seq }
    }

    fn state(epoch: u64, last_seq: u64) -> ProducerState {
        ProducerState {
            epoch,
            last_seq,
            newest: Receipt { start: Offset(10), next: Offset(20), closed: false },
            closed_epoch: None,
            last_seen_ms: 0,
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
        assert_eq!(decide(None, &w(0, 3)), ProducerDecision::EpochNotClaimed);
    }

    #[test]
    fn a_claim_remembers_the_epoch_it_closed() {
        let prev = state(1, 9);
        let receipt = Receipt { start: Offset(0), next: Offset(1), closed: false };
        let next = record(Some(&prev), &w(2, 0), receipt, 5);
        assert_eq!(next.closed_epoch, Some(ClosedEpoch { epoch: 1, seq: 9 }));
        assert_eq!(
            decide(Some(&next), &w(1, 3)),
            ProducerDecision::StaleEpoch { current: 2, closed_by_claim: Some(ClosedEpoch { epoch: 1, seq: 9 }) }
        );
        assert_eq!(decide(Some(&next), &w(0, 3)), ProducerDecision::StaleEpoch { current: 2, closed_by_claim: None });
    }
}
