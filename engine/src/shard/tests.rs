//! The timer heap stays bounded when a connection moves its deadline on
//! every frame, and the live deadline still fires.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dtp_codec::{ErrorCode, Limits};
use dtp_transports::{ConnId, Endpoint, MemoryHub, RecvBuf, Transport};

use super::Shard;
use crate::clock::{Clock, ManualClock};
use crate::runtime::ShardMetrics;
use crate::service::{Origin, Outbox, Service};

#[derive(Default)]
struct Timed {
    conn: Option<ConnId>,
    fired: Vec<Instant>,
}

impl Service for Timed {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_>) {
        self.conn = Some(conn);
    }

    fn bytes(&mut self, _: &mut (), _: RecvBuf, _: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn timeout(&mut self, _: &mut (), now: Instant, _: &mut Outbox<'_>) {
        self.fired.push(now);
    }
}

/// A shard on a manual clock running `service`, with one in-memory
/// connection accepted (the client's transport is returned to keep it open).
fn one_connection<S: Service>(
    service: S,
) -> (
    Shard<dtp_transports::MemoryTransport, S, ManualClock>,
    ManualClock,
    dtp_transports::MemoryTransport,
) {
    let hub = MemoryHub::new();
    let at = Endpoint::Memory("shard-tests".into());
    let clock = ManualClock::new(Instant::now());
    let mut shard = Shard::on_clock(
        hub.transport(),
        service,
        Limits::default(),
        1 << 20,
        Arc::new(ShardMetrics::default()),
        clock.clone(),
    );
    shard.listen(&at).unwrap();
    let mut client = hub.transport();
    client.connect(&at).unwrap();
    for _ in 0..3 {
        shard.turn(Some(Duration::ZERO)).unwrap();
    }
    (shard, clock, client)
}

#[test]
fn a_deadline_moved_on_every_frame_leaves_no_pile_of_stale_entries() {
    let (mut shard, clock, _client) = one_connection(Timed::default());
    let conn = shard.service().conn.unwrap();
    let base = clock.now() + Duration::from_secs(60);
    for i in 0..50_000u64 {
        let deadline = base + Duration::from_micros(i);
        shard.core.set_timer(conn, Some(Some(deadline)));
        assert!(shard.core.timers.len() <= 2 + super::state::TIMERS_SLACK + 1);
    }
    let last = base + Duration::from_micros(49_999);
    clock.advance(last - clock.now() - Duration::from_micros(1));
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert!(shard.service().fired.is_empty(), "not due yet");
    clock.advance(Duration::from_micros(1));
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(
        shard.service().fired,
        vec![last],
        "fired once, at the live deadline"
    );
}

/// Lowers its send budget on open, then answers every input with 600
/// bytes while it has room, recording what the outbox says.
#[derive(Default)]
struct Limited {
    seen: Vec<(usize, u64, u64)>,
    writable: usize,
}

impl Service for Limited {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, out: &mut Outbox<'_>) {
        out.limit_send_queue(1_000);
    }

    fn bytes(&mut self, _: &mut (), _: RecvBuf, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        if out.room() >= 600 {
            out.wire().extend_from_slice(&[7; 600]);
        } else {
            out.want_writable();
        }
        self.seen.push((out.budget(), out.position(), out.sent()));
        Ok(())
    }

    fn writable(&mut self, _: &mut (), out: &mut Outbox<'_>) {
        self.writable += 1;
        self.seen.push((out.budget(), out.position(), out.sent()));
    }
}

/// SPEC MEM-5, RT-13: a service's own, lower send budget holds for its
/// connection, and the outbox counts the connection's bytes handed and
/// sent over its life.
#[test]
fn a_lowered_send_budget_holds_and_positions_count_what_left() {
    let metrics = Arc::new(ShardMetrics::default());
    let (mut shard, mut client, id) = connected("limited", Limited::default(), metrics.clone());
    let mut events = Vec::new();
    let mut turn = |shard: &mut Shard<_, Limited, _>,
                    client: &mut dtp_transports::MemoryTransport,
                    read: bool| {
        shard.turn(Some(Duration::ZERO)).unwrap();
        events.clear();
        if read {
            client.poll(&mut events, Some(Duration::ZERO)).unwrap();
        }
    };
    // 600 bytes queued are more than half of the lowered budget (not of
    // the shard's 1 MiB): reading pauses, and the second input waits.
    client.send(id, b"a").unwrap();
    turn(&mut shard, &mut client, false);
    client.send(id, b"b").unwrap();
    turn(&mut shard, &mut client, false);
    let seen = shard.service().seen.clone();
    assert_eq!(seen, vec![(1_000, 600, 0)], "600 handed, none sent yet");
    assert_eq!(metrics.paused.load(std::sync::atomic::Ordering::Relaxed), 1);
    // The client reads: the queue drains, the service hears of room, and
    // every byte handed has left.
    for _ in 0..4 {
        turn(&mut shard, &mut client, true);
    }
    let s = shard.service();
    assert!(s.writable >= 1, "told of room once the queue drained");
    assert_eq!(s.seen[1], (1_000, 600, 600), "room: the first 600 left");
    assert_eq!(
        s.seen[2],
        (1_000, 1_200, 600),
        "the held input, once resumed"
    );
    assert_eq!(
        *s.seen.last().unwrap(),
        (1_000, 1_200, 1_200),
        "all has left"
    );
}

/// Writes 3,000 bytes under a 1,000-byte budget and closes, in one callback.
struct SayAndClose;

impl Service for SayAndClose {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, out: &mut Outbox<'_>) {
        out.limit_send_queue(1_000);
    }

    fn bytes(&mut self, _: &mut (), _: RecvBuf, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        out.wire().extend_from_slice(&[9; 3_000]);
        out.close();
        Ok(())
    }
}

/// A close asked for while bytes wait for the driver (refused for want of
/// room) sends them first: the peer gets every byte, then the end.
#[test]
fn a_close_sends_the_bytes_the_driver_refused_first() {
    let metrics = Arc::new(ShardMetrics::default());
    let (mut shard, mut client, id) = connected("say-and-close", SayAndClose, metrics);
    let mut events = Vec::new();
    client.send(id, b"go").unwrap();
    let mut got = 0;
    let mut ended = false;
    for _ in 0..20 {
        shard.turn(Some(Duration::ZERO)).unwrap();
        events.clear();
        client.poll(&mut events, Some(Duration::ZERO)).unwrap();
        for e in &events {
            match e {
                dtp_transports::Event::Received { data, .. } => got += data.len(),
                dtp_transports::Event::Closed { .. } => ended = true,
                _ => {}
            }
        }
    }
    assert_eq!(got, 3_000, "every byte before the end");
    assert!(ended, "then the connection ended");
}

/// A shard running `service` on the memory transport at `name` with the
/// given metrics, and a client connected to it (after three turns).
fn connected<S: Service>(
    name: &str,
    service: S,
    metrics: Arc<ShardMetrics>,
) -> (
    Shard<dtp_transports::MemoryTransport, S, ManualClock>,
    dtp_transports::MemoryTransport,
    ConnId,
) {
    let hub = MemoryHub::new();
    let at = Endpoint::Memory(name.into());
    let clock = ManualClock::new(Instant::now());
    let mut shard = Shard::on_clock(
        hub.transport(),
        service,
        Limits::default(),
        1 << 20,
        metrics,
        clock,
    );
    shard.listen(&at).unwrap();
    let mut client = hub.transport();
    let id = client.connect(&at).unwrap();
    let mut events = Vec::new();
    for _ in 0..3 {
        shard.turn(Some(Duration::ZERO)).unwrap();
        client.poll(&mut events, Some(Duration::ZERO)).unwrap();
    }
    (shard, client, id)
}

/// Remembers its notifier and the connections it was notified for.
#[derive(Default)]
struct Noticed {
    notifier: Option<crate::Notifier>,
    conn: Option<ConnId>,
    notified: Vec<ConnId>,
}

impl Service for Noticed {
    type Conn = ConnId;
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_>) -> ConnId {
        self.conn = Some(conn);
        conn
    }

    fn bytes(&mut self, _: &mut ConnId, _: RecvBuf, _: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn attach(&mut self, notifier: crate::Notifier) {
        self.notifier = Some(notifier);
    }

    fn notified(&mut self, conn: &mut ConnId, _: &mut Outbox<'_>) {
        self.notified.push(*conn);
    }
}

/// A connection named to the shard's notifier from another thread is
/// handed to the service at the shard's next turn, once; a connection the
/// shard does not hold is skipped; a turn with no notice calls nothing.
#[test]
fn a_notice_from_another_thread_reaches_its_connection_at_the_next_turn() {
    let (mut shard, _clock, _client) = one_connection(Noticed::default());
    let conn = shard.service().conn.unwrap();
    let notifier = shard.service().notifier.clone().unwrap();
    std::thread::spawn(move || {
        notifier.notify(conn);
        notifier.notify(ConnId::from_u64(u64::MAX));
    })
    .join()
    .unwrap();
    assert!(shard.service().notified.is_empty(), "not before a turn");
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(shard.service().notified, vec![conn]);
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(shard.service().notified, vec![conn], "once");
}
