//! The realtime wire formats: REALTIME_EVENT_V1 envelopes, `realtime.v1`
//! messages, SSE, the publication body and its receipt (SPEC RT-3, RT-4,
//! RT-6, RT-8, RT-9, RT-13, RT-14).
//!
//! This module owns bytes only: it never touches IO, time, randomness, the
//! stream registry, scope fences, epochs, sequences or dedupe — those are the
//! client runtime's and the server ledger's (SPEC RT-4 after the exact-key
//! step, RT-5, RT-6).
//!
//! # Decoding (SPEC RT-4)
//!
//! Every decoder ([`Envelope::decode`], [`ClientMessage::decode`],
//! [`ServerMessage::decode`], [`SnapshotCheckpoint::decode`],
//! [`SseControl::decode`]) runs [`check_json`] first — byte ceiling, UTF-8,
//! then one allocation-free scan with the depth and element ceilings of
//! [`JsonLimits`] — and only then builds a `serde_json` value (refusing
//! duplicate keys), checks the protocol literal and `type`, the exact key set
//! (unknown keys before missing ones), and each member in wire order. Every
//! refusal is a [`Refusal`] whose [`Refusal::failure_kind`] is its SPEC RT-14
//! name. Refusals never echo peer bytes.
//!
//! # Encoding
//!
//! Encoders write compact JSON with a fixed member order into any growable
//! [`bytes::BufMut`], after checking the same rules the decoders apply, so a
//! server never emits what its clients refuse. For fan-out, an envelope is
//! encoded once ([`Envelope::to_json_bytes`], or [`write_envelope`] around a
//! payload that is already JSON) and framed per subscriber without
//! re-parsing ([`write_event_message`], [`write_sse_event`]).
//!
//! # Choices the seed leaves open (documented here, binding for both sides)
//!
//! - String bounds: identifiers (`subscriptionId`, `streamId`,
//!   `connectionId`, `nonce`, `streamEpoch`, `eventType`, `eventId`) are 1–128
//!   bytes of `[A-Za-z0-9._:-]` ([`MAX_ID_LEN`]); opaque tokens (`cursor`,
//!   `acceptedCursor`, `resumeCursor`, `scopeBinding`, `snapshotRevision`) are
//!   1–512 bytes of header-safe visible ASCII `!`–`~` ([`MAX_TOKEN_LEN`]), so
//!   a cursor travels unchanged as an SSE `id` and a `Last-Event-ID` header.
//! - `occurredAt`: see [`is_valid_rfc3339`] (uppercase `T`/`Z`, 1–9 fraction
//!   digits, no leap second).
//! - WELCOME: `protocol` is `"realtime.v1"` ([`SUBPROTOCOL`]); `heartbeat` is
//!   [`HeartbeatPolicy`] `{minIntervalMs, maxIntervalMs, ackTimeoutMs}`;
//!   `limits` is [`ConnectionLimits`] `{maxMessageBytes, maxSubscriptions,
//!   maxQueuedMessages, maxQueuedBytes}`; all JSON integers.
//! - Directions follow seed §7.3: HEARTBEAT is client → server only,
//!   HEARTBEAT_ACK server → client only; CLOSE goes both ways.
//! - A server's CLOSE may add `retryAfterMs` (ours): its exact not-before
//!   hint, a JSON integer in `1..=`[`MAX_RETRY_AFTER_MS`]; without it an
//!   OVERLOADED close is not retried (SPEC RT-7).
//! - RESET_REQUIRED's `reason` (WebSocket and SSE) is a [`FailureKind`].
//! - SSE control events ([`SseControl`]): `RESET_REQUIRED{reason}`,
//!   `GAP{streamEpoch, afterSequence}`, `CLOSE{category}`.
//! - Failure kinds of refusals: byte, depth and element ceilings →
//!   `EVENT_TOO_LARGE`; unknown protocol or message type, or a message of the
//!   wrong direction → `PROTOCOL_MISMATCH`; all else → `MALFORMED_EVENT`.
//! - Close codes of [`CloseCategory`]: see its table (1000, 1012, 1013, 4401,
//!   4403, 1002, 4409; `NETWORK_LOST` is observed, never sent).

mod checkpoint;
mod client_msg;
mod envelope;
mod failure;
mod json_guard;
mod jsonw;
mod publication;
mod recovery;
mod refusal;
mod scalar;
mod server_msg;
mod sse_parse;
mod sse_write;
mod value;
mod welcome;

#[cfg(test)]
mod tests_envelope;
#[cfg(test)]
mod tests_guard;
#[cfg(test)]
mod tests_message;
#[cfg(test)]
mod tests_prop;
#[cfg(test)]
mod tests_publication;
#[cfg(test)]
mod tests_sse;
#[cfg(test)]
mod tests_vocab;

pub use checkpoint::SnapshotCheckpoint;
pub use client_msg::{ClientMessage, SUBPROTOCOL};
pub use envelope::{ENVELOPE_PROTOCOL, Envelope, EnvelopeHead, write_envelope};
pub use failure::{CloseCategory, FailureKind, UnknownCloseCategory, UnknownFailureKind};
pub use json_guard::{JsonLimits, check_json};
pub use jsonw::decimal;
pub use publication::{Publication, PublishReceipt, write_publication, write_receipt};
pub use recovery::{RecoveryMode, UnknownRecoveryMode};
pub use refusal::Refusal;
pub use scalar::{is_valid_rfc3339, parse_canonical_u64};
/// The JSON types of [`Envelope::payload`], so a user needs no `serde_json` of its own.
pub use serde_json::{Map, Value};
pub use server_msg::{
    EVENT_MESSAGE_END, MAX_RETRY_AFTER_MS, ServerMessage, write_event_message,
    write_event_message_head,
};
pub use sse_parse::{SSE_MAX_BUFFER, SseError, SseEvent, SseParser};
pub use sse_write::{
    SSE_CONTROL_EVENT, SseControl, SseEncodeError, sse_chunk_with, write_sse_comment,
    write_sse_control, write_sse_envelope, write_sse_event, write_sse_heartbeat, write_sse_retry,
};
pub use value::{MAX_ID_LEN, MAX_TOKEN_LEN, is_valid_id, is_valid_token, parse_object};
pub use welcome::{ConnectionLimits, HeartbeatPolicy, MAX_HEARTBEAT_MS};
