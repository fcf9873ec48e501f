//! Arbitrary UTF-8 into `json::from_json_str` (`dtp frame encode` reads it
//! from users).
//!
//! The oracle: parsing never panics; a frame it accepts either encodes or is
//! refused with an `EncodeError` (never a panic), under the default and tiny
//! limits; what encodes decodes back to the same frame, in exactly the bytes
//! written; and its pretty and JSON forms work.

#![no_main]

use dtp_codec::{decode_frame, json};
use dtp_codec_fuzz::{LIMITS, check_forms};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let frame = match json::from_json_str(text) {
        Ok(frame) => frame,
        Err(e) => {
            std::hint::black_box(e.to_string());
            return;
        }
    };
    check_forms(&frame);
    for limits in &LIMITS {
        match frame.to_bytes(limits) {
            Ok(wire) => {
                assert_eq!(frame.encoded_len(limits), Ok(wire.len()));
                let (back, used) = decode_frame(&wire, limits).unwrap_or_else(|e| {
                    panic!("encoder wrote what the decoder refuses: {e}\n{frame:?}")
                });
                assert_eq!(used, wire.len());
                assert_eq!(back, frame, "wire round trip changed the frame");
            }
            Err(e) => {
                std::hint::black_box(e.to_string());
            }
        }
    }
});
