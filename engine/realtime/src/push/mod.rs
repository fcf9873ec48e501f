//! Web Push sender, backend side (SPEC RT-12, seed §8), sans-IO: no
//! sockets, clocks or randomness. Times are unix seconds or milliseconds
//! given by the caller; every random value (ephemeral ECDH key, salt,
//! association epoch) is drawn by the caller and passed in.
//!
//! - [`encrypt`] / [`decrypt`]: RFC 8291 message encryption in the RFC 8188
//!   `aes128gcm` coding, one record, at most 4096 bytes.
//! - [`VapidKey`] / [`vapid_header`] / [`VapidCache`]: RFC 8292
//!   `Authorization: vapid t=…, k=…` with an ES256 JWT of exactly `aud`,
//!   `exp`, `sub`, signed once per push service origin and reused until
//!   shortly before it expires.
//! - [`WebPushHint`]: the WEB_PUSH_HINT_V1 payload codec.
//! - [`Registry`]: subscriptions bound to a principal's association epoch,
//!   idempotent revoke, provider cleanup, ceilings.
//! - [`Delivery`]: one message's request and the provider-answer state
//!   machine (201/202 delivered, 404/410 gone, 429/5xx bounded retry,
//!   400/403/413 rejected, full-jitter backoff with the caller's random
//!   draws); [`prepare`] chains hint, encryption and delivery.
//! - [`PushTarget`] / [`write_request`] / [`is_public_address`]: the
//!   HTTP/1.1 request bytes and the SSRF guard a sender applies to every
//!   address an endpoint resolves to.
//!
//! This module owns no HTTP client, key store or database: it never sees a
//! socket (the sender that does is `dtp_gateway::push`), and the VAPID private key enters as bytes and leaves only as
//! signatures. It must never log or `Debug`-print endpoints, `p256dh`,
//! `auth`, VAPID tokens or private keys (seed §12.3).
//!
//! # Choices the seed leaves open (binding for sender and worker)
//!
//! - Hint identifiers (`notificationType`, `notificationId`,
//!   `associationEpoch`, `releaseEpoch`, `routeIntent`) are 1–128 bytes of
//!   `[A-Za-z0-9._:-]`, the realtime codec's identifier class.
//! - Hint timestamps are exactly `YYYY-MM-DDTHH:MM:SS.sssZ` (UTC,
//!   milliseconds, what `Date.prototype.toISOString()` writes; years
//!   1970–9999), so one instant has one spelling; `issuedAt < expiresAt ≤
//!   issuedAt + 24 h`.
//! - Decode order: JSON guard (3 KiB, UTF-8, syntax, repeated keys, an
//!   object) → unknown keys (so `{"web_push": 8030, …}` is `UnknownKey`) →
//!   missing keys → `protocol` → members in seed order → lifetime.
//! - Provider answers outside the RT-12 list (e.g. 200, 401, 3xx) end the
//!   delivery as [`Outcome::Unexpected`], without retry.

mod b64;
mod delivery;
mod ece;
mod hint;
mod keys;
mod registry;
mod sender;
mod subscription;
mod vapid;
mod wire;

#[cfg(test)]
mod tests_delivery;
#[cfg(test)]
mod tests_ece;
#[cfg(test)]
mod tests_hint;
#[cfg(test)]
mod tests_registry;
#[cfg(test)]
mod tests_vapid;

pub use crate::time::{MAX_TIMESTAMP_MS, format_timestamp, parse_retry_after, parse_timestamp};
pub use delivery::{
    Delivery, DeliveryError, Message, Outcome, Poll, PushRequest, RetryPolicy, Urgency,
    is_valid_topic,
};
pub use ece::{
    DecryptError, EncryptError, HEADER_LEN, MAX_BODY_LEN, MAX_PLAINTEXT_LEN, MIN_RECORD_SIZE,
    TAG_LEN, decrypt, encrypt,
};
pub use hint::{
    HINT_PROTOCOL, HintError, MAX_CLOCK_SKEW_MS, MAX_HINT_BYTES, MAX_HINT_LIFETIME_MS, WebPushHint,
};
pub use keys::{
    AUTH_SECRET_LEN, EphemeralKey, KeyError, P256_POINT_LEN, ReceiverKeys, ReceiverSecret,
};
pub use registry::{
    Associated, AssociationEpoch, RegistrationState, Registry, RegistryConfig, RegistryError,
    Revoked, Subscribed,
};
pub use sender::{Outgoing, PrepareError, prepare};
pub use subscription::{MAX_ENDPOINT_LEN, PushSubscription, SubscriptionError, SubscriptionId};
pub use vapid::{
    MAX_AUDIENCE_LEN, MAX_CACHED_AUDIENCES, MAX_SUBJECT_LEN, MAX_VAPID_LIFETIME_SECS,
    VAPID_REFRESH_BEFORE_SECS, VAPID_TOKEN_LIFETIME_SECS, VapidCache, VapidError, VapidKey,
    private_key_pem, vapid_header,
};
pub use wire::{PushTarget, is_public_address, write_request};

/// base64url without padding (RFC 4648 §5), as Web Push keys are written.
pub fn base64url_encode(bytes: &[u8]) -> String {
    b64::encode(bytes)
}

/// base64url decoding (RFC 4648 §5; unpadded or exactly padded, canonical
/// trailing bits); `None` for anything else.
pub fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    b64::decode(text)
}
