//! A sans-IO decoder of HTTP/1.1 chunked bodies (RFC 9112 §7.1): bytes in,
//! body bytes out, trailers skipped. It holds no buffer of its own beyond
//! one size line, so feeding it a byte at a time works, and no input makes
//! it panic or allocate more than the caller's output grows by.

/// The longest chunk-size line (size, extensions, CRLF) or trailer line
/// accepted.
const MAX_LINE: usize = 1024;

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChunkError {
    /// A chunk size that is not hexadecimal, or is too large for `u64`.
    #[error("invalid chunk size")]
    BadSize,
    /// A size or trailer line longer than the limit.
    #[error("chunk line too long")]
    LineTooLong,
    /// Chunk data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    MissingCrlf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading hex digits of a size.
    Size {
        value: u64,
        digits: usize,
        line: usize,
    },
    /// Past the digits: extensions until LF.
    SizeRest {
        value: u64,
        line: usize,
    },
    /// `remaining` data bytes of the current chunk.
    Data {
        remaining: u64,
    },
    /// Expecting CR then LF after chunk data.
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines until an empty one.
    Trailer {
        line: usize,
    },
    Done,
}

/// The decoder's state across calls.
#[derive(Clone, Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self {
            state: State::Size {
                value: 0,
                digits: 0,
                line: 0,
            },
        }
    }
}

impl ChunkedDecoder {
    /// Whether the last chunk and its trailers have been read.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, appending body bytes to `out`; returns how many
    /// input bytes were used. It stops at the end of the body
    /// ([`Self::is_done`]), leaving the rest (a next response) unread.
    pub(crate) fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Done => return Ok(i),
                State::Data { remaining } => {
                    let avail = input.len() - i;
                    let take = usize::try_from(remaining).map_or(avail, |r| r.min(avail));
                    out.extend_from_slice(&input[i..i + take]);
                    i += take;
                    let left = remaining - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { remaining: left }
                    };
                    continue;
                }
                State::Size {
                    value,
                    digits,
                    line,
                } => {
                    let line = bump(line)?;
                    self.state = match (b as char).to_digit(16) {
                        Some(d) => {
                            if digits >= 16 {
                                return Err(ChunkError::BadSize);
                            }
                            State::Size {
                                value: (value << 4) | u64::from(d),
                                digits: digits + 1,
                                line,
                            }
                        }
                        None if digits == 0 => return Err(ChunkError::BadSize),
                        None if b == b'\n' => after_size(value),
                        None if matches!(b, b';' | b' ' | b'\t' | b'\r') => {
                            State::SizeRest { value, line }
                        }
                        None => return Err(ChunkError::BadSize),
                    };
                }
                State::SizeRest { value, line } => {
                    let line = bump(line)?;
                    self.state = if b == b'\n' {
                        after_size(value)
                    } else {
                        State::SizeRest { value, line }
                    };
                }
                State::DataCr => {
                    self.state = match b {
                        b'\r' => State::DataLf,
                        b'\n' => next_size(),
                        _ => return Err(ChunkError::MissingCrlf),
                    };
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkError::MissingCrlf);
                    }
                    self.state = next_size();
                }
                State::Trailer { line } => {
                    self.state = match b {
                        // A line holding only CR (or nothing) ends the body.
                        b'\n' if line == 0 => State::Done,
                        b'\n' => State::Trailer { line: 0 },
                        b'\r' if line == 0 => State::Trailer { line: 0 },
                        _ => State::Trailer { line: bump(line)? },
                    };
                }
            }
            i += 1;
        }
        Ok(i)
    }
}

fn bump(line: usize) -> Result<usize, ChunkError> {
    if line >= MAX_LINE {
        Err(ChunkError::LineTooLong)
    } else {
        Ok(line + 1)
    }
}

fn next_size() -> State {
    State::Size {
        value: 0,
        digits: 0,
        line: 0,
    }
}

fn after_size(value: u64) -> State {
    if value == 0 {
        State::Trailer { line: 0 }
    } else {
        State::Data { remaining: value }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn decode_all(wire: &[u8]) -> Result<(Vec<u8>, usize, bool), ChunkError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let n = d.decode(wire, &mut out)?;
        Ok((out, n, d.is_done()))
    }

    #[test]
    fn decodes_etcd_style_body_with_trailer() {
        let wire = b"6c\r\n{\"error\":\"etcdserver: requested lease not found\",\"message\":\"etcdserver: requested lease not found\",\"code\":5}\r\n0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\nHTTP/1.1";
        let (out, n, done) = decode_all(wire).unwrap();
        assert!(done);
        assert!(out.starts_with(b"{\"error\""));
        assert_eq!(out.len(), 0x6c);
        assert_eq!(&wire[n..], b"HTTP/1.1");
    }

    #[test]
    fn extensions_and_bare_lf_are_accepted() {
        let (out, _, done) = decode_all(b"3;x=y\r\nabc\r\n2\nde\n0\n\n").unwrap();
        assert_eq!(out, b"abcde");
        assert!(done);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(decode_all(b"zz\r\n"), Err(ChunkError::BadSize));
        assert_eq!(decode_all(b"\r\n"), Err(ChunkError::BadSize));
        assert_eq!(decode_all(b"1\r\nab"), Err(ChunkError::MissingCrlf));
        assert_eq!(
            decode_all(b"11111111111111111\r\n"),
            Err(ChunkError::BadSize)
        );
        let long = [b"1;".as_slice(), &[b'x'; 2000]].concat();
        assert_eq!(decode_all(&long), Err(ChunkError::LineTooLong));
        // The largest size is fine to announce: the data simply never comes.
        let (out, _, done) = decode_all(b"ffffffffffffffff\r\nab").unwrap();
        assert_eq!(out, b"ab");
        assert!(!done);
    }

    proptest! {
        /// Any split of a valid body into pieces decodes to the same bytes.
        #[test]
        fn split_anywhere(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 0..6),
                          cuts in prop::collection::vec(0usize..400, 0..8)) {
            let mut wire = Vec::new();
            for c in &chunks {
                wire.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
                wire.extend_from_slice(c);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (wire.len() + 1)).collect();
            cuts.sort_unstable();
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain([wire.len()]) {
                if cut > at {
                    let n = d.decode(&wire[at..cut], &mut out).unwrap();
                    prop_assert_eq!(n, cut - at);
                    at = cut;
                }
            }
            prop_assert!(d.is_done());
            prop_assert_eq!(out, chunks.concat());
        }

        /// Arbitrary bytes never panic.
        #[test]
        fn arbitrary_bytes(wire in prop::collection::vec(any::<u8>(), 0..300)) {
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            let _ = d.decode(&wire, &mut out);
        }
    }
}
