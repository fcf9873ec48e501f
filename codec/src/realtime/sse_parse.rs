//! The client side of SSE: an incremental `text/event-stream` parser
//! (WHATWG HTML §9.2.6 "Interpreting an event stream"; SPEC RT-8, RT-13).
//!
//! Bytes arrive in arbitrary chunks; events go to a callback as borrowed
//! views, so nothing queues up and nothing is copied per event (a long
//! `id` persisting over many tiny events costs nothing extra). The parser
//! holds only the state of the event in progress, bounded by the SPEC RT-13
//! ceiling of 128 KiB; past it, it fails — it never grows.
//!
//! Deviations from WHATWG, both fail-closed: invalid UTF-8 is an error, not
//! U+FFFD (seed §6.3: "UTF-8 only"), and a `retry` value that does not fit
//! u64 is ignored.

use std::fmt;

/// SPEC RT-13: the SSE incomplete parser buffer ceiling.
pub const SSE_MAX_BUFFER: usize = 128 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event, borrowed from the parser for the duration of the
/// callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event` field of the block, or `"message"` when it had none.
    pub event_type: &'a str,
    /// The `data` lines of the block joined with `\n`.
    pub data: &'a str,
    /// The `id` field of this block itself, if it had one (seed §6.3: a
    /// CURSOR event must carry its own `id`; an inherited one does not count).
    pub id: Option<&'a str>,
    /// The last event ID as WHATWG keeps it: the latest `id` on the stream,
    /// persisting across blocks (what a reconnect sends as `Last-Event-ID`).
    pub last_event_id: &'a str,
    /// The latest valid `retry` value on the stream, ms.
    pub retry: Option<u64>,
}

/// Why the parser stopped. Once failed, it stays failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SseError {
    /// The unfinished line plus the event in progress would exceed the
    /// ceiling (SPEC RT-13; reported as `EVENT_TOO_LARGE`).
    BufferExceeded {
        /// Bytes the parser would have had to hold.
        len: usize,
        /// The ceiling.
        max: usize,
    },
    /// A line is not UTF-8 (reported as `MALFORMED_EVENT`).
    InvalidUtf8,
}

impl SseError {
    /// The failure kind to report (SPEC RT-14).
    pub const fn failure_kind(&self) -> super::FailureKind {
        match self {
            Self::BufferExceeded { .. } => super::FailureKind::EventTooLarge,
            Self::InvalidUtf8 => super::FailureKind::MalformedEvent,
        }
    }
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BufferExceeded { len, max } => {
                write!(
                    f,
                    "SSE event would need {len} bytes, over the {max}-byte ceiling"
                )
            }
            Self::InvalidUtf8 => f.write_str("SSE stream is not UTF-8"),
        }
    }
}

impl std::error::Error for SseError {}

/// An incremental event-stream parser (WHATWG; SPEC RT-8, RT-13).
///
/// ```
/// use dtp_codec::realtime::SseParser;
///
/// let mut p = SseParser::new();
/// let mut seen = Vec::new();
/// for chunk in [&b"id: c1\r"[..], b"\ndata: {\"a\":1}\n", b"\n"] {
///     p.feed(chunk, |e| seen.push((e.id.map(str::to_owned), e.data.to_owned())))
///         .unwrap();
/// }
/// assert_eq!(seen, [(Some("c1".to_owned()), "{\"a\":1}".to_owned())]);
/// ```
#[derive(Clone, Debug)]
pub struct SseParser {
    max: usize,
    /// The unfinished line (only when it spans chunks).
    line: Vec<u8>,
    /// The previous chunk ended in a CR: an LF first in the next is its pair.
    skip_lf: bool,
    /// A line has been completed (the BOM can only lead the first).
    started: bool,
    data: String,
    event_type: String,
    last_event_id: String,
    block_has_id: bool,
    retry: Option<u64>,
    failed: Option<SseError>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser with the SPEC RT-13 ceiling ([`SSE_MAX_BUFFER`]).
    pub fn new() -> Self {
        Self::with_max_buffer(SSE_MAX_BUFFER)
    }

    /// A parser with a lower ceiling (a value above [`SSE_MAX_BUFFER`] is
    /// clamped to it: a deployment may lower, never raise).
    pub fn with_max_buffer(max: usize) -> Self {
        Self {
            max: max.min(SSE_MAX_BUFFER),
            line: Vec::new(),
            skip_lf: false,
            started: false,
            data: String::new(),
            event_type: String::new(),
            last_event_id: String::new(),
            block_has_id: false,
            retry: None,
            failed: None,
        }
    }

    /// Parses `chunk`, calling `on_event` for each event dispatched by a
    /// blank line within it, in order. On an error nothing more is parsed,
    /// now or later.
    pub fn feed<F: FnMut(SseEvent<'_>)>(
        &mut self,
        chunk: &[u8],
        mut on_event: F,
    ) -> Result<(), SseError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let result = self.feed_inner(chunk, &mut on_event);
        if let Err(e) = result {
            self.failed = Some(e);
        }
        result
    }

    /// Ends the stream (EOF): an event without its blank line is discarded
    /// (WHATWG; seed §6.3). The last event ID and `retry` survive for the
    /// reconnect, and the parser can be fed the next connection's bytes.
    pub fn finish(&mut self) {
        self.line.clear();
        self.skip_lf = false;
        self.started = false;
        self.data.clear();
        self.event_type.clear();
        self.block_has_id = false;
        self.failed = None;
    }

    /// The last event ID (WHATWG), for `Last-Event-ID` on reconnect.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The latest valid `retry` value, ms.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Bytes held now: the unfinished line and the event in progress,
    /// including the persisting last event ID. Never above the ceiling.
    pub fn buffered_len(&self) -> usize {
        self.state_len() + self.line.len()
    }

    /// The ceiling this parser enforces.
    pub fn max_buffer(&self) -> usize {
        self.max
    }

    fn state_len(&self) -> usize {
        self.data.len() + self.event_type.len() + self.last_event_id.len()
    }

    /// Fails unless the state plus `extra` line bytes fits the ceiling. A
    /// processed line never grows the state by more than its own length, so
    /// checking before each line keeps the state under the ceiling, and the
    /// outcome does not depend on how the stream was chunked.
    fn reserve(&self, extra: usize) -> Result<(), SseError> {
        let len = self.buffered_len().saturating_add(extra);
        if len > self.max {
            Err(SseError::BufferExceeded { len, max: self.max })
        } else {
            Ok(())
        }
    }

    fn feed_inner(
        &mut self,
        chunk: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        let mut rest = chunk;
        if self.skip_lf
            && let Some((&first, after)) = rest.split_first()
        {
            self.skip_lf = false;
            if first == b'\n' {
                rest = after;
            }
        }
        loop {
            let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
                self.reserve(rest.len())?;
                self.line.extend_from_slice(rest);
                return Ok(());
            };
            self.reserve(end)?;
            let (piece, after) = rest.split_at(end);
            if self.line.is_empty() {
                self.process_line(piece, on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(piece);
                let outcome = self.process_line(&line, on_event);
                line.clear();
                self.line = line;
                outcome?;
            }
            // `after` starts with the terminator found at `end`.
            let (terminator, after) = match after.split_first() {
                Some((&t, a)) => (t, a),
                None => return Ok(()),
            };
            rest = after;
            if terminator == b'\r' {
                match rest.split_first() {
                    None => self.skip_lf = true,
                    Some((b'\n', a)) => rest = a,
                    Some(_) => {}
                }
            }
        }
    }

    fn process_line(
        &mut self,
        bytes: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        let mut bytes = bytes;
        if !self.started {
            self.started = true;
            bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
        }
        let line = std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8)?;
        if line.is_empty() {
            self.dispatch(on_event);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => {
                self.event_type.clear();
                self.event_type.push_str(value);
            }
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => {
                self.last_event_id.clear();
                self.last_event_id.push_str(value);
                self.block_has_id = true;
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, on_event: &mut dyn FnMut(SseEvent<'_>)) {
        let has_id = std::mem::take(&mut self.block_has_id);
        if self.data.is_empty() {
            self.event_type.clear();
            return;
        }
        if self.data.ends_with('\n') {
            self.data.pop();
        }
        on_event(SseEvent {
            event_type: if self.event_type.is_empty() {
                "message"
            } else {
                &self.event_type
            },
            data: &self.data,
            id: has_id.then_some(self.last_event_id.as_str()),
            last_event_id: &self.last_event_id,
            retry: self.retry,
        });
        self.data.clear();
        self.event_type.clear();
    }
}
