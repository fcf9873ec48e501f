//! The realtime plane: every stream's ledger, on the control thread (the
//! ledgers' one writer, DESIGN.md §1). It answers the shards' subscribe,
//! publish, snapshot and cut requests, and broadcasts each committed event
//! once per shard; the shards fan it out to their subscribers. With Web
//! Push on, it also owns the push registry and answers the `/v1/push/...`
//! requests (`push/`, SPEC RT-12); `clustered.rs` is its side for ledgers
//! shared through NATS JetStream.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::realtime::{
    EnvelopeHead, RecoveryMode, SnapshotCheckpoint, sse_chunk_with, write_envelope,
};
use dtp_realtime::{Epoch, LedgerItem, PublishError, ResumeRefusal, StreamRegistry, StreamSpec};
use dtp_transports::ConnId;

use super::cluster::{ClusterLedgers, ClusterSettings, Input};
use super::json::published_body;
use super::msg::{PageSize, ReplayPage, RtDecision, RtEvent, RtRefusal, RtRequest, SubKey};
use super::state::{Change, StreamState};
use crate::app::{Decisions, GatewayDown, GatewayUp, PlaneEvent};
use crate::plane::{Clock, SystemClock};
use dtp_engine::{ControlPlane, Decision, Request};
use dtp_realtime::time::format_timestamp as format_rfc3339_ms;

mod clustered;

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
    /// Publications refused because the cluster's log (NATS JetStream)
    /// could not be reached: never accepted locally (fail closed).
    pub cluster_unavailable: std::sync::atomic::AtomicU64,
    /// Events read from the cluster's log that another gateway published.
    pub cluster_followed: std::sync::atomic::AtomicU64,
    /// Ranges of the cluster's log that retention removed before this
    /// gateway read them (older cursors are reset).
    pub cluster_gaps: std::sync::atomic::AtomicU64,
    /// Requests refused (unknown stream, unknown event type, …).
    pub refused: std::sync::atomic::AtomicU64,
}

/// The realtime plane (a [`ControlPlane`] for [`GatewayUp::Realtime`]).
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
    /// The ledgers' shared log, when they are shared with other gateways
    /// (`[cluster]`): publications are committed there, not here.
    cluster: Option<Box<ClusterLedgers>>,
    /// The workers' inputs taken at a tick (kept: no allocation per tick).
    inputs: Vec<Input>,
}

/// A stream of the configuration could not be registered, or (with no
/// stream named) the cluster's log could not be joined.
#[derive(Debug, thiserror::Error)]
#[error("{}{why}", named(stream))]
pub struct StreamSetupError {
    stream: String,
    why: String,
}

/// `stream "id": `, or nothing for an error of no one stream.
fn named(stream: &str) -> String {
    if stream.is_empty() {
        String::new()
    } else {
        format!("stream {stream:?}: ")
    }
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
            cluster: None,
            inputs: Vec::new(),
        })
    }

    /// A plane whose ledgers are shared with the other gateways of a
    /// cluster through NATS JetStream (SPEC RT-6 scale-out; see
    /// `cluster.rs`): the streams are made or updated, their epochs derived
    /// and their retained windows read before this returns (it blocks:
    /// call it before the engine runs), and the publisher and follower
    /// workers started. Cursors are tagged with `settings.cursor_key`, the
    /// same on every gateway.
    pub fn clustered(
        specs: Vec<StreamSpec>,
        shards: usize,
        settings: &ClusterSettings,
        clock: C,
    ) -> Result<Self, StreamSetupError> {
        let (cluster, starts) =
            ClusterLedgers::start(settings, &specs).map_err(|e| StreamSetupError {
                stream: String::new(),
                why: e.to_string(),
            })?;
        let mut epochs = starts.iter().map(|s| s.epoch);
        let key = settings.cursor_key;
        let mut words = key.chunks(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_le_bytes(b)
        });
        // The key's four words first, then each stream's derived epoch, in
        // the order `with_clock` draws them.
        let mut random = || words.next().or_else(|| epochs.next()).unwrap_or_default();
        let mut plane = Self::with_clock(specs, shards, &mut random, clock)?;
        let mut scratch = Vec::new();
        let now = Instant::now();
        for (n, start) in starts.into_iter().enumerate() {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            if let Some(l) = plane.ledger_of(n) {
                l.skip_to(start.base);
            }
            for (seq, event) in start.window {
                plane.follow(n, seq, event, now, &mut scratch);
                scratch.clear();
            }
        }
        plane.cluster = Some(Box::new(cluster));
        Ok(plane)
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

    /// The plane's counters when its ledgers are shared by a cluster.
    pub fn cluster_metrics(&self) -> Option<Arc<RealtimeMetrics>> {
        self.cluster.as_ref().map(|_| self.metrics.clone())
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
            Some(c) => {
                let resumed = ledger
                    .resume(c, &s.scope, now)
                    .map(|r| (r.next_expected_sequence(), take_page(&r, page)));
                let shared = self.cluster.is_some();
                match resumed {
                    Ok((next, replay)) => (next, Some(Arc::<str>::from(c)), replay, None),
                    // A shared ledger's log may still hold what the window
                    // dropped: the replay's pages are read from it (each
                    // page asked for as the socket drains, see `replay`).
                    Err(ResumeRefusal::Expired)
                        if shared && let Ok(after) = ledger.position_of(c, &s.scope) =>
                    {
                        let more = ReplayPage {
                            events: Vec::new(),
                            more: true,
                        };
                        (after + 1, Some(Arc::<str>::from(c)), more, None)
                    }
                    Err(why) => {
                        Self::bump(&self.metrics.resets);
                        (fresh, None, ReplayPage::default(), Some(refusal(why)))
                    }
                }
            }
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
            Some(Err(ResumeRefusal::Expired)) if self.cluster.is_some() => {
                if self.read_from_log((shard, conn, key), (stream, epoch, after), size, now) {
                    return;
                }
                Self::bump(&self.metrics.resets);
                Err(RtRefusal::CursorExpired)
            }
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
        if self.cluster.is_some() {
            if let Err(why) = self.submit(Some((shard, conn)), what, now) {
                out.push(self.refuse(shard, conn, 0, why));
            }
            return;
        }
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
        let (n, change) = self.admit(stream, event_type, &payload)?;
        let unix_ms = self.clock.unix_ms(now).0;
        let at = self.commit(n, (event_type, payload), change, (now, unix_ms), out)?;
        Ok((n, at))
    }

    /// Whether an event may be published: the stream's index and what it
    /// changes in the stream's state. Refused before it takes a sequence:
    /// a refusal is never a gap.
    fn admit(
        &self,
        stream: &str,
        event_type: &str,
        payload: &[u8],
    ) -> Result<(u32, Change), RtRefusal> {
        let &n = self.index.get(stream).ok_or(RtRefusal::UnknownStream)?;
        let s = &self.streams[n as usize];
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
        Ok((n, s.state.check(payload)?))
    }

    /// Appends an admitted event of stream `n` (see [`Self::publish`]),
    /// occurred at Unix millisecond `unix_ms`.
    fn commit(
        &mut self,
        n: u32,
        (event_type, payload): (&str, Bytes),
        change: Change,
        (now, unix_ms): (Instant, u64),
        out: &mut Decisions,
    ) -> Result<dtp_realtime::Appended, RtRefusal> {
        if self.stamp.0 != unix_ms {
            self.stamp = (unix_ms, format_rfc3339_ms(unix_ms).unwrap_or_default());
        }
        let occurred_at = &self.stamp.1;
        let s = &self.streams[n as usize];
        let bound = ENVELOPE_HEAD + s.id.len() + s.scope.len() + event_type.len() + payload.len();
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
        let mut encoded = Ok(());
        let mut made = None;
        let event_id = &mut self.event_id;
        let published = self.registry.publish_with(&s.id, event_type, now, |at| {
            let head = (epoch.as_str(), recovery, event_type, occurred_at.as_str());
            let event = encode(n, s, head, event_id, at, (&payload, bound));
            if event.sse.is_empty() {
                encoded = Err(RtRefusal::TooLarge);
            } else {
                encoded = Ok(());
            }
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
        Ok(at)
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
        let mut c = ledger.checkpoint();
        // Shared by a cluster, the state changes only with the log's
        // events: its sequence is the revision every gateway gives the
        // same state (a local count would make one gateway's entity tag
        // match another's different state, SPEC RT-11).
        if self.cluster.is_some() {
            c.revision = c.last_sequence;
        }
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
            let done = match self.cluster {
                Some(_) => self.submit(None, what, now),
                None => self.publish(what, now, out).map(|_| ()),
            };
            if let Err(why) = done {
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
        // More inputs than one tick takes: tick again at once.
        let more = self.cluster.is_some() && self.cluster_inputs(now, out);
        if self.next_expiry.is_none_or(|at| now >= at) {
            self.registry.expire_all(now);
            self.next_expiry = Some(now + EXPIRY_PERIOD);
        }
        if more { Some(now) } else { self.next_expiry }
    }

    fn attach(&mut self, waker: dtp_engine::ControlWaker) {
        if let Some(c) = &self.cluster {
            c.attach(waker.clone());
        }
        if let Some(push) = &self.push {
            push.attach(waker);
        }
    }
}

/// Event `at` of stream `n` (`s`) as one SSE chunk with the envelope
/// inside, shared by every subscriber; an empty chunk if it could not be
/// encoded (a bug: the head comes from validated config). `head` is the
/// epoch, recovery mode, event type and `occurredAt`; `event_id` a buffer
/// kept so that publishing allocates no id; `bound` the chunk's size.
fn encode(
    n: u32,
    s: &Stream,
    (epoch, recovery, event_type, occurred_at): (&str, RecoveryMode, &str, &str),
    event_id: &mut String,
    at: &dtp_realtime::Appended,
    (payload, bound): (&[u8], usize),
) -> Arc<RtEvent> {
    // Written into the kept buffer, not `format!`ted: one allocation less
    // per event on the control thread.
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
    // One buffer: the SSE block framed as a chunk, the envelope written in
    // place inside it and shared as a slice of it (a profile of the
    // built-in streams showed three buffers and two copies per event).
    // Sized once: growing it cost more than encoding.
    let built = sse_chunk_with(at.cursor.as_deref(), bound, |b| {
        write_envelope(b, &head, payload)
    });
    let (sse, envelope) = built.unwrap_or((Bytes::new(), 0..0));
    Arc::new(RtEvent::new(n, at.sequence, sse, envelope))
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
