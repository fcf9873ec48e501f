//! Incremental UTF-8 validation across fragments (RFC 6455 §5.6, §8.1).

/// Validates text that arrives in pieces, failing on the first byte that
/// can no longer begin or continue a valid sequence (Autobahn 6.x "fail
/// fast"), and at [`Utf8Validator::finish`] on a sequence cut short.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Utf8Validator {
    /// The bytes of a sequence that started in an earlier piece (≤ 3).
    pending: [u8; 4],
    pending_len: usize,
    /// Bytes accepted so far (for error offsets).
    seen: u64,
}

impl Utf8Validator {
    /// A validator at the start of a message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates the next piece. On error, returns the offset (from the start
    /// of the text) of the sequence that is invalid.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), u64> {
        // Finish a sequence begun in an earlier piece, a byte at a time.
        while self.pending_len > 0 {
            let Some((&b, rest)) = data.split_first() else {
                return Ok(());
            };
            self.pending[self.pending_len] = b;
            self.pending_len += 1;
            data = rest;
            match std::str::from_utf8(&self.pending[..self.pending_len]) {
                Ok(_) => {
                    self.seen += self.pending_len as u64;
                    self.pending_len = 0;
                }
                Err(e) if e.error_len().is_some() => return Err(self.seen),
                Err(_) if self.pending_len >= 4 => return Err(self.seen),
                Err(_) => {}
            }
        }
        match std::str::from_utf8(data) {
            Ok(_) => {
                self.seen += data.len() as u64;
                Ok(())
            }
            Err(e) => {
                let valid = e.valid_up_to();
                self.seen += valid as u64;
                if e.error_len().is_some() {
                    return Err(self.seen);
                }
                // A prefix of a valid sequence (at most 3 bytes) at the end.
                let tail = data.get(valid..).unwrap_or_default();
                if tail.len() > 3 {
                    return Err(self.seen);
                }
                self.pending[..tail.len()].copy_from_slice(tail);
                self.pending_len = tail.len();
                Ok(())
            }
        }
    }

    /// Ends the text: an unfinished sequence is an error at its offset.
    pub fn finish(&self) -> Result<(), u64> {
        if self.pending_len == 0 {
            Ok(())
        } else {
            Err(self.seen)
        }
    }
}
