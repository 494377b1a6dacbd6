//! Reading Server-Sent Events from a live response, event by event.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::{Req, TIMEOUT, base64_decode};

/// One Server-Sent Event: its type and its `data:` lines joined with LF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
}

impl Event {
    pub fn is(&self, event: &str) -> bool {
        self.event == event
    }

    /// The data of a `control` or `error` event as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {self:?}"))
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An open SSE response, read event by event with a timeout per event.
pub struct Sse {
    what: String,
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: ByteStream,
    buf: Vec<u8>,
    ended: bool,
    /// Every event read so far, for failure messages.
    seen: Vec<Event>,
}

impl Sse {
    pub async fn open(req: Req) -> Sse {
        let (what, response) = req.open().await;
        let status = response.status();
        let headers = response.headers().clone();
        Sse {
            what,
            status,
            headers,
            body: Box::pin(response.bytes_stream()),
            buf: Vec::new(),
            ended: false,
            seen: Vec::new(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().expect("a visible-ASCII header value"))
    }

    /// The next event, or `None` once the server ended the response.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.take_event() {
                self.seen.push(event.clone());
                return Some(event);
            }
            if self.ended {
                return None;
            }
            let what = &self.what;
            let seen = &self.seen;
            let chunk = tokio::time::timeout(TIMEOUT, self.body.next())
                .await
                .unwrap_or_else(|_| panic!("{what}: no SSE event within {TIMEOUT:?}; events so far: {seen:#?}"));
            match chunk {
                Some(Ok(bytes)) => self.buf.extend_from_slice(&bytes),
                Some(Err(e)) => panic!("{what}: the SSE body failed: {e}"),
                None => self.ended = true,
            }
        }
    }

    /// Reads events until one matches `done`, and returns all of them, the
    /// matching one last. Fails if the response ends first.
    pub async fn until(&mut self, done: impl Fn(&Event) -> bool) -> Vec<Event> {
        let mut events = Vec::new();
        loop {
            let Some(event) = self.next().await else {
                panic!("{}: the SSE response ended before the expected event; events: {:#?}", self.what, self.seen);
            };
            let matched = done(&event);
            events.push(event);
            if matched {
                return events;
            }
        }
    }

    /// The next control event, skipping data events (which are returned too).
    pub async fn until_control(&mut self) -> (Vec<Event>, Value) {
        let events = self.until(|e| e.is("control")).await;
        let control = events.last().map(Event::json).unwrap_or_default();
        (events, control)
    }

    /// Asserts the server ends the response without another event.
    pub async fn expect_end(&mut self) {
        if let Some(event) = self.next().await {
            panic!("{}: expected the SSE response to end, got {event:?}", self.what);
        }
    }

    /// Parses one complete event out of the buffer, if there is one. Events
    /// end with a blank line; comment lines (`:`) are skipped.
    fn take_event(&mut self) -> Option<Event> {
        loop {
            let end = self.buf.windows(2).position(|w| w == b"\n\n")?;
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8(block).expect("SSE text is UTF-8");
            let mut event = String::from("message");
            let mut data: Vec<&str> = Vec::new();
            let mut any = false;
            for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
                if line.is_empty() || line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                any = true;
                match field {
                    "event" => event = value.to_string(),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            if any {
                return Some(Event { event, data: data.join("\n") });
            }
        }
    }
}

/// The payload bytes of a stream's data events: base64-decoded when the
/// response says `Stream-Sse-Data-Encoding: base64`, as base protocol §5.8
/// tells clients (join the lines, drop CR and LF, decode).
pub fn sse_payload(events: &[Event], base64: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events.iter().filter(|e| e.is("data")) {
        if base64 {
            let text: String = event.data.chars().filter(|c| *c != '\n' && *c != '\r').collect();
            out.extend(base64_decode(&text).unwrap_or_else(|| panic!("invalid base64 in {event:?}")));
        } else {
            out.extend_from_slice(event.data.as_bytes());
        }
    }
    out
}
