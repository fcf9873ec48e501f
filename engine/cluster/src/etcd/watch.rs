//! A watch: etcd's streamed answer to `/v3/watch`, read on a worker thread
//! as an iterator of [`WatchEvent`]s.

use std::collections::VecDeque;
use std::time::Duration;

use super::types::{EventKind, KeyValue, WatchEvent};
use super::wire::{self, WStreamed, WWatch};
use crate::error::{Error, Result, server_text};
use crate::http::Stream;

/// Events of one watch, in revision order, on a connection of its own.
///
/// Iterating blocks until the next event or the read timeout: a timeout
/// yields `Some(Err(Error::Timeout { .. }))` and the watch stays usable
/// (call `next` again), so a worker can check for shutdown between waits.
/// Any other error ends the watch (`None` after it): a compacted start
/// revision is [`Error::Compacted`], a server that cancels the watch
/// [`Error::WatchCanceled`]. Buffered events are bounded by one answer
/// line, itself bounded by the client's `max_body`.
#[derive(Debug)]
pub struct Watch {
    stream: Stream,
    pending: VecDeque<WatchEvent>,
    /// The revision of the last answer read (the header's revision).
    revision: i64,
    ended: bool,
}

impl Watch {
    /// Reads the answer's head and etcd's "created" message.
    pub(crate) fn start(stream: Stream) -> Result<Self> {
        let mut w = Self {
            stream,
            pending: VecDeque::new(),
            revision: 0,
            ended: false,
        };
        if w.stream.status() != 200 {
            let endpoint = w.stream.endpoint().to_owned();
            let body = w.stream.next_line()?.unwrap_or_default();
            return Err(wire::error(&endpoint, w.stream.status(), &body));
        }
        let created = w.read_message()?;
        // A watch etcd refuses (a bad token, no permission) is created and
        // cancelled in one message, with the reason.
        if created.canceled && !created.cancel_reason.is_empty() {
            return Err(wire::cancel_error(&created.cancel_reason));
        }
        if !created.created {
            return Err(Error::protocol(
                w.stream.endpoint(),
                "watch answer did not start with `created`",
            ));
        }
        w.absorb(created)?;
        Ok(w)
    }

    /// The store revision of the last message read: every change up to it
    /// within the watched range has been yielded or is buffered.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Changes how long one `next` waits (`None`: for ever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<()> {
        self.stream.set_read_timeout(timeout)
    }

    fn read_message(&mut self) -> Result<WWatch> {
        let endpoint = self.stream.endpoint().to_owned();
        let Some(line) = self.stream.next_line()? else {
            return Err(Error::WatchCanceled);
        };
        let msg: WStreamed<WWatch> = wire::parse(&endpoint, &line)?;
        match (msg.result, msg.error) {
            (_, Some(e)) => Err(Error::Etcd {
                code: e.code,
                message: server_text(&e.message),
            }),
            (Some(w), None) => Ok(w),
            (None, None) => Err(Error::protocol(&endpoint, "watch message without a result")),
        }
    }

    fn absorb(&mut self, msg: WWatch) -> Result<()> {
        if msg.header.revision > 0 {
            self.revision = msg.header.revision;
        }
        if msg.compact_revision > 0 {
            return Err(Error::Compacted {
                compact_revision: msg.compact_revision,
            });
        }
        if msg.canceled {
            return Err(Error::WatchCanceled);
        }
        for ev in msg.events {
            let kind = match ev.kind.as_str() {
                "" | "PUT" => EventKind::Put,
                "DELETE" => EventKind::Delete,
                _ => {
                    return Err(Error::protocol(
                        self.stream.endpoint(),
                        "watch event of unknown type",
                    ));
                }
            };
            self.pending.push_back(WatchEvent {
                kind,
                kv: KeyValue::from(ev.kv),
            });
        }
        Ok(())
    }
}

impl Iterator for Watch {
    type Item = Result<WatchEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(Ok(ev));
            }
            if self.ended {
                return None;
            }
            let step = self.read_message().and_then(|m| self.absorb(m));
            match step {
                Ok(()) => {}
                Err(e @ Error::Timeout { .. }) => return Some(Err(e)),
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
