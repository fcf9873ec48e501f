//! One notification's delivery to one subscription (SPEC RT-12, seed §8.6):
//! the request to send as plain data, and what each provider answer means —
//! delivered, subscription gone (cleanup), bounded retry, or failed.
//!
//! Driver loop (sans-IO; `now_ms` is unix milliseconds and `random` a
//! uniform 64-bit draw, both from the caller):
//!
//! | call | when |
//! |---|---|
//! | `poll(now)` → `Transmit(req)` | send `req` now, with an `Authorization` from the [`VapidCache`](super::VapidCache) |
//! | `on_response(now, status, retry_after, random)` | the push service answered |
//! | `on_transport_error(now, random)` | no answer (connect, TLS, reset, timeout) |
//! | `poll(now)` → `Wait { until_ms }` | poll again then |
//! | `poll(now)` → `Done(outcome)` | finished; on `Gone`, mark the subscription gone in the [`Registry`](super::Registry) |
//!
//! Retries (429, 5xx, no answer) wait a full-jitter backoff — uniform in
//! `0 ..= min(max_backoff, base × 2^(attempt-1))` — or the push service's
//! `Retry-After`, whichever is later, and stop at `max_attempts` or at the
//! hint's expiry, whichever comes first.

use std::fmt;

use bytes::Bytes;

use super::subscription::SubscriptionId;
use crate::time::parse_retry_after;

/// RFC 8030 §5.3 `Urgency`. Seed §8.5: `high` is never a default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Urgency {
    /// `very-low`: on power and Wi-Fi only.
    VeryLow,
    /// `low`: on power or Wi-Fi.
    Low,
    /// `normal` (the default).
    #[default]
    Normal,
    /// `high`: even on low battery.
    High,
}

impl Urgency {
    /// The urgency a request names (`very-low`, `low`, `normal`, `high`,
    /// exactly); `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::VeryLow, Self::Low, Self::Normal, Self::High]
            .into_iter()
            .find(|u| u.as_str() == text)
    }

    /// The header value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::VeryLow => "very-low",
            Self::Low => "low",
            Self::Normal => "normal",
            Self::High => "high",
        }
    }
}

/// The retry bounds of a [`Delivery`] (SPEC RT-12 "429/5xx bounded retry").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests sent at most, the first included (≥ 1).
    pub max_attempts: u32,
    /// The jitter's ceiling after the first retryable failure; doubles
    /// after each (the wait itself is uniform below it: full jitter).
    pub base_backoff_ms: u64,
    /// Ceiling of the doubling (a `Retry-After` may ask for longer).
    pub max_backoff_ms: u64,
    /// Ceiling of the `TTL` header; it is also never past the hint's expiry.
    pub max_ttl_secs: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff_ms: 1_000,
            max_backoff_ms: 60_000,
            max_ttl_secs: 24 * 60 * 60,
        }
    }
}

/// What to send, apart from the endpoint and the VAPID token (RFC 8030 §5,
/// RFC 8291 §4). The `Authorization` is not part of it: the driver signs it
/// per request from a [`VapidCache`](super::VapidCache), so a retry hours
/// later never carries an expired token. `Debug` does not show the body.
#[derive(Clone, PartialEq, Eq)]
pub struct Message {
    /// The `aes128gcm` body ([`encrypt`](super::encrypt)).
    pub body: Bytes,
    /// The `Urgency` header.
    pub urgency: Urgency,
    /// An optional `Topic` (RFC 8030 §5.4: ≤ 32 base64url characters), to
    /// replace an undelivered earlier message with the same topic.
    pub topic: Option<String>,
}

/// An HTTP request for the caller to send, after adding `Authorization`
/// (SPEC RT-12; [`write_request`](super::write_request) writes the whole
/// HTTP/1.1 request). `Debug` shows the header names and the body length
/// only: the endpoint is never logged (seed §12.3).
#[derive(Clone, PartialEq, Eq)]
pub struct PushRequest {
    /// Always `POST` (RFC 8030 §5).
    pub method: &'static str,
    /// The subscription endpoint.
    pub url: String,
    /// `TTL`, `Content-Encoding: aes128gcm`, `Urgency`, `Topic` when set,
    /// in that order. `Authorization`, `Host` and `Content-Length` are the
    /// HTTP client's.
    pub headers: Vec<(&'static str, String)>,
    /// The encrypted body.
    pub body: Bytes,
}

/// How a delivery ended (SPEC RT-12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// 201 or 202: the push service accepted the message.
    Delivered {
        /// The status.
        status: u16,
    },
    /// 404 or 410: the subscription is gone; remove it (seed §8.3).
    Gone {
        /// The subscription to remove.
        subscription: SubscriptionId,
        /// The status.
        status: u16,
    },
    /// 400, 403 or 413: the request is wrong; retrying cannot help.
    Rejected {
        /// The status.
        status: u16,
    },
    /// Any other status (e.g. 401, 3xx, 200): not retried.
    Unexpected {
        /// The status.
        status: u16,
    },
    /// 429, 5xx or transport failures used up [`RetryPolicy::max_attempts`].
    RetriesExhausted {
        /// Requests sent.
        attempts: u32,
        /// The last status, `None` when the last attempt got no response.
        last_status: Option<u16>,
    },
    /// The hint's `expiresAt` came (or the next retry would come after it)
    /// before the message was accepted: sending it later is pointless.
    Expired {
        /// Requests sent.
        attempts: u32,
    },
}

/// What the driver does next (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Poll {
    /// Send this request now and report its answer.
    Transmit(PushRequest),
    /// Nothing to do before `until_ms`.
    Wait {
        /// Unix milliseconds.
        until_ms: u64,
    },
    /// A request is outstanding: report its answer first.
    AwaitingResponse,
    /// Finished.
    Done(Outcome),
}

/// Why a [`Delivery`] was not created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// `max_attempts` is 0.
    #[error("retry policy allows no attempt")]
    NoAttempts,
    /// `Topic` is empty, longer than 32 or outside base64url (RFC 8030 §5.4).
    #[error("topic is not 1-32 base64url characters")]
    InvalidTopic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ready { at_ms: u64 },
    InFlight,
    Done(Outcome),
}

/// The delivery state machine of one message to one subscription (SPEC
/// RT-12). `Debug` redacts the endpoint and the message.
#[derive(Clone)]
pub struct Delivery {
    subscription: SubscriptionId,
    endpoint: String,
    message: Message,
    expires_at_ms: u64,
    policy: RetryPolicy,
    attempts: u32,
    last_status: Option<u16>,
    state: State,
}

impl Delivery {
    /// A delivery ready to send at once, that gives up at `expires_at_ms`
    /// (the hint's `expiresAt`).
    pub fn new(
        subscription: SubscriptionId,
        endpoint: &str,
        message: Message,
        expires_at_ms: u64,
        policy: RetryPolicy,
    ) -> Result<Self, DeliveryError> {
        if policy.max_attempts == 0 {
            return Err(DeliveryError::NoAttempts);
        }
        if message.topic.as_deref().is_some_and(|t| !is_valid_topic(t)) {
            return Err(DeliveryError::InvalidTopic);
        }
        Ok(Self {
            subscription,
            endpoint: endpoint.to_owned(),
            message,
            expires_at_ms,
            policy,
            attempts: 0,
            last_status: None,
            state: State::Ready { at_ms: 0 },
        })
    }

    /// The next step at `now_ms`.
    pub fn poll(&mut self, now_ms: u64) -> Poll {
        match self.state {
            State::Done(outcome) => Poll::Done(outcome),
            State::InFlight => Poll::AwaitingResponse,
            State::Ready { .. } if now_ms >= self.expires_at_ms => self.finish(Outcome::Expired {
                attempts: self.attempts,
            }),
            State::Ready { at_ms } if now_ms < at_ms => Poll::Wait { until_ms: at_ms },
            State::Ready { .. } => {
                self.attempts += 1;
                self.state = State::InFlight;
                Poll::Transmit(self.request(now_ms))
            }
        }
    }

    /// The provider answered the outstanding request with `status` and, if
    /// present, the raw `Retry-After` header value (seconds or an HTTP
    /// date); `random` is a uniform draw for the backoff's jitter. Ignored
    /// when no request is outstanding.
    pub fn on_response(
        &mut self,
        now_ms: u64,
        status: u16,
        retry_after: Option<&[u8]>,
        random: u64,
    ) {
        if self.state != State::InFlight {
            return;
        }
        self.last_status = Some(status);
        let outcome = match status {
            201 | 202 => Outcome::Delivered { status },
            404 | 410 => Outcome::Gone {
                subscription: self.subscription,
                status,
            },
            400 | 403 | 413 => Outcome::Rejected { status },
            429 | 500..=599 => {
                let hinted = retry_after.and_then(|v| parse_retry_after(v, now_ms / 1_000));
                return self.retry(now_ms, hinted, random);
            }
            _ => Outcome::Unexpected { status },
        };
        self.state = State::Done(outcome);
    }

    /// The outstanding request got no answer (connect failure, reset,
    /// timeout): retried like a 5xx; `random` is a uniform draw for the
    /// jitter. Ignored when nothing is outstanding.
    pub fn on_transport_error(&mut self, now_ms: u64, random: u64) {
        if self.state != State::InFlight {
            return;
        }
        self.last_status = None;
        self.retry(now_ms, None, random);
    }

    /// Requests sent so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The subscription this delivery is for.
    pub fn subscription(&self) -> SubscriptionId {
        self.subscription
    }

    /// The endpoint this delivery posts to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn retry(&mut self, now_ms: u64, retry_after_secs: Option<u64>, random: u64) {
        if self.attempts >= self.policy.max_attempts {
            self.state = State::Done(Outcome::RetriesExhausted {
                attempts: self.attempts,
                last_status: self.last_status,
            });
            return;
        }
        let doublings = self.attempts.saturating_sub(1).min(63);
        let cap = self
            .policy
            .base_backoff_ms
            .saturating_mul(1u64 << doublings)
            .min(self.policy.max_backoff_ms);
        // Full jitter: uniform in 0 ..= cap by multiply-shift.
        let jittered = (u128::from(random) * (u128::from(cap) + 1)) >> 64;
        let jittered = u64::try_from(jittered).unwrap_or(cap);
        // Never earlier than the push service asked (RFC 8030 §8.4, RFC 9110
        // §10.2.3).
        let asked = retry_after_secs.map_or(0, |s| s.saturating_mul(1_000));
        let at_ms = now_ms.saturating_add(jittered.max(asked));
        self.state = if at_ms >= self.expires_at_ms {
            State::Done(Outcome::Expired {
                attempts: self.attempts,
            })
        } else {
            State::Ready { at_ms }
        };
    }

    fn finish(&mut self, outcome: Outcome) -> Poll {
        self.state = State::Done(outcome);
        Poll::Done(outcome)
    }

    fn request(&self, now_ms: u64) -> PushRequest {
        let remaining_secs = self.expires_at_ms.saturating_sub(now_ms) / 1_000;
        let ttl = remaining_secs.min(self.policy.max_ttl_secs);
        let mut headers = vec![
            ("TTL", ttl.to_string()),
            ("Content-Encoding", "aes128gcm".to_owned()),
            ("Urgency", self.message.urgency.as_str().to_owned()),
        ];
        if let Some(topic) = &self.message.topic {
            headers.push(("Topic", topic.clone()));
        }
        PushRequest {
            method: "POST",
            url: self.endpoint.clone(),
            headers,
            body: self.message.body.clone(),
        }
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("body_len", &self.body.len())
            .field("urgency", &self.urgency)
            .field("topic", &self.topic.is_some())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for PushRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        f.debug_struct("PushRequest")
            .field("method", &self.method)
            .field("headers", &names)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("subscription", &self.subscription)
            .field("expires_at_ms", &self.expires_at_ms)
            .field("attempts", &self.attempts)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
/// Whether `topic` is a `Topic` RFC 8030 §5.4 allows: 1–32 base64url
/// characters.
pub fn is_valid_topic(topic: &str) -> bool {
    (1..=32).contains(&topic.len())
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
