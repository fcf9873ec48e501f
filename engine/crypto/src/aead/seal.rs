//! The sending direction: seal plaintext frames into wire bytes, in place.

use bytes::{BufMut, BytesMut};
use dtp_codec::{
    AeadAlgorithm, Body, DecodeError, HEADER_LEN, Limits, LogicalFrame, SEAL_COUNTER_LEN,
    peek_frame_len,
};
use ring::aead::Aad;

use super::keys::{DirectionKey, KeyLimits};
use super::{AAD_LEN, AeadError, AeadStats};

/// SPEC ENC-1, ENC-4: the sending half of a connection's keys.
///
/// Seals frames under the current key version with a strictly increasing
/// seal counter (0, 1, 2, …, reset to 0 by [`Sealer::rekey`]), so no
/// (key, nonce) pair is ever used twice. A sealer is made by
/// [`session_keys`](super::session_keys) or held by an
/// [`EncryptionModule`](super::EncryptionModule).
pub struct Sealer {
    key: DirectionKey,
    limits: KeyLimits,
    /// The counter the next seal uses.
    counter: u64,
    /// Blocks sealed under the current key.
    blocks: u64,
    stats: AeadStats,
}

/// Shows the algorithm, version and counter; never key material.
impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("algorithm", &self.key.algorithm())
            .field("key_version", &self.key.version())
            .field("seal_counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    pub(crate) fn new(key: DirectionKey, limits: KeyLimits) -> Self {
        Self {
            key,
            limits,
            counter: 0,
            blocks: 0,
            stats: AeadStats::default(),
        }
    }

    /// The algorithm chosen at CAP time.
    pub fn algorithm(&self) -> AeadAlgorithm {
        self.key.algorithm()
    }

    /// The key version written in the header of the next sealed frame.
    pub fn key_version(&self) -> u16 {
        self.key.version()
    }

    /// The seal counter of the next sealed frame (= frames sealed under the
    /// current key).
    pub fn seal_counter(&self) -> u64 {
        self.counter
    }

    /// The usage limits of every key of this direction.
    pub fn limits(&self) -> KeyLimits {
        self.limits
    }

    /// True once the current key passed a soft limit: rekey at the next
    /// convenient point, before sealing fails with
    /// [`AeadError::KeyExhausted`].
    pub fn needs_rekey(&self) -> bool {
        self.counter >= self.limits.soft_seals || self.blocks >= self.limits.soft_blocks
    }

    /// Switches to the next key version: its secret is HKDF-Expand(current
    /// secret, "dtp1 aead next secret"); the seal counter restarts at 0 and
    /// the old key is dropped. The peer's opener follows when it sees the new
    /// version in a header; nothing else needs to be sent.
    pub fn rekey(&mut self) -> Result<(), AeadError> {
        self.key = self.key.next()?;
        self.counter = 0;
        self.blocks = 0;
        self.stats.rekeys_sent += 1;
        Ok(())
    }

    /// Counters of this direction.
    pub fn stats(&self) -> AeadStats {
        self.stats
    }

    /// SPEC ENC-1, ENC-4: encodes the plaintext `frame` and seals it,
    /// appending the complete wire bytes (header with algorithm and key
    /// version, seal counter, ciphertext, tag) to `dst`. Returns the number
    /// of bytes appended.
    ///
    /// The body is encoded straight into `dst` and encrypted where it lies:
    /// one pass over the payload for the copy in, one for the cipher. Only
    /// the 16-byte header moves. On error nothing is appended.
    pub fn seal_frame(
        &mut self,
        frame: &LogicalFrame,
        limits: &Limits,
        dst: &mut BytesMut,
    ) -> Result<usize, AeadError> {
        if let Body::Sealed(_) = frame.body {
            return Err(AeadError::AlreadySealed);
        }
        let plain_total = frame.encoded_len(limits).map_err(AeadError::Encode)?;
        let body_len = plain_total - HEADER_LEN;
        self.check(body_len, limits)?;
        let start = dst.len();
        dst.reserve(SEAL_COUNTER_LEN + plain_total + dtp_codec::TAG_LEN);
        dst.put_bytes(0, SEAL_COUNTER_LEN);
        if let Err(e) = frame.encode(dst, limits) {
            dst.truncate(start);
            return Err(AeadError::Encode(e));
        }
        self.seal_prepared(dst, start, body_len)
    }

    /// Seals a frame that is already encoded in plaintext (`plaintext` is
    /// exactly one frame with algorithm 0, e.g. a resend from the resume
    /// cache), appending the wire bytes to `dst`. The header is checked; the
    /// body is taken as it is. One copy into `dst`, then encryption in place.
    pub fn seal_encoded(
        &mut self,
        plaintext: &[u8],
        limits: &Limits,
        dst: &mut BytesMut,
    ) -> Result<usize, AeadError> {
        let total = peek_frame_len(plaintext, limits).map_err(AeadError::Malformed)?;
        if total != plaintext.len() {
            return Err(AeadError::Malformed(DecodeError::Incomplete {
                needed: total,
            }));
        }
        if plaintext[5] != 0 {
            return Err(AeadError::AlreadySealed);
        }
        let body_len = total - HEADER_LEN;
        self.check(body_len, limits)?;
        let start = dst.len();
        dst.reserve(SEAL_COUNTER_LEN + total + dtp_codec::TAG_LEN);
        dst.put_bytes(0, SEAL_COUNTER_LEN);
        dst.extend_from_slice(plaintext);
        self.seal_prepared(dst, start, body_len)
    }

    /// Refuses a body that would not fit once sealed, or a seal the key's
    /// budget does not allow.
    fn check(&mut self, body_len: usize, limits: &Limits) -> Result<(), AeadError> {
        let sealed_len = body_len + SEAL_COUNTER_LEN + dtp_codec::TAG_LEN;
        if sealed_len > limits.max_frame_len as usize {
            return Err(AeadError::FrameTooLarge {
                len: sealed_len,
                max: limits.max_frame_len,
            });
        }
        let cost = KeyLimits::blocks(body_len);
        if self.counter >= self.limits.hard_seals
            || self.blocks.saturating_add(cost) > self.limits.hard_blocks
        {
            self.stats.seal_refused += 1;
            return Err(AeadError::KeyExhausted {
                key_version: self.key.version(),
                seals: self.counter,
            });
        }
        Ok(())
    }

    /// `dst[start..]` holds 8 spare bytes, then a plaintext header, then
    /// `body_len` body bytes. Moves the header to `start`, marks it sealed,
    /// writes the counter into the gap, encrypts the body in place and
    /// appends the tag.
    fn seal_prepared(
        &mut self,
        dst: &mut BytesMut,
        start: usize,
        body_len: usize,
    ) -> Result<usize, AeadError> {
        let sealed_len = body_len + SEAL_COUNTER_LEN + dtp_codec::TAG_LEN;
        let counter = self.counter;
        let buf = &mut dst[start..];
        buf.copy_within(SEAL_COUNTER_LEN..SEAL_COUNTER_LEN + HEADER_LEN, 0);
        buf[5] = self.key.algorithm() as u8;
        buf[6..8].copy_from_slice(&self.key.version().to_be_bytes());
        // `check` bounded sealed_len by max_frame_len, a u32.
        buf[12..16].copy_from_slice(&(sealed_len as u32).to_be_bytes());
        buf[HEADER_LEN..AAD_LEN].copy_from_slice(&counter.to_be_bytes());
        let (aad, body) = buf.split_at_mut(AAD_LEN);
        let sealed = self.key.ring_key().seal_in_place_separate_tag(
            self.key.nonce(counter),
            Aad::from(&aad[..]),
            body,
        );
        let tag = match sealed {
            Ok(tag) => tag,
            Err(_) => {
                dst.truncate(start);
                return Err(AeadError::Crypto);
            }
        };
        dst.extend_from_slice(tag.as_ref());
        // check() refused counter >= hard_seals, and hard_seals < u64::MAX.
        self.counter += 1;
        self.blocks = self.blocks.saturating_add(KeyLimits::blocks(body_len));
        self.stats.sealed_frames += 1;
        self.stats.sealed_bytes += body_len as u64;
        Ok(HEADER_LEN + sealed_len)
    }
}
