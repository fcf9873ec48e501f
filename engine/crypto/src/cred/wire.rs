//! The canonical binary form of a Fay credential: what is signed and what
//! travels inside the CAP handshake.
//!
//! All integers are big-endian. Layout (version 1):
//!
//! | offset | field | notes |
//! |---|---|---|
//! | 0 | magic `"DTPC"` | 4 bytes; also the signature's domain separator |
//! | 4 | version `u8` | `1` |
//! | 5 | `descriptor_id` | 16 bytes, a UUID v4 (RFC 4122 variant) |
//! | 21 | `issuer_key_id` | 8 bytes, see [`super::KeyId`] |
//! | 29 | `noise_key` | 32 bytes, the Fay's X25519 Noise static public key |
//! | 61 | `not_before` `u64` | Unix seconds, inclusive |
//! | 69 | `not_after` `u64` | Unix seconds, exclusive; must be > `not_before` |
//! | 77 | `fay_id` | `u8` length (1–255) + UTF-8, no control characters |
//! | … | grant count `u8` | 0–[`MAX_GRANTS`] |
//! | … | each grant | `resource_id` (`u8` length 1–255 + UTF-8) then the access-mode bit set `u8` (read 1, write 2, execute 4, configure 8; non-zero, no other bit) |
//! | … | signature | 64 bytes, Ed25519 over every byte before it |
//!
//! Grants are sorted by `resource_id` (bytewise, strictly ascending, so no
//! duplicates): a credential has exactly one encoding, and the parser refuses
//! any other. Nothing may follow the signature.
//!
//! This module owns the byte layout only; it never checks signatures or
//! time (that is [`Verifier`](super::Verifier)'s job).

use uuid::Uuid;

use super::{AccessModes, Descriptor, Grant, KeyId};

/// The first four bytes of every credential.
pub const MAGIC: [u8; 4] = *b"DTPC";
/// The only version this crate writes and reads.
pub const VERSION: u8 = 1;
/// Length of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// Most grants a credential may carry.
pub const MAX_GRANTS: usize = 64;
/// Longest `fay_id` or `resource_id`, in bytes.
pub const MAX_ID_LEN: usize = 255;
/// Longest possible encoded credential (the bound every reader may rely on).
pub const MAX_CREDENTIAL_LEN: usize =
    FIXED_LEN + 1 + MAX_ID_LEN + 1 + MAX_GRANTS * (1 + MAX_ID_LEN + 1) + SIGNATURE_LEN;
/// Bytes before `fay_id`.
const FIXED_LEN: usize = 77;

/// Why bytes are not a credential. Carries the field and its byte offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed credential: {kind} at `{field}` (byte {offset})")]
pub struct ParseError {
    /// What is wrong.
    pub kind: ParseErrorKind,
    /// The field where it was found (`grants[3].resource_id`, …).
    pub field: &'static str,
    /// Byte offset of that field from the start of the credential.
    pub offset: usize,
}

/// What is wrong with a malformed credential.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// The input is longer than [`MAX_CREDENTIAL_LEN`].
    #[error("credential is {0} bytes, more than the {MAX_CREDENTIAL_LEN}-byte maximum")]
    TooLong(usize),
    /// A field runs past the end of the input.
    #[error("input ends inside the field")]
    Truncated,
    /// The magic is not `DTPC`.
    #[error("not a DTP credential (bad magic)")]
    BadMagic,
    /// The version is not 1.
    #[error("unsupported credential version {0}")]
    UnsupportedVersion(u8),
    /// The descriptor id is not a UUID v4.
    #[error("descriptor id is not a UUID v4")]
    NotUuidV4,
    /// An identifier is empty.
    #[error("identifier is empty")]
    EmptyId,
    /// An identifier is longer than [`MAX_ID_LEN`] bytes (found when issuing).
    #[error("identifier is {0} bytes, more than {MAX_ID_LEN}")]
    IdTooLong(usize),
    /// An identifier is not UTF-8, or holds a control character.
    #[error("identifier is not printable UTF-8")]
    BadText,
    /// More grants than [`MAX_GRANTS`].
    #[error("{0} grants, more than the maximum of {MAX_GRANTS}")]
    TooManyGrants(usize),
    /// Grants are not strictly ascending by `resource_id`.
    #[error("grants are not sorted by resource_id, or one is repeated")]
    NotCanonical,
    /// The access-mode byte is zero or has unknown bits.
    #[error("access-mode bits {0:#04x} are empty or unknown")]
    BadModes(u8),
    /// `not_after` is not after `not_before`.
    #[error("not_after is not after not_before")]
    EmptyWindow,
    /// Bytes follow the signature.
    #[error("{0} bytes follow the signature")]
    TrailingBytes(usize),
}

/// Writes the signed part of a credential (everything but the signature).
/// The descriptor must be valid ([`check_descriptor`]); the issuer checks
/// before calling.
pub(crate) fn encode_descriptor(d: &Descriptor) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_LEN + 2 + d.fay_id.len() + d.grants.len() * 32);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(d.descriptor_id.as_bytes());
    out.extend_from_slice(&d.issuer_key_id.0);
    out.extend_from_slice(&d.noise_key);
    out.extend_from_slice(&d.not_before.to_be_bytes());
    out.extend_from_slice(&d.not_after.to_be_bytes());
    put_id(&mut out, &d.fay_id);
    // Lengths and counts were checked by `check_descriptor`; the casts cannot
    // truncate.
    out.push(u8::try_from(d.grants.len()).unwrap_or(u8::MAX));
    for g in &d.grants {
        put_id(&mut out, &g.resource_id);
        out.push(g.modes.bits());
    }
    out
}

fn put_id(out: &mut Vec<u8>, id: &str) {
    out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(id.as_bytes());
}

/// Checks what the parser would check, on a descriptor about to be signed,
/// so that the issuer never signs what a verifier would refuse.
pub(crate) fn check_descriptor(d: &Descriptor) -> Result<(), ParseError> {
    let err = |kind, field| {
        Err(ParseError {
            kind,
            field,
            offset: 0,
        })
    };
    if d.descriptor_id.get_version_num() != 4
        || d.descriptor_id.get_variant() != uuid::Variant::RFC4122
    {
        return err(ParseErrorKind::NotUuidV4, "descriptor_id");
    }
    if d.not_after <= d.not_before {
        return err(ParseErrorKind::EmptyWindow, "not_after");
    }
    check_id(&d.fay_id).or_else(|kind| err(kind, "fay_id"))?;
    if d.grants.len() > MAX_GRANTS {
        return err(ParseErrorKind::TooManyGrants(d.grants.len()), "grants");
    }
    for (i, g) in d.grants.iter().enumerate() {
        check_id(&g.resource_id).or_else(|kind| err(kind, "grants[].resource_id"))?;
        if g.modes.bits() == 0 {
            return err(ParseErrorKind::BadModes(0), "grants[].modes");
        }
        if i > 0 && d.grants[i - 1].resource_id.as_bytes() >= g.resource_id.as_bytes() {
            return err(ParseErrorKind::NotCanonical, "grants[].resource_id");
        }
    }
    Ok(())
}

fn check_id(id: &str) -> Result<(), ParseErrorKind> {
    if id.is_empty() {
        return Err(ParseErrorKind::EmptyId);
    }
    if id.len() > MAX_ID_LEN {
        return Err(ParseErrorKind::IdTooLong(id.len()));
    }
    if id.chars().any(char::is_control) {
        return Err(ParseErrorKind::BadText);
    }
    Ok(())
}

/// A parsed credential: the descriptor, the length of its signed prefix,
/// and the signature.
pub(crate) struct Parsed {
    pub(crate) descriptor: Descriptor,
    pub(crate) signed_len: usize,
    pub(crate) signature: [u8; SIGNATURE_LEN],
}

/// Parses a credential strictly. Never panics, whatever the input.
pub(crate) fn parse(input: &[u8]) -> Result<Parsed, ParseError> {
    if input.len() > MAX_CREDENTIAL_LEN {
        return Err(ParseError {
            kind: ParseErrorKind::TooLong(input.len()),
            field: "credential",
            offset: 0,
        });
    }
    let mut r = Reader { input, pos: 0 };
    let magic = r.array::<4>("magic")?;
    if magic != MAGIC {
        return Err(r.err_at(ParseErrorKind::BadMagic, "magic", 0));
    }
    let version = r.array::<1>("version")?[0];
    if version != VERSION {
        return Err(r.err_at(ParseErrorKind::UnsupportedVersion(version), "version", 4));
    }
    let id_at = r.pos;
    let descriptor_id = Uuid::from_bytes(r.array::<16>("descriptor_id")?);
    if descriptor_id.get_version_num() != 4 || descriptor_id.get_variant() != uuid::Variant::RFC4122
    {
        return Err(r.err_at(ParseErrorKind::NotUuidV4, "descriptor_id", id_at));
    }
    let issuer_key_id = KeyId(r.array::<8>("issuer_key_id")?);
    let noise_key = r.array::<32>("noise_key")?;
    let not_before = u64::from_be_bytes(r.array::<8>("not_before")?);
    let after_at = r.pos;
    let not_after = u64::from_be_bytes(r.array::<8>("not_after")?);
    if not_after <= not_before {
        return Err(r.err_at(ParseErrorKind::EmptyWindow, "not_after", after_at));
    }
    let fay_id = r.id("fay_id")?;
    let count_at = r.pos;
    let count = usize::from(r.array::<1>("grants.count")?[0]);
    if count > MAX_GRANTS {
        return Err(r.err_at(
            ParseErrorKind::TooManyGrants(count),
            "grants.count",
            count_at,
        ));
    }
    let mut grants: Vec<Grant> = Vec::with_capacity(count);
    for _ in 0..count {
        let rid_at = r.pos;
        let resource_id = r.id("grants[].resource_id")?;
        if let Some(prev) = grants.last()
            && prev.resource_id.as_bytes() >= resource_id.as_bytes()
        {
            return Err(r.err_at(ParseErrorKind::NotCanonical, "grants[].resource_id", rid_at));
        }
        let modes_at = r.pos;
        let bits = r.array::<1>("grants[].modes")?[0];
        let modes = AccessModes::from_bits(bits)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| r.err_at(ParseErrorKind::BadModes(bits), "grants[].modes", modes_at))?;
        grants.push(Grant { resource_id, modes });
    }
    let signed_len = r.pos;
    let signature = r.array::<SIGNATURE_LEN>("signature")?;
    if r.pos != input.len() {
        return Err(r.err_at(
            ParseErrorKind::TrailingBytes(input.len() - r.pos),
            "signature",
            r.pos,
        ));
    }
    Ok(Parsed {
        descriptor: Descriptor {
            descriptor_id,
            fay_id,
            noise_key,
            grants,
            not_before,
            not_after,
            issuer_key_id,
        },
        signed_len,
        signature,
    })
}

struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err_at(&self, kind: ParseErrorKind, field: &'static str, offset: usize) -> ParseError {
        ParseError {
            kind,
            field,
            offset,
        }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], ParseError> {
        let rest = self.input.get(self.pos..).unwrap_or_default();
        let Some(bytes) = rest.get(..n) else {
            return Err(self.err_at(ParseErrorKind::Truncated, field, self.pos));
        };
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ParseError> {
        let at = self.pos;
        let bytes = self.take(N, field)?;
        bytes.try_into().map_err(|_| ParseError {
            kind: ParseErrorKind::Truncated,
            field,
            offset: at,
        })
    }

    fn id(&mut self, field: &'static str) -> Result<String, ParseError> {
        let at = self.pos;
        let len = usize::from(self.array::<1>(field)?[0]);
        if len == 0 {
            return Err(self.err_at(ParseErrorKind::EmptyId, field, at));
        }
        let bytes = self.take(len, field)?;
        let text = std::str::from_utf8(bytes)
            .ok()
            .filter(|s| !s.chars().any(char::is_control))
            .ok_or(ParseError {
                kind: ParseErrorKind::BadText,
                field,
                offset: at + 1,
            })?;
        Ok(text.to_owned())
    }
}
