//! VAPID (RFC 8292): the application server identifies itself to the push
//! service with an ES256 JWT (RFC 7519, RFC 7515) signed by a key that
//! never leaves the server (SPEC RT-12, seed §8.3).

use std::fmt;

use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};

use super::b64;
use super::keys::{KeyError, P256_POINT_LEN, uncompressed};

/// RFC 8292 §2: `exp` must not be more than 24 hours from the time of the
/// request.
pub const MAX_VAPID_LIFETIME_SECS: u64 = 24 * 60 * 60;

/// Longest `sub` accepted (a bound of ours; RFC 8292 sets none).
pub const MAX_SUBJECT_LEN: usize = 256;

/// Longest `aud` accepted: `https://` plus a 253-byte DNS name and `:65535`.
pub const MAX_AUDIENCE_LEN: usize = 8 + 253 + 6;

/// The JOSE header of every VAPID JWT (RFC 8292 §2: ES256).
const JWT_HEADER: &str = r#"{"typ":"JWT","alg":"ES256"}"#;

/// The application server's VAPID signing key (RFC 8292 §3.2), an ECDSA
/// P-256 key. `Debug` shows only the public key: the private scalar is never
/// printed, serialised or returned (seed §8.3: it stays on the server).
#[derive(Clone)]
pub struct VapidKey {
    key: SigningKey,
    public: [u8; P256_POINT_LEN],
}

/// Why no VAPID header was produced (RFC 8292 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VapidError {
    /// `aud` is not an `https` origin (`https://host[:port]`, no path,
    /// userinfo, query or fragment).
    #[error("audience is not an https origin")]
    InvalidAudience,
    /// `sub` is not a `mailto:` or `https:` URI of at most 256 visible ASCII
    /// characters (without `"` or `\`).
    #[error("subject is not a mailto: or https: URI")]
    InvalidSubject,
    /// `exp` is more than 24 hours after `now` (RFC 8292 §2).
    #[error("expiry {exp} is more than 24 h after {now}")]
    ExpiryTooFar {
        /// The requested expiry, unix seconds.
        exp: u64,
        /// The caller's current time, unix seconds.
        now: u64,
    },
    /// `exp` is not after `now`: the push service would refuse the token.
    #[error("expiry {exp} is not after {now}")]
    AlreadyExpired {
        /// The requested expiry, unix seconds.
        exp: u64,
        /// The caller's current time, unix seconds.
        now: u64,
    },
}

impl VapidKey {
    /// The key whose private scalar is `private` (big-endian, as in a JWK's
    /// `d`); the caller loads it from its secret store.
    pub fn from_bytes(private: &[u8; 32]) -> Result<Self, KeyError> {
        let key = SigningKey::from_slice(private).map_err(|_| KeyError::InvalidPrivateKey)?;
        let public = uncompressed(&p256::PublicKey::from(key.verifying_key()));
        Ok(Self { key, public })
    }

    /// The uncompressed public key: the browser's `applicationServerKey`
    /// and the header's `k` (RFC 8292 §3.2).
    pub fn public_key(&self) -> &[u8; P256_POINT_LEN] {
        &self.public
    }

    /// RFC 8292 §3 (SPEC RT-12): the `Authorization` header value
    /// `vapid t=<JWT>, k=<public key>`, whose JWT carries exactly the claims
    /// `aud` (the push service origin), `exp` (unix seconds, after `now_secs`
    /// and at most 24 h after it) and `sub` (a `mailto:` or `https:`
    /// contact). ES256 signatures are deterministic (RFC 6979), so no
    /// randomness is needed.
    pub fn header(
        &self,
        audience: &str,
        subject: &str,
        exp_secs: u64,
        now_secs: u64,
    ) -> Result<String, VapidError> {
        if !is_https_origin(audience) {
            return Err(VapidError::InvalidAudience);
        }
        if !is_contact(subject) {
            return Err(VapidError::InvalidSubject);
        }
        if exp_secs <= now_secs {
            return Err(VapidError::AlreadyExpired {
                exp: exp_secs,
                now: now_secs,
            });
        }
        if exp_secs - now_secs > MAX_VAPID_LIFETIME_SECS {
            return Err(VapidError::ExpiryTooFar {
                exp: exp_secs,
                now: now_secs,
            });
        }
        // Both strings were checked to hold no `"` or `\`: no escaping needed.
        let claims = format!(r#"{{"aud":"{audience}","exp":{exp_secs},"sub":"{subject}"}}"#);
        let signing_input = format!(
            "{}.{}",
            b64::encode(JWT_HEADER.as_bytes()),
            b64::encode(claims.as_bytes())
        );
        let signature: Signature = self.key.sign(signing_input.as_bytes());
        Ok(format!(
            "vapid t={signing_input}.{}, k={}",
            b64::encode(&signature.to_bytes()),
            b64::encode(&self.public)
        ))
    }
}

impl fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VapidKey")
            .field("public", &b64::encode(&self.public))
            .finish_non_exhaustive()
    }
}

/// SPEC RT-12 convenience: [`VapidKey::header`].
pub fn vapid_header(
    key: &VapidKey,
    audience: &str,
    subject: &str,
    exp_secs: u64,
    now_secs: u64,
) -> Result<String, VapidError> {
    key.header(audience, subject, exp_secs, now_secs)
}

/// `https://host[:port]`: a DNS name or IPv4 literal of `[A-Za-z0-9.-]`
/// (1–253 bytes), an optional port 1–65535, nothing after.
pub(crate) fn is_https_origin(s: &str) -> bool {
    if s.len() > MAX_AUDIENCE_LEN {
        return false;
    }
    let Some(authority) = s.strip_prefix("https://") else {
        return false;
    };
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let host_ok = (1..=253).contains(&host.len())
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && !host.starts_with(['.', '-'])
        && !host.ends_with(['.', '-']);
    let port_ok = port.is_none_or(|p| {
        (1..=5).contains(&p.len())
            && p.bytes().all(|b| b.is_ascii_digit())
            && !p.starts_with('0')
            && p.parse::<u16>().is_ok()
    });
    host_ok && port_ok
}

/// RFC 8292 §2.1: `sub` is a `mailto:` or `https:` URI; bounded to visible
/// ASCII without `"` and `\` so it embeds in JSON unescaped.
fn is_contact(s: &str) -> bool {
    let rest = s
        .strip_prefix("mailto:")
        .or_else(|| s.strip_prefix("https://"));
    s.len() <= MAX_SUBJECT_LEN
        && rest.is_some_and(|r| !r.is_empty())
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
}
