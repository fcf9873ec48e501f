//! The closed vocabularies (SPEC RT-9 close categories, RT-14 failure kinds).

use super::*;
use crate::ws::CloseCode;

#[test]
fn failure_vocabulary_is_the_full_closed_list_of_seed_13_1() {
    let names: Vec<&str> = FailureKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "ABORTED",
            "UNSUPPORTED",
            "OFFLINE",
            "CONNECT_TIMEOUT",
            "IDLE_TIMEOUT",
            "AUTH_REQUIRED",
            "FORBIDDEN",
            "RATE_LIMITED",
            "PROVIDER_UNAVAILABLE",
            "PROTOCOL_MISMATCH",
            "MALFORMED_EVENT",
            "MAPPING_CONTRACT_VIOLATION",
            "EVENT_CONFLICT",
            "EVENT_TOO_LARGE",
            "DUPLICATE_EVENT",
            "STALE_EVENT",
            "SEQUENCE_GAP",
            "CURSOR_EXPIRED",
            "QUEUE_OVERFLOW",
            "APPLY_FAILED",
            "POLL_BUDGET_EXHAUSTED",
            "PUSH_PERMISSION_DENIED",
            "PUSH_SUBSCRIPTION_STALE",
            "NOTIFICATION_REJECTED",
            "SCOPE_FENCED",
            "SCOPE_PROTOCOL_VIOLATION",
            "CLOSED",
        ]
    );
    for k in FailureKind::ALL {
        assert_eq!(k.as_str().parse::<FailureKind>(), Ok(*k));
        assert_eq!(k.to_string(), k.as_str());
    }
    assert_eq!("aborted".parse::<FailureKind>(), Err(UnknownFailureKind));
    assert_eq!("ABORTED ".parse::<FailureKind>(), Err(UnknownFailureKind));
    assert_eq!("DROPPED".parse::<FailureKind>(), Err(UnknownFailureKind));
}

#[test]
fn close_categories_round_trip_through_their_codes() {
    assert_eq!(CloseCategory::ALL.len(), 8);
    for c in CloseCategory::ALL {
        assert_eq!(c.as_str().parse::<CloseCategory>(), Ok(*c));
        match c.close_code() {
            Some(code) => assert_eq!(CloseCategory::from_close_code(code.0), *c),
            None => assert_eq!(*c, CloseCategory::NetworkLost),
        }
    }
    assert_eq!("normal".parse::<CloseCategory>(), Err(UnknownCloseCategory));
}

#[test]
fn received_codes_map_to_the_documented_categories() {
    let table = [
        (1000, "NORMAL"),
        (1001, "RESTART"),
        (1002, "PROTOCOL_MISMATCH"),
        (1006, "NETWORK_LOST"),
        (1008, "FORBIDDEN"),
        (1009, "PROTOCOL_MISMATCH"),
        (1011, "NETWORK_LOST"),
        (1012, "RESTART"),
        (1013, "OVERLOADED"),
        (4401, "AUTH_REQUIRED"),
        (4403, "FORBIDDEN"),
        (4409, "CURSOR_RESET"),
        (4999, "NETWORK_LOST"),
    ];
    for (code, name) in table {
        assert_eq!(
            CloseCategory::from_close_code(code).as_str(),
            name,
            "{code}"
        );
    }
    assert_eq!(CloseCategory::Normal.close_code(), Some(CloseCode(1000)));
    assert_eq!(CloseCategory::Restart.close_code(), Some(CloseCode(1012)));
    assert_eq!(
        CloseCategory::Overloaded.close_code(),
        Some(CloseCode(1013))
    );
    assert_eq!(
        CloseCategory::ProtocolMismatch.close_code(),
        Some(CloseCode(1002))
    );
    assert!(CloseCategory::Restart.may_reconnect());
    assert!(!CloseCategory::Forbidden.may_reconnect());
}
