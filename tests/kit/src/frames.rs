//! Whole `LogicalFrame`s (SPEC FRM-*) read from a blocking [`TcpStream`].
//! A read that times out, a peer that closes, and bytes that do not decode
//! all fail the test, saying how far it got.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use dtp_codec::{FrameDecoder, LogicalFrame};

/// Reads frames off one stream, keeping bytes that arrived past the last
/// frame for the next read.
#[derive(Default)]
pub struct FrameReader {
    decoder: FrameDecoder,
    buf: BytesMut,
}

impl FrameReader {
    /// A reader with the default limits and nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next whole frame from `s`, under the socket's own read timeout
    /// (a timeout fails the test).
    pub fn next(&mut self, s: &mut TcpStream) -> LogicalFrame {
        self.read(s, 1).pop().unwrap()
    }

    /// The next `n` whole frames from `s`.
    pub fn read(&mut self, s: &mut TcpStream, n: usize) -> Vec<LogicalFrame> {
        let mut out = Vec::with_capacity(n);
        let mut tmp = [0u8; 65536];
        loop {
            while out.len() < n {
                match self.decoder.decode(&mut self.buf).unwrap() {
                    Some(f) => out.push(f),
                    None => break,
                }
            }
            if out.len() >= n {
                return out;
            }
            let k = match s.read(&mut tmp) {
                Ok(k) => k,
                Err(e) => panic!("no frame after {} of {n}: {e}", out.len()),
            };
            assert!(k > 0, "the server closed after {} frames", out.len());
            self.buf.extend_from_slice(&tmp[..k]);
        }
    }
}

/// Exactly one frame from `s`, waiting at most `timeout` for each read.
pub fn read_frame(s: &mut TcpStream, timeout: Duration) -> LogicalFrame {
    s.set_read_timeout(Some(timeout)).unwrap();
    FrameReader::new().next(s)
}

/// Reads from `s` until `n` whole frames arrived (the socket's read timeout
/// turns a hang into a failure); bytes past the `n`th frame are dropped.
pub fn read_frames(s: &mut TcpStream, n: usize) -> Vec<LogicalFrame> {
    FrameReader::new().read(s, n)
}
