//! The fan-out of live events (SPEC RT-8, RT-9, RT-10): the events the
//! control thread sent this shard in one turn are held until the turn's
//! last decision ([`Service::decisions_done`]), then sent stream by stream
//! to every subscriber as one shared block each — a burst of events is one
//! send per subscriber, not one per event.
//!
//! The block is built once per shard and run, and queued by reference on
//! every subscriber's connection ([`Outbox::send_shared`]): for SSE the
//! events' chunks, copied once into a buffer of the shard's own; for
//! WebSocket the EVENT messages framed for one subscription id, since the
//! id is the only part of the message that differs between subscribers.
//! Clients name their subscriptions alike (a client library counts them
//! from one), so each id seen in a run is framed once and kept for the
//! rest of the run, up to [`WS_IDS`] of them; a subscription with yet
//! another id gets its messages framed for it alone, the same bytes.
//!
//! The ceilings are checked for the whole block first; a subscriber it
//! does not fit gets the run's events one by one up to the first that does
//! not fit, then is ended as a slow consumer: the same messages, in the
//! same order, as when every event was sent on its own.
//!
//! [`Service::decisions_done`]: dtp_engine::Service::decisions_done

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use dtp_codec::realtime::{EVENT_MESSAGE_END, write_event_message_head};
use dtp_codec::ws::{Opcode, Role, encode_header};

use super::replay::Outflow;
use super::{RealtimeFront, RtConn};
use crate::app::GatewayUp;
use crate::realtime::RtEvent;
use dtp_engine::{Connections, Outbox};

/// Subscription ids whose framed messages one run keeps.
pub(super) const WS_IDS: usize = 16;

/// Event messages joined in one buffer, with where each ends.
#[derive(Debug)]
pub(super) struct Joined {
    pub(super) bytes: Bytes,
    /// The end of each message in `bytes`, in order.
    pub(super) ends: Vec<usize>,
}

impl Joined {
    /// Queues these messages on a subscriber: in one shared block when
    /// they all fit its ceilings, else one by one up to the first that
    /// does not. Returns how many were queued.
    pub(super) fn queue(
        &self,
        flow: &mut Outflow,
        max: usize,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> usize {
        let start = out.position();
        if flow.fits_all(out, self.bytes.len(), self.ends.len(), max) {
            share(out, &self.bytes);
            for &end in &self.ends {
                flow.queued_to(start + end as u64);
            }
            return self.ends.len();
        }
        let mut from = 0;
        for (n, &end) in self.ends.iter().enumerate() {
            if !flow.fits_all(out, end - from, 1, max) {
                return n;
            }
            share(out, &self.bytes.slice(from..end));
            flow.queued_to(out.position());
            from = end;
        }
        self.ends.len()
    }
}

/// Queues `bytes` by reference; past the connection's send budget (the
/// ceiling is the caller's to check) it is written into the batch instead.
pub(super) fn share(out: &mut Outbox<'_, GatewayUp>, bytes: &Bytes) {
    if out.send_shared(bytes).is_err() {
        out.wire().extend_from_slice(bytes);
    }
}

/// Consecutive events of one stream, and their messages as built so far.
pub(super) struct Run<'a> {
    events: &'a [Arc<RtEvent>],
    sse: Option<Joined>,
    ws: Vec<(Box<str>, Joined)>,
}

impl<'a> Run<'a> {
    pub(super) fn new(events: &'a [Arc<RtEvent>]) -> Self {
        Self {
            events,
            sse: None,
            ws: Vec::new(),
        }
    }

    /// The events' SSE chunks, joined in a buffer of this shard's own,
    /// even for one event: every subscriber's send takes and drops a
    /// reference to it, and the event's own buffer is shared with the
    /// other shards, whose cores would pull its reference count back and
    /// forth (a profile showed the count's cache misses at about 3% of
    /// the fan-out's CPU).
    pub(super) fn sse(&mut self) -> &Joined {
        self.sse.get_or_insert_with(|| {
            let len = self.events.iter().map(|e| e.sse.len()).sum();
            let mut b = BytesMut::with_capacity(len);
            for e in self.events {
                b.extend_from_slice(&e.sse);
            }
            let bytes = b.freeze();
            let mut end = 0;
            let ends = self
                .events
                .iter()
                .map(|e| {
                    end += e.sse.len();
                    end
                })
                .collect();
            Joined { bytes, ends }
        })
    }

    /// The events' EVENT messages for subscription `id`, framed and
    /// joined: kept for the run's other subscribers of the same id (up
    /// to [`WS_IDS`] ids), else framed for this one alone.
    pub(super) fn ws(&mut self, id: &str, cb: impl FnOnce(&Joined) -> usize) -> usize {
        if let Some(i) = self.ws.iter().position(|(k, _)| **k == *id) {
            return cb(&self.ws[i].1);
        }
        let joined = ws_messages(id, self.events);
        let n = cb(&joined);
        if self.ws.len() < WS_IDS {
            self.ws.push((id.into(), joined));
        }
        n
    }
}

/// The EVENT messages of `events` for subscription `id`, each one
/// WebSocket text frame: header, head, the shared envelope, the end.
fn ws_messages(id: &str, events: &[Arc<RtEvent>]) -> Joined {
    let mut head = BytesMut::new();
    if write_event_message_head(&mut head, id).is_err() {
        // Ids are checked by the SUBSCRIBE decoder: unreachable in practice.
        head.clear();
    }
    let len = events
        .iter()
        .map(|e| 10 + head.len() + e.envelope().len() + 1)
        .sum();
    let mut b = BytesMut::with_capacity(len);
    let ends = events
        .iter()
        .map(|e| {
            event_frame(&mut b, &head, e.envelope());
            b.len()
        })
        .collect();
    Joined {
        bytes: b.freeze(),
        ends,
    }
}

/// Appends one EVENT message frame to `wire`: its header, `head`, the
/// envelope, the end.
pub(super) fn event_frame(wire: &mut BytesMut, head: &[u8], envelope: &[u8]) {
    let len = head.len() + envelope.len() + 1;
    match encode_header(Role::Server, true, Opcode::Text, len as u64, None) {
        Ok(h) => {
            wire.extend_from_slice(h.as_slice());
            wire.extend_from_slice(head);
            wire.extend_from_slice(envelope);
            wire.extend_from_slice(&[EVENT_MESSAGE_END]);
        }
        Err(_) => tracing::error!("a WebSocket frame header could not be encoded"),
    }
}

impl RealtimeFront {
    /// Fans out the events held this turn, in order, a run of one stream's
    /// consecutive events at a time.
    pub(super) fn fan_out(&mut self, conns: &mut dyn Connections<RtConn, GatewayUp>) {
        if self.burst.is_empty() {
            return;
        }
        let burst = std::mem::take(&mut self.burst);
        let mut rest = &burst[..];
        while let Some(first) = rest.first() {
            let n = rest.iter().take_while(|e| e.stream == first.stream).count();
            let (run, tail) = rest.split_at(n);
            self.fan_out_run(run, conns);
            rest = tail;
        }
        self.burst = burst;
        self.burst.clear();
    }

    /// Sends consecutive events of one stream to every subscriber of it,
    /// in one block each.
    fn fan_out_run(
        &mut self,
        events: &[Arc<RtEvent>],
        conns: &mut dyn Connections<RtConn, GatewayUp>,
    ) {
        let stream = events[0].stream;
        let mut run = Run::new(events);
        let mut dropped = Vec::new();
        let mut i = 0;
        // Walked by position, not copied: the list may be long.
        while let Some(&(conn, key)) = self.index.stream(stream).list().get(i) {
            i += 1;
            let mut kept = false;
            conns.visit(conn, &mut |c, out| {
                kept = self.deliver(c, key, &mut run, out)
            });
            if !kept {
                dropped.push((conn, key));
            }
        }
        self.metrics.delivered((i - dropped.len()) * events.len());
        if !dropped.is_empty() {
            for who in dropped {
                self.index.remove(stream, who);
            }
            self.publish_gauges();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use std::collections::HashMap;
    use std::time::Instant;

    use dtp_codec::Limits;
    use dtp_codec::realtime::{
        ClientMessage, EnvelopeHead, RecoveryMode, sse_chunk_with, write_envelope,
        write_event_message,
    };
    use dtp_codec::ws::encode_frame;
    use dtp_engine::{Origin, Service};
    use dtp_transports::{ConnId, RecvBuf};

    use super::*;
    use crate::app::GatewayDown;
    use crate::realtime::config::{RtClient, RtConfig, RtLimits};
    use crate::realtime::{LoginKey, ReplayPage, RtDecision, SubKey};

    /// One connection as a test's shard sees it: nothing it is sent is
    /// ever read by its peer.
    struct Peer {
        conn: RtConn,
        /// Its bytes as they would go on the wire, in order.
        wire: Vec<u8>,
        /// Pieces handed to the transport: each shared block, and each
        /// run of batch bytes between them.
        sends: usize,
    }

    /// The shard's side of a test: connections, each with a send budget
    /// of `budget` bytes.
    struct Shard {
        peers: HashMap<ConnId, Peer>,
        limits: Limits,
        budget: usize,
    }

    impl Shard {
        fn run(
            &mut self,
            conn: ConnId,
            f: &mut dyn FnMut(&mut RtConn, &mut Outbox<'_, GatewayUp>),
        ) {
            let peer = self.peers.get_mut(&conn).unwrap();
            let mut buf = BytesMut::new();
            let room = self.budget.saturating_sub(peer.wire.len());
            let mut out = Outbox::new(&mut buf, &self.limits, room, self.budget, Instant::now());
            f(&mut peer.conn, &mut out);
            let shared = out.shared().to_vec();
            drop(out);
            let mut start = 0;
            for (at, bytes) in shared {
                peer.sends += usize::from(at > start) + 1;
                peer.wire.extend_from_slice(&buf[start..at]);
                peer.wire.extend_from_slice(&bytes);
                start = at;
            }
            peer.sends += usize::from(buf.len() > start);
            peer.wire.extend_from_slice(&buf[start..]);
        }

        /// Forgets what `conn` was sent so far (its peer read it).
        fn read(&mut self, conn: ConnId) {
            let peer = self.peers.get_mut(&conn).unwrap();
            peer.wire.clear();
            peer.sends = 0;
        }
    }

    impl Connections<RtConn, GatewayUp> for Shard {
        fn visit(
            &mut self,
            conn: ConnId,
            f: &mut dyn FnMut(&mut RtConn, &mut Outbox<'_, GatewayUp>),
        ) -> bool {
            if !self.peers.contains_key(&conn) {
                return false;
            }
            self.run(conn, f);
            true
        }
    }

    const TOKEN: &str = "reader-token";

    fn rig(max_outbound: usize) -> (RealtimeFront, Shard) {
        let config = RtConfig {
            clients: vec![RtClient {
                token: TOKEN.into(),
                streams: vec!["*".into()],
                publish: false,
                admin: false,
            }],
            cookie: "s".into(),
            login: LoginKey::new([5; 32], Instant::now()),
            origins: Vec::new(),
            own_origins: Default::default(),
            echo_max_message: None,
            scopes: HashMap::new(),
            limits: RtLimits {
                max_outbound,
                ..RtLimits::default()
            },
        };
        let front = RealtimeFront::new(Arc::new(config), 0, Arc::default());
        let shard = Shard {
            peers: HashMap::new(),
            limits: Limits::default(),
            budget: max_outbound,
        };
        (front, shard)
    }

    /// Opens connection `n` and feeds it `input`.
    fn connect(front: &mut RealtimeFront, shard: &mut Shard, n: u64, input: &[u8]) -> ConnId {
        let conn = ConnId::from_u64(n);
        let (mut buf, limits) = (BytesMut::new(), Limits::default());
        let mut out = Outbox::new(&mut buf, &limits, 1 << 20, 1 << 20, Instant::now());
        let c = front.open(conn, Origin::Accepted { listener: 0 }, &mut out);
        drop(out);
        shard.peers.insert(
            conn,
            Peer {
                conn: c,
                wire: Vec::new(),
                sends: 0,
            },
        );
        feed(front, shard, conn, input);
        conn
    }

    fn feed(front: &mut RealtimeFront, shard: &mut Shard, conn: ConnId, input: &[u8]) {
        shard.run(conn, &mut |c, out| {
            let data = RecvBuf::from(BytesMut::from(input));
            assert!(front.bytes(c, data, out).is_ok());
        });
    }

    fn decide(front: &mut RealtimeFront, shard: &mut Shard, d: RtDecision) {
        let rest = front.decision(GatewayDown::Realtime(Box::new(d)), shard);
        assert!(rest.is_none());
    }

    fn subscribed(front: &mut RealtimeFront, shard: &mut Shard, conn: ConnId, key: SubKey) {
        let d = RtDecision::Subscribed {
            conn,
            key,
            stream: 0,
            epoch: "ep".into(),
            next: 1,
            accepted: None,
            replay: ReplayPage {
                events: Vec::new(),
                more: false,
            },
            reset: None,
        };
        decide(front, shard, d);
        front.decisions_done(shard);
        shard.read(conn);
    }

    /// A `realtime.v1` session subscribed to stream 0 as `id`.
    fn ws(front: &mut RealtimeFront, shard: &mut Shard, n: u64, id: &str) -> ConnId {
        let upgrade = format!(
            "GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Protocol: realtime.v1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        let conn = connect(front, shard, n, upgrade.as_bytes());
        let json = ClientMessage::Subscribe {
            subscription_id: id.into(),
            stream_id: "demo".into(),
            cursor: None,
            scope_binding: "scope".into(),
        }
        .encode()
        .unwrap();
        let frame = encode_frame(Role::Client, true, Opcode::Text, &json, Some([0; 4])).unwrap();
        feed(front, shard, conn, &frame);
        subscribed(front, shard, conn, 1);
        conn
    }

    /// An SSE stream subscribed to stream 0.
    fn sse(front: &mut RealtimeFront, shard: &mut Shard, n: u64) -> ConnId {
        let get = format!(
            "GET /v1/streams/demo/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        let conn = connect(front, shard, n, get.as_bytes());
        subscribed(front, shard, conn, 0);
        conn
    }

    /// Event `seq` of stream 0, as the realtime plane encodes it.
    fn event(seq: u64) -> Arc<RtEvent> {
        let event_id = format!("ep-{seq}");
        let cursor = format!("c{seq}");
        let head = EnvelopeHead {
            stream_id: "demo",
            stream_epoch: "ep",
            event_type: "demo.tick",
            event_id: &event_id,
            sequence: seq,
            occurred_at: "2026-12-04T12:00:00.000Z",
            scope_binding: "scope",
            recovery: RecoveryMode::Cursor,
            resume_cursor: Some(&cursor),
        };
        let payload = format!(r#"{{"n":{seq},"pad":"{}"}}"#, "x".repeat(64));
        let (sse, range) = sse_chunk_with(Some(&cursor), 512, |b| {
            write_envelope(b, &head, payload.as_bytes())
        })
        .unwrap();
        Arc::new(RtEvent::new(0, seq, sse, range))
    }

    /// The EVENT messages of `events` for `id`, framed one by one with the
    /// codec's own encoder.
    fn ws_wire(id: &str, events: &[Arc<RtEvent>]) -> Vec<u8> {
        let mut wire = Vec::new();
        for e in events {
            let mut msg = BytesMut::new();
            write_event_message(&mut msg, id, e.envelope()).unwrap();
            let frame = encode_frame(Role::Server, true, Opcode::Text, &msg, None).unwrap();
            wire.extend_from_slice(&frame);
        }
        wire
    }

    /// Publishes `events` to the front end, `per_turn` to a turn of the
    /// shard's loop.
    fn publish(
        front: &mut RealtimeFront,
        shard: &mut Shard,
        events: &[Arc<RtEvent>],
        per_turn: usize,
    ) {
        for turn in events.chunks(per_turn) {
            for e in turn {
                decide(front, shard, RtDecision::Event(e.clone()));
            }
            front.decisions_done(shard);
        }
    }

    /// A burst of events taken in one turn goes to each subscriber in one
    /// shared block, the same for every subscriber of a subscription id;
    /// the bytes are those of the events sent one at a time.
    #[test]
    fn a_burst_is_one_send_per_subscriber_with_the_same_bytes() {
        let events: Vec<_> = (1..=5).map(event).collect();
        let mut turns = Vec::new();
        for per_turn in [1, 5] {
            let (mut front, mut shard) = rig(1 << 20);
            let a = ws(&mut front, &mut shard, 1, "s1");
            let b = ws(&mut front, &mut shard, 2, "s1");
            let other = ws(&mut front, &mut shard, 3, "another-id");
            let s = sse(&mut front, &mut shard, 4);
            publish(&mut front, &mut shard, &events, per_turn);
            let p = |c: ConnId| (shard.peers[&c].wire.clone(), shard.peers[&c].sends);
            turns.push([p(a), p(b), p(other), p(s)]);
        }
        let [one_by_one, burst] = [&turns[0], &turns[1]];
        let sse_wire: Vec<u8> = events.iter().flat_map(|e| e.sse.to_vec()).collect();
        let want = [
            ws_wire("s1", &events),
            ws_wire("s1", &events),
            ws_wire("another-id", &events),
            sse_wire,
        ];
        for ((want, (single, singles)), (joined, sends)) in want.iter().zip(one_by_one).zip(burst) {
            assert_eq!(single, want, "one event a turn");
            assert_eq!(joined, want, "a burst");
            assert_eq!(*singles, events.len(), "one send per event a turn");
            assert_eq!(*sends, 1, "one send for the burst");
        }
    }

    /// Events of different streams in one turn keep their order: the burst
    /// is cut into runs of one stream, and a decision that is not an event
    /// sends the events before it first.
    #[test]
    fn a_burst_keeps_its_order_around_other_decisions() {
        let (mut front, mut shard) = rig(1 << 20);
        let a = ws(&mut front, &mut shard, 1, "s1");
        let events: Vec<_> = (1..=4).map(event).collect();
        for e in &events[..2] {
            decide(&mut front, &mut shard, RtDecision::Event(e.clone()));
        }
        // A late subscriber's answer in the same turn: the events before it
        // are not its to see, and the first session has them already.
        let late = ws(&mut front, &mut shard, 2, "s1");
        assert_eq!(shard.peers[&a].wire, ws_wire("s1", &events[..2]));
        for e in &events[2..] {
            decide(&mut front, &mut shard, RtDecision::Event(e.clone()));
        }
        front.decisions_done(&mut shard);
        assert_eq!(shard.peers[&a].wire, ws_wire("s1", &events));
        assert_eq!(shard.peers[&late].wire, ws_wire("s1", &events[2..]));
    }

    /// SPEC RT-10, RT-13: a burst that does not fit a subscriber's ceiling
    /// is sent up to the first event that does not fit, then the
    /// subscriber is ended as a slow consumer — the same bytes as when the
    /// events came one a turn.
    #[test]
    fn a_burst_past_the_ceiling_ends_the_subscriber_where_single_events_would() {
        let events: Vec<_> = (1..=6).map(event).collect();
        let size = ws_wire("s1", &events[..1]).len();
        let mut wires = Vec::new();
        for per_turn in [1, 6] {
            // Room for three and a half events.
            let (mut front, mut shard) = rig(size * 7 / 2);
            let a = ws(&mut front, &mut shard, 1, "s1");
            let s = sse(&mut front, &mut shard, 2);
            publish(&mut front, &mut shard, &events, per_turn);
            assert_eq!(front.index.total(), 0, "both ended as slow consumers");
            wires.push((shard.peers[&a].wire.clone(), shard.peers[&s].wire.clone()));
        }
        assert_eq!(wires[0], wires[1]);
        let (ws_got, sse_got) = &wires[1];
        let sent = ws_wire("s1", &events[..3]);
        assert!(ws_got.starts_with(&sent) && ws_got.len() > sent.len());
        let end = String::from_utf8_lossy(&ws_got[sent.len()..]).into_owned();
        assert!(
            end.contains(r#""category":"OVERLOADED","retryAfterMs":"#),
            "{end}"
        );
        let mut room = size * 7 / 2;
        let fit = events
            .iter()
            .take_while(|e| room.checked_sub(e.sse.len()).map(|r| room = r).is_some())
            .count();
        assert!((1..events.len()).contains(&fit));
        let sse_sent: Vec<u8> = events[..fit].iter().flat_map(|e| e.sse.to_vec()).collect();
        assert!(sse_got.starts_with(&sse_sent));
        assert!(String::from_utf8_lossy(&sse_got[sse_sent.len()..]).contains("QUEUE_OVERFLOW"));
    }
}
