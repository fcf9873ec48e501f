//! Arbitrary bytes fed in arbitrary chunks into a `FrameDecoder`.
//!
//! The oracle: however the stream is cut, the decoder yields the same frames
//! and stops the same way (out of bytes with the same remainder, or the same
//! error) as `decode_frame` run over the whole stream at once.
//!
//! Input layout: byte 0 picks the limits (bit 7) and how many chunk lengths
//! follow (bits 0..4); each following byte is one chunk length (0 feeds an
//! empty chunk); the lengths are used in a cycle until the stream is fed, the
//! stream being everything after them.

#![no_main]

use bytes::{Bytes, BytesMut};
use dtp_codec::FrameDecoder;
use dtp_codec_fuzz::{End, LIMITS, Run, decode_all};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let limits = LIMITS[usize::from(control >> 7)];
    let n = usize::from(control & 0x1f).min(rest.len());
    let (cuts, stream) = rest.split_at(n);
    let stream = Bytes::copy_from_slice(stream);

    let expected = decode_all(&stream, &limits);
    let decoder = FrameDecoder::new(limits);

    // One go: the whole stream in the buffer.
    let mut buf = BytesMut::from(&stream[..]);
    assert_eq!(drain(&decoder, &mut buf, Vec::new()), expected);

    // In chunks: decode after every chunk, as a reader would.
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut fed = 0;
    // No cuts, or only empty ones, would never finish: feed it in one chunk.
    let cuts: Vec<usize> = match cuts.iter().any(|&c| c > 0) {
        true => cuts.iter().map(|&c| usize::from(c)).collect(),
        false => vec![stream.len()],
    };
    let mut lens = cuts.iter().copied().cycle();
    let got = loop {
        let len = lens.next().unwrap_or(0).min(stream.len() - fed);
        buf.extend_from_slice(&stream[fed..fed + len]);
        fed += len;
        let last = fed == stream.len();
        match drain(&decoder, &mut buf, frames) {
            Run {
                frames: f,
                end: End::NeedMore(_),
            } if !last => frames = f,
            run => break run,
        }
    };
    assert_eq!(got, expected, "chunked decoding differs (cuts {cuts:?})");
});

/// Takes frames off `buf` until the decoder wants more bytes or fails.
fn drain(
    decoder: &FrameDecoder,
    buf: &mut BytesMut,
    mut frames: Vec<dtp_codec::LogicalFrame>,
) -> Run {
    loop {
        let before = buf.len();
        match decoder.decode(buf) {
            Ok(Some(frame)) => {
                assert!(
                    buf.len() < before,
                    "a frame came off without consuming bytes"
                );
                frames.push(frame);
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "Ok(None) consumed bytes");
                return Run {
                    frames,
                    end: End::NeedMore(buf.len()),
                };
            }
            Err(e) => {
                return Run {
                    frames,
                    end: End::Error(e),
                };
            }
        }
    }
}
