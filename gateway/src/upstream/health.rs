//! Which upstreams answer, so routing skips a dead voter instead of
//! picking it again (0.7 release notes, "The gateway stops picking a node
//! that does not answer"): an upstream that refuses or breaks a call is
//! ejected for 10 s, each failure after a window doubles the next one up
//! to 60 s, and any answer (a call or the health probe) puts it back.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

const FIRST_EJECTION: Duration = Duration::from_secs(10);
const LONGEST_EJECTION: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    ejected_until: Option<Instant>,
    /// The window the next failure ejects for, once one has.
    next_window: Option<Duration>,
    /// When the upstream last answered anything.
    answered: Option<Instant>,
}

/// Per upstream: ejection windows and the last answer.
pub struct Health {
    states: Vec<Mutex<State>>,
    pub ejections: AtomicU64,
}

impl Health {
    pub fn new(upstreams: usize) -> Health {
        Health { states: (0..upstreams).map(|_| Mutex::default()).collect(), ejections: AtomicU64::new(0) }
    }

    fn with<R>(&self, i: usize, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        self.states.get(i).map(|m| f(&mut m.lock().unwrap_or_else(|p| p.into_inner())))
    }

    /// The upstream answered: it is back in rotation at once.
    pub fn answered(&self, i: usize, now: Instant) {
        self.with(i, |s| {
            s.ejected_until = None;
            s.next_window = None;
            s.answered = Some(now);
        });
    }

    /// A call could not reach the upstream or broke: skip it for a window.
    pub fn failed(&self, i: usize, now: Instant) {
        let ejected = self.with(i, |s| {
            if s.ejected_until.is_some_and(|until| until > now) {
                return false;
            }
            let window = s.next_window.unwrap_or(FIRST_EJECTION);
            s.ejected_until = Some(now + window);
            s.next_window = Some((window * 2).min(LONGEST_EJECTION));
            true
        });
        if ejected == Some(true) {
            self.ejections.fetch_add(1, Relaxed);
        }
    }

    pub fn is_ejected(&self, i: usize, now: Instant) -> bool {
        self.with(i, |s| s.ejected_until.is_some_and(|until| until > now)).unwrap_or(false)
    }

    pub fn ejected_now(&self, now: Instant) -> usize {
        (0..self.states.len()).filter(|i| self.is_ejected(*i, now)).count()
    }

    /// Whether any upstream answered within `within`.
    pub fn any_answered(&self, now: Instant, within: Duration) -> bool {
        (0..self.states.len())
            .any(|i| self.with(i, |s| s.answered.is_some_and(|t| now.duration_since(t) <= within)) == Some(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_eject_for_doubling_windows_and_an_answer_restores() {
        let h = Health::new(2);
        let t0 = Instant::now();
        h.failed(0, t0);
        assert!(h.is_ejected(0, t0 + Duration::from_secs(9)));
        assert!(!h.is_ejected(0, t0 + Duration::from_secs(10)));
        assert!(!h.is_ejected(1, t0));
        // A failure inside the window does not extend it or count again.
        h.failed(0, t0 + Duration::from_secs(1));
        assert_eq!(h.ejections.load(Relaxed), 1);
        let t1 = t0 + Duration::from_secs(11);
        h.failed(0, t1);
        assert!(h.is_ejected(0, t1 + Duration::from_secs(19)));
        assert!(!h.is_ejected(0, t1 + Duration::from_secs(20)));
        for k in 0..5 {
            h.failed(0, t1 + Duration::from_secs(100 * (k + 1)));
        }
        let t2 = t1 + Duration::from_secs(500);
        assert!(h.is_ejected(0, t2 + Duration::from_secs(59)));
        assert!(!h.is_ejected(0, t2 + Duration::from_secs(60)));
        h.answered(0, t2);
        assert!(!h.is_ejected(0, t2));
        assert_eq!(h.ejected_now(t2), 0);
        assert!(h.any_answered(t2, Duration::from_secs(1)));
    }
}
