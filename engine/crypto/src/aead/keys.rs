//! The key schedule: traffic secrets, the AEAD key and IV derived from them,
//! the next key version's secret, and the per-key usage limits.
//!
//! Everything here is a pure function of the secret handed over by CAP; no
//! randomness and no clock.

use std::fmt;

use dtp_codec::AeadAlgorithm;
use ring::aead::{AES_256_GCM, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf;

use super::AeadError;

/// Length of a traffic secret, and of the AEAD keys derived from it.
pub const SECRET_LEN: usize = 32;

/// HKDF-Expand label of the AEAD key (followed by the algorithm id byte).
pub(crate) const LABEL_KEY: &[u8] = b"dtp1 aead key";
/// HKDF-Expand label of the static IV (followed by the algorithm id byte).
pub(crate) const LABEL_IV: &[u8] = b"dtp1 aead iv";
/// HKDF-Expand label of the next key version's secret (RFC 8446 §7.2 style).
pub(crate) const LABEL_NEXT: &[u8] = b"dtp1 aead next secret";

/// SPEC ENC-1: one direction's 32-byte traffic secret, as CAP hands it over
/// (the Noise handshake's split, one secret per direction).
///
/// Never printed (`Debug` shows `Secret(<redacted>)`), not `Clone`, and
/// overwritten with zeros when dropped. The wipe is best effort: without
/// `unsafe` a volatile write is out of reach, and ring's expanded key
/// schedules cannot be wiped from outside at all.
pub struct Secret([u8; SECRET_LEN]);

impl Secret {
    /// A secret from its bytes (the caller should wipe its own copy).
    pub fn from_bytes(bytes: [u8; SECRET_LEN]) -> Self {
        Self(bytes)
    }

    /// Equality without an early exit, so the time taken says nothing about
    /// where two secrets differ.
    pub(crate) fn ct_eq(&self, other: &Secret) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// The secret of the next key version: HKDF-Expand(secret,
    /// "dtp1 aead next secret", 32), like TLS 1.3's
    /// `application_traffic_secret_N+1` (RFC 8446 §7.2).
    fn next(&self) -> Result<Secret, AeadError> {
        let mut out = [0u8; SECRET_LEN];
        expand(&self.0, &[LABEL_NEXT], &mut out)?;
        Ok(Secret(out))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.fill(0);
        // Keeps the stores above from being optimised away as dead.
        std::hint::black_box(&mut self.0);
    }
}

/// The output length of one HKDF-Expand call.
struct OutLen(usize);

impl hkdf::KeyType for OutLen {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand with SHA-256 over a secret that already is a pseudorandom key
/// (CAP's output is an HKDF output itself, so no Extract step).
fn expand(secret: &[u8; SECRET_LEN], info: &[&[u8]], out: &mut [u8]) -> Result<(), AeadError> {
    let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
    prk.expand(info, OutLen(out.len()))
        .and_then(|okm| okm.fill(out))
        // Only an output longer than 255 × 32 bytes fails; ours are ≤ 32.
        .map_err(|_| AeadError::Crypto)
}

/// One direction's key at one version: the ring key, the static IV and the
/// secret the next version is derived from.
pub(crate) struct DirectionKey {
    algorithm: AeadAlgorithm,
    version: u16,
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    secret: Secret,
}

impl DirectionKey {
    /// Derives key and IV from `secret`; both bind the algorithm id, so the
    /// same secret never keys two algorithms.
    pub(crate) fn derive(
        algorithm: AeadAlgorithm,
        version: u16,
        secret: Secret,
    ) -> Result<Self, AeadError> {
        let alg_id = [algorithm as u8];
        let mut key_bytes = [0u8; SECRET_LEN];
        expand(&secret.0, &[LABEL_KEY, &alg_id], &mut key_bytes)?;
        let mut iv = [0u8; NONCE_LEN];
        expand(&secret.0, &[LABEL_IV, &alg_id], &mut iv)?;
        let ring_alg = match algorithm {
            AeadAlgorithm::Aes256Gcm => &AES_256_GCM,
            AeadAlgorithm::ChaCha20Poly1305 => &CHACHA20_POLY1305,
        };
        let unbound = UnboundKey::new(ring_alg, &key_bytes).map_err(|_| AeadError::Crypto);
        key_bytes.fill(0);
        std::hint::black_box(&mut key_bytes);
        Ok(Self {
            algorithm,
            version,
            key: LessSafeKey::new(unbound?),
            iv,
            secret,
        })
    }

    /// The key of the next version (version + 1, secret from HKDF).
    pub(crate) fn next(&self) -> Result<Self, AeadError> {
        let version = self
            .version
            .checked_add(1)
            .ok_or(AeadError::KeyVersionsExhausted)?;
        Self::derive(self.algorithm, version, self.secret.next()?)
    }

    pub(crate) fn algorithm(&self) -> AeadAlgorithm {
        self.algorithm
    }

    pub(crate) fn version(&self) -> u16 {
        self.version
    }

    pub(crate) fn ring_key(&self) -> &LessSafeKey {
        &self.key
    }

    /// The nonce of seal counter `counter`: the static IV XOR the counter,
    /// big-endian, in the last 8 bytes (RFC 8446 §5.3's construction).
    pub(crate) fn nonce(&self, counter: u64) -> Nonce {
        let mut n = self.iv;
        for (b, c) in n[NONCE_LEN - 8..].iter_mut().zip(counter.to_be_bytes()) {
            *b ^= c;
        }
        Nonce::assume_unique_for_key(n)
    }
}

/// How much one key may seal before it must be replaced (SPEC ENC-1: keys
/// are only used within their safe limits).
///
/// Two budgets, each with a soft threshold where
/// [`Sealer::needs_rekey`](super::Sealer::needs_rekey) turns true and a hard
/// one where sealing is refused with [`AeadError::KeyExhausted`]:
/// - `seals`: frames sealed under the key. The hard limit is below 2^64, so
///   the seal counter never wraps and a nonce is never reused.
/// - `blocks`: 16-byte blocks processed, counted per frame as
///   ⌈plaintext / 16⌉ + 1 (the +1 covers the tag block).
///
/// Defaults ([`KeyLimits::for_algorithm`]):
/// - AES-256-GCM: 2^36 blocks (≈ 1 TiB). The confidentiality advantage of
///   GCM is about (σ + q + 1)² / 2^129 for σ blocks in q messages
///   (draft-irtf-cfrg-aead-limits §5.1.1); 2^36 keeps it below 2^-57, the
///   bound RFC 8446 §5.5 and RFC 9001 §6.6 aim at. Seals are bounded by the
///   blocks (each costs at least one).
/// - ChaCha20-Poly1305: no practical confidentiality limit (RFC 8446 §5.5:
///   "the record sequence number would wrap before the safety limit is
///   reached"), so only the counter bound: 2^62 seals.
///
/// The soft thresholds are half the hard ones. A deployment may lower the
/// limits (rekey more often); [`KeyLimits::validate`] refuses raising them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyLimits {
    /// Seals after which the key should be replaced.
    pub soft_seals: u64,
    /// Seals after which sealing is refused.
    pub hard_seals: u64,
    /// Blocks after which the key should be replaced.
    pub soft_blocks: u64,
    /// Blocks after which sealing is refused.
    pub hard_blocks: u64,
}

impl KeyLimits {
    /// The default (and highest allowed) limits of `algorithm`.
    pub const fn for_algorithm(algorithm: AeadAlgorithm) -> Self {
        match algorithm {
            AeadAlgorithm::Aes256Gcm => Self {
                soft_seals: 1 << 35,
                hard_seals: 1 << 36,
                soft_blocks: 1 << 35,
                hard_blocks: 1 << 36,
            },
            AeadAlgorithm::ChaCha20Poly1305 => Self {
                soft_seals: 1 << 61,
                hard_seals: 1 << 62,
                soft_blocks: u64::MAX,
                hard_blocks: u64::MAX,
            },
        }
    }

    /// Checks that soft ≤ hard, that every limit is at least 1 and that none
    /// is above `algorithm`'s default.
    pub fn validate(&self, algorithm: AeadAlgorithm) -> Result<(), AeadError> {
        let max = Self::for_algorithm(algorithm);
        if self.hard_seals == 0 || self.hard_blocks == 0 {
            return Err(AeadError::InvalidLimits("a hard limit is 0"));
        }
        if self.soft_seals > self.hard_seals || self.soft_blocks > self.hard_blocks {
            return Err(AeadError::InvalidLimits(
                "a soft limit is above its hard limit",
            ));
        }
        if self.hard_seals > max.hard_seals || self.hard_blocks > max.hard_blocks {
            return Err(AeadError::InvalidLimits(
                "a hard limit is above the algorithm's safe limit",
            ));
        }
        Ok(())
    }

    /// The block cost of sealing `plaintext_len` bytes.
    pub(crate) fn blocks(plaintext_len: usize) -> u64 {
        (plaintext_len as u64).div_ceil(16) + 1
    }
}
