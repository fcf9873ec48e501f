//! Shared pieces of the codec's fuzz targets: the limits they decode under
//! and the checks every decoded frame must pass.

#![forbid(unsafe_code)]

use bytes::{Bytes, BytesMut};
use dtp_codec::{DecodeError, Limits, LogicalFrame, decode_frame, json};

/// The limits every target decodes under: the defaults, and limits so small
/// that the ceiling checks, not the happy path, do most of the work.
pub const LIMITS: [Limits; 2] = [
    Limits {
        max_frame_len: 1024 * 1024,
        max_string_len: 4096,
        max_map_entries: 64,
        max_relations: 32,
        max_beats: 1024,
        max_credential_len: 16 * 1024,
    },
    TINY,
];

/// The smallest frame ceiling `Limits::validate` accepts, and single-digit
/// ceilings on everything else.
pub const TINY: Limits = Limits {
    max_frame_len: 64,
    max_string_len: 8,
    max_map_entries: 2,
    max_relations: 2,
    max_beats: 2,
    max_credential_len: 8,
};

/// SPEC FRM-3 from the bytes' side: a frame the decoder took from `wire`
/// (which it said is `used` bytes long) encodes under the same limits to
/// exactly those bytes, and the other forms of the frame (pretty, JSON)
/// neither panic nor lose anything.
pub fn check_decoded(frame: &LogicalFrame, wire: &[u8], limits: &Limits) {
    let len = frame
        .encoded_len(limits)
        .unwrap_or_else(|e| panic!("decoded frame does not encode: {e}\n{frame:?}"));
    assert_eq!(
        len,
        wire.len(),
        "encoded_len disagrees with the bytes decoded"
    );
    let mut out = BytesMut::with_capacity(len);
    let n = frame
        .encode(&mut out, limits)
        .unwrap_or_else(|e| panic!("decoded frame does not encode: {e}\n{frame:?}"));
    assert_eq!(n, len);
    assert_eq!(&out[..], wire, "re-encoding changed the bytes of {frame:?}");
    check_forms(frame);
}

/// The pretty printer must not panic, and the JSON form must give the frame
/// back unchanged.
pub fn check_forms(frame: &LogicalFrame) {
    std::hint::black_box(frame.to_string());
    let value = json::to_json(frame);
    let text = value.to_string();
    let back = json::from_json_str(&text)
        .unwrap_or_else(|e| panic!("JSON form of a frame is refused: {e}\n{text}"));
    assert_eq!(&back, frame, "JSON round trip changed the frame");
}

/// What decoding a whole buffer frame after frame gives: every frame, then
/// how it stopped.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// The frames decoded, in order.
    pub frames: Vec<LogicalFrame>,
    /// Why decoding stopped.
    pub end: End,
}

/// How a run of decoding stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// Out of bytes, with this many left over (the start of a frame).
    NeedMore(usize),
    /// The bytes cannot become a frame.
    Error(DecodeError),
}

/// The reference: `decode_frame` over slices of the whole stream at once.
pub fn decode_all(stream: &Bytes, limits: &Limits) -> Run {
    let mut frames = Vec::new();
    let mut at = 0;
    loop {
        let tail = stream.slice(at..);
        match decode_frame(&tail, limits) {
            Ok((frame, used)) => {
                assert!(
                    used > 0 && used <= tail.len(),
                    "used {used} of {}",
                    tail.len()
                );
                frames.push(frame);
                at += used;
            }
            Err(DecodeError::Incomplete { needed }) => {
                assert!(
                    needed > tail.len(),
                    "Incomplete asks for {needed} bytes of {}",
                    tail.len()
                );
                return Run {
                    frames,
                    end: End::NeedMore(tail.len()),
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
