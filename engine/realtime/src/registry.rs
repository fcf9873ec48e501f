//! The streams a deployment configures, each with its ledger (SPEC RT-3,
//! RT-6): lookup by id, refusal of unknown streams and unregistered event
//! types (fail closed), and a ceiling on how many streams exist.
//!
//! Generic over the ledger item (the engine stores encoded envelopes). The
//! registry owns no wire format and no authorisation: the caller checks the
//! subscriber's scope before asking a ledger to resume.

use std::collections::BTreeMap;
use std::time::Instant;

use dtp_codec::realtime::RecoveryMode;

use crate::ledger::{Appended, Epoch, Ledger, LedgerItem, Retention, RetentionError};

/// Most streams one registry holds.
pub const MAX_STREAMS: usize = 1024;
/// Most event types one stream registers.
pub const MAX_EVENT_TYPES: usize = 256;
/// Longest scope binding, in bytes.
pub const MAX_SCOPE_LEN: usize = 256;
/// Longest stream id or event type, in characters.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `s` is a valid stream id or event type: 1–64 characters of
/// `[A-Za-z0-9._-]`.
pub fn is_valid_name(s: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// One configured stream (SPEC RT-3 immutable registration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    /// Stream id (`streamId`), see [`is_valid_name`].
    pub id: String,
    /// The stream's recovery mode.
    pub recovery: RecoveryMode,
    /// Event types (`eventType`) the stream may publish: non-empty, each a
    /// valid name, no duplicates, at most [`MAX_EVENT_TYPES`].
    pub event_types: Vec<String>,
    /// Replay retention.
    pub retention: Retention,
    /// The stream's scope binding (opaque, at most [`MAX_SCOPE_LEN`] bytes),
    /// which its cursors are bound to.
    pub scope: String,
}

impl StreamSpec {
    /// Checks every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !is_valid_name(&self.id) {
            return Err(SpecError::InvalidStreamId);
        }
        if self.event_types.is_empty() {
            return Err(SpecError::NoEventTypes);
        }
        if self.event_types.len() > MAX_EVENT_TYPES {
            return Err(SpecError::TooManyEventTypes);
        }
        for (index, t) in self.event_types.iter().enumerate() {
            if !is_valid_name(t) {
                return Err(SpecError::InvalidEventType { index });
            }
            if self
                .event_types
                .get(..index)
                .is_some_and(|before| before.contains(t))
            {
                return Err(SpecError::DuplicateEventType { index });
            }
        }
        if self.scope.len() > MAX_SCOPE_LEN {
            return Err(SpecError::ScopeTooLong);
        }
        self.retention.validate().map_err(SpecError::Retention)
    }
}

/// A refused [`StreamSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The id is not 1–64 characters of `[A-Za-z0-9._-]`.
    #[error("stream id must be 1-64 characters of [A-Za-z0-9._-]")]
    InvalidStreamId,
    /// No event types: the stream could publish nothing.
    #[error("stream registers no event types")]
    NoEventTypes,
    /// More than [`MAX_EVENT_TYPES`] event types.
    #[error("stream registers more than {MAX_EVENT_TYPES} event types")]
    TooManyEventTypes,
    /// `event_types[index]` is not a valid name.
    #[error("event type #{index} must be 1-64 characters of [A-Za-z0-9._-]")]
    InvalidEventType {
        /// Position in `event_types`.
        index: usize,
    },
    /// `event_types[index]` repeats an earlier one.
    #[error("event type #{index} is listed twice")]
    DuplicateEventType {
        /// Position of the repetition in `event_types`.
        index: usize,
    },
    /// The scope binding is longer than [`MAX_SCOPE_LEN`] bytes.
    #[error("scope binding longer than {MAX_SCOPE_LEN} bytes")]
    ScopeTooLong,
    /// The retention is refused.
    #[error(transparent)]
    Retention(RetentionError),
}

/// A refused registration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The spec is invalid.
    #[error("stream spec refused: {0}")]
    InvalidSpec(#[from] SpecError),
    /// A stream with this id is already registered.
    #[error("stream {0:?} is already registered")]
    DuplicateStream(String),
    /// The registry holds its maximum number of streams.
    #[error("registry is full ({max} streams)")]
    TooManyStreams {
        /// The registry's ceiling.
        max: usize,
    },
    /// A stream ceiling above [`MAX_STREAMS`] (or zero) was configured.
    #[error("stream ceiling must be 1..={MAX_STREAMS}")]
    InvalidCeiling,
}

/// A refused publication (fail closed, SPEC RT-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// No stream with this id is registered.
    #[error("unknown stream")]
    UnknownStream,
    /// The stream does not register this event type.
    #[error("event type not registered for this stream")]
    UnknownEventType,
    /// The stream's epoch ran out of sequences; start a new epoch.
    #[error("sequence space of this epoch exhausted; start a new epoch")]
    SequenceExhausted,
}

struct Stream<T> {
    spec: StreamSpec,
    ledger: Ledger<T>,
}

/// The configured streams and their ledgers (SPEC RT-3, RT-6).
pub struct StreamRegistry<T> {
    cursor_key: [u8; 32],
    max_streams: usize,
    streams: BTreeMap<String, Stream<T>>,
}

impl<T: LedgerItem> StreamRegistry<T> {
    /// An empty registry holding at most [`MAX_STREAMS`] streams whose
    /// cursors are tagged with `cursor_key` (the deployment's secret).
    pub fn new(cursor_key: [u8; 32]) -> Self {
        Self {
            cursor_key,
            max_streams: MAX_STREAMS,
            streams: BTreeMap::new(),
        }
    }

    /// An empty registry with a lower stream ceiling (1 ..= [`MAX_STREAMS`]).
    pub fn with_max_streams(cursor_key: [u8; 32], max: usize) -> Result<Self, RegistryError> {
        if !(1..=MAX_STREAMS).contains(&max) {
            return Err(RegistryError::InvalidCeiling);
        }
        Ok(Self {
            cursor_key,
            max_streams: max,
            streams: BTreeMap::new(),
        })
    }

    /// Registers `spec` with a ledger starting in `epoch` (drawn randomly by
    /// the caller at every process start).
    pub fn register(&mut self, spec: StreamSpec, epoch: Epoch) -> Result<(), RegistryError> {
        spec.validate()?;
        if self.streams.contains_key(&spec.id) {
            return Err(RegistryError::DuplicateStream(spec.id));
        }
        if self.streams.len() >= self.max_streams {
            return Err(RegistryError::TooManyStreams {
                max: self.max_streams,
            });
        }
        let ledger = Ledger::new(
            &spec.id,
            &spec.scope,
            spec.recovery,
            spec.retention,
            epoch,
            &self.cursor_key,
        )
        .map_err(|e| RegistryError::InvalidSpec(SpecError::Retention(e)))?;
        self.streams
            .insert(spec.id.clone(), Stream { spec, ledger });
        Ok(())
    }

    /// Number of registered streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream is registered.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// Registered stream ids, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.streams.keys().map(String::as_str)
    }

    /// The spec of stream `id`.
    pub fn spec(&self, id: &str) -> Option<&StreamSpec> {
        self.streams.get(id).map(|s| &s.spec)
    }

    /// The ledger of stream `id`.
    pub fn ledger(&self, id: &str) -> Option<&Ledger<T>> {
        self.streams.get(id).map(|s| &s.ledger)
    }

    /// The ledger of stream `id`, to resume, cut or change epoch.
    pub fn ledger_mut(&mut self, id: &str) -> Option<&mut Ledger<T>> {
        self.streams.get_mut(id).map(|s| &mut s.ledger)
    }

    /// Appends a committed event of `event_type` to stream `stream_id`
    /// (SPEC RT-6 publish after commit), refusing unknown streams and event
    /// types the stream does not register (SPEC RT-3 fail closed).
    pub fn publish(
        &mut self,
        stream_id: &str,
        event_type: &str,
        item: T,
        now: Instant,
    ) -> Result<Appended, PublishError> {
        self.publish_with(stream_id, event_type, now, |_| item)
    }

    /// [`StreamRegistry::publish`] for an item that carries its own
    /// position ([`Ledger::append_with`]).
    pub fn publish_with(
        &mut self,
        stream_id: &str,
        event_type: &str,
        now: Instant,
        make: impl FnOnce(&Appended) -> T,
    ) -> Result<Appended, PublishError> {
        let stream = self
            .streams
            .get_mut(stream_id)
            .ok_or(PublishError::UnknownStream)?;
        if !stream.spec.event_types.iter().any(|t| t == event_type) {
            return Err(PublishError::UnknownEventType);
        }
        stream
            .ledger
            .append_with(now, make)
            .map_err(|_| PublishError::SequenceExhausted)
    }

    /// Ages out old events of every stream at `now`; returns how many.
    pub fn expire_all(&mut self, now: Instant) -> usize {
        self.streams
            .values_mut()
            .map(|s| s.ledger.expire(now))
            .sum()
    }
}

#[cfg(test)]
mod tests;
