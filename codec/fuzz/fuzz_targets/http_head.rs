//! Arbitrary bytes into the HTTP/1.1 request head parser (SPEC RT-8, RT-9,
//! RT-11: no request from a browser or a proxy makes the server panic), under
//! small and default limits, and every head that parses into the WebSocket
//! handshake check and the field accessors.
//!
//! The oracles: a complete head claims no more bytes than it was given nor
//! than the head limit; re-parsing exactly those bytes gives the same head;
//! the head respects every limit it was parsed under; "incomplete" is only
//! said while the buffer is within the head limit; every refusal has one of
//! the statuses the parser documents; a valid handshake's key decodes to 16
//! bytes and its accept value to 20.

#![no_main]

use dtp_codec::http::{
    HttpLimits, accept_key, base64_decode, parse_request_head, websocket_upgrade,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let small = HttpLimits {
        max_head_bytes: 256,
        max_headers: 4,
        max_uri_len: 32,
        max_body_bytes: 16,
    };
    for limits in [small, HttpLimits::default()] {
        match parse_request_head(data, &limits) {
            Ok(Some((head, n))) => {
                assert!(n <= data.len() && n <= limits.max_head_bytes);
                assert_eq!(
                    parse_request_head(&data[..n], &limits),
                    Ok(Some((head.clone(), n)))
                );
                assert!(head.target().len() <= limits.max_uri_len);
                assert!(head.fields().len() <= limits.max_headers);
                assert!(head.content_length() <= limits.max_body_bytes);
                match websocket_upgrade(&head) {
                    Ok(Some(up)) => {
                        assert_eq!(base64_decode(&up.key).map(|k| k.len()), Some(16));
                        assert_eq!(
                            base64_decode(&accept_key(&up.key)).map(|a| a.len()),
                            Some(20)
                        );
                        let _ = up.response(up.protocols.first().map(String::as_str));
                    }
                    Ok(None) => {}
                    Err(e) => assert!(matches!(e.status(), 400 | 405 | 426)),
                }
                let _ = (
                    head.path_segments(),
                    head.query_param("a"),
                    head.cookie("a"),
                );
                let _ = (
                    head.bearer_token(),
                    head.if_none_match(),
                    head.last_event_id(),
                );
                let _ = head.keep_alive();
            }
            Ok(None) => assert!(data.len() <= limits.max_head_bytes),
            Err(e) => {
                assert!(matches!(e.status(), 400 | 413 | 414 | 431 | 501 | 505));
                assert!(!e.to_response().is_empty());
            }
        }
    }
});
