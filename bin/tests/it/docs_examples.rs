//! The curl examples of `docs/extensions.md` must not rot: this test starts
//! a node and runs each `## ` section's ```` ```bash ```` blocks, in order, as
//! one `bash -euo pipefail` script with `http://127.0.0.1:4437` replaced by
//! the node's URL, and asserts that every section exits 0. Each example
//! ends with a check (`curl -sf`, `test`, `grep`), so a server that answers
//! otherwise fails the section.
//!
//! Needs `bash` and `curl` on the machine that runs the tests.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::Node;

/// The URL the examples are written against.
const DOCS_URL: &str = "http://127.0.0.1:4437";
/// Upper bound for one section's script.
const SECTION_TIMEOUT: Duration = Duration::from_secs(60);
/// The extensions the page must show, one section each.
const SECTIONS: [&str; 9] = [
    "Buckets and stream ids",
    "Stream incarnations",
    "Snapshots",
    "Retention",
    "Bootstrap",
    "Immutable reads",
    "Write keys and typed answers",
    "Read path",
    "Error bodies",
];

/// One `## ` section of the page and its bash blocks, joined in order.
#[derive(Debug, PartialEq, Eq)]
struct Section {
    title: String,
    script: String,
}

/// The `## ` sections that hold at least one ```` ```bash ```` block. Other
/// fences (plain, `http`, ...) are prose.
fn bash_sections(markdown: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut title: Option<String> = None;
    let mut fence: Option<bool> = None; // Some(is_bash) while inside a fence
    for line in markdown.lines() {
        match fence {
            Some(is_bash) => {
                if line.trim_start().starts_with("```") {
                    fence = None;
                    if is_bash && let Some(section) = sections.last_mut() {
                        section.script.push('\n');
                    }
                } else if is_bash && let Some(section) = sections.last_mut() {
                    section.script.push_str(line);
                    section.script.push('\n');
                }
            }
            None => {
                if let Some(heading) = line.strip_prefix("## ") {
                    title = Some(heading.trim().to_string());
                } else if let Some(info) = line.trim_start().strip_prefix("```") {
                    let is_bash = info.trim() == "bash";
                    fence = Some(is_bash);
                    if is_bash {
                        let name = title.clone().unwrap_or_else(|| "(before the first section)".into());
                        if sections.last().is_none_or(|s| s.title != name) {
                            sections.push(Section { title: name, script: String::new() });
                        }
                    }
                }
            }
        }
    }
    sections
}

/// What running one section's script gave.
struct Run {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `script` with `bash -euo pipefail` (and `-x`, so a failure shows
/// the command that failed), killing it after `SECTION_TIMEOUT`.
fn run_bash(script: &str) -> Run {
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail", "-x", "-c", script])
        .current_dir(std::env::temp_dir())
        // The node is on loopback: never through a proxy.
        .env("NO_PROXY", "*")
        .env("no_proxy", "*")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running bash (the docs examples need bash and curl)");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + SECTION_TIMEOUT;
    let (status, timed_out) = loop {
        match child.try_wait() {
            Ok(Some(status)) => break (status.code(), false),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("waiting for bash: {e}"),
        }
    };
    Run { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default(), timed_out }
}

/// Keeps the end of a long output, where a failure shows.
fn tail_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[test]
fn docs_extensions_md_examples_run_against_a_node() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/extensions.md");
    let markdown = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let sections = bash_sections(&markdown);
    let titles: Vec<&str> = sections.iter().map(|s| s.title.as_str()).collect();
    for wanted in SECTIONS {
        assert!(
            titles.contains(&wanted),
            "docs/extensions.md has no section {wanted:?} with a bash example: {titles:?}"
        );
    }

    let node = Node::start();
    let mut failures = Vec::new();
    for section in &sections {
        assert!(section.script.contains(DOCS_URL), "section {:?} never talks to {DOCS_URL}", section.title);
        let script = section.script.replace(DOCS_URL, node.base());
        let run = run_bash(&script);
        if run.timed_out || run.status != Some(0) {
            failures.push(format!(
                "## {} (exit {:?}{}):\n--- stdout (end) ---\n{}\n--- stderr (end) ---\n{}",
                section.title,
                run.status,
                if run.timed_out { ", timed out" } else { "" },
                tail_of(&run.stdout, 3000),
                tail_of(&run.stderr, 3000),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} sections of docs/extensions.md failed:\n\n{}",
        failures.len(),
        sections.len(),
        failures.join("\n\n")
    );
}

#[test]
fn bash_sections_collects_only_bash_fences_per_section() {
    let markdown = "\
# Title

```
not a script
```

## One

text

```bash
echo a
```

```http
GET / HTTP/1.1
```

```bash
echo b
```

## Two

```bash
echo c
```

## Three

no example
";
    assert_eq!(
        bash_sections(markdown),
        vec![
            Section { title: "One".into(), script: "echo a\n\necho b\n\n".into() },
            Section { title: "Two".into(), script: "echo c\n\n".into() },
        ]
    );
}
