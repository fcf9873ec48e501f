//! Arbitrary bytes into `decode_frame`, under the default and under tiny
//! limits (SPEC FRM-5: no input makes the decoder panic).
//!
//! The oracle: whatever decodes re-encodes to exactly the bytes it was
//! decoded from (so the decoder accepts nothing the encoder would not write,
//! and drops nothing it read), its pretty and JSON forms work, and
//! `peek_frame_len` agrees with `decode_frame` about the header.

#![no_main]

use bytes::Bytes;
use dtp_codec::{DecodeError, decode_frame, peek_frame_len};
use dtp_codec_fuzz::{LIMITS, check_decoded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    for limits in &LIMITS {
        match decode_frame(&buf, limits) {
            Ok((frame, used)) => {
                assert!(used <= data.len(), "used {used} of {} bytes", data.len());
                assert_eq!(peek_frame_len(data, limits), Ok(used));
                check_decoded(&frame, &data[..used], limits);
            }
            Err(e) => {
                match &e {
                    DecodeError::Incomplete { needed } => {
                        assert!(
                            *needed > data.len(),
                            "Incomplete asks for {needed} of {} bytes",
                            data.len()
                        );
                    }
                    DecodeError::Malformed { offset, .. } => {
                        assert!(
                            *offset <= data.len(),
                            "error offset {offset} past {} bytes",
                            data.len()
                        );
                    }
                }
                // A header that peek accepts with enough bytes behind it is
                // the body's fault; otherwise peek must refuse it the same way.
                match peek_frame_len(data, limits) {
                    Ok(total) => assert!(
                        total <= data.len() || e == DecodeError::Incomplete { needed: total }
                    ),
                    Err(p) => assert_eq!(p, e, "peek_frame_len and decode_frame disagree"),
                }
                std::hint::black_box(e.to_string());
            }
        }
    }
});
