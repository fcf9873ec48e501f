//! WEB_PUSH_HINT_V1, the only payload a push message carries (SPEC RT-12,
//! seed §8.4): a small opaque hint, never content, never the declarative
//! `web_push: 8030` shape (seed §8.1).

use std::fmt;

use dtp_codec::realtime::{JsonLimits, Map, Refusal, Value, is_valid_id, parse_object};

use crate::time::{format_timestamp, parse_timestamp};

/// The `protocol` literal (seed §8.4).
pub const HINT_PROTOCOL: &str = "WEB_PUSH_HINT_V1";

/// SPEC RT-12 / seed §11: a decoded hint is at most 3 KiB.
pub const MAX_HINT_BYTES: usize = 3 * 1024;

/// Seed §11: `expiresAt - issuedAt` is at most 24 hours.
pub const MAX_HINT_LIFETIME_MS: u64 = 24 * 60 * 60 * 1000;

/// Seed §8.4, §11: `issuedAt` may be at most 5 minutes ahead of the
/// receiver's clock.
pub const MAX_CLOCK_SKEW_MS: u64 = 5 * 60 * 1000;

/// The members, in the order the seed lists them and the encoder writes them.
const KEYS: [&str; 8] = [
    "protocol",
    "notificationType",
    "notificationId",
    "associationEpoch",
    "releaseEpoch",
    "issuedAt",
    "expiresAt",
    "routeIntent",
];

/// A WEB_PUSH_HINT_V1 payload (SPEC RT-12, seed §8.4).
///
/// The five string members are identifiers (1–128 bytes of
/// `[A-Za-z0-9._:-]`, [`is_valid_id`]): registry IDs for
/// `notificationType` and `routeIntent`, opaque references for the rest —
/// so no free text (names, message bodies, URLs) fits. The timestamps are
/// unix milliseconds, written `YYYY-MM-DDTHH:MM:SS.sssZ`
/// ([`parse_timestamp`](super::parse_timestamp)).
///
/// `Debug` shows the registry IDs and times only: the notification
/// reference and the epochs are not logged (seed §12.3).
#[derive(Clone, PartialEq, Eq)]
pub struct WebPushHint {
    /// `notificationType`: a closed notification registry ID.
    pub notification_type: String,
    /// `notificationId`: the opaque reference the foreground BFF resolves
    /// under current authorization.
    pub notification_id: String,
    /// `associationEpoch`: the backend association this push belongs to.
    pub association_epoch: String,
    /// `releaseEpoch`: from the verified release manifest.
    pub release_epoch: String,
    /// `issuedAt`, unix milliseconds.
    pub issued_at_ms: u64,
    /// `expiresAt`, unix milliseconds; `issued_at_ms < expires_at_ms ≤
    /// issued_at_ms + 24 h`.
    pub expires_at_ms: u64,
    /// `routeIntent`: a closed route registry ID.
    pub route_intent: String,
}

/// Why a hint was refused (SPEC RT-12). Never echoes peer bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HintError {
    /// The JSON guard refused the text: over 3 KiB ([`Refusal::TooLarge`]),
    /// not UTF-8, not JSON, a repeated key, not an object, too deep.
    #[error("hint refused: {0}")]
    Json(Refusal),
    /// A member the schema does not list — this includes the declarative
    /// `web_push` key (seed §8.1), which is never accepted.
    #[error("hint has a key WEB_PUSH_HINT_V1 does not list")]
    UnknownKey,
    /// A required member is absent.
    #[error("hint lacks `{0}`")]
    MissingKey(&'static str),
    /// `protocol` is not `WEB_PUSH_HINT_V1` (unknown version: fail closed).
    #[error("hint protocol is not WEB_PUSH_HINT_V1")]
    UnknownProtocol,
    /// A member is not a JSON string.
    #[error("hint member `{0}` is not a string")]
    WrongType(&'static str),
    /// An identifier member is empty, over 128 bytes or outside
    /// `[A-Za-z0-9._:-]`.
    #[error("hint member `{0}` is not an identifier")]
    InvalidId(&'static str),
    /// A timestamp member is outside the `YYYY-MM-DDTHH:MM:SS.sssZ` profile
    /// (or, when encoding, beyond year 9999).
    #[error("hint member `{0}` is not a timestamp in the hint profile")]
    InvalidTimestamp(&'static str),
    /// `expiresAt` is not after `issuedAt`, or more than 24 hours after it.
    #[error("hint lifetime is not within (0, 24 h]")]
    InvalidLifetime,
    /// Receiver check: `issuedAt` more than 5 minutes ahead of `now`.
    #[error("hint issued in the future")]
    IssuedInFuture,
    /// Receiver check: `now` is at or past `expiresAt`.
    #[error("hint expired")]
    Expired,
    /// Receiver check: `associationEpoch` differs from the active one.
    #[error("hint association epoch does not match")]
    AssociationMismatch,
    /// Receiver check: `releaseEpoch` differs from the running release.
    #[error("hint release epoch does not match")]
    ReleaseMismatch,
}

impl WebPushHint {
    /// The JSON ceilings of a hint: 3 KiB (SPEC RT-12); depth and element
    /// ceilings loose enough that a nested object (e.g. the declarative
    /// shape's `notification`) reaches the key check and is refused there.
    pub const LIMITS: JsonLimits = JsonLimits::new(MAX_HINT_BYTES, 4, 64);

    /// Strict decode (SPEC RT-12): guard (3 KiB, UTF-8, JSON, no repeated
    /// key, an object), then the exact key set (unknown keys before missing
    /// ones), the protocol literal, each member in order, the lifetime.
    pub fn decode(bytes: &[u8]) -> Result<Self, HintError> {
        let map = parse_object(bytes, &Self::LIMITS).map_err(HintError::Json)?;
        if map.keys().any(|k| !KEYS.contains(&k.as_str())) {
            return Err(HintError::UnknownKey);
        }
        if let Some(missing) = KEYS.iter().find(|k| !map.contains_key(**k)) {
            return Err(HintError::MissingKey(missing));
        }
        if string(&map, "protocol")? != HINT_PROTOCOL {
            return Err(HintError::UnknownProtocol);
        }
        let hint = Self {
            notification_type: id(&map, "notificationType")?,
            notification_id: id(&map, "notificationId")?,
            association_epoch: id(&map, "associationEpoch")?,
            release_epoch: id(&map, "releaseEpoch")?,
            issued_at_ms: timestamp(&map, "issuedAt")?,
            expires_at_ms: timestamp(&map, "expiresAt")?,
            route_intent: id(&map, "routeIntent")?,
        };
        hint.check_lifetime()?;
        Ok(hint)
    }

    /// The rules [`decode`](Self::decode) applies, for a hint built in code.
    pub fn validate(&self) -> Result<(), HintError> {
        let ids = [
            ("notificationType", &self.notification_type),
            ("notificationId", &self.notification_id),
            ("associationEpoch", &self.association_epoch),
            ("releaseEpoch", &self.release_epoch),
            ("routeIntent", &self.route_intent),
        ];
        if let Some((key, _)) = ids.iter().find(|(_, v)| !is_valid_id(v)) {
            return Err(HintError::InvalidId(key));
        }
        self.check_lifetime()
    }

    /// Compact JSON in the seed's member order, after [`validate`](Self::validate):
    /// what a sender encrypts (SPEC RT-12). Identifiers and timestamps need
    /// no escaping, so the text is written directly.
    pub fn encode(&self) -> Result<Vec<u8>, HintError> {
        self.validate()?;
        let issued =
            format_timestamp(self.issued_at_ms).ok_or(HintError::InvalidTimestamp("issuedAt"))?;
        let expires =
            format_timestamp(self.expires_at_ms).ok_or(HintError::InvalidTimestamp("expiresAt"))?;
        let text = format!(
            concat!(
                r#"{{"protocol":"{}","notificationType":"{}","notificationId":"{}","#,
                r#""associationEpoch":"{}","releaseEpoch":"{}","issuedAt":"{}","#,
                r#""expiresAt":"{}","routeIntent":"{}"}}"#
            ),
            HINT_PROTOCOL,
            self.notification_type,
            self.notification_id,
            self.association_epoch,
            self.release_epoch,
            issued,
            expires,
            self.route_intent,
        );
        // Five 128-byte identifiers and two timestamps stay far below 3 KiB;
        // checked anyway so the encoder can never emit what decode refuses.
        if text.len() > MAX_HINT_BYTES {
            return Err(HintError::Json(Refusal::TooLarge {
                len: text.len(),
                max: MAX_HINT_BYTES,
            }));
        }
        Ok(text.into_bytes())
    }

    /// The receiver's checks after decoding (seed §8.4): `issuedAt` at most
    /// 5 minutes ahead of `now_ms`, not expired, and the association and
    /// release epochs exactly the active ones. Any failure drops the hint.
    pub fn check_at(
        &self,
        now_ms: u64,
        association_epoch: &str,
        release_epoch: &str,
    ) -> Result<(), HintError> {
        if self.issued_at_ms > now_ms.saturating_add(MAX_CLOCK_SKEW_MS) {
            return Err(HintError::IssuedInFuture);
        }
        if now_ms >= self.expires_at_ms {
            return Err(HintError::Expired);
        }
        if self.association_epoch != association_epoch {
            return Err(HintError::AssociationMismatch);
        }
        if self.release_epoch != release_epoch {
            return Err(HintError::ReleaseMismatch);
        }
        Ok(())
    }

    fn check_lifetime(&self) -> Result<(), HintError> {
        let lifetime = self.expires_at_ms.checked_sub(self.issued_at_ms);
        match lifetime {
            Some(l) if (1..=MAX_HINT_LIFETIME_MS).contains(&l) => Ok(()),
            _ => Err(HintError::InvalidLifetime),
        }
    }
}

impl fmt::Debug for WebPushHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebPushHint")
            .field("notification_type", &self.notification_type)
            .field("route_intent", &self.route_intent)
            .field("issued_at_ms", &self.issued_at_ms)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &'static str) -> Result<&'a str, HintError> {
    map.get(key)
        .ok_or(HintError::MissingKey(key))?
        .as_str()
        .ok_or(HintError::WrongType(key))
}

fn id(map: &Map<String, Value>, key: &'static str) -> Result<String, HintError> {
    let s = string(map, key)?;
    if is_valid_id(s) {
        Ok(s.to_owned())
    } else {
        Err(HintError::InvalidId(key))
    }
}

fn timestamp(map: &Map<String, Value>, key: &'static str) -> Result<u64, HintError> {
    parse_timestamp(string(map, key)?).ok_or(HintError::InvalidTimestamp(key))
}
