//! The browser's session cookie (SPEC RT-8, RT-9): `POST /v1/login` with a
//! bearer token answers with a cookie that is a random, expiring session
//! id, never the token itself. The id names the client on this server (its
//! grants stay in the server's configuration) and is signed with a key
//! drawn at start-up, so no table of sessions has to be shared between the
//! shards or bounded: a forged, altered or expired id is refused, and a
//! restart ends every session (browsers log in again).
//!
//! An id is `v1.<client>.<expires>.<nonce>.<tag>`: the client's index, its
//! expiry in seconds since the key was drawn (the monotonic clock, so a
//! wall-clock jump changes nothing), 16 random bytes and an HMAC-SHA256
//! tag over the rest, in hex.

use std::fmt;
use std::time::{Duration, Instant};

use ring::hmac;

use crate::secret::same_secret;

/// How long a login lasts (8 hours: a working day).
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// The key that signs session ids, and the instant expiries count from.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginKey {
    key: [u8; 32],
    base: Instant,
}

impl fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoginKey(..)")
    }
}

impl LoginKey {
    /// A key of 32 random bytes (pass the OS's randomness), with expiries
    /// counted from `base`.
    pub fn new(random: [u8; 32], base: Instant) -> Self {
        Self { key: random, base }
    }

    fn tag(&self, signed: &str) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.key);
        hex(hmac::sign(&key, signed.as_bytes()).as_ref())
    }

    /// A session id for client `client`, issued at `now`, valid for
    /// [`LOGIN_LIFETIME`]; `nonce` is 16 random bytes.
    pub fn issue(&self, client: usize, now: Instant, nonce: [u8; 16]) -> String {
        let expires = (now + LOGIN_LIFETIME)
            .saturating_duration_since(self.base)
            .as_secs();
        let signed = format!("v1.{client}.{expires}.{}", hex(&nonce));
        let tag = self.tag(&signed);
        format!("{signed}.{tag}")
    }

    /// The client a session id names, if it is one this key issued and it
    /// has not expired at `now`. The tag is compared in constant time.
    pub fn verify(&self, id: &str, now: Instant) -> Option<usize> {
        let (signed, tag) = id.rsplit_once('.')?;
        if !same_secret(tag.as_bytes(), self.tag(signed).as_bytes()) {
            return None;
        }
        let mut parts = signed.split('.');
        let (Some("v1"), Some(client), Some(expires)) = (parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let expires = self.base + Duration::from_secs(expires.parse().ok()?);
        (now < expires).then(|| client.parse().ok()).flatten()
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC RT-9: the id names its client until it expires; an altered,
    /// foreign or expired id names nobody; the id never carries a token.
    #[test]
    fn a_session_id_is_signed_expiring_and_names_its_client() {
        let t = Instant::now();
        let key = LoginKey::new([1; 32], t);
        let id = key.issue(3, t, [9; 16]);
        assert_eq!(key.verify(&id, t), Some(3));
        assert_eq!(
            key.verify(&id, t + LOGIN_LIFETIME - Duration::from_secs(1)),
            Some(3)
        );
        assert_eq!(key.verify(&id, t + LOGIN_LIFETIME), None, "expired");
        let other = LoginKey::new([2; 32], t);
        assert_eq!(other.verify(&id, t), None, "another key's");
        let forged = id.replacen("v1.3.", "v1.0.", 1);
        assert_eq!(key.verify(&forged, t), None, "altered");
        assert_eq!(key.verify("", t), None);
        assert_eq!(key.verify("v1.3", t), None);
        assert_ne!(key.issue(3, t, [8; 16]), id, "random per login");
        assert_eq!(
            format!("{key:?}"),
            "LoginKey(..)",
            "the key is never printed"
        );
    }
}
