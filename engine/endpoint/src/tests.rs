//! Unit tests of the endpoint's own parts (the protocol is tested through
//! whole endpoints: the session path, SES-1 … SES-4, in this crate's
//! `tests/ses.rs`; the rest in the gateway crate's tests).

#![allow(clippy::unwrap_used, reason = "tests")]

use bytes::Bytes;
use uuid::Uuid;

use dtp_codec::ErrorCode;

use crate::{DtpEvent, EndpointConfig};

/// The event queue's ceilings.
#[test]
fn event_queue_is_bounded() {
    let mut config = EndpointConfig::terminal();
    config.max_queued_events = 2;
    config.max_undelivered_fragments = 1;
    let mut q = crate::endpoint::EventQueue::new(&config);
    q.push(DtpEvent::Writable).unwrap();
    q.push(DtpEvent::Writable).unwrap();
    assert_eq!(
        q.push(DtpEvent::Writable).unwrap_err().code(),
        ErrorCode::LIMIT_EXCEEDED
    );
    assert!(q.has_room(10));
    q.push_unbounded(DtpEvent::Fragment {
        agreement_id: Uuid::nil(),
        fragment_id: 1,
        sequence: 1,
        relations: vec![],
        payload: Bytes::from_static(b"x"),
    });
    assert!(!q.has_room(1));
}
