//! The two shapes the seed leaves open in WELCOME (SPEC RT-9, seed §7.3–7.5):
//! `heartbeat` and `limits`. Both are JSON objects with exactly the members
//! below, each a JSON integer (not a string: they are small, unlike
//! sequences).

use bytes::BufMut;
use serde_json::{Map, Value};

use super::value::Fields;
use super::{JsonLimits, Refusal, jsonw};

/// The longest heartbeat interval or ack timeout a WELCOME may name: 1 h.
pub const MAX_HEARTBEAT_MS: u32 = 3_600_000;

/// WELCOME `heartbeat` (seed §7.4: "the server's WELCOME fixes the allowed
/// heartbeat range"; one outstanding nonce at a time):
/// `{"minIntervalMs":…,"maxIntervalMs":…,"ackTimeoutMs":…}`.
///
/// The client sends HEARTBEAT no more often than `minIntervalMs` and no less
/// often than `maxIntervalMs` (a server may close a connection silent for
/// longer); it closes the connection when the HEARTBEAT_ACK for its
/// outstanding nonce has not come within `ackTimeoutMs`. All three are in
/// `1..=`[`MAX_HEARTBEAT_MS`], and `minIntervalMs ≤ maxIntervalMs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeartbeatPolicy {
    /// Shortest allowed interval between two HEARTBEATs, ms.
    pub min_interval_ms: u32,
    /// Longest allowed interval between two HEARTBEATs, ms.
    pub max_interval_ms: u32,
    /// How long the client waits for the HEARTBEAT_ACK, ms.
    pub ack_timeout_ms: u32,
}

const HEARTBEAT_KEYS: [&str; 3] = ["minIntervalMs", "maxIntervalMs", "ackTimeoutMs"];

impl HeartbeatPolicy {
    /// The schema of the `heartbeat` member.
    pub(crate) fn from_map(map: &Map<String, Value>) -> Result<Self, Refusal> {
        let f = Fields::exact(map, &HEARTBEAT_KEYS)?;
        let max = u64::from(MAX_HEARTBEAT_MS);
        let policy = Self {
            min_interval_ms: narrow(f.positive("minIntervalMs", max)?),
            max_interval_ms: narrow(f.positive("maxIntervalMs", max)?),
            ack_timeout_ms: narrow(f.positive("ackTimeoutMs", max)?),
        };
        policy.validate()?;
        Ok(policy)
    }

    /// The rules a decoder of WELCOME applies to `heartbeat`.
    pub fn validate(&self) -> Result<(), Refusal> {
        let in_range = |v: u32| (1..=MAX_HEARTBEAT_MS).contains(&v);
        if !in_range(self.min_interval_ms) || self.min_interval_ms > self.max_interval_ms {
            return Err(Refusal::InvalidValue("minIntervalMs"));
        }
        if !in_range(self.max_interval_ms) {
            return Err(Refusal::InvalidValue("maxIntervalMs"));
        }
        if !in_range(self.ack_timeout_ms) {
            return Err(Refusal::InvalidValue("ackTimeoutMs"));
        }
        Ok(())
    }

    pub(crate) fn write<B: BufMut>(&self, buf: &mut B) {
        buf.put_u8(b'{');
        jsonw::key(buf, "minIntervalMs");
        jsonw::uint(buf, self.min_interval_ms.into());
        jsonw::next_key(buf, "maxIntervalMs");
        jsonw::uint(buf, self.max_interval_ms.into());
        jsonw::next_key(buf, "ackTimeoutMs");
        jsonw::uint(buf, self.ack_timeout_ms.into());
        buf.put_u8(b'}');
    }
}

/// WELCOME `limits` (seed §7.5, §11):
/// `{"maxMessageBytes":…,"maxSubscriptions":…,"maxQueuedMessages":…,"maxQueuedBytes":…}`
/// — the largest text message either side may send on this connection, the
/// logical subscriptions it may hold, and the client's outbound queue
/// ceilings. Each is a JSON integer in `1..=u32::MAX`; a server may
/// advertise lower values than SPEC RT-13 but never raise the client's own
/// ceilings, so the client applies [`ConnectionLimits::capped`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnectionLimits {
    /// Largest text message, bytes (RT-13 ceiling: 64 KiB).
    pub max_message_bytes: u32,
    /// Logical subscriptions per connection (RT-13 ceiling: 32).
    pub max_subscriptions: u32,
    /// Outbound queued messages (RT-13 ceiling: 128).
    pub max_queued_messages: u32,
    /// Outbound queued bytes (RT-13 ceiling: 256 KiB).
    pub max_queued_bytes: u32,
}

const LIMIT_KEYS: [&str; 4] = [
    "maxMessageBytes",
    "maxSubscriptions",
    "maxQueuedMessages",
    "maxQueuedBytes",
];

impl ConnectionLimits {
    /// The SPEC RT-13 ceilings.
    pub const RT13: Self = Self {
        max_message_bytes: JsonLimits::MAX_BYTES as u32,
        max_subscriptions: 32,
        max_queued_messages: 128,
        max_queued_bytes: 256 * 1024,
    };

    /// Each value lowered to its RT-13 ceiling (a server-advertised limit
    /// cannot raise the client's, seed §7.3).
    pub fn capped(&self) -> Self {
        Self {
            max_message_bytes: self.max_message_bytes.min(Self::RT13.max_message_bytes),
            max_subscriptions: self.max_subscriptions.min(Self::RT13.max_subscriptions),
            max_queued_messages: self.max_queued_messages.min(Self::RT13.max_queued_messages),
            max_queued_bytes: self.max_queued_bytes.min(Self::RT13.max_queued_bytes),
        }
    }

    /// The schema of the `limits` member.
    pub(crate) fn from_map(map: &Map<String, Value>) -> Result<Self, Refusal> {
        let f = Fields::exact(map, &LIMIT_KEYS)?;
        let max = u64::from(u32::MAX);
        Ok(Self {
            max_message_bytes: narrow(f.positive("maxMessageBytes", max)?),
            max_subscriptions: narrow(f.positive("maxSubscriptions", max)?),
            max_queued_messages: narrow(f.positive("maxQueuedMessages", max)?),
            max_queued_bytes: narrow(f.positive("maxQueuedBytes", max)?),
        })
    }

    /// The rules a decoder of WELCOME applies to `limits`: every value is at
    /// least 1.
    pub fn validate(&self) -> Result<(), Refusal> {
        let values = [
            self.max_message_bytes,
            self.max_subscriptions,
            self.max_queued_messages,
            self.max_queued_bytes,
        ];
        match values.iter().position(|v| *v == 0) {
            Some(i) => Err(Refusal::InvalidValue(LIMIT_KEYS[i])),
            None => Ok(()),
        }
    }

    pub(crate) fn write<B: BufMut>(&self, buf: &mut B) {
        buf.put_u8(b'{');
        jsonw::key(buf, "maxMessageBytes");
        jsonw::uint(buf, self.max_message_bytes.into());
        jsonw::next_key(buf, "maxSubscriptions");
        jsonw::uint(buf, self.max_subscriptions.into());
        jsonw::next_key(buf, "maxQueuedMessages");
        jsonw::uint(buf, self.max_queued_messages.into());
        jsonw::next_key(buf, "maxQueuedBytes");
        jsonw::uint(buf, self.max_queued_bytes.into());
        buf.put_u8(b'}');
    }
}

/// A value already checked to be at most `u32::MAX`.
fn narrow(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}
