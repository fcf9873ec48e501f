//! A browser's push subscription as the backend stores it (SPEC RT-12,
//! seed §8.3): the push service endpoint and the RFC 8291 receiver keys.
//! All three are delivery capability material: `Debug` redacts them.

use std::fmt;

use super::keys::{KeyError, ReceiverKeys};
use super::vapid::is_https_origin;

/// Longest endpoint URL accepted (a bound of ours; real endpoints are a few
/// hundred bytes).
pub const MAX_ENDPOINT_LEN: usize = 2048;

/// A registered subscription's opaque ID, issued by the
/// [`Registry`](super::Registry) (seed §8.3: "opaque registration ID").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriptionId(pub(crate) u64);

impl SubscriptionId {
    /// The number behind the ID (for storage keys; carries no meaning).
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The ID whose number is `n`, as [`get`](Self::get) gave it (read back
    /// from storage, or a test's).
    pub const fn from_raw(n: u64) -> Self {
        Self(n)
    }
}

/// Why a subscription was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    /// The endpoint is not `https://host[:port]/…` of at most 2048 visible
    /// ASCII bytes without a fragment (RFC 8030 §5: push resources are
    /// HTTPS).
    #[error("endpoint is not an https URL")]
    InvalidEndpoint,
    /// `p256dh` or `auth` refused.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// `PushSubscription.toJSON()` minus `expirationTime`: the endpoint and
/// the RFC 8291 keys (SPEC RT-12).
#[derive(Clone, PartialEq, Eq)]
pub struct PushSubscription {
    endpoint: String,
    keys: ReceiverKeys,
}

impl PushSubscription {
    /// A subscription from its endpoint and already decoded keys.
    pub fn new(endpoint: &str, keys: ReceiverKeys) -> Result<Self, SubscriptionError> {
        audience_of(endpoint).ok_or(SubscriptionError::InvalidEndpoint)?;
        Ok(Self {
            endpoint: endpoint.to_owned(),
            keys,
        })
    }

    /// A subscription from the browser's JSON fields: `endpoint`,
    /// `keys.p256dh` and `keys.auth` (base64url).
    pub fn from_parts(endpoint: &str, p256dh: &str, auth: &str) -> Result<Self, SubscriptionError> {
        Self::new(endpoint, ReceiverKeys::from_base64url(p256dh, auth)?)
    }

    /// The push resource URL a message is POSTed to (RFC 8030 §5).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The receiver keys (RFC 8291 §3).
    pub fn keys(&self) -> &ReceiverKeys {
        &self.keys
    }

    /// The endpoint's origin: the VAPID `aud` claim (RFC 8292 §2).
    pub fn audience(&self) -> &str {
        audience_of(&self.endpoint).unwrap_or_default()
    }
}

impl fmt::Debug for PushSubscription {
    // Seed §12.3: endpoint, p256dh and auth are never logged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushSubscription").finish_non_exhaustive()
    }
}

/// The `https://host[:port]` prefix of a valid endpoint, `None` for an
/// invalid one.
pub(crate) fn audience_of(endpoint: &str) -> Option<&str> {
    if endpoint.len() > MAX_ENDPOINT_LEN
        || !endpoint.bytes().all(|b| b.is_ascii_graphic() && b != b'#')
    {
        return None;
    }
    let after_scheme = endpoint.strip_prefix("https://")?;
    let cut = after_scheme
        .find(['/', '?'])
        .map_or(endpoint.len(), |i| i + "https://".len());
    let origin = endpoint.get(..cut)?;
    is_https_origin(origin).then_some(origin)
}
