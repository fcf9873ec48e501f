//! `realtime.v1` messages a client sends (SPEC RT-9, seed §7.3).
//!
//! Directions follow seed §7.3 exactly: the client sends SUBSCRIBE,
//! UNSUBSCRIBE, HEARTBEAT and CLOSE; the server sends WELCOME, SUBSCRIBED,
//! EVENT, RESET_REQUIRED, UNSUBSCRIBED, HEARTBEAT_ACK and CLOSE. A message of
//! the other side's type is [`Refusal::WrongDirection`].

use bytes::BufMut;
use serde_json::{Map, Value};

use super::value::{Fields, check_id, check_token, parse_object};
use super::{CloseCategory, JsonLimits, Refusal, jsonw};

/// The WebSocket subprotocol, and WELCOME's `protocol` literal (SPEC RT-9).
pub const SUBPROTOCOL: &str = "realtime.v1";

/// Types only a client sends.
const CLIENT_TYPES: [&str; 4] = ["SUBSCRIBE", "UNSUBSCRIBE", "HEARTBEAT", "CLOSE"];
/// Types only a server sends (CLOSE goes both ways).
const SERVER_TYPES: [&str; 7] = [
    "WELCOME",
    "SUBSCRIBED",
    "EVENT",
    "RESET_REQUIRED",
    "UNSUBSCRIBED",
    "HEARTBEAT_ACK",
    "CLOSE",
];

/// Which side sent the message being decoded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sender {
    Client,
    Server,
}

/// The guard, then the `type` member checked against the sender's types
/// (SPEC RT-4 order: type and version before the key set).
pub(crate) fn parse_message(
    bytes: &[u8],
    limits: &JsonLimits,
    from: Sender,
) -> Result<(Map<String, Value>, &'static str), Refusal> {
    let map = parse_object(bytes, limits)?;
    let ty = match map.get("type") {
        None => return Err(Refusal::MissingKey("type")),
        Some(Value::String(t)) => t.as_str(),
        Some(_) => return Err(Refusal::WrongType("type")),
    };
    let (mine, theirs): (&[&'static str], &[&'static str]) = match from {
        Sender::Client => (&CLIENT_TYPES, &SERVER_TYPES),
        Sender::Server => (&SERVER_TYPES, &CLIENT_TYPES),
    };
    match mine.iter().find(|t| **t == ty) {
        Some(t) => Ok((map, t)),
        None if theirs.contains(&ty) => Err(Refusal::WrongDirection),
        None => Err(Refusal::UnknownType),
    }
}

/// A message a client sends on `realtime.v1` (SPEC RT-9). On the wire, one
/// JSON object: `type` plus exactly the members named here, in camelCase.
/// `subscriptionId` and `streamId` are identifiers ([`super::MAX_ID_LEN`]),
/// `cursor` and `scopeBinding` opaque tokens ([`super::MAX_TOKEN_LEN`]),
/// `nonce` an identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMessage {
    /// `{"type":"SUBSCRIBE","subscriptionId","streamId","cursor","scopeBinding"}`;
    /// `cursor` is a token or JSON `null`.
    Subscribe {
        /// The client-chosen id of this logical subscription.
        subscription_id: String,
        /// The registered stream.
        stream_id: String,
        /// The committed resume cursor (CURSOR streams), else `None`.
        cursor: Option<String>,
        /// The session's scope token, echoed in every event.
        scope_binding: String,
    },
    /// `{"type":"UNSUBSCRIBE","subscriptionId"}`.
    Unsubscribe {
        /// The subscription to end.
        subscription_id: String,
    },
    /// `{"type":"HEARTBEAT","nonce"}`: the one outstanding heartbeat.
    Heartbeat {
        /// Echoed in the HEARTBEAT_ACK.
        nonce: String,
    },
    /// `{"type":"CLOSE","category"}`.
    Close {
        /// Why the client closes.
        category: CloseCategory,
    },
}

impl ClientMessage {
    /// Decodes one text message received by a server: guard, `type`, exact
    /// key set, members (SPEC RT-4, RT-9).
    pub fn decode(bytes: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let (map, ty) = parse_message(bytes, limits, Sender::Client)?;
        match ty {
            "SUBSCRIBE" => {
                let f = Fields::exact(
                    &map,
                    &[
                        "type",
                        "subscriptionId",
                        "streamId",
                        "cursor",
                        "scopeBinding",
                    ],
                )?;
                Ok(Self::Subscribe {
                    subscription_id: f.id("subscriptionId")?,
                    stream_id: f.id("streamId")?,
                    cursor: f.opt_token("cursor")?,
                    scope_binding: f.token("scopeBinding")?,
                })
            }
            "UNSUBSCRIBE" => {
                let f = Fields::exact(&map, &["type", "subscriptionId"])?;
                Ok(Self::Unsubscribe {
                    subscription_id: f.id("subscriptionId")?,
                })
            }
            "HEARTBEAT" => {
                let f = Fields::exact(&map, &["type", "nonce"])?;
                Ok(Self::Heartbeat {
                    nonce: f.id("nonce")?,
                })
            }
            _ => {
                let f = Fields::exact(&map, &["type", "category"])?;
                Ok(Self::Close {
                    category: f.closed("category")?,
                })
            }
        }
    }

    /// The message's `type`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Subscribe { .. } => "SUBSCRIBE",
            Self::Unsubscribe { .. } => "UNSUBSCRIBE",
            Self::Heartbeat { .. } => "HEARTBEAT",
            Self::Close { .. } => "CLOSE",
        }
    }

    /// Checks every member against the rules [`ClientMessage::decode`] applies.
    pub fn validate(&self) -> Result<(), Refusal> {
        match self {
            Self::Subscribe {
                subscription_id,
                stream_id,
                cursor,
                scope_binding,
            } => {
                check_id("subscriptionId", subscription_id)?;
                check_id("streamId", stream_id)?;
                if let Some(c) = cursor {
                    check_token("cursor", c)?;
                }
                check_token("scopeBinding", scope_binding)
            }
            Self::Unsubscribe { subscription_id } => check_id("subscriptionId", subscription_id),
            Self::Heartbeat { nonce } => check_id("nonce", nonce),
            Self::Close { .. } => Ok(()),
        }
    }

    /// Compact JSON, members in the order listed on each variant.
    pub fn encode(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(128);
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    /// [`ClientMessage::encode`] appended to `buf` (nothing is written on a
    /// refusal).
    pub fn encode_into<B: BufMut>(&self, buf: &mut B) -> Result<(), Refusal> {
        self.validate()?;
        buf.put_u8(b'{');
        jsonw::key(buf, "type");
        jsonw::str(buf, self.type_name());
        match self {
            Self::Subscribe {
                subscription_id,
                stream_id,
                cursor,
                scope_binding,
            } => {
                jsonw::next_key(buf, "subscriptionId");
                jsonw::str(buf, subscription_id);
                jsonw::next_key(buf, "streamId");
                jsonw::str(buf, stream_id);
                jsonw::next_key(buf, "cursor");
                jsonw::opt_str(buf, cursor.as_deref());
                jsonw::next_key(buf, "scopeBinding");
                jsonw::str(buf, scope_binding);
            }
            Self::Unsubscribe { subscription_id } => {
                jsonw::next_key(buf, "subscriptionId");
                jsonw::str(buf, subscription_id);
            }
            Self::Heartbeat { nonce } => {
                jsonw::next_key(buf, "nonce");
                jsonw::str(buf, nonce);
            }
            Self::Close { category } => {
                jsonw::next_key(buf, "category");
                jsonw::str(buf, category.as_str());
            }
        }
        buf.put_u8(b'}');
        Ok(())
    }
}
