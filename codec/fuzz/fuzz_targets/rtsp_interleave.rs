//! Arbitrary bytes as an RTSP connection's stream (`$` packets and the
//! messages between them, `dtp_codec::rtsp::InterleavedDecoder`), fed
//! whole and fed in chunks.
//!
//! Input layout: byte 0 holds the ceilings (bit 7: small ones) and a
//! number of chunk lengths (bits 0–3); those lengths (one byte each)
//! follow; the rest is the stream, fed in chunks of those lengths
//! (cycled; 0 counts as 1).
//!
//! The oracles: fed whole and fed in chunks, the decoder yields the same
//! packets (payloads joined per packet), the same messages and the same
//! end (the same error, or the same bytes left over); every item takes
//! something, never more than it was
//! given; `Incomplete` asks for at least one byte; a packet's payload
//! never exceeds 65,535 bytes; every message writes back to bytes that
//! decode to an equal message.

#![no_main]

use dtp_codec::rtsp::{
    InterleaveError, InterleavedDecoder, Item, MAX_PAYLOAD, Message, RtspLimits,
};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
enum Got {
    Packet(u8, Vec<u8>),
    Message(Message),
}

#[derive(Debug, PartialEq)]
enum End {
    Left(usize),
    Error(InterleaveError),
}

fn decode(chunks: &[&[u8]], limits: RtspLimits) -> (Vec<Got>, End) {
    let mut dec = InterleavedDecoder::new(limits);
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut packet: Option<(u8, Vec<u8>)> = None;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match dec.decode(&buf) {
                Ok((Item::Data { channel, skip, len, last }, used)) => {
                    assert!(skip == 0 || skip >= 4);
                    assert_eq!(used, skip + len);
                    assert!(used <= buf.len());
                    assert!(used > 0);
                    let p = packet.get_or_insert_with(|| (channel, Vec::new()));
                    assert_eq!(p.0, channel);
                    p.1.extend_from_slice(&buf[skip..used]);
                    assert!(p.1.len() <= MAX_PAYLOAD);
                    if last {
                        let (c, p) = packet.take().expect("a packet in progress");
                        out.push(Got::Packet(c, p));
                    }
                    buf.drain(..used);
                }
                Ok((Item::Message(m), used)) => {
                    assert!(used > 0 && used <= buf.len());
                    buf.drain(..used);
                    out.push(Got::Message(m));
                }
                Err(InterleaveError::Incomplete { more }) => {
                    assert!(more >= 1);
                    break;
                }
                Err(e) => return (out, End::Error(e)),
            }
        }
    }
    (out, End::Left(buf.len()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let limits = if control & 0x80 != 0 {
        RtspLimits {
            max_head_bytes: 128,
            max_headers: 3,
            max_uri_len: 16,
            max_body_bytes: 8,
        }
    } else {
        RtspLimits::default()
    };
    let n = usize::from(control & 0x0f).min(rest.len());
    let (lens, stream) = rest.split_at(n);
    let whole = decode(&[stream], limits);
    let mut chunks = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < stream.len() {
        let len = lens.get(i % lens.len().max(1)).map_or(stream.len(), |&l| usize::from(l).max(1));
        let end = (at + len).min(stream.len());
        chunks.push(&stream[at..end]);
        at = end;
        i += 1;
    }
    let chunked = decode(&chunks, limits);
    // An error ends both; what was left behind it depends on the cuts.
    match (&whole.1, &chunked.1) {
        (End::Error(a), End::Error(b)) => {
            assert_eq!(a, b);
            assert_eq!(whole.0, chunked.0);
        }
        _ => assert_eq!(whole, chunked),
    }
    for got in &whole.0 {
        if let Got::Message(m) = got {
            let mut wire = Vec::new();
            m.write(&mut wire).expect("a decoded message writes back");
            let roomy = RtspLimits {
                max_head_bytes: wire.len(),
                ..limits
            };
            let mut dec = InterleavedDecoder::new(roomy);
            match dec.decode(&wire) {
                Ok((Item::Message(again), used)) => {
                    assert_eq!(&again, m);
                    assert_eq!(used, wire.len());
                }
                other => panic!("written back, it decodes as {other:?}"),
            }
        }
    }
});
