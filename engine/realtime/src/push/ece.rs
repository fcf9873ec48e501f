//! Message encryption for Web Push (RFC 8291) in the `aes128gcm` content
//! coding (RFC 8188), one record per message (SPEC RT-12).
//!
//! ```text
//! body   = salt(16) ‖ rs(u32 BE) ‖ idlen(1) = 65 ‖ keyid = as_public(65)
//!          ‖ AES-128-GCM(CEK, NONCE, plaintext ‖ 0x02 ‖ 0x00 × padding)
//! PRK_key = HKDF-Extract(auth, ECDH(as_private, ua_public))
//! IKM     = HKDF-Expand(PRK_key, "WebPush: info" ‖ 0 ‖ ua_public ‖ as_public, 32)
//! PRK     = HKDF-Extract(salt, IKM)
//! CEK     = HKDF-Expand(PRK, "Content-Encoding: aes128gcm" ‖ 0, 16)
//! NONCE   = HKDF-Expand(PRK, "Content-Encoding: nonce" ‖ 0, 12)   (record 0)
//! ```
//!
//! Sans-IO: the ephemeral key and the salt are the caller's random draws.

use p256::SecretKey;
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, KeyType, Prk, Salt};

use super::keys::{EphemeralKey, P256_POINT_LEN, ReceiverKeys, ReceiverSecret, parse_point};

/// Bytes before the record: salt 16, rs 4, idlen 1, keyid 65 (RFC 8291 §4:
/// "86 octets").
pub const HEADER_LEN: usize = 16 + 4 + 1 + P256_POINT_LEN;

/// RFC 8291 §4: a push service need not accept a body over 4096 bytes, so
/// no sender should emit one.
pub const MAX_BODY_LEN: usize = 4096;

/// The AES-GCM tag (RFC 8188 §2: every record ends with it).
pub const TAG_LEN: usize = 16;

/// The largest plaintext that fits [`MAX_BODY_LEN`] with no padding:
/// 4096 − 86 − 16 − 1 = 3993 (RFC 8291 §4).
pub const MAX_PLAINTEXT_LEN: usize = MAX_BODY_LEN - HEADER_LEN - TAG_LEN - 1;

/// RFC 8188 §2: `rs` must exceed the 16-byte tag plus the delimiter.
pub const MIN_RECORD_SIZE: u32 = 18;

/// Why a message was not encrypted (RFC 8291 §4, RFC 8188 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncryptError {
    /// `rs` below [`MIN_RECORD_SIZE`].
    #[error("record size {rs} is below the RFC 8188 minimum of 18")]
    RecordSizeTooSmall {
        /// The record size asked for.
        rs: u32,
    },
    /// Plaintext, delimiter, padding and tag do not fit one record of `rs`
    /// bytes (RFC 8291 §4: one record per push message).
    #[error("a {record_len}-byte record does not fit the record size {rs}")]
    DoesNotFitRecord {
        /// Bytes the record would need.
        record_len: usize,
        /// The record size.
        rs: u32,
    },
    /// The body would exceed [`MAX_BODY_LEN`] (RFC 8291 §4).
    #[error("a {body_len}-byte body exceeds the 4096-byte Web Push ceiling")]
    TooLarge {
        /// Bytes the body would need.
        body_len: usize,
    },
    /// The cryptographic library refused (cannot happen with valid keys;
    /// reported rather than trusted).
    #[error("the cipher refused the input")]
    Crypto,
}

/// Why a body was not decrypted (RFC 8188 §2, RFC 8291 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// Shorter than the header plus a minimal record.
    #[error("body shorter than the aes128gcm header and one record")]
    Truncated,
    /// `rs` below [`MIN_RECORD_SIZE`].
    #[error("record size below 18")]
    RecordSizeTooSmall,
    /// `keyid` is not a 65-byte uncompressed P-256 point (RFC 8291 §4).
    #[error("keyid is not an uncompressed P-256 point")]
    InvalidKeyId,
    /// More than one record: RFC 8291 §4 allows exactly one.
    #[error("body holds more than one record")]
    NotSingleRecord,
    /// The tag did not verify (wrong keys, or altered bytes).
    #[error("record authentication failed")]
    Authentication,
    /// No `0x02` delimiter before the zero padding (RFC 8188 §2: the last
    /// record's delimiter).
    #[error("record padding has no final-record delimiter")]
    InvalidPadding,
}

/// RFC 8291 + RFC 8188 `aes128gcm` (SPEC RT-12): encrypts `plaintext` for
/// `receiver` as one record of size `rs` with `padding` zero bytes after the
/// delimiter, using the caller-drawn `sender` key and `salt`. The whole body
/// is at most [`MAX_BODY_LEN`] bytes.
pub fn encrypt(
    receiver: &ReceiverKeys,
    plaintext: &[u8],
    sender: &EphemeralKey,
    salt: &[u8; 16],
    rs: u32,
    padding: usize,
) -> Result<Vec<u8>, EncryptError> {
    if rs < MIN_RECORD_SIZE {
        return Err(EncryptError::RecordSizeTooSmall { rs });
    }
    let record_len = plaintext
        .len()
        .saturating_add(padding)
        .saturating_add(1 + TAG_LEN);
    let body_len = record_len.saturating_add(HEADER_LEN);
    if usize::try_from(rs).is_ok_and(|rs| record_len > rs) {
        return Err(EncryptError::DoesNotFitRecord { record_len, rs });
    }
    if body_len > MAX_BODY_LEN {
        return Err(EncryptError::TooLarge { body_len });
    }
    let secret = ecdh(sender.secret(), receiver.point());
    let (cek, nonce) = derive(
        &secret,
        receiver.auth(),
        receiver.p256dh(),
        sender.public_key(),
        salt,
    )
    .ok_or(EncryptError::Crypto)?;

    let mut body = Vec::with_capacity(body_len);
    body.extend_from_slice(salt);
    body.extend_from_slice(&rs.to_be_bytes());
    body.push(P256_POINT_LEN as u8);
    body.extend_from_slice(sender.public_key());
    let mut record = Vec::with_capacity(record_len);
    record.extend_from_slice(plaintext);
    record.push(0x02);
    record.resize(record_len - TAG_LEN, 0);
    let key = aead_key(&cek).ok_or(EncryptError::Crypto)?;
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::empty(),
        &mut record,
    )
    .map_err(|_| EncryptError::Crypto)?;
    body.extend_from_slice(&record);
    Ok(body)
}

/// The receiver side of RFC 8291 (what a browser does): parses the
/// `aes128gcm` header, derives the keys and opens the single record,
/// returning the plaintext without its padding. For round-trip tests and
/// conformance checks (SPEC RT-12); never panics on arbitrary bytes.
pub fn decrypt(receiver: &ReceiverSecret, body: &[u8]) -> Result<Vec<u8>, DecryptError> {
    let (salt, rest) = body
        .split_first_chunk::<16>()
        .ok_or(DecryptError::Truncated)?;
    let (rs, rest) = rest
        .split_first_chunk::<4>()
        .ok_or(DecryptError::Truncated)?;
    let rs = u32::from_be_bytes(*rs);
    let (&idlen, rest) = rest.split_first().ok_or(DecryptError::Truncated)?;
    let keyid = rest
        .get(..usize::from(idlen))
        .ok_or(DecryptError::Truncated)?;
    let record = rest
        .get(usize::from(idlen)..)
        .ok_or(DecryptError::Truncated)?;
    if rs < MIN_RECORD_SIZE {
        return Err(DecryptError::RecordSizeTooSmall);
    }
    let (sender_point, sender_public) =
        parse_point(keyid).map_err(|_| DecryptError::InvalidKeyId)?;
    if record.len() < TAG_LEN + 1 {
        return Err(DecryptError::Truncated);
    }
    if usize::try_from(rs).is_ok_and(|rs| record.len() > rs) {
        return Err(DecryptError::NotSingleRecord);
    }
    let keys = receiver.keys();
    let secret = ecdh(receiver.secret(), &sender_point);
    let (cek, nonce) = derive(&secret, keys.auth(), keys.p256dh(), &sender_public, salt)
        .ok_or(DecryptError::Authentication)?;
    let key = aead_key(&cek).ok_or(DecryptError::Authentication)?;
    let mut buf = record.to_vec();
    let opened = key
        .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
        .map_err(|_| DecryptError::Authentication)?;
    let end = opened
        .iter()
        .rposition(|&b| b != 0)
        .ok_or(DecryptError::InvalidPadding)?;
    match opened.get(end) {
        Some(0x02) => Ok(opened.get(..end).unwrap_or_default().to_vec()),
        _ => Err(DecryptError::InvalidPadding),
    }
}

/// The ECDH shared secret: the x coordinate (RFC 8291 §3.1).
fn ecdh(secret: &SecretKey, peer: &p256::PublicKey) -> [u8; 32] {
    let shared = p256::ecdh::diffie_hellman(secret.to_nonzero_scalar(), peer.as_affine());
    let mut out = [0u8; 32];
    out.copy_from_slice(shared.raw_secret_bytes().as_slice());
    out
}

/// RFC 8291 §3.3–§3.4 then RFC 8188 §2.2–§2.3: `(CEK, NONCE)` for record 0.
pub(crate) fn derive(
    ecdh_secret: &[u8; 32],
    auth: &[u8; 16],
    ua_public: &[u8; P256_POINT_LEN],
    as_public: &[u8; P256_POINT_LEN],
    salt: &[u8; 16],
) -> Option<([u8; 16], [u8; 12])> {
    let prk_key = Salt::new(HKDF_SHA256, auth).extract(ecdh_secret);
    let mut ikm = [0u8; 32];
    expand(
        &prk_key,
        &[b"WebPush: info\0", ua_public, as_public],
        &mut ikm,
    )?;
    let prk = Salt::new(HKDF_SHA256, salt).extract(&ikm);
    let mut cek = [0u8; 16];
    expand(&prk, &[b"Content-Encoding: aes128gcm\0"], &mut cek)?;
    let mut nonce = [0u8; 12];
    expand(&prk, &[b"Content-Encoding: nonce\0"], &mut nonce)?;
    Some((cek, nonce))
}

/// An HKDF output length, as ring asks for it.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn expand(prk: &Prk, info: &[&[u8]], out: &mut [u8]) -> Option<()> {
    prk.expand(info, Len(out.len())).ok()?.fill(out).ok()
}

fn aead_key(cek: &[u8; 16]) -> Option<LessSafeKey> {
    UnboundKey::new(&AES_128_GCM, cek)
        .ok()
        .map(LessSafeKey::new)
}
