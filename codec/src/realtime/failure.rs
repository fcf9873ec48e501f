//! The closed failure vocabulary (SPEC RT-14, seed §13.1) and the closed
//! WebSocket close categories (SPEC RT-9, seed §7.4).
//!
//! Raw native errors, close reasons and backend messages never become one of
//! these values: a parser maps its refusal to a [`FailureKind`], a received
//! close code to a [`CloseCategory`], and only those names reach telemetry.

use std::fmt;
use std::str::FromStr;

use crate::ws::CloseCode;

/// Defines a closed enum with its exact wire spelling, `as_str`, `ALL`,
/// `Display` and `FromStr`.
macro_rules! closed_vocabulary {
    (
        $(#[$meta:meta])*
        $ty:ident, $err:ident, $what:literal {
            $($(#[$vmeta:meta])* $variant:ident => $name:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)*
        }

        impl $ty {
            /// Every value, in the order the seed lists them.
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];

            /// The exact UPPER_SNAKE wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)*
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[doc = concat!("A ", $what, " spelled otherwise than on the wire.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $err;

        impl fmt::Display for $err {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!("unknown ", $what))
            }
        }

        impl std::error::Error for $err {}

        impl FromStr for $ty {
            type Err = $err;

            /// Exact wire spelling only (closed vocabulary: fail closed).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)*
                    _ => Err($err),
                }
            }
        }
    };
}

closed_vocabulary! {
    /// A failure of the realtime runtime, from the closed list of seed §13.1
    /// (SPEC RT-14). Nothing else — no raw error text — is ever reported.
    FailureKind, UnknownFailureKind, "failure kind" {
        /// Lifecycle or user cancellation; no retry.
        Aborted => "ABORTED",
        /// The capability is missing; use the declared fallback.
        Unsupported => "UNSUPPORTED",
        /// Network hint or attempt failure.
        Offline => "OFFLINE",
        /// The open deadline passed.
        ConnectTimeout => "CONNECT_TIMEOUT",
        /// The heartbeat or byte deadline passed.
        IdleTimeout => "IDLE_TIMEOUT",
        /// The session expired or its recovery failed.
        AuthRequired => "AUTH_REQUIRED",
        /// The stream or resource was refused; no retry.
        Forbidden => "FORBIDDEN",
        /// A connection, request or provider limit.
        RateLimited => "RATE_LIMITED",
        /// Backend, push or hosting unavailable.
        ProviderUnavailable => "PROVIDER_UNAVAILABLE",
        /// Version, subprotocol or content type mismatch; terminal.
        ProtocolMismatch => "PROTOCOL_MISMATCH",
        /// Syntax, schema or exact-key failure of a state-bearing message.
        MalformedEvent => "MALFORMED_EVENT",
        /// The registered mapper refused a validated event.
        MappingContractViolation => "MAPPING_CONTRACT_VIOLATION",
        /// The same id or sequence names two different events.
        EventConflict => "EVENT_CONFLICT",
        /// A byte (or structure) ceiling was exceeded.
        EventTooLarge => "EVENT_TOO_LARGE",
        /// Already processed; ignored.
        DuplicateEvent => "DUPLICATE_EVENT",
        /// Old or out of order; ignored.
        StaleEvent => "STALE_EVENT",
        /// An event is missing; snapshot resync.
        SequenceGap => "SEQUENCE_GAP",
        /// The cursor is outside replay retention; snapshot reset.
        CursorExpired => "CURSOR_EXPIRED",
        /// A backpressure ceiling was reached.
        QueueOverflow => "QUEUE_OVERFLOW",
        /// The feature effect failed; the cursor is not committed.
        ApplyFailed => "APPLY_FAILED",
        /// The poll lease is exhausted.
        PollBudgetExhausted => "POLL_BUDGET_EXHAUSTED",
        /// The user refused push permission.
        PushPermissionDenied => "PUSH_PERMISSION_DENIED",
        /// Rotation, expiry or provider gone.
        PushSubscriptionStale => "PUSH_SUBSCRIPTION_STALE",
        /// Invalid, expired or out-of-scope notification.
        NotificationRejected => "NOTIFICATION_REJECTED",
        /// An old account or release generation; dropped.
        ScopeFenced => "SCOPE_FENCED",
        /// The scope binding of a current-connection event does not match.
        ScopeProtocolViolation => "SCOPE_PROTOCOL_VIOLATION",
        /// The runtime is terminal; only a new generation may start.
        Closed => "CLOSED",
    }
}

closed_vocabulary! {
    /// Why a realtime connection closed (SPEC RT-9, seed §7.4): the only thing
    /// a close code or reason is ever turned into.
    ///
    /// The recommended WebSocket close codes ([`CloseCategory::close_code`])
    /// and the reverse mapping ([`CloseCategory::from_close_code`]):
    ///
    /// | category | sent as | also read from | reconnect (seed §7.4) |
    /// | --- | --- | --- | --- |
    /// | `NORMAL` | 1000 | — | no |
    /// | `RESTART` | 1012 (IANA "Service Restart") | 1001 | bounded |
    /// | `OVERLOADED` | 1013 (IANA "Try Again Later") | 1014, 4429 | only with a server hint |
    /// | `AUTH_REQUIRED` | 4401 | — | once, after session recovery |
    /// | `FORBIDDEN` | 4403 | 1008 | no |
    /// | `PROTOCOL_MISMATCH` | 1002 | 1003, 1007, 1009, 1010 | no |
    /// | `CURSOR_RESET` | 4409 | 4410 | after a snapshot, new connection |
    /// | `NETWORK_LOST` | never sent (1006 is observed, not sent) | every other code | bounded |
    CloseCategory, UnknownCloseCategory, "close category" {
        /// Intentional close or drain.
        Normal => "NORMAL",
        /// Server deploy or restart.
        Restart => "RESTART",
        /// Server capacity or rate.
        Overloaded => "OVERLOADED",
        /// The session expired.
        AuthRequired => "AUTH_REQUIRED",
        /// Policy or authorisation.
        Forbidden => "FORBIDDEN",
        /// Version, schema or subprotocol.
        ProtocolMismatch => "PROTOCOL_MISMATCH",
        /// Replay is impossible.
        CursorReset => "CURSOR_RESET",
        /// Abnormal closure or network loss.
        NetworkLost => "NETWORK_LOST",
    }
}

impl CloseCategory {
    /// The WebSocket close code to send for this category (table above), or
    /// `None` for `NETWORK_LOST`, which a peer observes (1006) but never sends.
    ///
    /// 1012 and 1013 are in the IANA WebSocket close code registry, not in
    /// RFC 6455 itself; the 4xxx codes are private-use (RFC 6455 §7.4.2) and
    /// echo the HTTP status of the same meaning.
    pub const fn close_code(self) -> Option<CloseCode> {
        match self {
            Self::Normal => Some(CloseCode(1000)),
            Self::Restart => Some(CloseCode(1012)),
            Self::Overloaded => Some(CloseCode(1013)),
            Self::AuthRequired => Some(CloseCode(4401)),
            Self::Forbidden => Some(CloseCode(4403)),
            Self::ProtocolMismatch => Some(CloseCode(1002)),
            Self::CursorReset => Some(CloseCode(4409)),
            Self::NetworkLost => None,
        }
    }

    /// The category of a received close code (table above); a code this
    /// table does not name — including 1006 and 1011 — is `NETWORK_LOST`.
    pub const fn from_close_code(code: u16) -> Self {
        match code {
            1000 => Self::Normal,
            1001 | 1012 => Self::Restart,
            1013 | 1014 | 4429 => Self::Overloaded,
            4401 => Self::AuthRequired,
            1008 | 4403 => Self::Forbidden,
            1002 | 1003 | 1007 | 1009 | 1010 => Self::ProtocolMismatch,
            4409 | 4410 => Self::CursorReset,
            _ => Self::NetworkLost,
        }
    }

    /// Whether seed §7.4 allows an automatic (bounded) reconnect after this
    /// category without any other recovery step first.
    pub const fn may_reconnect(self) -> bool {
        matches!(self, Self::Restart | Self::NetworkLost)
    }
}
