//! Property tests: no input makes the parser panic or claim bytes it was not
//! given, generated requests round-trip, and the encoders invert their
//! decoders.

use proptest::prelude::*;

use super::*;

fn small_limits() -> HttpLimits {
    HttpLimits {
        max_head_bytes: 96,
        max_headers: 3,
        max_uri_len: 24,
        max_body_bytes: 10,
    }
}

/// The oracles shared by every arbitrary input.
fn check(buf: &[u8], limits: &HttpLimits) {
    match parse_request_head(buf, limits) {
        Ok(Some((head, n))) => {
            assert!(n <= buf.len() && n <= limits.max_head_bytes);
            assert_eq!(
                parse_request_head(&buf[..n], limits),
                Ok(Some((head.clone(), n)))
            );
            assert!(head.target().len() <= limits.max_uri_len);
            assert!(head.content_length() <= limits.max_body_bytes);
            let _ = websocket_upgrade(&head);
            let _ = (
                head.path_segments(),
                head.if_none_match(),
                head.keep_alive(),
            );
            let _ = (head.query_param("a"), head.cookie("a"), head.bearer_token());
        }
        Ok(None) => assert!(buf.len() <= limits.max_head_bytes),
        Err(e) => assert!(matches!(e.status(), 400 | 413 | 414 | 431 | 501 | 505)),
    }
}

/// The oracles of the response parser on arbitrary input: no panic, never
/// more bytes claimed than given or than the ceiling, the same answer on
/// the claimed prefix alone, and an unambiguous framing.
fn check_response(buf: &[u8], limits: &ResponseLimits) {
    match parse_response_head(buf, limits) {
        Ok(Some((head, n))) => {
            assert!(n <= buf.len() && n <= limits.max_head_bytes);
            assert_eq!(
                parse_response_head(&buf[..n], limits),
                Ok(Some((head.clone(), n)))
            );
            assert!((100..=999).contains(&head.status()));
            assert!(head.fields().len() <= limits.max_headers);
            assert!(!(head.content_length().is_some() && head.has_transfer_encoding()));
            let _ = (head.framing(), head.header("content-type"), head.reason());
        }
        Ok(None) => assert!(buf.len() <= limits.max_head_bytes),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// `prefix` with `noise` spliced in at `at`, then a line end.
fn with_noise(prefix: &[u8], noise: Vec<u8>, at: prop::sample::Index) -> Vec<u8> {
    let mut buf = prefix.to_vec();
    let at = at.index(buf.len() + 1);
    buf.splice(at..at, noise);
    buf.extend_from_slice(b"\r\n");
    buf
}

fn small_response_limits() -> ResponseLimits {
    ResponseLimits {
        max_head_bytes: 64,
        max_headers: 2,
    }
}

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9-]{0,12}".prop_filter("framing and host are generated apart", |n| {
        !["content-length", "transfer-encoding", "host"].contains(&n.to_ascii_lowercase().as_str())
    })
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        Just(Method::Get),
        Just(Method::Head),
        Just(Method::Post),
        Just(Method::Put),
        Just(Method::Delete),
        Just(Method::Options),
        Just(Method::Patch),
        "[A-Z]{1,3}X".prop_map(Method::Other),
    ]
}

prop_compose! {
    fn request()(
        method in method(),
        segments in prop::collection::vec("[A-Za-z0-9._~-]{1,8}|%[0-9A-F]{2}", 0..5),
        query in prop::option::of("[A-Za-z0-9=&%+]{0,12}"),
        fields in prop::collection::vec((token(), "[!-~]([ -~]{0,20}[!-~])?|"), 0..8),
        length in prop::option::of(0u64..=65_536),
        http10 in any::<bool>(),
    ) -> (Method, String, Option<String>, Vec<(String, String)>, Option<u64>, bool) {
        let path = format!("/{}", segments.join("/"));
        (method, path, query, fields, length, http10)
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_response_parser(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        check_response(&buf, &ResponseLimits::default());
        check_response(&buf, &small_response_limits());
    }

    #[test]
    fn mutated_responses_never_panic(
        prefix in prop::sample::select(vec![
            &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n"[..],
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n",
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n",
        ]),
        noise in prop::collection::vec(any::<u8>(), 0..40),
        at in any::<prop::sample::Index>(),
    ) {
        let buf = with_noise(prefix, noise, at);
        check_response(&buf, &ResponseLimits::default());
        check_response(&buf, &small_response_limits());
    }

    #[test]
    fn generated_responses_round_trip(
        status in 100u16..=599,
        fields in prop::collection::vec((token(), "[!-~]([ -~]{0,20}[!-~])?|"), 0..8),
        length in prop::option::of(0u64..=1 << 40),
        chunked in any::<bool>(),
    ) {
        let mut head = ResponseHead::new(status);
        for (name, value) in &fields {
            head = head.header(name, value).unwrap();
        }
        head = match (chunked, length) {
            (true, _) => head.chunked(),
            (false, Some(n)) => head.content_length(n),
            (false, None) => head,
        };
        let wire = head.to_bytes();
        let limits = ResponseLimits::default();
        for end in 0..wire.len() {
            prop_assert_eq!(parse_response_head(&wire[..end], &limits), Ok(None));
        }
        let (resp, n) = parse_response_head(&wire, &limits).unwrap().unwrap();
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(resp.status(), status);
        prop_assert_eq!(resp.reason(), reason_phrase(status));
        let bodiless = status < 200 || status == 204 || status == 304;
        let want = match (bodiless, chunked, length) {
            (true, _, _) => BodyFraming::Length(0),
            (false, true, _) => BodyFraming::Chunked,
            (false, false, Some(n)) => BodyFraming::Length(n),
            (false, false, None) => BodyFraming::UntilClose,
        };
        prop_assert_eq!(resp.framing(), want);
        for (name, _) in &fields {
            let first = fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).unwrap();
            prop_assert_eq!(resp.header(&name.to_ascii_uppercase()), Some(first.1.as_str()));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300)) {
        check(&buf, &HttpLimits::default());
        check(&buf, &small_limits());
    }

    #[test]
    fn mutated_requests_never_panic(
        prefix in prop::sample::select(vec![
            &b"GET /v1/ws?a=b HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"[..],
            b"POST /a HTTP/1.0\r\nContent-Length: 3\r\nCookie: a=1\r\n",
            b"GET / HTTP/1.1\r\nIf-None-Match: W/\"a\"\r\nAuthorization: Bearer x\r\n",
        ]),
        noise in prop::collection::vec(any::<u8>(), 0..40),
        at in any::<prop::sample::Index>(),
    ) {
        let buf = with_noise(prefix, noise, at);
        check(&buf, &HttpLimits::default());
        check(&buf, &small_limits());
    }

    #[test]
    fn generated_requests_round_trip((method, path, query, fields, length, http10) in request()) {
        let mut wire = format!("{} {path}", method.as_str());
        if let Some(q) = &query {
            wire.push('?');
            wire.push_str(q);
        }
        wire.push_str(if http10 { " HTTP/1.0\r\n" } else { " HTTP/1.1\r\nHost: h\r\n" });
        for (name, value) in &fields {
            wire.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(n) = length {
            wire.push_str(&format!("Content-Length: {n}\r\n"));
        }
        wire.push_str("\r\n");
        let limits = HttpLimits::default();
        for end in 0..wire.len() {
            prop_assert_eq!(parse_request_head(&wire.as_bytes()[..end], &limits), Ok(None));
        }
        let (head, n) = parse_request_head(wire.as_bytes(), &limits).unwrap().unwrap();
        prop_assert_eq!(n, wire.len());
        prop_assert_eq!(head.method(), &method);
        prop_assert_eq!(head.path(), path.as_str());
        prop_assert_eq!(head.query(), query.as_deref());
        prop_assert_eq!(head.version(), if http10 { Version::Http10 } else { Version::Http11 });
        prop_assert_eq!(head.content_length(), length.unwrap_or(0));
        let host = usize::from(!http10);
        let got: Vec<(&str, &str)> = head.fields()[host..host + fields.len()]
            .iter()
            .map(|f| (f.name.as_str(), std::str::from_utf8(&f.value).unwrap()))
            .collect();
        let want: Vec<(&str, &str)> = fields.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        prop_assert_eq!(got, want);
        for (name, _) in &fields {
            let first = fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).unwrap();
            prop_assert_eq!(head.header(&name.to_ascii_uppercase()), Some(first.1.as_str()));
        }
    }

    #[test]
    fn base64_round_trips(raw in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = base64_encode(&raw);
        prop_assert_eq!(text.len(), raw.len().div_ceil(3) * 4);
        prop_assert_eq!(base64_decode(&text), Some(raw));
    }

    #[test]
    fn base64_decode_of_arbitrary_text_re_encodes(text in "[A-Za-z0-9+/=]{0,24}") {
        if let Some(raw) = base64_decode(&text) {
            prop_assert_eq!(base64_encode(&raw), text);
        }
    }

    #[test]
    fn percent_encoded_query_values_decode(value in "\\PC{0,12}") {
        let encoded: String = value.bytes().map(|b| format!("%{b:02X}")).collect();
        let wire = format!("GET /?z=0&k={encoded} HTTP/1.1\r\n\r\n");
        let (head, _) = parse_request_head(wire.as_bytes(), &HttpLimits::default()).unwrap().unwrap();
        prop_assert_eq!(head.query_param("k"), Some(value));
    }

    #[test]
    fn written_headers_parse_back_or_are_refused(name in "\\PC{0,6}", value in "[ -~\t\r\n\0]{0,12}") {
        match ResponseHead::new(200).header(&name, &value) {
            Err(e) => prop_assert_eq!(e, HttpError::InvalidResponseHeader),
            Ok(head) => {
                let wire = head.content_length(0).to_bytes();
                let (resp, n) = parse_response_head(&wire, &ResponseLimits::default()).unwrap().unwrap();
                prop_assert_eq!(n, wire.len());
                prop_assert_eq!(resp.fields().len(), 2);
                prop_assert_eq!(resp.fields()[0].name.as_str(), name.as_str());
                prop_assert_eq!(&resp.fields()[0].value[..], value.trim_matches([' ', '\t']).as_bytes());
                prop_assert_eq!(resp.framing(), BodyFraming::Length(0));
            }
        }
    }
}
