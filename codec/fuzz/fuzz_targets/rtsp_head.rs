//! Arbitrary bytes into the RTSP message parser (`dtp_codec::rtsp`, RFC
//! 2326: no request from an RTSP client makes the transport panic), under
//! small and default ceilings, and every message that parses into the
//! typed header readers and the writer.
//!
//! The oracles: a whole message claims no more bytes than it was given,
//! and its head, header count, URI and body respect the ceilings; re-
//! parsing exactly those bytes gives the same message; what parses writes
//! back to bytes that parse to an equal message (and a typed `Session` or
//! `Transport` that reads writes back to one that reads equal); every
//! error points inside the input and maps to a status a server sends; a
//! prefix of the input is refused with the same error, needs more, or
//! gives the same message (the answer never depends on where bytes were
//! cut).

#![no_main]

use dtp_codec::rtsp::{
    Message, Parse, RtspLimits, Session, format_transport, parse_message, parse_transport,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let small = RtspLimits {
        max_head_bytes: 256,
        max_headers: 4,
        max_uri_len: 32,
        max_body_bytes: 16,
    };
    for limits in [small, RtspLimits::default()] {
        let whole = parse_message(data, &limits);
        match &whole {
            Ok(Parse::Done(m, n)) => check_message(data, m, *n, &limits),
            Ok(Parse::NeedMore(more)) => assert!(*more >= 1),
            Err(e) => {
                assert!(e.offset <= data.len(), "{e} in {} bytes", data.len());
                assert!(matches!(e.status(), 400 | 413 | 414 | 505), "{e}");
            }
        }
        // Prefixes: a few cut points, chosen by the input itself.
        let cuts = [data.len() / 2, data.len().saturating_sub(1), usize::from(data.first().copied().unwrap_or(0))];
        for cut in cuts {
            let Some(prefix) = data.get(..cut) else { continue };
            match parse_message(prefix, &limits) {
                Ok(Parse::NeedMore(_)) => {}
                other => assert_eq!(other, whole, "prefix of {cut} bytes"),
            }
        }
    }
});

fn check_message(data: &[u8], m: &Message, n: usize, limits: &RtspLimits) {
    assert!(n <= data.len());
    let (headers, body, cseq) = match m {
        Message::Request(r) => {
            assert!(r.uri.len() <= limits.max_uri_len);
            (&r.headers, &r.body, r.cseq)
        }
        Message::Response(r) => {
            assert!((100..600).contains(&r.status));
            (&r.headers, &r.body, r.cseq)
        }
    };
    assert!(body.len() <= limits.max_body_bytes);
    assert!(n - body.len() <= limits.max_head_bytes);
    let fields = headers.0.len() + usize::from(cseq.is_some()) + usize::from(!body.is_empty());
    assert!(fields <= limits.max_headers, "{fields} fields");
    assert_eq!(parse_message(&data[..n], limits), Ok(Parse::Done(m.clone(), n)));
    let mut again = Vec::new();
    m.write(&mut again).expect("a parsed message writes back");
    let roomy = RtspLimits {
        max_head_bytes: again.len(),
        ..*limits
    };
    assert_eq!(
        parse_message(&again, &roomy),
        Ok(Parse::Done(m.clone(), again.len())),
        "written back: {:?}",
        String::from_utf8_lossy(&again)
    );
    match headers.session() {
        Ok(Some(s)) => assert_eq!(Session::parse(&s.to_string()), Ok(s)),
        Ok(None) => {}
        Err(e) => assert!(e.offset < data.len()),
    }
    match headers.transport() {
        Ok(Some(specs)) => assert_eq!(parse_transport(&format_transport(&specs)), Ok(specs)),
        Ok(None) => {}
        Err(e) => assert!(e.offset < data.len()),
    }
}
