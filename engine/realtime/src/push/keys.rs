//! The P-256 key material of RFC 8291: a subscription's receiver keys
//! (`p256dh`, `auth`), the sender's per-message ephemeral key, and — for
//! tests and round trips only — the receiver's private half.
//!
//! Private scalars never appear in `Debug` output (seed §8.3, §12.3: key
//! material is not logged).

use std::fmt;

use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::{PublicKey, SecretKey};

use super::b64;

/// Length of an uncompressed P-256 point (X9.62 §4.3.6: `0x04 ‖ x ‖ y`).
pub const P256_POINT_LEN: usize = 65;

/// Length of a subscription's authentication secret (RFC 8291 §3.2).
pub const AUTH_SECRET_LEN: usize = 16;

/// Why key material was refused (RFC 8291 §3.1, §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// `p256dh` is not base64url, or `auth` is not.
    #[error("a key is not canonical base64url")]
    NotBase64Url,
    /// `p256dh` is not a 65-byte uncompressed point on P-256 (RFC 8291 §3.1
    /// requires the uncompressed form).
    #[error("p256dh is not an uncompressed P-256 point")]
    InvalidPoint,
    /// `auth` is not exactly 16 bytes (RFC 8291 §3.2).
    #[error("auth is not 16 bytes")]
    InvalidAuthSecret,
    /// A private key is not a scalar in `[1, n - 1]`.
    #[error("private key is not a valid P-256 scalar")]
    InvalidPrivateKey,
}

/// A push subscription's receiver keys (RFC 8291 §3.1 `ua_public` = the
/// `p256dh` key, §3.2 the `auth` secret): what the sender needs to encrypt
/// for one browser (SPEC RT-12).
#[derive(Clone, PartialEq, Eq)]
pub struct ReceiverKeys {
    point: PublicKey,
    p256dh: [u8; P256_POINT_LEN],
    auth: [u8; AUTH_SECRET_LEN],
}

impl ReceiverKeys {
    /// Keys from raw bytes: `p256dh` a 65-byte uncompressed point on P-256,
    /// `auth` 16 bytes.
    pub fn new(p256dh: &[u8], auth: &[u8]) -> Result<Self, KeyError> {
        let auth: [u8; AUTH_SECRET_LEN] =
            auth.try_into().map_err(|_| KeyError::InvalidAuthSecret)?;
        let (point, p256dh) = parse_point(p256dh)?;
        Ok(Self {
            point,
            p256dh,
            auth,
        })
    }

    /// Keys as `PushSubscription.toJSON().keys` gives them: base64url
    /// (W3C Push API §3.4).
    pub fn from_base64url(p256dh: &str, auth: &str) -> Result<Self, KeyError> {
        let p = b64::decode(p256dh).ok_or(KeyError::NotBase64Url)?;
        let a = b64::decode(auth).ok_or(KeyError::NotBase64Url)?;
        Self::new(&p, &a)
    }

    /// The uncompressed point `ua_public` (RFC 8291 §3.4 key_info input).
    pub fn p256dh(&self) -> &[u8; P256_POINT_LEN] {
        &self.p256dh
    }

    /// The authentication secret (RFC 8291 §3.2).
    pub fn auth(&self) -> &[u8; AUTH_SECRET_LEN] {
        &self.auth
    }

    pub(crate) fn point(&self) -> &PublicKey {
        &self.point
    }
}

impl fmt::Debug for ReceiverKeys {
    // The keys are delivery capability material (seed §8.3): never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverKeys").finish_non_exhaustive()
    }
}

/// The sender's key pair for one message (RFC 8291 §3.1: "a new ephemeral
/// ECDH key pair" per message). Sans-IO: the caller draws the 32 random
/// bytes; this type never reads a random source.
#[derive(Clone)]
pub struct EphemeralKey {
    secret: SecretKey,
    public: [u8; P256_POINT_LEN],
}

impl EphemeralKey {
    /// The key whose scalar is `random` (big-endian); refused when it is 0
    /// or not below the group order (probability ~2⁻³² for uniform bytes:
    /// draw again).
    pub fn from_bytes(random: &[u8; 32]) -> Result<Self, KeyError> {
        let secret = SecretKey::from_slice(random).map_err(|_| KeyError::InvalidPrivateKey)?;
        let public = uncompressed(&secret.public_key());
        Ok(Self { secret, public })
    }

    /// The uncompressed public point `as_public`, sent as the header's
    /// `keyid` (RFC 8291 §2).
    pub fn public_key(&self) -> &[u8; P256_POINT_LEN] {
        &self.public
    }

    pub(crate) fn secret(&self) -> &SecretKey {
        &self.secret
    }
}

impl fmt::Debug for EphemeralKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EphemeralKey")
            .field("public", &b64::encode(&self.public))
            .finish_non_exhaustive()
    }
}

/// The receiver's private half (what a browser holds): only for
/// [`decrypt`](super::decrypt), i.e. round-trip tests and conformance
/// checks; a sender never has it.
#[derive(Clone)]
pub struct ReceiverSecret {
    secret: SecretKey,
    keys: ReceiverKeys,
}

impl ReceiverSecret {
    /// The receiver whose private scalar is `private` and whose
    /// authentication secret is `auth`.
    pub fn new(private: &[u8; 32], auth: [u8; AUTH_SECRET_LEN]) -> Result<Self, KeyError> {
        let secret = SecretKey::from_slice(private).map_err(|_| KeyError::InvalidPrivateKey)?;
        let point = secret.public_key();
        let p256dh = uncompressed(&point);
        Ok(Self {
            secret,
            keys: ReceiverKeys {
                point,
                p256dh,
                auth,
            },
        })
    }

    /// The public keys a subscription would publish.
    pub fn keys(&self) -> &ReceiverKeys {
        &self.keys
    }

    pub(crate) fn secret(&self) -> &SecretKey {
        &self.secret
    }
}

impl fmt::Debug for ReceiverSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiverSecret").finish_non_exhaustive()
    }
}

/// A 65-byte uncompressed point on P-256 (not compressed, not identity).
pub(crate) fn parse_point(bytes: &[u8]) -> Result<(PublicKey, [u8; P256_POINT_LEN]), KeyError> {
    let raw: [u8; P256_POINT_LEN] = bytes.try_into().map_err(|_| KeyError::InvalidPoint)?;
    if raw[0] != 0x04 {
        return Err(KeyError::InvalidPoint);
    }
    let point = PublicKey::from_sec1_bytes(&raw).map_err(|_| KeyError::InvalidPoint)?;
    Ok((point, raw))
}

/// `0x04 ‖ x ‖ y` of a public key.
pub(crate) fn uncompressed(key: &PublicKey) -> [u8; P256_POINT_LEN] {
    let point = key.to_encoded_point(false);
    let mut out = [0u8; P256_POINT_LEN];
    // An uncompressed P-256 encoding is always 65 bytes; copy defensively so
    // a mismatch could never panic.
    let src = point.as_bytes();
    let n = src.len().min(P256_POINT_LEN);
    out[..n].copy_from_slice(&src[..n]);
    out
}
