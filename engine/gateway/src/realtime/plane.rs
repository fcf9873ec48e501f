//! The realtime plane: every stream's ledger, on the control thread (the
//! ledgers' one writer, DESIGN.md §1). It answers the shards' subscribe,
//! publish, snapshot and cut requests, and broadcasts each committed event
//! once per shard; the shards fan it out to their subscribers. With Web
//! Push on, it also owns the push registry and answers the `/v1/push/...`
//! requests (`push.rs`, SPEC RT-12).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::realtime::{EnvelopeHead, SnapshotCheckpoint, sse_chunk_with, write_envelope};
use dtp_realtime::{Epoch, LedgerItem, PublishError, ResumeRefusal, StreamRegistry, StreamSpec};
use dtp_transports::ConnId;

use super::json::published_body;
use super::msg::{PageSize, ReplayPage, RtDecision, RtEvent, RtRefusal, RtRequest, SubKey};
use super::state::StreamState;
use crate::app::{Decisions, GatewayDown, GatewayUp, PlaneEvent};
use crate::plane::{Clock, SystemClock};
use dtp_engine::{ControlPlane, Decision, Request};
use dtp_realtime::time::format_timestamp as format_rfc3339_ms;

/// The largest envelope published: the event ceiling of SPEC RT-13
/// (64 KiB) less room for the `realtime.v1` EVENT message around it (its
/// type and a subscription id of at most 128 bytes), so that no message
/// exceeds the `maxMessageBytes` a session announces.
const MAX_ENVELOPE: usize = 64 * 1024 - 256;

/// An upper bound of an envelope's bytes besides its payload and the
/// stream's own names: member names, epoch (twice), sequence (twice),
/// timestamp, cursor, recovery mode.
const ENVELOPE_HEAD: usize = 512;

/// How often retained events are aged out when nothing else happens.
const EXPIRY_PERIOD: Duration = Duration::from_secs(1);

/// A committed event as the ledger keeps it: shared with every shard.
#[derive(Clone, Debug)]
struct Stored(Arc<RtEvent>);

impl LedgerItem for Stored {
    /// The SSE chunk: the envelope is a slice of it, no memory of its own.
    fn byte_len(&self) -> usize {
        self.0.sse.len()
    }
}

/// One stream as the plane knows it besides its ledger.
struct Stream {
    id: Arc<str>,
    /// The stream's scope binding, carried by every envelope (SPEC RT-3:
    /// opaque, exact-match).
    scope: Box<str>,
    /// The stream's state in a snapshot: the latest payload, or the table
    /// of a built-in stream that keeps one (`sessions`).
    state: StreamState,
}

/// Counters of the realtime plane (for `/metrics`).
#[derive(Debug, Default)]
pub struct RealtimeMetrics {
    /// Events committed.
    pub published: std::sync::atomic::AtomicU64,
    /// Subscriptions accepted (resumed or fresh).
    pub subscribed: std::sync::atomic::AtomicU64,
    /// Resumes refused (RESET_REQUIRED), by any reason.
    pub resets: std::sync::atomic::AtomicU64,
    /// Snapshots served.
    pub snapshots: std::sync::atomic::AtomicU64,
    /// Requests refused (unknown stream, unknown event type, …).
    pub refused: std::sync::atomic::AtomicU64,
}

/// The realtime plane (a [`ControlPlane`] for [`Request::Realtime`]).
pub struct RealtimePlane<C: Clock = SystemClock> {
    registry: StreamRegistry<Stored>,
    streams: Vec<Stream>,
    index: HashMap<Arc<str>, u32>,
    shards: usize,
    clock: C,
    next_expiry: Option<Instant>,
    metrics: Arc<RealtimeMetrics>,
    /// The last `occurredAt` written and its Unix millisecond: events of
    /// one batch share it, so it is formatted once per millisecond.
    stamp: (u64, String),
    /// The epoch of the stream last published to, and the id of its event:
    /// buffers kept so that publishing allocates neither.
    epoch: String,
    event_id: String,
    /// Web Push registrations and notifications (SPEC RT-12), when
    /// `[realtime.push]` is on.
    push: Option<super::push::PushPlane>,
}

/// A stream of the configuration could not be registered.
#[derive(Debug, thiserror::Error)]
#[error("stream {stream:?}: {why}")]
pub struct StreamSetupError {
    stream: String,
    why: String,
}

impl RealtimePlane<SystemClock> {
    /// A plane over `specs` for `shards` shards, on the system clock.
    /// `random` gives the cursor key and the epochs (a restart without
    /// persistence is a new epoch, SPEC RT-6): pass the OS's randomness.
    pub fn new(
        specs: Vec<StreamSpec>,
        shards: usize,
        random: &mut dyn FnMut() -> u64,
    ) -> Result<Self, StreamSetupError> {
        Self::with_clock(specs, shards, random, SystemClock::default())
    }
}

impl<C: Clock> RealtimePlane<C> {
    /// [`RealtimePlane::new`] on a given clock (tests: virtual time).
    pub fn with_clock(
        specs: Vec<StreamSpec>,
        shards: usize,
        random: &mut dyn FnMut() -> u64,
        clock: C,
    ) -> Result<Self, StreamSetupError> {
        let mut key = [0u8; 32];
        for part in key.chunks_mut(8) {
            part.copy_from_slice(&random().to_le_bytes());
        }
        let mut registry = StreamRegistry::new(key);
        let mut streams = Vec::new();
        let mut index = HashMap::new();
        for spec in specs {
            let id: Arc<str> = spec.id.as_str().into();
            let scope = spec.scope.clone().into_boxed_str();
            registry
                .register(spec, Epoch::from_random(random()))
                .map_err(|e| StreamSetupError {
                    stream: id.to_string(),
                    why: e.to_string(),
                })?;
            let n = u32::try_from(streams.len()).unwrap_or(u32::MAX);
            index.insert(id.clone(), n);
            let state = StreamState::new(crate::plane::built_in_table(&id));
            streams.push(Stream { id, scope, state });
        }
        Ok(Self {
            registry,
            streams,
            index,
            shards,
            clock,
            next_expiry: None,
            stamp: (u64::MAX, String::new()),
            epoch: String::new(),
            event_id: String::new(),
            metrics: Arc::default(),
            push: None,
        })
    }

    /// Serves Web Push (SPEC RT-12) with `push`.
    pub fn with_push(mut self, push: super::push::PushPlane) -> Self {
        self.push = Some(push);
        self
    }

    /// The Web Push counters, when Web Push is on.
    pub fn push_metrics(&self) -> Option<Arc<super::push::PushMetrics>> {
        self.push.as_ref().map(super::push::PushPlane::metrics)
    }

    /// The plane's counters.
    pub fn metrics(&self) -> Arc<RealtimeMetrics> {
        self.metrics.clone()
    }

    /// The configured streams' ids, in index order.
    pub fn stream_ids(&self) -> impl Iterator<Item = &str> {
        self.streams.iter().map(|s| &*s.id)
    }

    fn bump(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn refuse(
        &self,
        shard: usize,
        conn: ConnId,
        key: SubKey,
        why: RtRefusal,
    ) -> (usize, crate::app::GatewayDecision) {
        Self::bump(&self.metrics.refused);
        let d = RtDecision::Refused { conn, key, why };
        (shard, rt_decision(d))
    }

    fn subscribe(
        &mut self,
        shard: usize,
        (conn, key): (ConnId, SubKey),
        stream: &str,
        (cursor, page): (Option<&str>, PageSize),
        now: Instant,
        out: &mut Decisions,
    ) {
        let Some(&n) = self.index.get(stream) else {
            out.push(self.refuse(shard, conn, key, RtRefusal::UnknownStream));
            return;
        };
        let s = &self.streams[n as usize];
        let Some(ledger) = self.registry.ledger_mut(&s.id) else {
            out.push(self.refuse(shard, conn, key, RtRefusal::UnknownStream));
            return;
        };
        let epoch: Arc<str> = ledger.epoch().as_str().into();
        let fresh = ledger.resume_from_start().next_expected_sequence;
        let (next, accepted, replay, reset) = match cursor {
            None => (fresh, None, ReplayPage::default(), None),
            Some(c) => match ledger.resume(c, &s.scope, now) {
                Ok(r) => (
                    r.next_expected_sequence(),
                    Some(Arc::<str>::from(c)),
                    take_page(&r, page),
                    None,
                ),
                Err(why) => {
                    Self::bump(&self.metrics.resets);
                    (fresh, None, ReplayPage::default(), Some(refusal(why)))
                }
            },
        };
        Self::bump(&self.metrics.subscribed);
        let d = RtDecision::Subscribed {
            conn,
            key,
            stream: n,
            epoch,
            next,
            accepted,
            replay,
            reset,
        };
        out.push((shard, rt_decision(d)));
    }

    /// SPEC RT-10: the next page of a paced replay.
    fn replay(
        &mut self,
        (shard, conn, key): (usize, ConnId, SubKey),
        (stream, epoch, after): (u32, &str, u64),
        size: PageSize,
        now: Instant,
        out: &mut Decisions,
    ) {
        let ledger = self
            .streams
            .get(stream as usize)
            .and_then(|s| self.registry.ledger_mut(&s.id));
        let page = match ledger.map(|l| l.continue_after(epoch, after, now)) {
            Some(Ok(r)) => Ok(take_page(&r, size)),
            Some(Err(why)) => Err(refusal(why)),
            None => Err(RtRefusal::UnknownStream),
        };
        let d = RtDecision::Replay { conn, key, page };
        out.push((shard, rt_decision(d)));
    }

    /// Answers a shard's publication with its outcome.
    fn publish_for(
        &mut self,
        (shard, conn): (usize, ConnId),
        what: (&str, &str, Bytes),
        now: Instant,
        out: &mut Decisions,
    ) {
        let d = match self.publish(what, now, out) {
            Ok((n, at)) => {
                let id = &self.streams[n as usize].id;
                let body = published_body(id, &self.epoch, at.sequence, at.cursor.as_deref());
                RtDecision::Published { conn, body }
            }
            Err(why) => {
                Self::bump(&self.metrics.refused);
                RtDecision::Refused { conn, key: 0, why }
            }
        };
        out.push((shard, rt_decision(d)));
    }

    /// Commits an event to its stream's ledger (SPEC RT-6: the append is
    /// the commit), encodes its envelope and SSE block once, and broadcasts
    /// it to every shard. Returns the stream's index, its epoch and the
    /// event's position (for a publisher's answer).
    fn publish(
        &mut self,
        (stream, event_type, payload): (&str, &str, Bytes),
        now: Instant,
        out: &mut Decisions,
    ) -> Result<(u32, dtp_realtime::Appended), RtRefusal> {
        let &n = self.index.get(stream).ok_or(RtRefusal::UnknownStream)?;
        let unix_ms = self.clock.unix_ms(now).0;
        if self.stamp.0 != unix_ms {
            self.stamp = (unix_ms, format_rfc3339_ms(unix_ms).unwrap_or_default());
        }
        let occurred_at = &self.stamp.1;
        let s = &self.streams[n as usize];
        // Refused before it takes a sequence: a refusal is never a gap.
        let bound = ENVELOPE_HEAD + s.id.len() + s.scope.len() + event_type.len() + payload.len();
        if bound > MAX_ENVELOPE {
            return Err(RtRefusal::TooLarge);
        }
        let registered = self
            .registry
            .spec(&s.id)
            .is_some_and(|spec| spec.event_types.iter().any(|t| t == event_type));
        if !registered {
            return Err(RtRefusal::UnknownEventType);
        }
        let change = s.state.check(&payload)?;
        let ledger = self
            .registry
            .ledger(&s.id)
            .ok_or(RtRefusal::UnknownStream)?;
        // The epoch is copied into a buffer kept for the purpose (the
        // ledger is borrowed again below), as is the event id.
        let epoch = &mut self.epoch;
        epoch.clear();
        epoch.push_str(ledger.epoch().as_str());
        let recovery = ledger.recovery();
        let mut encoded = Err(RtRefusal::TooLarge);
        let mut made = None;
        let event_id = &mut self.event_id;
        let published = self.registry.publish_with(&s.id, event_type, now, |at| {
            // Written into the kept buffer, not `format!`ted: one
            // allocation less per event on the control thread.
            event_id.clear();
            let _ = write!(event_id, "{epoch}-{}", at.sequence);
            let head = EnvelopeHead {
                stream_id: &s.id,
                stream_epoch: epoch,
                event_type,
                event_id,
                sequence: at.sequence,
                occurred_at,
                scope_binding: &s.scope,
                recovery,
                resume_cursor: at.cursor.as_deref(),
            };
            // One buffer: the SSE block framed as a chunk, the envelope
            // written in place inside it and shared as a slice of it (a
            // profile of the built-in streams showed three buffers and two
            // copies per event). Sized once: growing it cost more than
            // encoding.
            let built = sse_chunk_with(at.cursor.as_deref(), bound, |b| {
                write_envelope(b, &head, &payload)
            });
            let (sse, envelope) = match built {
                Ok(built) => {
                    encoded = Ok(());
                    built
                }
                Err(_) => (Bytes::new(), 0..0),
            };
            let event = Arc::new(RtEvent::new(n, at.sequence, sse, envelope));
            made = Some(event.clone());
            Stored(event)
        });
        let at = match (published, encoded) {
            (Ok(at), Ok(())) => at,
            (Err(PublishError::UnknownEventType), _) => return Err(RtRefusal::UnknownEventType),
            (Err(_), _) => return Err(RtRefusal::UnknownStream),
            // The payload was checked by the shard and the head is built
            // from validated config: an encoding failure here is a bug. The
            // ledger holds an empty item in its place, which subscribers
            // see as a gap (and resync), never as a silent skip.
            (Ok(_), Err(why)) => {
                tracing::error!(stream = %s.id, "an event could not be encoded");
                return Err(why);
            }
        };
        Self::bump(&self.metrics.published);
        self.streams[n as usize].state.apply(change, payload);
        if let Some(event) = made {
            for to in 0..self.shards {
                out.push((to, Decision::Service(GatewayDown::RtEvent(event.clone()))));
            }
        }
        // SPEC RT-12: a hinted stream's bound registrations are told,
        // after the commit.
        if let Some(push) = &mut self.push {
            push.publication(&self.streams[n as usize].id, (now, unix_ms));
        }
        Ok((n, at))
    }

    fn snapshot(&mut self, shard: usize, conn: ConnId, stream: &str, out: &mut Decisions) {
        let Some(&n) = self.index.get(stream) else {
            out.push(self.refuse(shard, conn, 0, RtRefusal::UnknownStream));
            return;
        };
        let s = &self.streams[n as usize];
        let Some(ledger) = self.registry.ledger(&s.id) else {
            out.push(self.refuse(shard, conn, 0, RtRefusal::UnknownStream));
            return;
        };
        // The checkpoint and the state are read in this one step: the
        // same commit point (SPEC RT-6).
        let c = ledger.checkpoint();
        let checkpoint = SnapshotCheckpoint {
            stream_epoch: c.epoch.as_str().to_owned(),
            last_applied_sequence: c.last_sequence,
            snapshot_revision: c.revision.to_string(),
            recovery_mode: c.recovery,
            resume_cursor: c.cursor,
        };
        let etag: Arc<str> = format!("\"{}-{}\"", c.epoch.as_str(), c.revision).into();
        let state = s.state.to_json();
        let body = super::json::snapshot_body(&s.id, &s.scope, &checkpoint, &state);
        Self::bump(&self.metrics.snapshots);
        let d = RtDecision::Snapshot { conn, body, etag };
        out.push((shard, rt_decision(d)));
    }
}

impl<C: Clock> RealtimePlane<C> {
    /// Handles one realtime request of shard `shard`.
    pub fn handle_request(
        &mut self,
        shard: usize,
        r: RtRequest,
        now: Instant,
        out: &mut Decisions,
    ) {
        match r {
            RtRequest::Subscribe {
                conn,
                key,
                stream,
                cursor,
                page,
            } => {
                let how = (cursor.as_deref(), page);
                self.subscribe(shard, (conn, key), &stream, how, now, out);
            }
            RtRequest::Replay {
                conn,
                key,
                stream,
                epoch,
                after,
                page,
            } => self.replay((shard, conn, key), (stream, &epoch, after), page, now, out),
            RtRequest::Publish {
                conn,
                stream,
                event_type,
                payload,
            } => {
                self.publish_for((shard, conn), (&stream, &event_type, payload), now, out);
            }
            RtRequest::Snapshot { conn, stream } => self.snapshot(shard, conn, &stream, out),
            RtRequest::Push(call) => {
                let unix_ms = self.clock.unix_ms(now).0;
                match &mut self.push {
                    Some(push) => push.handle(shard, call, (now, unix_ms), out),
                    None => {
                        let body = Bytes::from_static(
                            br#"{"error":"UNSUPPORTED","message":"web push is not configured here"}"#,
                        );
                        let d = RtDecision::PushAnswer {
                            conn: call.conn(),
                            status: 404,
                            body,
                        };
                        out.push((shard, rt_decision(d)));
                    }
                }
            }
            RtRequest::Kick { conn, stream } => {
                let Some(&n) = self.index.get(&*stream) else {
                    out.push(self.refuse(shard, conn, 0, RtRefusal::UnknownStream));
                    return;
                };
                for to in 0..self.shards {
                    out.push((to, rt_decision(RtDecision::Kick(n))));
                }
                let body = Bytes::from_static(b"{}");
                let d = RtDecision::Published { conn, body };
                out.push((shard, rt_decision(d)));
            }
            RtRequest::Cut { conn, stream } => {
                let cut = self.registry.ledger_mut(&stream).map(|l| l.cut());
                let d = match cut {
                    Some(_) => RtDecision::Published {
                        conn,
                        body: Bytes::from_static(b"{}"),
                    },
                    None => RtDecision::Refused {
                        conn,
                        key: 0,
                        why: RtRefusal::UnknownStream,
                    },
                };
                out.push((shard, rt_decision(d)));
            }
        }
    }

    /// Publishes another plane's events (commit and broadcast each).
    pub fn publish_events(
        &mut self,
        events: &mut Vec<PlaneEvent>,
        now: Instant,
        out: &mut Decisions,
    ) {
        for e in events.drain(..) {
            // A built-in stream that is not configured is simply not served.
            if !self.index.contains_key(e.stream) {
                continue;
            }
            let what = (e.stream, e.event_type, Bytes::from(e.payload));
            if let Err(why) = self.publish(what, now, out) {
                Self::bump(&self.metrics.refused);
                tracing::warn!(
                    stream = e.stream,
                    ?why,
                    "a built-in event was not published"
                );
            }
        }
    }
}

impl<C: Clock> ControlPlane<GatewayUp, GatewayDown> for RealtimePlane<C> {
    fn handle(
        &mut self,
        shard: usize,
        request: Request<GatewayUp>,
        now: Instant,
        out: &mut Decisions,
    ) {
        // Connections come and go: the shards keep their subscribers.
        if let Request::Service(GatewayUp::Realtime(r)) = request {
            self.handle_request(shard, *r, now, out);
        }
    }

    fn tick(&mut self, now: Instant, out: &mut Decisions) -> Option<Instant> {
        if let Some(push) = &mut self.push {
            push.poll(now, out);
        }
        if self.next_expiry.is_none_or(|at| now >= at) {
            self.registry.expire_all(now);
            self.next_expiry = Some(now + EXPIRY_PERIOD);
        }
        self.next_expiry
    }

    fn attach(&mut self, waker: dtp_engine::ControlWaker) {
        if let Some(push) = &self.push {
            push.attach(waker);
        }
    }
}

/// The first events of `r` that fit in `size`: at least one, or none for
/// a page of no events (the caller asks for them later).
fn take_page(r: &dtp_realtime::Resume<'_, Stored>, size: PageSize) -> ReplayPage {
    if size.events == 0 {
        let more = !r.is_empty();
        return ReplayPage {
            events: Vec::new(),
            more,
        };
    }
    let mut events = Vec::new();
    let mut bytes = 0usize;
    for e in r.iter() {
        let len = e.item.0.sse.len();
        let full = events.len() >= usize::from(size.events)
            || (!events.is_empty() && bytes + len > size.bytes as usize);
        if full {
            return ReplayPage { events, more: true };
        }
        bytes += len;
        events.push(e.item.0.clone());
    }
    ReplayPage {
        events,
        more: false,
    }
}

/// A ledger's refusal in the front end's vocabulary.
fn refusal(why: ResumeRefusal) -> RtRefusal {
    match why {
        ResumeRefusal::Expired | ResumeRefusal::EpochChanged => RtRefusal::CursorExpired,
        ResumeRefusal::NotResumable => RtRefusal::NotResumable,
        ResumeRefusal::Malformed | ResumeRefusal::Tampered | ResumeRefusal::Future => {
            RtRefusal::CursorInvalid
        }
    }
}

/// A realtime decision for a shard's front end.
pub(super) fn rt_decision(d: RtDecision) -> Decision<GatewayDown> {
    Decision::Service(GatewayDown::Realtime(Box::new(d)))
}
