//! Stream lifetime: a sliding `Stream-TTL` or a fixed `Stream-Expires-At`
//! (spec/13-streams.md "Lifecycle").

/// How long a stream lives, as its create asked.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Lifetime {
    Forever,
    /// Sliding window in seconds, renewed by writes and (at most once per
    /// quarter window) by reads.
    Ttl {
        secs: u64,
    },
    /// A fixed instant, in milliseconds since the Unix epoch.
    ExpiresAt {
        at_ms: u64,
    },
}

/// Where a stream's lifetime stands.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct LifetimeClock {
    pub lifetime: Lifetime,
    /// When the stream expires; `None` for `Forever`.
    pub deadline_ms: Option<u64>,
    /// When the TTL was last renewed.
    pub renewed_ms: u64,
}

impl Lifetime {
    /// Whether two creates ask for the same lifetime (idempotent create).
    pub fn same_as(&self, other: &Lifetime) -> bool {
        match (self, other) {
            (Lifetime::Forever, Lifetime::Forever) => true,
            (Lifetime::Ttl { secs: a }, Lifetime::Ttl { secs: b }) => a == b,
            (Lifetime::ExpiresAt { at_ms: a }, Lifetime::ExpiresAt { at_ms: b }) => a == b,
            _ => false,
        }
    }
}

impl LifetimeClock {
    pub fn start(lifetime: Lifetime, now_ms: u64) -> LifetimeClock {
        let deadline_ms = match &lifetime {
            Lifetime::Forever => None,
            Lifetime::Ttl { secs } => Some(now_ms.saturating_add(secs.saturating_mul(1000))),
            Lifetime::ExpiresAt { at_ms } => Some(*at_ms),
        };
        LifetimeClock { lifetime, deadline_ms, renewed_ms: now_ms }
    }

    pub fn expired(&self, now_ms: u64) -> bool {
        self.deadline_ms.is_some_and(|d| now_ms >= d)
    }

    /// A write restarts the sliding window. Renewal never moves expiry earlier.
    pub fn renew(&mut self, now_ms: u64) {
        if let Lifetime::Ttl { secs } = self.lifetime {
            let next = now_ms.saturating_add(secs.saturating_mul(1000));
            self.deadline_ms = Some(self.deadline_ms.map_or(next, |d| d.max(next)));
            self.renewed_ms = self.renewed_ms.max(now_ms);
        }
    }

    /// A read renews at most once per quarter of the window.
    pub fn read_wants_renewal(&self, now_ms: u64) -> bool {
        match self.lifetime {
            Lifetime::Ttl { secs } => {
                let quarter = secs.saturating_mul(1000) / 4;
                now_ms.saturating_sub(self.renewed_ms) >= quarter
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_slides_with_writes_and_never_moves_earlier() {
        let mut clock = LifetimeClock::start(Lifetime::Ttl { secs: 10 }, 1_000);
        assert_eq!(clock.deadline_ms, Some(11_000));
        assert!(!clock.expired(10_999));
        assert!(clock.expired(11_000));
        clock.renew(5_000);
        assert_eq!(clock.deadline_ms, Some(15_000));
        clock.renew(2_000); // a slower clock
        assert_eq!(clock.deadline_ms, Some(15_000));
    }

    #[test]
    fn reads_renew_once_per_quarter_window() {
        let clock = LifetimeClock::start(Lifetime::Ttl { secs: 8 }, 0);
        assert!(!clock.read_wants_renewal(1_999));
        assert!(clock.read_wants_renewal(2_000));
        let fixed = LifetimeClock::start(Lifetime::ExpiresAt { at_ms: 9 }, 0);
        assert!(!fixed.read_wants_renewal(5));
        assert!(fixed.expired(9));
    }
}
