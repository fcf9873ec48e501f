//! The peer's shared state: every stream's ledger and broadcast channel
//! (SPEC RT-6), behind one `std::sync::Mutex` per stream.
//!
//! The lock is what makes the fan-out exact: an event is appended to the
//! ledger *and* sent on the channel in one critical section, and a
//! subscriber reads the ledger's position *and* subscribes to the channel
//! in one critical section, so every subscriber sees exactly the events
//! after its `nextExpectedSequence - 1`, in order. The section is short and
//! never awaits, so a std mutex is the right tool (tokio's own advice).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dtp_codec::realtime::{EnvelopeHead, FailureKind, RecoveryMode, write_envelope};
use dtp_realtime::time::format_timestamp as format_rfc3339_ms;
use dtp_realtime::{Epoch, Ledger, LedgerItem, ResumeRefusal, Retention, StreamSpec};
use tokio::sync::broadcast;

use super::{BROADCAST_CAPACITY, PeerConfig};

/// One committed event, encoded once and shared by every subscriber.
#[derive(Debug)]
pub(super) struct Event {
    /// Its `resumeCursor` (the SSE `id`), for CURSOR streams.
    pub(super) cursor: Option<Box<str>>,
    /// The REALTIME_EVENT_V1 envelope as one line of compact JSON (SPEC RT-3).
    pub(super) envelope: Box<str>,
}

/// What a ledger retains: the shared event.
struct Stored(Arc<Event>);

impl LedgerItem for Stored {
    fn byte_len(&self) -> usize {
        self.0.envelope.len()
    }
}

/// One configured stream.
pub(super) struct Stream {
    /// The stream id.
    pub(super) id: Box<str>,
    /// Its scope binding (SPEC RT-3), carried by every envelope.
    pub(super) scope: Box<str>,
    event_types: Vec<String>,
    ledger: Mutex<Ledger<Stored>>,
    tx: broadcast::Sender<Arc<Event>>,
}

/// A publication refused by the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PublishRefusal {
    /// The event type is not registered (400 MAPPING_CONTRACT_VIOLATION).
    UnknownEventType,
    /// The envelope could not be built (413 EVENT_TOO_LARGE), or the
    /// epoch's sequences ran out.
    Unencodable,
}

/// A committed publication: what the 201 answer reports.
#[derive(Debug)]
pub(super) struct Published {
    pub(super) epoch: String,
    pub(super) sequence: u64,
    pub(super) cursor: Option<String>,
}

/// A subscriber attached to a stream: where it starts, what it replays,
/// and its receiver for everything after.
pub(super) struct Attached {
    pub(super) epoch: String,
    /// `nextExpectedSequence` (SPEC RT-9).
    pub(super) next: u64,
    /// The cursor resumed from, if one was given and accepted.
    pub(super) accepted: Option<String>,
    /// Events after the accepted cursor, oldest first.
    pub(super) replay: Vec<Arc<Event>>,
    /// Why a given cursor could not be resumed (the subscriber starts live).
    pub(super) reset: Option<FailureKind>,
    pub(super) rx: broadcast::Receiver<Arc<Event>>,
}

impl Stream {
    fn lock(&self) -> MutexGuard<'_, Ledger<Stored>> {
        // A panic while holding the lock cannot leave the ledger half
        // updated (append is one call), so a poisoned lock is still usable.
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends and broadcasts one event of `event_type` around
    /// `payload_json` (one compact JSON object), encoding its envelope once
    /// (SPEC RT-3, RT-6).
    pub(super) fn publish(
        &self,
        event_type: &str,
        payload_json: &[u8],
    ) -> Result<Published, PublishRefusal> {
        if !self.event_types.iter().any(|t| t == event_type) {
            return Err(PublishRefusal::UnknownEventType);
        }
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let occurred_at = format_rfc3339_ms(unix_ms).unwrap_or_default();
        let now = Instant::now();
        let mut ledger = self.lock();
        let epoch = ledger.epoch().as_str().to_owned();
        let recovery = ledger.recovery();
        let mut event = None;
        let at = ledger
            .append_with(now, |at| {
                let event_id = format!("{epoch}-{}", at.sequence);
                let head = EnvelopeHead {
                    stream_id: &self.id,
                    stream_epoch: &epoch,
                    event_type,
                    event_id: &event_id,
                    sequence: at.sequence,
                    occurred_at: &occurred_at,
                    scope_binding: &self.scope,
                    recovery,
                    resume_cursor: at.cursor.as_deref(),
                };
                let mut buf = Vec::with_capacity(320 + payload_json.len());
                // The envelope is ASCII JSON around a payload that was
                // valid UTF-8: the conversion only fails on a bug, which
                // leaves an empty item (a gap subscribers see, as ours).
                let envelope = write_envelope(&mut buf, &head, payload_json)
                    .ok()
                    .and_then(|()| String::from_utf8(buf).ok());
                let ev = Arc::new(Event {
                    cursor: at.cursor.as_deref().map(Box::from),
                    envelope: envelope.as_deref().unwrap_or_default().into(),
                });
                if envelope.is_some() {
                    event = Some(Arc::clone(&ev));
                }
                Stored(ev)
            })
            .map_err(|_| PublishRefusal::Unencodable)?;
        let event = event.ok_or(PublishRefusal::Unencodable)?;
        // No receiver is not an error: nobody is subscribed right now.
        let _ = self.tx.send(event);
        drop(ledger);
        Ok(Published {
            epoch,
            sequence: at.sequence,
            cursor: at.cursor,
        })
    }

    /// Attaches a subscriber: fresh at "now", or resumed after `cursor`
    /// (SPEC RT-6, RT-9: proven continuity or a reset, never a silent skip).
    pub(super) fn attach(&self, cursor: Option<&str>) -> Attached {
        let now = Instant::now();
        let mut ledger = self.lock();
        let rx = self.tx.subscribe();
        let epoch = ledger.epoch().as_str().to_owned();
        let fresh = ledger.resume_from_start().next_expected_sequence;
        let (next, accepted, replay, reset) = match cursor {
            None => (fresh, None, Vec::new(), None),
            Some(c) => match ledger.resume(c, &self.scope, now) {
                Ok(r) => (
                    r.next_expected_sequence(),
                    Some(c.to_owned()),
                    r.iter().map(|e| Arc::clone(&e.item.0)).collect(),
                    None,
                ),
                Err(why) => (fresh, None, Vec::new(), Some(reset_reason(why))),
            },
        };
        drop(ledger);
        Attached {
            epoch,
            next,
            accepted,
            replay,
            reset,
            rx,
        }
    }
}

/// The reason a refused resume is reported with, as our server reports it.
fn reset_reason(why: ResumeRefusal) -> FailureKind {
    match why {
        ResumeRefusal::NotResumable => FailureKind::Unsupported,
        ResumeRefusal::Expired
        | ResumeRefusal::EpochChanged
        | ResumeRefusal::Malformed
        | ResumeRefusal::Tampered
        | ResumeRefusal::Future => FailureKind::CursorExpired,
    }
}

/// Everything the handlers share.
pub(super) struct App {
    /// The one bearer token that may read and publish.
    pub(super) token: Box<str>,
    streams: HashMap<Box<str>, Stream>,
    serial: AtomicU64,
}

impl App {
    /// The state of `config`, with a fresh random cursor key and epochs
    /// (a restart is a new epoch, SPEC RT-6).
    pub(super) fn new(config: &PeerConfig) -> std::io::Result<Self> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        if config.token.is_empty() {
            return Err(invalid("the peer's token is empty".into()));
        }
        let mut key = [0u8; 32];
        fill_random(&mut key)?;
        let mut streams = HashMap::new();
        for (id, scope) in &config.streams {
            let spec = StreamSpec {
                id: id.clone(),
                recovery: RecoveryMode::Cursor,
                event_types: config.event_types.clone(),
                retention: Retention::default(),
                scope: scope.clone(),
            };
            spec.validate()
                .map_err(|e| invalid(format!("stream {id:?}: {e}")))?;
            let mut seed = [0u8; 8];
            fill_random(&mut seed)?;
            let ledger = Ledger::new(
                id,
                scope,
                spec.recovery,
                spec.retention,
                Epoch::from_random(u64::from_le_bytes(seed)),
                &key,
            )
            .map_err(|e| invalid(format!("stream {id:?}: {e}")))?;
            let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
            let stream = Stream {
                id: id.as_str().into(),
                scope: scope.as_str().into(),
                event_types: spec.event_types,
                ledger: Mutex::new(ledger),
                tx,
            };
            if streams.insert(id.as_str().into(), stream).is_some() {
                return Err(invalid(format!("stream {id:?} is listed twice")));
            }
        }
        Ok(Self {
            token: config.token.as_str().into(),
            streams,
            serial: AtomicU64::new(0),
        })
    }

    /// The stream `id`, if configured.
    pub(super) fn stream(&self, id: &str) -> Option<&Stream> {
        self.streams.get(id)
    }

    /// A new connection's serial number (for WELCOME's `connectionId`).
    pub(super) fn next_serial(&self) -> u64 {
        self.serial.fetch_add(1, Ordering::Relaxed) + 1
    }
}

fn fill_random(buf: &mut [u8]) -> std::io::Result<()> {
    use ring::rand::SecureRandom;
    ring::rand::SystemRandom::new()
        .fill(buf)
        .map_err(|_| std::io::Error::other("the OS refused randomness"))
}
