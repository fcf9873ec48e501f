//! What the shards and the realtime plane on the control thread tell each
//! other over the control rings (DESIGN.md §1: the stream ledgers have one
//! writer, the control thread; the cores fan events out).
//!
//! Ordering is what makes the fan-out exact: a shard's decision ring is
//! FIFO, so an event published after a subscription was accepted reaches
//! the shard after the [`RtDecision::Subscribed`] that carried the
//! subscription's replay, and one published before is either in that
//! replay or was already applied.
//!
//! A replay is paced (SPEC RT-10, RT-13): the subscription's answer carries
//! its first page, and the shard asks for each next one
//! ([`RtRequest::Replay`]) only once the subscriber's socket has taken the
//! last — so a resumer that does not read holds one page, never the
//! ledger's whole history. While it replays, a subscription's live events
//! are skipped on the shard: the ledger still holds them, so a later page
//! brings them in order.

use std::sync::Arc;

use bytes::Bytes;
use dtp_codec::realtime::FailureKind;
use dtp_transports::ConnId;

/// A subscription's key on its connection: chosen by the shard (a WebSocket
/// subscription's index, 0 for an SSE connection).
pub type SubKey = u32;

/// One committed event, encoded once for every subscriber on every core.
#[derive(Debug, PartialEq, Eq)]
pub struct RtEvent {
    /// The stream's index in the registry (cheap to match on a shard).
    pub stream: u32,
    /// Its sequence in the stream's current epoch.
    pub sequence: u64,
    /// The SSE event block carrying the envelope (SPEC RT-8), framed as one
    /// HTTP/1.1 chunk of an SSE response, ready to send: one allocation
    /// queued by reference on every subscriber's connection.
    pub sse: Bytes,
    /// Where the envelope lies in `sse`.
    envelope_at: std::ops::Range<usize>,
}

impl RtEvent {
    /// The event `sequence` of stream `stream`: its SSE chunk and where
    /// the envelope lies in it (as `sse_chunk_with` gives them).
    ///
    /// # Panics
    /// If `envelope_at` is not within `sse` (a bug of the caller).
    pub fn new(
        stream: u32,
        sequence: u64,
        sse: Bytes,
        envelope_at: std::ops::Range<usize>,
    ) -> Self {
        assert!(envelope_at.start <= envelope_at.end && envelope_at.end <= sse.len());
        Self {
            stream,
            sequence,
            sse,
            envelope_at,
        }
    }

    /// The envelope (REALTIME_EVENT_V1) as JSON (SPEC RT-3), read in place
    /// in `sse`: not a `Bytes` slice of it, which cost a reference count
    /// taken on the control thread and dropped on every event's eviction.
    pub fn envelope(&self) -> &[u8] {
        &self.sse[self.envelope_at.clone()]
    }
}

/// A shard's realtime request (the connection is the one it came from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RtRequest {
    /// Subscribe `conn`'s subscription `key` to `stream`, resuming after
    /// `cursor` if given (SPEC RT-6, RT-8, RT-9).
    Subscribe {
        /// The connection.
        conn: ConnId,
        /// The subscription on it.
        key: SubKey,
        /// The stream id as the client named it.
        stream: Box<str>,
        /// The resume cursor the client presented.
        cursor: Option<Box<str>>,
        /// What the replay's first page may hold (the front end asks for
        /// [`PageSize::NONE`]).
        page: PageSize,
    },
    /// The next page of a replay under way (after [`RtDecision::Subscribed`]
    /// or [`RtDecision::Replay`] said there is more).
    Replay {
        /// The connection.
        conn: ConnId,
        /// The subscription on it.
        key: SubKey,
        /// The stream's index.
        stream: u32,
        /// The epoch the replay is in.
        epoch: Arc<str>,
        /// The last sequence sent to the subscriber.
        after: u64,
        /// What the page may hold.
        page: PageSize,
    },
    /// Publish an event (SPEC RT-6: after commit — the ledger append is the
    /// commit).
    Publish {
        /// The connection that asked (answered with [`RtDecision::Published`]).
        conn: ConnId,
        /// The stream id.
        stream: Box<str>,
        /// The event type.
        event_type: Box<str>,
        /// The payload: one JSON object, already checked by the shard.
        payload: Bytes,
    },
    /// A forced retention cut of the stream (operator action): every
    /// retained event is dropped, so older cursors get RESET_REQUIRED.
    /// Answered with [`RtDecision::Published`] (an empty object).
    Cut {
        /// The connection that asked.
        conn: ConnId,
        /// The stream id.
        stream: Box<str>,
    },
    /// Ends every subscription of the stream on every shard with CLOSE
    /// RESTART (operator action, e.g. before maintenance): clients
    /// reconnect and resume from their cursors. Answered with
    /// [`RtDecision::Published`] (an empty object).
    Kick {
        /// The connection that asked.
        conn: ConnId,
        /// The stream id.
        stream: Box<str>,
    },
    /// The stream's snapshot and checkpoint (SPEC RT-6, RT-11).
    Snapshot {
        /// The connection that asked.
        conn: ConnId,
        /// The stream id.
        stream: Box<str>,
    },
    /// A Web Push registration or notification request (SPEC RT-12),
    /// answered with [`RtDecision::PushAnswer`].
    Push(super::push::PushCall),
}

/// The ceilings of one replay page: at least one event, then no more than
/// `bytes` (SSE block lengths) and `events`; [`PageSize::NONE`] asks for no
/// event at all (only whether there are some).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSize {
    /// Most bytes.
    pub bytes: u32,
    /// Most events.
    pub events: u16,
}

impl PageSize {
    /// No events: a subscription's answer says only whether a replay
    /// follows, and the shard asks for its pages once the connection has
    /// room (several subscriptions answered at once never overfill it).
    pub const NONE: PageSize = PageSize {
        bytes: 0,
        events: 0,
    };
}

/// Events of a replay, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayPage {
    /// The events.
    pub events: Vec<Arc<RtEvent>>,
    /// The ledger held later events than the page could take: ask again.
    pub more: bool,
}

/// Why a subscription or publication was refused, in the closed failure
/// vocabulary of SPEC RT-14.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtRefusal {
    /// No such stream (or not visible to this client).
    UnknownStream,
    /// The event type is not registered for the stream.
    UnknownEventType,
    /// The cursor cannot be proven continuous: the client must take a
    /// snapshot (RESET_REQUIRED, reason CURSOR_EXPIRED).
    CursorExpired,
    /// The cursor was not issued for this stream, epoch and scope.
    CursorInvalid,
    /// The stream keeps no cursors (SNAPSHOT_ONLY, SESSION_REBUILD).
    NotResumable,
    /// The ledger refused (e.g. the payload is above the stream's ceiling).
    TooLarge,
    /// The stream keeps a table (its snapshot, e.g. `sessions`) and the
    /// payload names no row (no string key member).
    NotARow,
    /// The stream's table is at its ceiling and the event would add a row.
    TableFull,
    /// The stream's ledger is shared by a cluster and its log (NATS
    /// JetStream) cannot be reached: the publication is refused, never
    /// accepted locally (fail closed, SPEC RT-6).
    Unavailable,
}

impl RtRefusal {
    /// Its name in the closed failure vocabulary (SPEC RT-14).
    pub fn failure_kind(self) -> FailureKind {
        match self {
            // A foreign or tampered cursor is reset like an expired one:
            // either way the client resyncs from a snapshot (SPEC RT-6).
            Self::CursorExpired | Self::CursorInvalid => FailureKind::CursorExpired,
            Self::UnknownStream | Self::NotResumable => FailureKind::Unsupported,
            Self::UnknownEventType | Self::NotARow => FailureKind::MappingContractViolation,
            Self::TooLarge | Self::TableFull => FailureKind::EventTooLarge,
            Self::Unavailable => FailureKind::ProviderUnavailable,
        }
    }
}

/// The realtime plane's answer or broadcast, addressed to a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RtDecision {
    /// A subscription is live: send `replay` first, then every later
    /// [`RtDecision::Event`] of the stream.
    Subscribed {
        /// The connection.
        conn: ConnId,
        /// The subscription on it.
        key: SubKey,
        /// The stream's index.
        stream: u32,
        /// The stream's epoch.
        epoch: Arc<str>,
        /// The next sequence the subscriber will get (SPEC RT-9:
        /// `lastApplied + 1` on a same-epoch resume, never a silent advance).
        next: u64,
        /// The cursor accepted (echoed), if any.
        accepted: Option<Arc<str>>,
        /// The first page of the retained events after the cursor.
        replay: ReplayPage,
        /// The resume was refused (the cursor could not be proven
        /// continuous): the subscription is live from now on, and the
        /// client is told to reset first.
        reset: Option<RtRefusal>,
    },
    /// The next page of a replay, or why the replay cannot go on (the
    /// subscriber fell behind the ledger's retention, or the epoch
    /// changed: it must reset).
    Replay {
        /// The connection.
        conn: ConnId,
        /// The subscription on it.
        key: SubKey,
        /// The page.
        page: Result<ReplayPage, RtRefusal>,
    },
    /// A subscription or publication was refused.
    Refused {
        /// The connection.
        conn: ConnId,
        /// The subscription (0 for a publication or snapshot).
        key: SubKey,
        /// Why.
        why: RtRefusal,
    },
    /// An event of a stream, for every subscriber of it on the shard.
    Event(Arc<RtEvent>),
    /// End every subscription of the stream (index) on the shard with
    /// CLOSE RESTART.
    Kick(u32),
    /// A publication was committed.
    Published {
        /// The connection that asked.
        conn: ConnId,
        /// The response body (JSON: stream, epoch, sequence, cursor).
        body: Bytes,
    },
    /// A snapshot, taken at the same commit point as its checkpoint.
    Snapshot {
        /// The connection that asked.
        conn: ConnId,
        /// The response body (JSON: checkpoint and state).
        body: Bytes,
        /// Its entity tag (SPEC RT-11).
        etag: Arc<str>,
    },
    /// The answer to a [`RtRequest::Push`]: status and JSON body (empty for
    /// 204).
    PushAnswer {
        /// The connection that asked.
        conn: ConnId,
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Bytes,
    },
}
