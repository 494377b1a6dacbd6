//! Collecting the failures of many table rows, to report them all at once.

use std::fmt;

/// Collects failed expectations, so a test that checks many rows of a
/// table reports every wrong row at once instead of the first.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
    count: usize,
    finished: bool,
}

impl Checks {
    pub fn new() -> Checks {
        Checks::default()
    }

    /// Runs `check` (which asserts, e.g. with `Answer::expect`) and keeps
    /// its panic message under `label` instead of unwinding.
    pub fn run(&mut self, label: impl fmt::Display, check: impl FnOnce()) {
        self.count += 1;
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check)) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            self.failures.push(format!("{label}: {message}"));
        }
    }

    /// Fails the test when any check failed, listing them all.
    #[track_caller]
    pub fn finish(mut self) {
        self.finished = true;
        assert!(
            self.failures.is_empty(),
            "{} of {} checks failed:\n\n{}",
            self.failures.len(),
            self.count,
            self.failures.join("\n\n")
        );
    }
}

/// A collector dropped without `finish` would swallow its failures: it
/// fails the test instead.
impl Drop for Checks {
    fn drop(&mut self) {
        if !self.finished && !std::thread::panicking() {
            panic!(
                "Checks dropped without finish(): {} of {} checks failed:\n\n{}",
                self.failures.len(),
                self.count,
                self.failures.join("\n\n")
            );
        }
    }
}

#[test]
#[should_panic(expected = "dropped without finish")]
fn checks_that_are_never_finished_fail() {
    let mut checks = Checks::new();
    checks.run("a passing check", || {});
}
