//! The receiving direction: authenticate, decrypt in place and decode.

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    AeadAlgorithm, DecodeError, DecodeErrorKind, FrameBuf, FrameKind, HEADER_LEN, Limits,
    LogicalFrame, MAGIC, SEAL_COUNTER_LEN, Sealed, TAG_LEN, VERSION, decode_opened, peek_frame_len,
};
use ring::aead::Aad;

use super::keys::DirectionKey;
use super::{AAD_LEN, AeadError, AeadStats};

/// A sealed frame opened in place: its header fields and the plaintext body,
/// a slice of the buffer it arrived in.
#[derive(Debug, PartialEq, Eq)]
pub struct OpenedBody<'a> {
    /// The body's kind.
    pub kind: FrameKind,
    /// The frame's stream.
    pub stream_id: u32,
    /// The key version that sealed it.
    pub key_version: u16,
    /// Its seal counter.
    pub seal_counter: u64,
    /// The decrypted body (not yet decoded).
    pub plaintext: &'a [u8],
}

/// SPEC ENC-2, ENC-4: the receiving half of a connection's keys.
///
/// Accepts frames under the current key version with strictly increasing
/// seal counters (the transports are in-order, so anything else is a replay
/// or a reordering). A frame under the next version (current + 1) that
/// authenticates switches the opener to it, and the old key is dropped at
/// once: on an in-order transport nothing sealed under it can follow. A
/// frame that fails any check changes nothing, so a forged "next version"
/// frame cannot push the opener off its key.
pub struct Opener {
    current: DirectionKey,
    /// The next version's key, derived on first sight of that version and
    /// kept, so forged frames cost one HKDF derivation at most.
    next: Option<DirectionKey>,
    /// Highest counter opened under `current` (`None`: none yet).
    last_counter: Option<u64>,
    stats: AeadStats,
}

/// What the checks found in a sealed frame's header.
struct SealedHeader {
    kind: FrameKind,
    aead: AeadAlgorithm,
    key_version: u16,
    stream_id: u32,
    counter: u64,
}

/// Shows the algorithm, version and last counter; never key material.
impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("algorithm", &self.current.algorithm())
            .field("key_version", &self.current.version())
            .field("last_counter", &self.last_counter)
            .finish_non_exhaustive()
    }
}

impl Opener {
    pub(crate) fn new(key: DirectionKey) -> Self {
        Self {
            current: key,
            next: None,
            last_counter: None,
            stats: AeadStats::default(),
        }
    }

    /// The algorithm chosen at CAP time.
    pub fn algorithm(&self) -> AeadAlgorithm {
        self.current.algorithm()
    }

    /// The key version frames are currently accepted under (and the next).
    pub fn key_version(&self) -> u16 {
        self.current.version()
    }

    /// Counters of this direction.
    pub fn stats(&self) -> AeadStats {
        self.stats
    }

    /// SPEC ENC-2: opens one sealed frame, the whole of `wire` (e.g. a
    /// `split_to` of the receive buffer), decrypting in place. The returned
    /// frame's payload is a slice of `wire`'s memory: no copy.
    pub fn open_frame<B: FrameBuf>(
        &mut self,
        mut wire: B,
        limits: &Limits,
    ) -> Result<LogicalFrame, AeadError> {
        let (kind, stream_id, plain_len) = {
            let opened = self.open_in_place(&mut wire, limits)?;
            (opened.kind, opened.stream_id, opened.plaintext.len())
        };
        let plaintext = wire.freeze().slice(AAD_LEN..AAD_LEN + plain_len);
        self.decode(kind, stream_id, &plaintext, limits)
    }

    /// SPEC ENC-2: opens a sealed body as the codec decoded it (from
    /// [`dtp_codec::FrameDecoder`] or [`dtp_codec::decode_frame`]). The
    /// associated data is rebuilt from the fields; the ciphertext is
    /// decrypted in place when no other handle shares its memory, and copied
    /// once otherwise.
    pub fn open_sealed(
        &mut self,
        stream_id: u32,
        sealed: Sealed,
        limits: &Limits,
    ) -> Result<LogicalFrame, AeadError> {
        let len = sealed.ciphertext.len() + SEAL_COUNTER_LEN;
        let len32 = match u32::try_from(len) {
            Ok(l) if l <= limits.max_frame_len && sealed.ciphertext.len() >= TAG_LEN => l,
            _ => {
                let e = AeadError::Malformed(DecodeError::Malformed {
                    kind: DecodeErrorKind::FrameTooLarge {
                        len: len as u64,
                        max: limits.max_frame_len.into(),
                    },
                    field: "header.length",
                    offset: 12,
                });
                return Err(self.reject(e));
            }
        };
        let mut aad = [0u8; AAD_LEN];
        aad[..2].copy_from_slice(&MAGIC);
        aad[2] = VERSION;
        aad[3] = sealed.kind as u8;
        aad[5] = sealed.aead as u8;
        aad[6..8].copy_from_slice(&sealed.key_version.to_be_bytes());
        aad[8..12].copy_from_slice(&stream_id.to_be_bytes());
        aad[12..16].copy_from_slice(&len32.to_be_bytes());
        aad[16..].copy_from_slice(&sealed.seal_counter.to_be_bytes());
        let h = SealedHeader {
            kind: sealed.kind,
            aead: sealed.aead,
            key_version: sealed.key_version,
            stream_id,
            counter: sealed.seal_counter,
        };
        let mut body = sealed
            .ciphertext
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        let plain_len = self.open_core(&aad, &h, &mut body)?;
        body.truncate(plain_len);
        let plaintext = body.freeze();
        self.decode(h.kind, stream_id, &plaintext, limits)
    }

    /// SPEC ENC-2: authenticates and decrypts one sealed frame, the whole of
    /// `wire`, in place, without decoding the body. The returned plaintext
    /// is a slice of `wire`.
    pub fn open_in_place<'a>(
        &mut self,
        wire: &'a mut [u8],
        limits: &Limits,
    ) -> Result<OpenedBody<'a>, AeadError> {
        let h = match parse_sealed_header(wire, limits) {
            Ok(h) => h,
            Err(e) => return Err(self.reject(e)),
        };
        let (aad, rest) = wire.split_at_mut(AAD_LEN);
        let plain_len = self.open_core(aad, &h, rest)?;
        let rest: &'a [u8] = rest;
        Ok(OpenedBody {
            kind: h.kind,
            stream_id: h.stream_id,
            key_version: h.key_version,
            seal_counter: h.counter,
            plaintext: &rest[..plain_len],
        })
    }

    /// Picks the key, checks the counter, decrypts `in_out` (ciphertext and
    /// tag) and only then commits the counter and any key switch. Returns
    /// the plaintext length.
    fn open_core(
        &mut self,
        aad: &[u8],
        h: &SealedHeader,
        in_out: &mut [u8],
    ) -> Result<usize, AeadError> {
        match self.try_open(aad, h, in_out) {
            Ok(n) => Ok(n),
            Err(e) => Err(self.reject(e)),
        }
    }

    fn try_open(
        &mut self,
        aad: &[u8],
        h: &SealedHeader,
        in_out: &mut [u8],
    ) -> Result<usize, AeadError> {
        if h.aead != self.current.algorithm() {
            return Err(AeadError::AlgorithmMismatch {
                expected: self.current.algorithm(),
                found: h.aead,
            });
        }
        let current = self.current.version();
        let switching = if h.key_version == current {
            if let Some(last) = self.last_counter
                && h.counter <= last
            {
                return Err(AeadError::Replay {
                    key_version: current,
                    counter: h.counter,
                    last,
                });
            }
            false
        } else if current.checked_add(1) == Some(h.key_version) {
            if self.next.is_none() {
                self.next = Some(self.current.next()?);
            }
            true
        } else {
            return Err(AeadError::KeyVersionMismatch {
                found: h.key_version,
                current,
            });
        };
        let key = match (&self.next, switching) {
            (Some(next), true) => next,
            _ => &self.current,
        };
        let plain_len = key
            .ring_key()
            .open_in_place(key.nonce(h.counter), Aad::from(aad), in_out)
            .map_err(|_| AeadError::DecryptFailed {
                key_version: h.key_version,
                counter: h.counter,
            })?
            .len();
        if switching && let Some(next) = self.next.take() {
            // The old key is dropped here: in-order delivery means nothing
            // sealed under it can still arrive.
            self.current = next;
            self.stats.rekeys_received += 1;
        }
        self.last_counter = Some(h.counter);
        Ok(plain_len)
    }

    /// Decodes an authenticated body. A decode failure is the peer's (it
    /// sealed an invalid body); the counter stays committed.
    fn decode(
        &mut self,
        kind: FrameKind,
        stream_id: u32,
        plaintext: &Bytes,
        limits: &Limits,
    ) -> Result<LogicalFrame, AeadError> {
        match decode_opened(kind, plaintext, limits) {
            Ok(body) => {
                self.stats.opened_frames += 1;
                self.stats.opened_bytes += plaintext.len() as u64;
                Ok(LogicalFrame { stream_id, body })
            }
            Err(e) => Err(self.reject(AeadError::Malformed(e.shifted(AAD_LEN)))),
        }
    }

    /// Counts a refusal and hands it back.
    fn reject(&mut self, e: AeadError) -> AeadError {
        self.stats.rejected.count(&e);
        e
    }
}

/// Checks that `wire` is exactly one well-formed sealed frame and reads its
/// header and counter.
fn parse_sealed_header(wire: &[u8], limits: &Limits) -> Result<SealedHeader, AeadError> {
    let total = peek_frame_len(wire, limits).map_err(AeadError::Malformed)?;
    if wire.len() < total {
        return Err(AeadError::Malformed(DecodeError::Incomplete {
            needed: total,
        }));
    }
    if wire.len() > total {
        return Err(AeadError::Malformed(DecodeError::Malformed {
            kind: DecodeErrorKind::TrailingBytes(wire.len() - total),
            field: "frame",
            offset: total,
        }));
    }
    // peek_frame_len validated kind and algorithm and, for a sealed frame,
    // a length of at least counter + tag.
    let Some(kind) = FrameKind::from_u8(wire[3]) else {
        return Err(AeadError::Malformed(DecodeError::Malformed {
            kind: DecodeErrorKind::UnknownKind(wire[3]),
            field: "header.kind",
            offset: 3,
        }));
    };
    let Some(aead) = AeadAlgorithm::from_u8(wire[5]) else {
        return Err(AeadError::NotSealed);
    };
    let mut counter = [0u8; SEAL_COUNTER_LEN];
    counter.copy_from_slice(&wire[HEADER_LEN..AAD_LEN]);
    Ok(SealedHeader {
        kind,
        aead,
        key_version: u16::from_be_bytes([wire[6], wire[7]]),
        stream_id: u32::from_be_bytes([wire[8], wire[9], wire[10], wire[11]]),
        counter: u64::from_be_bytes(counter),
    })
}
