//! The postcard wire of the `StreamService` (`ursula_http::wire::{encode,
//! decode}`): the commands a gateway sends to a voter, the answers it gets
//! back, the read query, and the typed refusals inside a `Failure`.
//!
//! The input's first byte picks the type, the rest is its encoding.
//! Properties: decoding never panics; a decoded value re-encodes to bytes
//! that decode to the same value (`==` where the type has it, else the same
//! bytes again); a decoded refusal maps to a `Failure` and back to itself,
//! and renders as an HTTP answer without panicking.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use ursula_http::backend::{
    BackendError, PartAdmission, PartStaged, PartsCommit, PartsDiscard, PartsRefusal, StagedPart,
};
use ursula_http::error::ApiError;
use ursula_http::wire::{self, Refused, pb};
use ursula_stream::{
    AdvanceRetention, AppendOk, AppendStream, BootstrapView, CreateOk, CreateStream, DeleteStream, PublishSnapshot,
    ReadQuery, ReadView, Rejection, SnapshotOk, SnapshotView, StreamInfo,
};

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else { return };
    match which % 20 {
        // Commands, gateway to voter (`encoded_command`).
        0 => bytes_stable::<CreateStream>(bytes),
        1 => bytes_stable::<AppendStream>(bytes),
        2 => bytes_stable::<DeleteStream>(bytes),
        3 => bytes_stable::<PublishSnapshot>(bytes),
        4 => bytes_stable::<AdvanceRetention>(bytes),
        5 => bytes_stable::<PartAdmission>(bytes),
        6 => bytes_stable::<StagedPart>(bytes),
        7 => bytes_stable::<PartsCommit>(bytes),
        8 => bytes_stable::<PartsDiscard>(bytes),
        // The read query (`encoded_query`).
        9 => same::<ReadQuery>(bytes),
        // Answers, voter to gateway (`EncodedOutcome`, `EncodedInfo`, `EncodedView`).
        10 => same::<CreateOk>(bytes),
        11 => same::<AppendOk>(bytes),
        12 => same::<SnapshotOk>(bytes),
        13 => same::<StreamInfo>(bytes),
        14 => {
            same::<ReadView>(bytes);
            read_chunk(bytes);
        }
        15 => same::<SnapshotView>(bytes),
        16 => same::<BootstrapView>(bytes),
        17 => same::<PartStaged>(bytes),
        // Refusals inside a `Failure`.
        18 => rejection(bytes),
        _ => parts_refusal(bytes),
    }
});

fn encode_decode<T: Serialize + DeserializeOwned>(value: &T) -> (Bytes, T) {
    let bytes = wire::encode(value);
    let back = wire::decode::<T>("the fuzzed type", &bytes).expect("an encoded value decodes");
    (bytes, back)
}

fn equal<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<T> {
    let value = wire::decode::<T>("the fuzzed type", bytes).ok()?;
    let (_, back) = encode_decode(&value);
    assert_eq!(back, value, "decode(encode(x)) == x");
    Some(value)
}

fn same<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    let _ = equal::<T>(bytes);
}

fn bytes_stable<T: Serialize + DeserializeOwned>(bytes: &[u8]) {
    let Ok(value) = wire::decode::<T>("the fuzzed type", bytes) else { return };
    let (first, back) = encode_decode(&value);
    assert_eq!(wire::encode(&back), first, "decode(encode(x)) encodes as x did");
}

/// A read's view travels without its chunks, which ride beside it.
fn read_chunk(bytes: &[u8]) {
    let chunk = pb::ReadChunk { encoded_view: Bytes::copy_from_slice(bytes), chunks: vec![Bytes::from_static(b"x")] };
    if let Ok(view) = wire::read_view(chunk) {
        assert_eq!(view.chunks, vec![Bytes::from_static(b"x")]);
        let again = wire::read_chunk(view.clone());
        assert_eq!(wire::read_view(again), Ok(view));
    }
}

fn answered(e: BackendError) {
    let code = match &e {
        BackendError::Rejected(r) => r.code().as_str().to_owned(),
        BackendError::Parts(p) => p.code().as_str().to_owned(),
        _ => String::new(),
    };
    assert!(!code.is_empty());
    let back = wire::refused(wire::failure(7, &e));
    assert_eq!(back, Refused::Backend(e.clone()), "a refusal maps to a Failure and back");
    for head in [false, true] {
        let answer = ursula_http::render::error(&ApiError::Backend(e.clone()), head);
        assert!(answer.status().is_client_error() || answer.status().is_server_error(), "{e:?}");
    }
}

fn rejection(bytes: &[u8]) {
    let failure = pb::Failure {
        kind: Some(pb::failure::Kind::Rejected(pb::Rejected {
            code: "FUZZ".into(),
            encoded_rejection: Bytes::copy_from_slice(bytes),
        })),
    };
    let refused = wire::refused(failure);
    match equal::<Rejection>(bytes) {
        Some(r) => {
            assert_eq!(refused, Refused::Backend(BackendError::Rejected(r.clone())));
            answered(BackendError::Rejected(r));
        }
        None => assert!(matches!(refused, Refused::Backend(BackendError::Internal(_)))),
    }
}

fn parts_refusal(bytes: &[u8]) {
    let failure = pb::Failure {
        kind: Some(pb::failure::Kind::PartsRefused(pb::PartsRefused {
            code: "FUZZ".into(),
            encoded_refusal: Bytes::copy_from_slice(bytes),
        })),
    };
    let refused = wire::refused(failure);
    match equal::<PartsRefusal>(bytes) {
        Some(p) => {
            assert_eq!(refused, Refused::Backend(BackendError::Parts(p.clone())));
            answered(BackendError::Parts(p));
        }
        None => assert!(matches!(refused, Refused::Backend(BackendError::Internal(_)))),
    }
}
