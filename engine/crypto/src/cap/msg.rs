//! The CAP payloads carried inside the Noise messages, and the sealing of
//! the final outcome message.
//!
//! | # | direction | Noise tokens | payload |
//! |---|---|---|---|
//! | 1 | Fay → terminal | `e` | `Offer`, in clear but bound by the handshake hash |
//! | 2 | terminal → Fay | `e, ee, s, es` | empty (encrypted; reserved) |
//! | 3 | Fay → terminal | `s, se` | the Fay's credential ([`crate::cred::wire`]), encrypted |
//! | 4 | terminal → Fay | — | `Outcome`, sealed with the outcome key |
//!
//! Offer: `version u8 (1)`, `count u8 (1–8)`, `count` algorithm ids
//! (`dtp_codec::AeadAlgorithm` bytes; unknown ids are skipped so a newer
//! Fay can offer more, repeated ids are refused).
//!
//! Outcome: `0x00 algorithm u8 session_id[16]` (accepted) or
//! `0x01 code u16` (rejected, a CAP code 2001–2006).
//!
//! Message 4 is sealed with ChaCha20-Poly1305 under
//! `HKDF-SHA256(salt = handshake hash, ikm = responder→initiator split key,
//! info = "DTP-CAP/1 outcome")`, nonce zero, associated data the handshake
//! hash. A key of its own (not the split key itself) means the AEAD layer
//! that takes the split keys can use every nonce without colliding with
//! this message.

use dtp_codec::{AeadAlgorithm, ErrorCode};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use uuid::Uuid;

use super::CapError;

/// The CAP payload version.
pub(crate) const VERSION: u8 = 1;
/// Most algorithm ids an offer may list.
pub(crate) const MAX_OFFER: usize = 8;
/// Longest message 1: ephemeral key plus the largest offer.
pub(crate) const MAX_MSG1: usize = 32 + 2 + MAX_OFFER;
/// Exact length of message 2: `e`, encrypted `s`, empty encrypted payload.
pub(crate) const MSG2_LEN: usize = 32 + 32 + 16 + 16;
/// Longest message 3: encrypted `s` plus the largest credential and its tag.
pub(crate) const MAX_MSG3: usize = 32 + 16 + crate::cred::MAX_CREDENTIAL_LEN + 16;
/// Longest message 4 (an acceptance).
pub(crate) const MAX_MSG4: usize = 1 + 1 + 16 + 16;

/// The Fay's AEAD preferences, in its order.
pub(crate) fn encode_offer(algorithms: &[AeadAlgorithm]) -> Vec<u8> {
    let mut out = vec![VERSION, u8::try_from(algorithms.len()).unwrap_or(0)];
    out.extend(algorithms.iter().map(|a| *a as u8));
    out
}

/// Parses an offer; returns the known algorithms in the Fay's order.
pub(crate) fn parse_offer(payload: &[u8]) -> Result<Vec<AeadAlgorithm>, CapError> {
    let bad = |reason, offset| CapError::Malformed {
        message: 1,
        reason,
        offset,
    };
    let (&version, rest) = payload.split_first().ok_or(bad("offer is empty", 0))?;
    if version != VERSION {
        return Err(bad("unsupported CAP version", 0));
    }
    let (&count, ids) = rest.split_first().ok_or(bad("offer has no count", 1))?;
    let count = usize::from(count);
    if count == 0 || count > MAX_OFFER {
        return Err(bad("offer lists 0 or more than 8 algorithms", 1));
    }
    if ids.len() != count {
        return Err(bad("offer length does not match its count", 2));
    }
    let mut known = Vec::with_capacity(count);
    for (i, &id) in ids.iter().enumerate() {
        if ids[..i].contains(&id) {
            return Err(bad("offer repeats an algorithm", 2 + i));
        }
        known.extend(AeadAlgorithm::from_u8(id));
    }
    Ok(known)
}

/// What the terminal tells the Fay in message 4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Accepted with these session parameters.
    Accepted {
        algorithm: AeadAlgorithm,
        session_id: Uuid,
    },
    /// Refused with this code.
    Rejected { code: ErrorCode },
}

fn outcome_key(hash: &[u8; 32], r2i: &[u8; 32]) -> Result<LessSafeKey, CapError> {
    let info: [&[u8]; 1] = [b"DTP-CAP/1 outcome"];
    let prk = Salt::new(HKDF_SHA256, hash).extract(r2i);
    let okm = prk
        .expand(&info, &CHACHA20_POLY1305)
        .map_err(|_| CapError::Internal("outcome key derivation"))?;
    Ok(LessSafeKey::new(UnboundKey::from(okm)))
}

/// Seals the outcome (message 4).
pub(crate) fn seal_outcome(
    outcome: Outcome,
    hash: &[u8; 32],
    r2i: &[u8; 32],
) -> Result<Vec<u8>, CapError> {
    let mut buf = match outcome {
        Outcome::Accepted {
            algorithm,
            session_id,
        } => {
            let mut v = vec![0, algorithm as u8];
            v.extend_from_slice(session_id.as_bytes());
            v
        }
        Outcome::Rejected { code } => {
            let mut v = vec![1];
            v.extend_from_slice(&code.0.to_be_bytes());
            v
        }
    };
    outcome_key(hash, r2i)?
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(hash),
            &mut buf,
        )
        .map_err(|_| CapError::Internal("outcome sealing"))?;
    Ok(buf)
}

/// Opens and parses message 4.
pub(crate) fn open_outcome(
    msg: &[u8],
    hash: &[u8; 32],
    r2i: &[u8; 32],
) -> Result<Outcome, CapError> {
    let mut buf = msg.to_vec();
    let plain = outcome_key(hash, r2i)?
        .open_in_place(
            Nonce::assume_unique_for_key([0; 12]),
            Aad::from(hash),
            &mut buf,
        )
        .map_err(|_| CapError::Decrypt { message: 4 })?;
    let bad = |reason, offset| CapError::Malformed {
        message: 4,
        reason,
        offset,
    };
    match plain {
        [0, alg, sid @ ..] => {
            let algorithm = AeadAlgorithm::from_u8(*alg).ok_or(bad("unknown algorithm", 1))?;
            let sid: [u8; 16] = sid.try_into().map_err(|_| bad("session id length", 2))?;
            Ok(Outcome::Accepted {
                algorithm,
                session_id: Uuid::from_bytes(sid),
            })
        }
        [1, hi, lo] => {
            let code = ErrorCode(u16::from_be_bytes([*hi, *lo]));
            if !(ErrorCode::CAP_FAILED.0..=ErrorCode::UNKNOWN_ISSUER.0).contains(&code.0) {
                return Err(bad("rejection code is not a CAP code", 1));
            }
            Ok(Outcome::Rejected { code })
        }
        _ => Err(bad("unknown outcome", 0)),
    }
}
