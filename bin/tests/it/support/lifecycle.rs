//! Process lifecycle for durability tests: `kill -9`, `SIGTERM`, the
//! node's stderr, and running the binary when it is expected to refuse.

use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::node::finish_stderr;
use super::{Node, START_TIMEOUT};

impl Node {
    /// What the node wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        let bytes = self.process_ref().stderr.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// `kill -9`: no shutdown runs, the page cache keeps what was written.
    pub fn kill9(mut self) {
        let p = self.process();
        let _ = p.child.kill();
        let _ = p.child.wait();
    }

    /// `SIGHUP` (a gateway reloads its access policy).
    pub fn hangup(&self) {
        let pid = self.process_ref().child.id().to_string();
        let sent = Command::new("kill").args(["-HUP", &pid]).status().expect("running kill");
        assert!(sent.success(), "kill -HUP {pid}");
    }

    /// `SIGTERM`, then waits for the exit; returns the status and stderr.
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let p = self.process();
        let pid = p.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("running kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let deadline = Instant::now() + START_TIMEOUT;
        let status = loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                break status;
            }
            assert!(Instant::now() < deadline, "ursula did not exit after SIGTERM");
            thread::sleep(Duration::from_millis(20));
        };
        let text = finish_stderr(&p.stderr, p.stderr_reader.take());
        (status, text)
    }
}

/// Runs `ursula ARGS` to its exit (it must exit within the start timeout)
/// and returns the status and stderr.
pub fn run_to_exit(args: &[String]) -> (ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ursula"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the ursula binary");
    let deadline = Instant::now() + START_TIMEOUT;
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ursula {args:?} kept running; it was expected to refuse to start");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut text);
    }
    (status, text)
}
