//! The Encryption Module (SPEC ENC-1 … ENC-4): sealing and opening of frame
//! bodies with the keys CAP negotiated.
//!
//! **Owns**: the per-direction AEAD keys of one connection, their versions,
//! seal counters and usage limits, and the sealed-frame layout of
//! `codec/FORMAT.md` §2.1:
//!
//! ```text
//! header (16) | seal_counter (8) | ciphertext | tag (16)
//! associated data = header (16) ‖ seal_counter (8)
//! ```
//!
//! **Never touches**: sockets, clocks, randomness (there is none to need:
//! nonces are counters), the handshake itself (`cap`), credentials (`cred`),
//! or the codec's layouts (bodies are encoded and decoded by `dtp-codec`).
//!
//! # Design
//!
//! - **Algorithms.** AES-256-GCM and ChaCha20-Poly1305 from `ring::aead`,
//!   one per connection, chosen at CAP time ([`AeadAlgorithm`]); a frame
//!   under the other one is refused ([`AeadError::AlgorithmMismatch`]).
//! - **Key schedule.** CAP hands over one 32-byte traffic secret per
//!   direction ([`KeyMaterial`]). From a secret, HKDF-SHA-256 Expand
//!   (`ring::hkdf`; the secret already is a PRK, so no Extract) derives
//!   `key = Expand(secret, "dtp1 aead key" ‖ alg_id, 32)` and
//!   `iv = Expand(secret, "dtp1 aead iv" ‖ alg_id, 12)`. Binding the
//!   algorithm id means one secret never keys two algorithms.
//! - **Nonce.** `nonce = iv XOR (0⁴ ‖ seal_counter as u64 big-endian)`, the
//!   construction of RFC 8446 §5.3. The seal counter is per key and per
//!   direction, starts at 0 and increases by one per sealed frame; it is not
//!   the fragment sequence number, so a fragment resent after a reconnect or
//!   a rekey is sealed under a fresh (key, nonce) pair, never a reused one.
//!   The derived IV (rather than zero bytes) keeps nonces of different keys
//!   apart, which matters for AES-GCM's multi-key security.
//! - **Usage limits.** [`KeyLimits`]: per key, a number of seals and of
//!   16-byte blocks (AES-GCM: 2^36 blocks, from draft-irtf-cfrg-aead-limits
//!   §5.1.1 / RFC 8446 §5.5; ChaCha20-Poly1305: 2^62 seals). The counter
//!   never wraps: sealing past a hard limit is refused
//!   ([`AeadError::KeyExhausted`]); [`Sealer::needs_rekey`] turns true at
//!   half of it.
//! - **Rekeying.** [`Sealer::rekey`] moves one direction to key version
//!   `v + 1` whose secret is `Expand(secret_v, "dtp1 aead next secret", 32)`
//!   (like TLS 1.3's key update, RFC 8446 §7.2); the two directions rekey
//!   independently. No message announces it: the key version in the
//!   plaintext header (ENC-4) is the signal. The [`Opener`] accepts the
//!   current version and the next one; the first frame under `v + 1` that
//!   authenticates switches it, and version `v` is dropped at that moment:
//!   the transports deliver in order, so no frame under `v` can follow a
//!   frame under `v + 1`. Anything else is
//!   [`AeadError::KeyVersionMismatch`] (5003). Version 65535 cannot be
//!   rekeyed: reconnect.
//! - **Replay.** Within a key, seal counters must strictly increase
//!   ([`AeadError::Replay`]). A frame from an earlier connection fails: each
//!   connection runs a fresh handshake with fresh secrets, so it does not
//!   authenticate ([`AeadError::DecryptFailed`]) or names a key version not
//!   in use.
//! - **ENC-3.** [`EncryptionModule`] starts in a "no keys" state and refuses
//!   to seal or open with [`AeadError::KeyNotReady`] (5001) until
//!   [`EncryptionModule::install`] is given CAP's keys. There is no
//!   plaintext fallback.
//! - **In place.** [`Sealer::seal_frame`] encodes the body straight into the
//!   output buffer and encrypts it there; only the 16-byte header moves.
//!   [`Opener::open_frame`] decrypts in the receive buffer and decodes
//!   zero-copy from it.
//! - **Failure leaves no trace.** An opening error commits nothing (counter,
//!   key switch), so forged frames cannot desynchronise the opener. The one
//!   exception is a body that authenticates but does not decode: the peer
//!   really sent it, so its counter stays used. Errors are counted by reason
//!   in [`AeadStats`]. On a byte stream the engine should close the
//!   connection on any opening error.
//! - **Opening paths.** [`Opener::open_frame`] takes the frame's own
//!   `BytesMut` (`split_to` of the receive buffer after
//!   [`dtp_codec::peek_frame_len`]) and never copies: that is the hot path.
//!   [`Opener::open_sealed`] takes the codec's [`Sealed`] body; it decrypts
//!   in place only when no other handle shares the memory (a
//!   [`dtp_codec::FrameDecoder`]'s remaining buffer does), else it copies
//!   the body once.
//! - **Secrets** ([`Secret`]) are never printed and wiped on drop (best
//!   effort, see its docs).

mod error;
mod keys;
mod open;
mod seal;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use bytes::BytesMut;
use dtp_codec::{
    AeadAlgorithm, FrameBuf, HEADER_LEN, Limits, LogicalFrame, SEAL_COUNTER_LEN, Sealed,
};

pub use error::{AeadError, AeadStats, Rejections};
pub use keys::{KeyLimits, SECRET_LEN, Secret};
pub use open::{OpenedBody, Opener};
pub use seal::Sealer;

/// Length of the associated data: the header and the seal counter.
pub(crate) const AAD_LEN: usize = HEADER_LEN + SEAL_COUNTER_LEN;

/// SPEC ENC-1: the outcome of CAP's key exchange, as the Encryption Module
/// needs it.
///
/// From `cap::CapOutcome`: on the Fay (the Noise initiator) `send` is
/// `initiator_to_responder` and `recv` is `responder_to_initiator`; on the
/// terminal the other way round. `initial_version` is 1 for a fresh
/// handshake; a reconnect's new handshake brings new secrets anyway.
#[derive(Debug)]
pub struct KeyMaterial {
    /// The algorithm chosen at CAP time.
    pub algorithm: AeadAlgorithm,
    /// The key version both directions start at (≥ 1: version 0 is the
    /// header's "plaintext" value).
    pub initial_version: u16,
    /// The secret of our sending direction (the peer's receiving one).
    pub send: Secret,
    /// The secret of our receiving direction (the peer's sending one).
    pub recv: Secret,
}

/// SPEC ENC-1: builds the two halves of a connection's keys from CAP's
/// outcome, with the algorithm's default [`KeyLimits`] when `limits` is
/// `None`.
///
/// Refuses version 0, equal secrets for both directions (which would let a
/// peer's own frames be reflected back to it as ours) and invalid limits.
pub fn session_keys(
    material: KeyMaterial,
    limits: Option<KeyLimits>,
) -> Result<(Sealer, Opener), AeadError> {
    let KeyMaterial {
        algorithm,
        initial_version,
        send,
        recv,
    } = material;
    if initial_version == 0 {
        return Err(AeadError::InvalidKeyMaterial(
            "key version 0 is reserved for plaintext frames",
        ));
    }
    if send.ct_eq(&recv) {
        return Err(AeadError::InvalidKeyMaterial(
            "both directions have the same secret",
        ));
    }
    let limits = limits.unwrap_or(KeyLimits::for_algorithm(algorithm));
    limits.validate(algorithm)?;
    let sealer = Sealer::new(
        keys::DirectionKey::derive(algorithm, initial_version, send)?,
        limits,
    );
    let opener = Opener::new(keys::DirectionKey::derive(
        algorithm,
        initial_version,
        recv,
    )?);
    Ok((sealer, opener))
}

/// SPEC ENC-3: whether CAP has delivered keys yet.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "a connection spends nearly all its life Ready; a Box would add an indirection to every seal and open"
)]
enum Keys {
    /// No key exchange has finished on this connection: nothing can be
    /// sealed or opened.
    Pending,
    /// Keys are installed.
    Ready { sealer: Sealer, opener: Opener },
}

/// SPEC ENC-1 … ENC-4: one connection's Encryption Module — the "no keys
/// yet" state, then a [`Sealer`] and an [`Opener`].
///
/// Its counters ([`EncryptionModule::stats`]) add up over every set of keys
/// it held, so they can be exported as monotonic metrics.
#[derive(Debug)]
pub struct EncryptionModule {
    keys: Keys,
    /// Counters of key sets already dropped, plus refusals while pending.
    retired: AeadStats,
}

impl Default for EncryptionModule {
    fn default() -> Self {
        Self::new()
    }
}

impl EncryptionModule {
    /// SPEC ENC-3: a module without keys; it refuses every seal and open
    /// until [`EncryptionModule::install`].
    pub fn new() -> Self {
        Self {
            keys: Keys::Pending,
            retired: AeadStats::default(),
        }
    }

    /// SPEC ENC-1, ENC-3: installs CAP's keys (see [`session_keys`]),
    /// replacing any earlier ones (a reconnect's new handshake: frames
    /// sealed under the old keys no longer open).
    pub fn install(
        &mut self,
        material: KeyMaterial,
        limits: Option<KeyLimits>,
    ) -> Result<(), AeadError> {
        let (sealer, opener) = session_keys(material, limits)?;
        self.retire();
        self.keys = Keys::Ready { sealer, opener };
        Ok(())
    }

    /// Drops the keys (connection lost, session closing): back to the "no
    /// keys" state until the next handshake installs new ones.
    pub fn reset(&mut self) {
        self.retire();
        self.keys = Keys::Pending;
    }

    /// SPEC ENC-3: true once keys are installed.
    pub fn is_ready(&self) -> bool {
        matches!(self.keys, Keys::Ready { .. })
    }

    /// The sending half, or [`AeadError::KeyNotReady`].
    pub fn sealer(&mut self) -> Result<&mut Sealer, AeadError> {
        match &mut self.keys {
            Keys::Ready { sealer, .. } => Ok(sealer),
            Keys::Pending => {
                self.retired.seal_refused += 1;
                Err(AeadError::KeyNotReady)
            }
        }
    }

    /// The receiving half, or [`AeadError::KeyNotReady`].
    pub fn opener(&mut self) -> Result<&mut Opener, AeadError> {
        match &mut self.keys {
            Keys::Ready { opener, .. } => Ok(opener),
            Keys::Pending => {
                self.retired.rejected.key_not_ready += 1;
                Err(AeadError::KeyNotReady)
            }
        }
    }

    /// SPEC ENC-1, ENC-3: [`Sealer::seal_frame`], refused with
    /// [`AeadError::KeyNotReady`] (5001) before keys are installed.
    pub fn seal_frame(
        &mut self,
        frame: &LogicalFrame,
        limits: &Limits,
        dst: &mut BytesMut,
    ) -> Result<usize, AeadError> {
        self.sealer()?.seal_frame(frame, limits, dst)
    }

    /// SPEC ENC-2, ENC-3: [`Opener::open_frame`], refused with
    /// [`AeadError::KeyNotReady`] before keys are installed.
    pub fn open_frame<B: FrameBuf>(
        &mut self,
        wire: B,
        limits: &Limits,
    ) -> Result<LogicalFrame, AeadError> {
        self.opener()?.open_frame(wire, limits)
    }

    /// SPEC ENC-2, ENC-3: [`Opener::open_sealed`], refused with
    /// [`AeadError::KeyNotReady`] before keys are installed.
    pub fn open_sealed(
        &mut self,
        stream_id: u32,
        sealed: Sealed,
        limits: &Limits,
    ) -> Result<LogicalFrame, AeadError> {
        self.opener()?.open_sealed(stream_id, sealed, limits)
    }

    /// Counters over the module's whole life.
    pub fn stats(&self) -> AeadStats {
        let mut s = self.retired;
        if let Keys::Ready { sealer, opener } = &self.keys {
            s.add(&sealer.stats());
            s.add(&opener.stats());
        }
        s
    }

    /// Folds the current keys' counters into `retired`.
    fn retire(&mut self) {
        if let Keys::Ready { sealer, opener } = &self.keys {
            self.retired.add(&sealer.stats());
            self.retired.add(&opener.stats());
        }
    }
}
