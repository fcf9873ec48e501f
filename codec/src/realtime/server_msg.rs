//! `realtime.v1` messages a server sends (SPEC RT-9, seed §7.3), and the
//! fan-out writer that frames an already-encoded envelope as an EVENT.

use bytes::BufMut;

use super::client_msg::{Sender, parse_message};
use super::value::{Fields, check_id, check_token};
use super::{
    CloseCategory, ConnectionLimits, Envelope, FailureKind, HeartbeatPolicy, JsonLimits, Refusal,
    SUBPROTOCOL, jsonw,
};

/// A message a server sends on `realtime.v1` (SPEC RT-9). On the wire, one
/// JSON object: `type` plus exactly the members named here, in camelCase.
/// `subscriptionId`, `connectionId`, `streamEpoch` and `nonce` are
/// identifiers ([`super::MAX_ID_LEN`]); `acceptedCursor` an opaque token
/// ([`super::MAX_TOKEN_LEN`]) or `null`.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerMessage {
    /// `{"type":"WELCOME","protocol":"realtime.v1","connectionId","heartbeat","limits"}`;
    /// `protocol` is always [`SUBPROTOCOL`] (another value is
    /// [`Refusal::UnknownProtocol`]), so it is not a field here.
    Welcome {
        /// The server's id of this connection (never logged raw).
        connection_id: String,
        /// The allowed heartbeat range.
        heartbeat: HeartbeatPolicy,
        /// The connection's ceilings.
        limits: ConnectionLimits,
    },
    /// `{"type":"SUBSCRIBED","subscriptionId","streamEpoch","acceptedCursor","nextExpectedSequence"}`;
    /// `nextExpectedSequence` is a canonical decimal string like `sequence`.
    Subscribed {
        /// The subscription the client chose.
        subscription_id: String,
        /// The stream's current epoch.
        stream_epoch: String,
        /// The cursor the server resumes from (CURSOR streams), else `None`.
        accepted_cursor: Option<String>,
        /// The sequence of the next EVENT on this subscription.
        next_expected_sequence: u64,
    },
    /// `{"type":"EVENT","subscriptionId","envelope"}`; `envelope` is a
    /// REALTIME_EVENT_V1 object (SPEC RT-3).
    Event {
        /// The subscription the event is for.
        subscription_id: String,
        /// The event.
        envelope: Envelope,
    },
    /// `{"type":"RESET_REQUIRED","subscriptionId","reason"}`; `reason` is a
    /// failure kind of the closed vocabulary (e.g. `CURSOR_EXPIRED`,
    /// `SEQUENCE_GAP`, `QUEUE_OVERFLOW`, `FORBIDDEN`), never free text.
    ResetRequired {
        /// The subscription that must resync.
        subscription_id: String,
        /// Why.
        reason: FailureKind,
    },
    /// `{"type":"UNSUBSCRIBED","subscriptionId"}`.
    Unsubscribed {
        /// The subscription that ended.
        subscription_id: String,
    },
    /// `{"type":"HEARTBEAT_ACK","nonce"}`.
    HeartbeatAck {
        /// The nonce of the HEARTBEAT it answers.
        nonce: String,
    },
    /// `{"type":"CLOSE","category"}`, or (ours) `{"type":"CLOSE","category",
    /// "retryAfterMs"}` with the server's exact not-before hint: a JSON
    /// integer in `1..=`[`MAX_RETRY_AFTER_MS`]. The gateway sends it with
    /// OVERLOADED when it closes a slow consumer, so that the client may
    /// retry (SPEC RT-7, RT-10: OVERLOADED is retried only with a hint).
    Close {
        /// Why the server closes.
        category: CloseCategory,
        /// The least time before the client reconnects, in milliseconds;
        /// `None`: no hint (the member is absent).
        retry_after_ms: Option<u32>,
    },
}

/// The largest CLOSE `retryAfterMs`: SPEC RT-13's largest reconnect delay
/// (60 s). A client whose own largest delay is lower treats a larger hint
/// as its budget spent (DEGRADED).
pub const MAX_RETRY_AFTER_MS: u32 = 60_000;

impl ServerMessage {
    /// Decodes one text message received by a client: guard, `type`,
    /// `protocol` (WELCOME), exact key sets — the EVENT's envelope included —
    /// then members (SPEC RT-4, RT-9).
    pub fn decode(bytes: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let (map, ty) = parse_message(bytes, limits, Sender::Server)?;
        match ty {
            "WELCOME" => {
                match map.get("protocol").and_then(|p| p.as_str()) {
                    Some(SUBPROTOCOL) => {}
                    Some(_) => return Err(Refusal::UnknownProtocol),
                    None if map.contains_key("protocol") => {
                        return Err(Refusal::WrongType("protocol"));
                    }
                    None => return Err(Refusal::MissingKey("protocol")),
                }
                let f = Fields::exact(
                    &map,
                    &["type", "protocol", "connectionId", "heartbeat", "limits"],
                )?;
                Ok(Self::Welcome {
                    connection_id: f.id("connectionId")?,
                    heartbeat: HeartbeatPolicy::from_map(f.object("heartbeat")?)?,
                    limits: ConnectionLimits::from_map(f.object("limits")?)?,
                })
            }
            "SUBSCRIBED" => {
                let f = Fields::exact(
                    &map,
                    &[
                        "type",
                        "subscriptionId",
                        "streamEpoch",
                        "acceptedCursor",
                        "nextExpectedSequence",
                    ],
                )?;
                Ok(Self::Subscribed {
                    subscription_id: f.id("subscriptionId")?,
                    stream_epoch: f.id("streamEpoch")?,
                    accepted_cursor: f.opt_token("acceptedCursor")?,
                    next_expected_sequence: f.sequence("nextExpectedSequence")?,
                })
            }
            "EVENT" => {
                let f = Fields::exact(&map, &["type", "subscriptionId", "envelope"])?;
                let subscription_id = f.id("subscriptionId")?;
                Ok(Self::Event {
                    subscription_id,
                    envelope: Envelope::from_map(f.object("envelope")?)?,
                })
            }
            "RESET_REQUIRED" => {
                let f = Fields::exact(&map, &["type", "subscriptionId", "reason"])?;
                Ok(Self::ResetRequired {
                    subscription_id: f.id("subscriptionId")?,
                    reason: f.closed("reason")?,
                })
            }
            "UNSUBSCRIBED" => {
                let f = Fields::exact(&map, &["type", "subscriptionId"])?;
                Ok(Self::Unsubscribed {
                    subscription_id: f.id("subscriptionId")?,
                })
            }
            "HEARTBEAT_ACK" => {
                let f = Fields::exact(&map, &["type", "nonce"])?;
                Ok(Self::HeartbeatAck {
                    nonce: f.id("nonce")?,
                })
            }
            _ => {
                let hinted = map.contains_key("retryAfterMs");
                let keys: &[&'static str] = if hinted {
                    &["type", "category", "retryAfterMs"]
                } else {
                    &["type", "category"]
                };
                let f = Fields::exact(&map, keys)?;
                let retry_after_ms = if hinted {
                    let ms = f.positive("retryAfterMs", u64::from(MAX_RETRY_AFTER_MS))?;
                    Some(u32::try_from(ms).map_err(|_| Refusal::InvalidValue("retryAfterMs"))?)
                } else {
                    None
                };
                Ok(Self::Close {
                    category: f.closed("category")?,
                    retry_after_ms,
                })
            }
        }
    }

    /// The message's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Welcome { .. } => "WELCOME",
            Self::Subscribed { .. } => "SUBSCRIBED",
            Self::Event { .. } => "EVENT",
            Self::ResetRequired { .. } => "RESET_REQUIRED",
            Self::Unsubscribed { .. } => "UNSUBSCRIBED",
            Self::HeartbeatAck { .. } => "HEARTBEAT_ACK",
            Self::Close { .. } => "CLOSE",
        }
    }

    /// Checks every member against the rules [`ServerMessage::decode`] applies.
    pub fn validate(&self) -> Result<(), Refusal> {
        match self {
            Self::Welcome {
                connection_id,
                heartbeat,
                limits,
            } => {
                check_id("connectionId", connection_id)?;
                heartbeat.validate()?;
                limits.validate()
            }
            Self::Subscribed {
                subscription_id,
                stream_epoch,
                accepted_cursor,
                ..
            } => {
                check_id("subscriptionId", subscription_id)?;
                check_id("streamEpoch", stream_epoch)?;
                match accepted_cursor {
                    Some(c) => check_token("acceptedCursor", c),
                    None => Ok(()),
                }
            }
            Self::Event {
                subscription_id,
                envelope,
            } => {
                check_id("subscriptionId", subscription_id)?;
                envelope.validate()
            }
            Self::ResetRequired {
                subscription_id, ..
            }
            | Self::Unsubscribed { subscription_id } => check_id("subscriptionId", subscription_id),
            Self::HeartbeatAck { nonce } => check_id("nonce", nonce),
            Self::Close {
                retry_after_ms: Some(ms),
                ..
            } if *ms == 0 || *ms > MAX_RETRY_AFTER_MS => Err(Refusal::InvalidValue("retryAfterMs")),
            Self::Close { .. } => Ok(()),
        }
    }

    /// Compact JSON, members in the order listed on each variant.
    pub fn encode(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(256);
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    /// [`ServerMessage::encode`] appended to `buf` (nothing is written on a
    /// refusal).
    pub fn encode_into<B: BufMut>(&self, buf: &mut B) -> Result<(), Refusal> {
        self.validate()?;
        if let Self::Event {
            subscription_id,
            envelope,
        } = self
        {
            write_event_head(buf, subscription_id);
            envelope.encode_into(buf)?;
            buf.put_u8(b'}');
            return Ok(());
        }
        buf.put_u8(b'{');
        jsonw::key(buf, "type");
        jsonw::str(buf, self.type_name());
        match self {
            Self::Welcome {
                connection_id,
                heartbeat,
                limits,
            } => {
                jsonw::next_key(buf, "protocol");
                jsonw::str(buf, SUBPROTOCOL);
                jsonw::next_key(buf, "connectionId");
                jsonw::str(buf, connection_id);
                jsonw::next_key(buf, "heartbeat");
                heartbeat.write(buf);
                jsonw::next_key(buf, "limits");
                limits.write(buf);
            }
            Self::Subscribed {
                subscription_id,
                stream_epoch,
                accepted_cursor,
                next_expected_sequence,
            } => {
                jsonw::next_key(buf, "subscriptionId");
                jsonw::str(buf, subscription_id);
                jsonw::next_key(buf, "streamEpoch");
                jsonw::str(buf, stream_epoch);
                jsonw::next_key(buf, "acceptedCursor");
                jsonw::opt_str(buf, accepted_cursor.as_deref());
                jsonw::next_key(buf, "nextExpectedSequence");
                jsonw::decimal_str(buf, *next_expected_sequence);
            }
            Self::ResetRequired {
                subscription_id,
                reason,
            } => {
                jsonw::next_key(buf, "subscriptionId");
                jsonw::str(buf, subscription_id);
                jsonw::next_key(buf, "reason");
                jsonw::str(buf, reason.as_str());
            }
            Self::Unsubscribed { subscription_id } => {
                jsonw::next_key(buf, "subscriptionId");
                jsonw::str(buf, subscription_id);
            }
            Self::HeartbeatAck { nonce } => {
                jsonw::next_key(buf, "nonce");
                jsonw::str(buf, nonce);
            }
            Self::Close {
                category,
                retry_after_ms,
            } => {
                jsonw::next_key(buf, "category");
                jsonw::str(buf, category.as_str());
                if let Some(ms) = retry_after_ms {
                    jsonw::next_key(buf, "retryAfterMs");
                    jsonw::uint(buf, u64::from(*ms));
                }
            }
            Self::Event { .. } => {}
        }
        buf.put_u8(b'}');
        Ok(())
    }
}

/// `{"type":"EVENT","subscriptionId":"…","envelope":`.
fn write_event_head<B: BufMut>(buf: &mut B, subscription_id: &str) {
    buf.put_u8(b'{');
    jsonw::key(buf, "type");
    jsonw::str(buf, "EVENT");
    jsonw::next_key(buf, "subscriptionId");
    jsonw::str(buf, subscription_id);
    jsonw::next_key(buf, "envelope");
}

/// The first part of an EVENT message for `subscription_id` (SPEC RT-9),
/// for a server that frames the message without copying the shared
/// envelope twice: the whole message is this head, then the envelope, then
/// [`EVENT_MESSAGE_END`] — byte-identical to [`write_event_message`].
/// Refuses (writing nothing) an invalid `subscription_id`.
pub fn write_event_message_head<B: BufMut>(
    buf: &mut B,
    subscription_id: &str,
) -> Result<(), Refusal> {
    check_id("subscriptionId", subscription_id)?;
    write_event_head(buf, subscription_id);
    Ok(())
}

/// The byte that ends an EVENT message after its envelope.
pub const EVENT_MESSAGE_END: u8 = b'}';

/// The server's fan-out path (SPEC RT-9): appends an EVENT message for
/// `subscription_id` around `envelope_json`, an envelope already encoded
/// once by [`Envelope::to_json_bytes`] or [`super::write_envelope`] and
/// shared by every subscriber. The envelope is copied, not re-parsed; the
/// result is byte-identical to [`ServerMessage::encode`] of the same event.
///
/// Refuses (writing nothing) an invalid `subscription_id`; `envelope_json`
/// is trusted to be this crate's output (debug builds check it is one line
/// and starts with `{`).
pub fn write_event_message<B: BufMut>(
    buf: &mut B,
    subscription_id: &str,
    envelope_json: &[u8],
) -> Result<(), Refusal> {
    check_id("subscriptionId", subscription_id)?;
    debug_assert!(
        envelope_json.first() == Some(&b'{')
            && !envelope_json.iter().any(|b| matches!(b, b'\r' | b'\n')),
        "write_event_message wants an envelope encoded by this crate"
    );
    write_event_head(buf, subscription_id);
    buf.put_slice(envelope_json);
    buf.put_u8(b'}');
    Ok(())
}
