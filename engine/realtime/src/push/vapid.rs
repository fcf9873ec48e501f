//! VAPID (RFC 8292): the application server identifies itself to the push
//! service with an ES256 JWT (RFC 7519, RFC 7515) signed by a key that
//! never leaves the server (SPEC RT-12, seed §8.3).

use std::collections::HashMap;
use std::fmt;

use p256::SecretKey;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};

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

    /// The key in a text file: PEM PKCS#8 (`PRIVATE KEY`, what `dtp cred
    /// vapid-key` and `py_vapid` write), PEM SEC1 (`EC PRIVATE KEY`, what
    /// `openssl ecparam -genkey` writes), or the 32-byte scalar in base64url
    /// on one line (what `web-push generate-vapid-keys` prints).
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let trimmed = text.trim();
        let secret = if trimmed.contains("-----BEGIN EC PRIVATE KEY-----") {
            SecretKey::from_sec1_pem(trimmed).map_err(|_| KeyError::InvalidPrivateKey)?
        } else if trimmed.contains("-----BEGIN") {
            SecretKey::from_pkcs8_pem(trimmed).map_err(|_| KeyError::InvalidPrivateKey)?
        } else {
            let raw = b64::decode(trimmed).ok_or(KeyError::NotBase64Url)?;
            SecretKey::from_slice(&raw).map_err(|_| KeyError::InvalidPrivateKey)?
        };
        let key = SigningKey::from(&secret);
        let public = uncompressed(&secret.public_key());
        Ok(Self { key, public })
    }

    /// The uncompressed public key: the browser's `applicationServerKey`
    /// and the header's `k` (RFC 8292 §3.2).
    pub fn public_key(&self) -> &[u8; P256_POINT_LEN] {
        &self.public
    }

    /// 32 bytes for `label`, HMAC-SHA-256 keyed by the private scalar: a
    /// secret that lives and dies with this key (a store of the
    /// registrations made for it, which no other key can send to), never
    /// the key itself.
    pub fn derive(&self, label: &[u8]) -> [u8; 32] {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.key.to_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(ring::hmac::sign(&key, label).as_ref());
        out
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

/// The PEM PKCS#8 text (`-----BEGIN PRIVATE KEY-----`) of the P-256 key
/// whose scalar is `private`: what `dtp cred vapid-key` writes, and what
/// [`VapidKey::from_text`] reads back.
pub fn private_key_pem(private: &[u8; 32]) -> Result<String, KeyError> {
    let secret = SecretKey::from_slice(private).map_err(|_| KeyError::InvalidPrivateKey)?;
    let pem = secret
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|_| KeyError::InvalidPrivateKey)?;
    Ok(pem.as_str().to_owned())
}

/// How long a cached VAPID token is valid: 12 h, half of RFC 8292's 24 h
/// ceiling, so a push service whose clock runs ahead still accepts it.
pub const VAPID_TOKEN_LIFETIME_SECS: u64 = 12 * 60 * 60;

/// A cached token is replaced once it has less than this left (10 min), so
/// no request leaves with a token about to expire in flight.
pub const VAPID_REFRESH_BEFORE_SECS: u64 = 10 * 60;

/// Push service origins a [`VapidCache`] holds tokens for at most; past it
/// the expired ones go, then the one expiring first.
pub const MAX_CACHED_AUDIENCES: usize = 256;

/// SPEC RT-12, RFC 8292 §2: VAPID `Authorization` values cached per push
/// service origin (`aud`), each signed once and reused until
/// [`VAPID_REFRESH_BEFORE_SECS`] before its expiry. Sans-IO: the caller
/// passes the time. `Debug` shows counts only (tokens are not logged).
pub struct VapidCache {
    key: VapidKey,
    subject: String,
    tokens: HashMap<String, (u64, String)>,
}

impl VapidCache {
    /// A cache signing with `key` for the contact `subject` (`mailto:` or
    /// `https:`), checked here so a bad subject fails at start-up.
    pub fn new(key: VapidKey, subject: &str) -> Result<Self, VapidError> {
        if !is_contact(subject) {
            return Err(VapidError::InvalidSubject);
        }
        Ok(Self {
            key,
            subject: subject.to_owned(),
            tokens: HashMap::new(),
        })
    }

    /// The signing key.
    pub fn key(&self) -> &VapidKey {
        &self.key
    }

    /// The `Authorization` value for a request to `audience` (the
    /// endpoint's origin) at `now_secs`: the cached one while it has more
    /// than [`VAPID_REFRESH_BEFORE_SECS`] left, else a new one valid for
    /// [`VAPID_TOKEN_LIFETIME_SECS`].
    pub fn authorization(&mut self, audience: &str, now_secs: u64) -> Result<&str, VapidError> {
        let fresh = self
            .tokens
            .get(audience)
            .is_some_and(|(exp, _)| *exp > now_secs.saturating_add(VAPID_REFRESH_BEFORE_SECS));
        if !fresh {
            let exp = now_secs.saturating_add(VAPID_TOKEN_LIFETIME_SECS);
            let header = self.key.header(audience, &self.subject, exp, now_secs)?;
            if !self.tokens.contains_key(audience) && self.tokens.len() >= MAX_CACHED_AUDIENCES {
                self.evict(now_secs);
            }
            self.tokens.insert(audience.to_owned(), (exp, header));
        }
        Ok(self
            .tokens
            .get(audience)
            .map(|(_, header)| header.as_str())
            .unwrap_or_default())
    }

    /// Origins with a cached token.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether no token is cached.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    fn evict(&mut self, now_secs: u64) {
        self.tokens
            .retain(|_, (exp, _)| *exp > now_secs.saturating_add(VAPID_REFRESH_BEFORE_SECS));
        if self.tokens.len() >= MAX_CACHED_AUDIENCES {
            let first = self
                .tokens
                .iter()
                .min_by_key(|(_, (exp, _))| *exp)
                .map(|(aud, _)| aud.clone());
            if let Some(aud) = first {
                self.tokens.remove(&aud);
            }
        }
    }
}

impl fmt::Debug for VapidCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VapidCache")
            .field("key", &self.key)
            .field("audiences", &self.tokens.len())
            .finish_non_exhaustive()
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
