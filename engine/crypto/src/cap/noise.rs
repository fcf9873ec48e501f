//! The Noise plumbing under CAP: the protocol name, a resolver that draws
//! randomness from caller-supplied seeds (no global RNG), the split keys,
//! and Noise static key pairs.
//!
//! **The split keys** come from snow's
//! `HandshakeState::dangerously_get_raw_split` (its `risky-raw-split`
//! feature): the two 32-byte Noise transport keys, which CAP does not use
//! with Noise's own transport but hands, as per-direction secrets, to the
//! Encryption Module (`crate::aead`), which derives its AEAD keys from them
//! with HKDF.

use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::{Builder, HandshakeState};

use super::CapError;
use crate::cred::{FormatError, armor, dearmor};

/// The Noise protocol name CAP runs (see the module docs of [`crate::cap`]).
pub const NOISE_PARAMS: &str = "Noise_XX_25519_ChaChaPoly_SHA256";
/// The Noise prologue: binds the protocol and its version into the
/// handshake hash, so a peer speaking another CAP version fails at once.
pub const PROLOGUE: &[u8] = b"DTP-CAP/1";
/// Armour label of a Noise static private key file.
pub const NOISE_PRIVATE_KEY_LABEL: &str = "DTP NOISE PRIVATE KEY";

/// A Noise static key pair (X25519). The private half is secret.
#[derive(Clone, PartialEq, Eq)]
pub struct NoiseKeypair {
    private: [u8; 32],
    public: [u8; 32],
}

impl std::fmt::Debug for NoiseKeypair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoiseKeypair")
            .field("public", &crate::cred::hex(&self.public))
            .finish_non_exhaustive()
    }
}

impl NoiseKeypair {
    /// The key pair whose private key is these 32 bytes. Any 32 bytes are a
    /// valid X25519 private key, so 32 fresh random bytes make a new pair.
    pub fn from_private(private: [u8; 32]) -> Result<Self, CapError> {
        let mut dh = DefaultResolver
            .resolve_dh(&DHChoice::Curve25519)
            .ok_or(CapError::Internal("snow has no Curve25519"))?;
        dh.set(&private);
        let public: [u8; 32] = dh
            .pubkey()
            .try_into()
            .map_err(|_| CapError::Internal("X25519 public key length"))?;
        Ok(NoiseKeypair { private, public })
    }

    /// The public key (what a credential names, what a Fay may pin).
    pub fn public(&self) -> &[u8; 32] {
        &self.public
    }

    /// The private key. Secret.
    pub fn private(&self) -> &[u8; 32] {
        &self.private
    }

    /// The private key file (armour label `DTP NOISE PRIVATE KEY`). Secret.
    pub fn to_text(&self) -> String {
        armor(NOISE_PRIVATE_KEY_LABEL, &self.private)
    }

    /// Reads a private key file.
    pub fn from_text(text: &str) -> Result<Self, FormatError> {
        let raw = dearmor(NOISE_PRIVATE_KEY_LABEL, text)?;
        let private: [u8; 32] = raw
            .as_slice()
            .try_into()
            .map_err(|_| FormatError::BadKey("X25519 private key"))?;
        Self::from_private(private).map_err(|_| FormatError::BadKey("X25519 private key"))
    }
}

impl Drop for NoiseKeypair {
    fn drop(&mut self) {
        // Best effort: the compiler may elide it, and copies may exist.
        self.private = [0; 32];
        std::hint::black_box(&self.private);
    }
}

/// A deterministic random source: SHA-256(seed ‖ counter) blocks. snow draws
/// the ephemeral key (32 bytes) from it; the caller's seed is the only
/// entropy, so seeds must be fresh random bytes per handshake.
struct SeededRng {
    seed: [u8; 32],
    counter: u64,
}

impl Random for SeededRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        for chunk in dest.chunks_mut(32) {
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
            ctx.update(b"DTP-CAP/1 rng");
            ctx.update(&self.seed);
            ctx.update(&self.counter.to_be_bytes());
            self.counter = self.counter.checked_add(1).ok_or(snow::Error::Rng)?;
            let block = ctx.finish();
            chunk.copy_from_slice(&block.as_ref()[..chunk.len()]);
        }
        Ok(())
    }
}

impl Drop for SeededRng {
    fn drop(&mut self) {
        self.seed = [0; 32];
        std::hint::black_box(&self.seed);
    }
}

/// snow's resolver for CAP: default primitives, seeded randomness.
struct CapResolver {
    seed: [u8; 32],
}

impl CryptoResolver for CapResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRng {
            seed: self.seed,
            counter: 0,
        }))
    }

    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }

    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

impl Drop for CapResolver {
    fn drop(&mut self) {
        self.seed = [0; 32];
        std::hint::black_box(&self.seed);
    }
}

/// A snow handshake state.
pub(crate) struct Noise {
    pub(crate) hs: HandshakeState,
}

impl Noise {
    /// Builds one side of the CAP handshake.
    pub(crate) fn new(
        initiator: bool,
        local: &NoiseKeypair,
        seed: [u8; 32],
    ) -> Result<Self, CapError> {
        let params = NOISE_PARAMS
            .parse()
            .map_err(|_| CapError::Internal("Noise parameters"))?;
        let resolver = CapResolver { seed };
        let builder = Builder::with_resolver(params, Box::new(resolver))
            .prologue(PROLOGUE)
            .and_then(|b| b.local_private_key(&local.private))
            .map_err(|_| CapError::Internal("Noise builder"))?;
        let hs = if initiator {
            builder.build_initiator()
        } else {
            builder.build_responder()
        }
        .map_err(|_| CapError::Internal("Noise builder"))?;
        Ok(Noise { hs })
    }

    /// After the last handshake message: the handshake hash and the split
    /// keys `(initiator→responder, responder→initiator)`. Consumes the
    /// handshake.
    pub(crate) fn finish(mut self) -> Result<Finished, CapError> {
        let internal = CapError::Internal("Noise handshake not finished");
        if !self.hs.is_handshake_finished() {
            return Err(internal);
        }
        let hash: [u8; 32] = self
            .hs
            .get_handshake_hash()
            .try_into()
            .map_err(|_| internal.clone())?;
        let remote: [u8; 32] = self
            .hs
            .get_remote_static()
            .and_then(|k| k.try_into().ok())
            .ok_or(internal)?;
        let (i2r, r2i) = self.hs.dangerously_get_raw_split();
        Ok(Finished {
            hash,
            remote,
            i2r,
            r2i,
        })
    }
}

/// What a finished handshake yields.
pub(crate) struct Finished {
    pub(crate) hash: [u8; 32],
    pub(crate) remote: [u8; 32],
    pub(crate) i2r: [u8; 32],
    pub(crate) r2i: [u8; 32],
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.i2r = [0; 32];
        self.r2i = [0; 32];
        std::hint::black_box((&self.i2r, &self.r2i));
    }
}
