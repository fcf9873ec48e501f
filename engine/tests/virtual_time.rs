//! A shard in virtual time (DESIGN.md §2, "Time is passed in"): over the
//! in-memory transport and on a clock the test moves, with no socket and no
//! sleep. A frame is answered at once; a deadline the service set fires
//! exactly when the clock passes it, and not a turn before.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_codec::{Body, DataFrame, ErrorCode, FrameDecoder, Limits, LogicalFrame};
use dtp_engine::{
    Clock, Frame, FrameService, Framed, ManualClock, Origin, Outbox, Shard, ShardMetrics,
};
use dtp_transports::{ConnId, Endpoint, Event, MemoryHub, Transport};

/// How long after a frame the service says it is still there.
const NUDGE: Duration = Duration::from_secs(5);

fn data(payload: &'static [u8]) -> LogicalFrame {
    LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: 1,
            sequence: 1,
            relations: vec![],
            payload: Bytes::from_static(payload),
        }),
    )
}

/// Echoes data frames, then sends "still here" `NUDGE` after the last one,
/// by the shard's clock.
struct Nudger;

impl FrameService for Nudger {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) {}

    fn frame(&mut self, _: &mut (), frame: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        let frame = frame.decode(out.limits()).map_err(|e| e.code())?;
        out.send(&frame)?;
        let at = out.now() + NUDGE;
        out.set_timer(Some(at));
        Ok(())
    }

    fn timeout(&mut self, _: &mut (), _: Instant, out: &mut Outbox<'_>) {
        // Frames the send budget cannot take are BUFFER_FULL: none here.
        out.send(&data(b"still here")).unwrap();
    }
}

/// What the client has decoded so far.
fn payloads(client: &mut impl Transport, rx: &mut BytesMut) -> Vec<Bytes> {
    let mut events = Vec::new();
    client.poll(&mut events, None).unwrap();
    for e in events {
        if let Event::Received { data, .. } = e {
            rx.extend_from_slice(&data);
        }
    }
    let decoder = FrameDecoder::new(Limits::default());
    let mut got = Vec::new();
    while let Some(f) = decoder.decode(rx).unwrap() {
        if let Body::Data(d) = f.body {
            got.push(d.payload);
        }
    }
    got
}

#[test]
fn a_shard_on_the_memory_transport_keeps_its_deadlines_in_virtual_time() {
    let hub = MemoryHub::new();
    let at = Endpoint::Memory("gateway".into());
    let clock = ManualClock::new(Instant::now());
    let mut shard = Shard::on_clock(
        hub.transport(),
        Framed::new(Nudger),
        Limits::default(),
        1 << 20,
        Arc::new(ShardMetrics::default()),
        clock.clone(),
    );
    shard.listen(&at).unwrap();
    let mut client = hub.transport();
    let conn = client.connect(&at).unwrap();
    client
        .send(conn, &data(b"hello").to_bytes(&Limits::default()).unwrap())
        .unwrap();
    let mut rx = BytesMut::new();

    // The frame is echoed within a turn or two; the deadline is NUDGE on.
    let mut deadline = None;
    for _ in 0..3 {
        deadline = shard.turn(Some(Duration::ZERO)).unwrap();
    }
    assert_eq!(
        payloads(&mut client, &mut rx),
        vec![Bytes::from_static(b"hello")]
    );
    assert_eq!(deadline, Some(clock.now() + NUDGE));

    // A turn just before the deadline fires nothing …
    clock.advance(NUDGE - Duration::from_millis(1));
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert!(payloads(&mut client, &mut rx).is_empty());
    // … and the turn at it does: no real time passed at all.
    clock.advance(Duration::from_millis(1));
    let next = shard.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(
        payloads(&mut client, &mut rx),
        vec![Bytes::from_static(b"still here")]
    );
    assert_eq!(next, None, "nothing more is due");
}

/// Answers every frame with owned bytes, shared bytes and owned bytes
/// again, in that order.
struct Mixed(Bytes);

impl FrameService for Mixed {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) {}

    fn frame(&mut self, _: &mut (), _: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        out.wire().extend_from_slice(b"<owned:");
        out.send_shared(&self.0)?;
        out.wire().extend_from_slice(b":owned>");
        Ok(())
    }
}

/// Shared bytes keep their place among the owned ones, whether the
/// transport takes them at once or refuses and they wait (copied) behind
/// what it refused.
#[test]
fn shared_bytes_keep_their_place_in_the_stream_even_under_backpressure() {
    use dtp_transports::MemoryConfig;
    let shared = Bytes::from(vec![b's'; 1500]);
    let mut want = Vec::new();
    for _ in 0..3 {
        want.extend_from_slice(b"<owned:");
        want.extend_from_slice(&shared);
        want.extend_from_slice(b":owned>");
    }
    // A roomy queue, and one of 4 KiB that the three answers overflow: the
    // third waits in the shard until the client has read the others. The
    // shard's send budget is the transport's queue, as in the engine.
    for queue_capacity in [1 << 20, 4096] {
        let hub = MemoryHub::new();
        let at = Endpoint::Memory("gateway".into());
        let config = MemoryConfig {
            queue_capacity,
            ..MemoryConfig::default()
        };
        let mut shard = Shard::on_clock(
            hub.transport_with(config),
            Framed::new(Mixed(shared.clone())),
            Limits::default(),
            queue_capacity,
            Arc::new(ShardMetrics::default()),
            ManualClock::new(Instant::now()),
        );
        shard.listen(&at).unwrap();
        let mut client = hub.transport();
        let conn = client.connect(&at).unwrap();
        let frame = data(b"go").to_bytes(&Limits::default()).unwrap();
        for _ in 0..3 {
            client.send(conn, &frame).unwrap();
        }
        let mut got = Vec::new();
        let mut events = Vec::new();
        for _ in 0..200 {
            shard.turn(Some(Duration::ZERO)).unwrap();
            client.poll(&mut events, None).unwrap();
            for e in events.drain(..) {
                if let Event::Received { data, .. } = e {
                    got.extend_from_slice(&data);
                }
            }
            if got.len() >= want.len() {
                break;
            }
        }
        assert!(
            got == want,
            "queue {queue_capacity}: {} bytes, out of order or lost",
            got.len()
        );
    }
}
