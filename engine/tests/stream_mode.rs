//! A byte-stream service with its own framing beside a framed one
//! ([`Framed`]) on the same shards, routed by listener name ([`Routed`]),
//! on both IO backends: bytes reach the stream service as sent, whatever
//! the chunking, its refusal closes the connection without a DTP close
//! frame, and a large answer is sent whole under backpressure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use dtp_codec::{Body, DataFrame, ErrorCode, Limits, LogicalFrame};
use dtp_engine::{
    Engine, EngineConfig, Frame, FrameService, Framed, Listener, Origin, Outbox, Routed, Service,
};
use dtp_transports::{BackendPreference, ConnId, DriverConfig, RecvBuf};

/// A line protocol: each line is answered upper-cased; the line `big N` is
/// answered with N bytes of `x`; a line holding `!` is refused.
struct Lines;

/// Echoes every frame, as received.
struct Echo;

impl FrameService for Echo {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) {}

    fn frame(&mut self, _: &mut (), f: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        out.wire().extend_from_slice(&f.wire);
        Ok(())
    }
}

impl Service for Lines {
    type Conn = BytesMut;
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) -> BytesMut {
        BytesMut::new()
    }

    fn bytes(
        &mut self,
        line: &mut BytesMut,
        data: RecvBuf,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        for &b in data.iter() {
            if b != b'\n' {
                line.put_u8(b);
                continue;
            }
            let line = std::mem::take(line);
            if line.contains(&b'!') {
                return Err(ErrorCode::INTERNAL);
            }
            if let Some(n) = line.strip_prefix(b"big ") {
                let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
                out.wire().put_bytes(b'x', n);
            } else {
                out.wire().extend_from_slice(&line.to_ascii_uppercase());
            }
            out.wire().put_u8(b'\n');
        }
        Ok(())
    }
}

fn any_addr() -> dtp_transports::Endpoint {
    "127.0.0.1:0".parse().unwrap()
}

fn start(backend: BackendPreference) -> dtp_engine::EngineHandle {
    let any = any_addr();
    Engine::start(
        EngineConfig {
            shards: 2,
            pin: false,
            listen: vec![
                Listener::new("frames", any.clone()),
                Listener::new("lines", any),
            ],
            driver: DriverConfig {
                backend,
                chunk_size: 16 * 1024,
                recv_buffers: 32,
                send_chunks: 128,
                ..DriverConfig::default()
            },
            limits: Limits::default(),
            drain: Duration::from_secs(2),
            control_ring: 64,
            quic: None,
        },
        |_| {
            let listeners = [
                Listener::new("frames", any_addr()),
                Listener::new("lines", any_addr()),
            ];
            Routed::by_name(&listeners, "lines", Framed::new(Echo), Lines)
        },
    )
    .unwrap()
}

fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    s.read_exact(&mut buf).unwrap();
    buf
}

fn both(test: fn(&dtp_engine::EngineHandle)) {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let engine = start(backend);
        test(&engine);
        engine.stop();
        engine.join().unwrap();
    }
}

#[test]
fn stream_listener_gets_bytes_and_framed_listener_gets_frames() {
    both(|engine| {
        let addrs = engine.local_addrs();
        // One address per listener, in order; every shard listens on each.
        let mut lines = TcpStream::connect(addrs[1].tcp().unwrap()).unwrap();
        lines
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // Sent one byte at a time: the service sees the bytes, not chunks.
        for b in b"hello\nwor" {
            lines.write_all(&[*b]).unwrap();
        }
        lines.write_all(b"ld\n").unwrap();
        assert_eq!(read_exactly(&mut lines, 12), b"HELLO\nWORLD\n");

        let mut framed = TcpStream::connect(addrs[0].tcp().unwrap()).unwrap();
        framed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let frame = LogicalFrame::plain(
            1,
            Body::Data(DataFrame {
                agreement_id: None,
                fragment_id: 7,
                sequence: 7,
                relations: vec![],
                payload: bytes::Bytes::from_static(b"frame"),
            }),
        );
        let wire = frame.to_bytes(&Limits::default()).unwrap();
        framed.write_all(&wire).unwrap();
        assert_eq!(read_exactly(&mut framed, wire.len()), wire.to_vec());
    });
}

#[test]
fn a_large_answer_is_sent_whole_and_a_refusal_closes_without_a_close_frame() {
    both(|engine| {
        let addr = engine.tcp_addr(1).unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // Larger than the send budget: goes out in pieces as room comes.
        let n = 3 << 20;
        s.write_all(format!("big {n}\nnext\n").as_bytes()).unwrap();
        let got = read_exactly(&mut s, n + 1 + 5);
        assert!(got[..n].iter().all(|&b| b == b'x'));
        assert_eq!(&got[n..], b"\nNEXT\n");

        s.write_all(b"ok\nbad!\nnever\n").unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert_eq!(
            rest, b"OK\n",
            "answered up to the refusal, then closed with nothing more"
        );
    });
}
