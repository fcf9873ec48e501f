//! The control thread: shards forward connection up/down and control-plane
//! messages through bounded rings, and carry out the decisions that come
//! back — in order, with nothing lost when the rings are tiny.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::{
    Beat, Body, ControlMessage, ErrorCode, Heartbeat, HeartbeatAck, Limits, LogicalFrame,
    SessionRelease,
};
use dtp_engine::{
    Connections, ControlPlane, Decision, Engine, EngineConfig, Frame, FrameService, Framed, Origin,
    Outbox, Request,
};
use dtp_test_kit::read_frames;
use dtp_transports::{BackendPreference, ConnId, DriverConfig};
use uuid::Uuid;

/// What the test service and its plane say to each other: a control
/// message and its connection.
type Msg = (ConnId, ControlMessage);

/// Hands every control frame to the control thread (its own messages: the
/// runtime carries them without looking inside) and sends back, as control
/// frames, what the control thread decides.
struct Forward;

impl FrameService for Forward {
    type Conn = ConnId;
    type Up = Msg;
    type Down = Msg;

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_, Msg>) -> ConnId {
        conn
    }

    fn frame(
        &mut self,
        conn: &mut ConnId,
        f: Frame,
        out: &mut Outbox<'_, Msg>,
    ) -> Result<(), ErrorCode> {
        match f.decode(out.limits()).map_err(|e| e.code())?.body {
            Body::Control(msg) => {
                out.to_control((*conn, msg));
                Ok(())
            }
            other => panic!("the service got {other:?}"),
        }
    }

    fn decision(
        &mut self,
        (conn, msg): Msg,
        conns: &mut dyn Connections<ConnId, Msg>,
    ) -> Option<Msg> {
        let frame = LogicalFrame::plain(0, Body::Control(msg));
        conns.visit(conn, &mut |_, out| out.send(&frame).unwrap());
        None
    }
}

/// Acks heartbeats, refuses releases with a close, counts ups and downs.
#[derive(Clone, Default)]
struct Plane {
    ups: Arc<AtomicU64>,
    downs: Arc<AtomicU64>,
    seen: Arc<Mutex<Vec<u64>>>,
}

impl ControlPlane<Msg, Msg> for Plane {
    fn handle(
        &mut self,
        shard: usize,
        request: Request<Msg>,
        _: Instant,
        out: &mut Vec<(usize, Decision<Msg>)>,
    ) {
        match request {
            Request::Up { .. } => {
                self.ups.fetch_add(1, Ordering::SeqCst);
            }
            Request::Down { .. } => {
                self.downs.fetch_add(1, Ordering::SeqCst);
            }
            Request::Service((conn, ControlMessage::Heartbeat(h))) => {
                self.seen.lock().unwrap().push(h.beats[0].sequence_number);
                let ack = ControlMessage::HeartbeatAck(HeartbeatAck { beats: h.beats });
                out.push((shard, Decision::Service((conn, ack))));
            }
            Request::Service((conn, _)) => out.push((
                shard,
                Decision::Close {
                    conn,
                    code: ErrorCode::E_SESSION_NOT_FOUND,
                    reason: "no such session".into(),
                },
            )),
        }
    }
}

fn config(backend: BackendPreference, ring: usize) -> EngineConfig {
    EngineConfig {
        shards: 2,
        pin: false,
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        driver: DriverConfig {
            backend,
            chunk_size: 16 * 1024,
            recv_buffers: 16,
            send_chunks: 64,
            max_send_queue: 256 * 1024,
            ..Default::default()
        },
        limits: Limits {
            max_frame_len: 64 * 1024,
            ..Limits::default()
        },
        drain: Duration::from_secs(2),
        control_ring: ring,
        quic: None,
    }
}

fn heartbeat(seq: u64) -> LogicalFrame {
    LogicalFrame::plain(
        0,
        Body::Control(ControlMessage::Heartbeat(Heartbeat {
            beats: vec![Beat {
                session_id: Uuid::from_u128(7),
                sequence_number: seq,
            }],
        })),
    )
}

#[test]
fn control_messages_round_trip_in_order_through_tiny_rings() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let plane = Plane::default();
        // Rings of two slots: every burst overflows them, so the backlog,
        // the pause and the held decisions all get exercised.
        let engine = Engine::start_with_control(
            config(backend, 2),
            |_| Framed::new(Forward),
            Box::new(plane.clone()),
        )
        .unwrap();
        let addr = engine.tcp_addr(0).unwrap();
        let mut clients: Vec<TcpStream> =
            (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for c in &mut clients {
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut wire = BytesMut::new();
            for seq in 0..500 {
                heartbeat(seq)
                    .encode(&mut wire, &Limits::default())
                    .unwrap();
            }
            c.write_all(&wire).unwrap();
        }
        for c in &mut clients {
            let acks = read_frames(c, 500);
            for (seq, f) in acks.iter().enumerate() {
                match &f.body {
                    Body::Control(ControlMessage::HeartbeatAck(a)) => {
                        assert_eq!(
                            a.beats[0].sequence_number, seq as u64,
                            "{backend:?}: acks out of order"
                        )
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(plane.seen.lock().unwrap().len(), 4 * 500);
        assert_eq!(plane.ups.load(Ordering::SeqCst), 4);
        // A message the plane refuses closes the connection with its code.
        let release = LogicalFrame::plain(
            0,
            Body::Control(ControlMessage::SessionRelease(SessionRelease {
                session_id: Uuid::from_u128(1),
            })),
        );
        clients[0]
            .write_all(&release.to_bytes(&Limits::default()).unwrap())
            .unwrap();
        match &read_frames(&mut clients[0], 1)[0].body {
            Body::Close(c) => assert_eq!(c.code, ErrorCode::E_SESSION_NOT_FOUND),
            other => panic!("{other:?}"),
        }
        drop(clients);
        let deadline = Instant::now() + Duration::from_secs(20);
        while plane.downs.load(Ordering::SeqCst) < 4 {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: downs {}",
                plane.downs.load(Ordering::SeqCst)
            );
            std::thread::yield_now();
        }
        let m = engine.control_metrics().unwrap();
        assert!(m.requests.load(Ordering::Relaxed) >= 4 * 500 + 8);
        engine.stop();
        engine.join().unwrap();
    }
}

/// Echoes every data frame back.
struct EchoData;

impl FrameService for EchoData {
    type Conn = ();
    type Up = Msg;
    type Down = Msg;
    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_, Msg>) {}
    fn frame(&mut self, _: &mut (), f: Frame, out: &mut Outbox<'_, Msg>) -> Result<(), ErrorCode> {
        out.send(&f.decode(out.limits()).map_err(|e| e.code())?)
    }
}

/// Data traffic alone must not wake the control thread: a shard wakes it
/// only after pushing a request. (It once woke it on every loop turn once it
/// had parked — a futex wake-up and a context switch per round trip.)
#[test]
fn data_traffic_does_not_wake_the_control_thread() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let plane = Plane::default();
        let engine = Engine::start_with_control(
            config(backend, 64),
            |_| Framed::new(EchoData),
            Box::new(plane.clone()),
        )
        .unwrap();
        let addr = engine.tcp_addr(0).unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // The Up request is the only one; let the control thread take it
        // and park.
        let deadline = Instant::now() + Duration::from_secs(20);
        while plane.ups.load(Ordering::SeqCst) < 1 {
            assert!(Instant::now() < deadline, "{backend:?}: no Up");
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(50));
        let m = engine.control_metrics().unwrap();
        let parks_before = m.parks.load(Ordering::Relaxed);
        // 1,000 round trips: at least 1,000 shard loop turns.
        let frame = LogicalFrame::plain(
            3,
            Body::Data(dtp_codec::DataFrame {
                agreement_id: None,
                fragment_id: 1,
                sequence: 1,
                relations: Vec::new(),
                payload: bytes::Bytes::from_static(&[7u8; 40]),
            }),
        );
        let wire = frame.to_bytes(&Limits::default()).unwrap();
        for _ in 0..1000 {
            c.write_all(&wire).unwrap();
            assert_eq!(read_frames(&mut c, 1)[0], frame, "{backend:?}");
        }
        let parks = m.parks.load(Ordering::Relaxed) - parks_before;
        assert!(
            parks < 100,
            "{backend:?}: the control thread woke {parks} times for 1,000 data round trips"
        );
        drop(c);
        engine.stop();
        engine.join().unwrap();
    }
}
