//! Progress of long operations on stderr, for people: one line rewritten
//! in place, and nothing when stderr is not a terminal.

use std::io::{IsTerminal, Write};

pub struct Progress {
    on: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress { on: std::io::stderr().is_terminal() }
    }

    pub fn say(&self, line: &str) {
        if self.on {
            let mut err = std::io::stderr();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        }
    }

    pub fn done(&self) {
        if self.on {
            let _ = writeln!(std::io::stderr());
        }
    }
}
