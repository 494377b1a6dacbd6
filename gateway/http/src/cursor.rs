//! `Stream-Cursor`: interval numbers that keep live-read URLs changing so a
//! cache never serves one empty answer in a loop (base protocol §8.1).

/// 2024-10-09T00:00:00Z, the protocol's cursor epoch.
const EPOCH_MS: u64 = 1_728_432_000_000;
const INTERVAL_MS: u64 = 20_000;

/// The cursor for a live answer at `now_ms` to a request that echoed `client`.
/// A client cursor at or past the current interval gets a strictly larger
/// one, advanced by 1 to 3600 seconds of jitter.
pub fn next_cursor(now_ms: u64, client: Option<&str>) -> u64 {
    let current = now_ms.saturating_sub(EPOCH_MS) / INTERVAL_MS;
    match client.and_then(|c| c.parse::<u64>().ok()) {
        Some(echoed) if echoed >= current => {
            let jitter_secs = fastrand::u64(1..=3600);
            echoed.saturating_add(jitter_secs.div_ceil(INTERVAL_MS / 1000).max(1))
        }
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_never_go_back() {
        let now = EPOCH_MS + 1_000 * INTERVAL_MS + 5;
        assert_eq!(next_cursor(now, None), 1_000);
        assert_eq!(next_cursor(now, Some("12")), 1_000);
        for _ in 0..100 {
            let c = next_cursor(now, Some("1000"));
            assert!(c > 1_000 && c <= 1_000 + 180);
            assert!(next_cursor(now, Some("5000")) > 5_000);
        }
    }
}
