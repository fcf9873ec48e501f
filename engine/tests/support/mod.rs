//! What the engine's end-to-end tests share.

use std::io::Read;
use std::net::TcpStream;

use bytes::BytesMut;
use dtp_codec::{FrameDecoder, LogicalFrame};

/// Reads from `s` until `n` whole frames arrived (the socket's read timeout
/// turns a hang into a failure).
pub(crate) fn read_frames(s: &mut TcpStream, n: usize) -> Vec<LogicalFrame> {
    let dec = FrameDecoder::default();
    let (mut buf, mut out, mut tmp) = (BytesMut::new(), Vec::new(), [0u8; 65536]);
    while out.len() < n {
        while let Some(f) = dec.decode(&mut buf).unwrap() {
            out.push(f);
        }
        if out.len() >= n {
            break;
        }
        let k = s.read(&mut tmp).unwrap();
        assert!(k > 0, "the server closed after {} frames", out.len());
        buf.extend_from_slice(&tmp[..k]);
    }
    out
}
