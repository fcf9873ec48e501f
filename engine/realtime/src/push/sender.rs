//! The whole send path for one hint to one subscription (SPEC RT-12):
//! encode the WEB_PUSH_HINT_V1, encrypt it (RFC 8291) and start a
//! [`Delivery`]. VAPID (RFC 8292) is signed per request by the driver's
//! [`VapidCache`](super::VapidCache).

use bytes::Bytes;

use super::delivery::{Delivery, DeliveryError, Message, RetryPolicy, Urgency};
use super::ece::{EncryptError, MAX_BODY_LEN, encrypt};
use super::hint::{HintError, WebPushHint};
use super::keys::EphemeralKey;
use super::subscription::{PushSubscription, SubscriptionId};

/// One send's inputs. The ephemeral key and salt are fresh random draws
/// of the caller for every message (RFC 8291 §3.1, RFC 8188 §2.1).
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// The hint to send.
    pub hint: &'a WebPushHint,
    /// The registry ID of `subscription` (reported back on 404/410).
    pub subscription_id: SubscriptionId,
    /// Where and for whom to encrypt.
    pub subscription: &'a PushSubscription,
    /// The message's ephemeral ECDH key.
    pub ephemeral: &'a EphemeralKey,
    /// The message's 16-byte salt.
    pub salt: [u8; 16],
    /// The `Urgency` header.
    pub urgency: Urgency,
    /// An optional `Topic` header.
    pub topic: Option<String>,
    /// The retry bounds.
    pub policy: RetryPolicy,
}

/// Why a send was not prepared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// The hint breaks WEB_PUSH_HINT_V1.
    #[error(transparent)]
    Hint(#[from] HintError),
    /// The hint's `expiresAt` is not after `now`.
    #[error("hint already expired")]
    Expired,
    /// Encryption refused.
    #[error(transparent)]
    Encrypt(#[from] EncryptError),
    /// The delivery refused its options.
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

/// SPEC RT-12 send path at `now_ms` (unix ms): the hint becomes one
/// `aes128gcm` record (`rs` = 4096, no padding) and the delivery gives up
/// at the hint's `expiresAt`.
pub fn prepare(out: Outgoing<'_>, now_ms: u64) -> Result<Delivery, PrepareError> {
    let plaintext = out.hint.encode()?;
    let expires_at_ms = out.hint.expires_at_ms;
    if now_ms >= expires_at_ms {
        return Err(PrepareError::Expired);
    }
    let body = encrypt(
        out.subscription.keys(),
        &plaintext,
        out.ephemeral,
        &out.salt,
        MAX_BODY_LEN as u32,
        0,
    )?;
    let message = Message {
        body: Bytes::from(body),
        urgency: out.urgency,
        topic: out.topic,
    };
    Ok(Delivery::new(
        out.subscription_id,
        out.subscription.endpoint(),
        message,
        expires_at_ms,
        out.policy,
    )?)
}
