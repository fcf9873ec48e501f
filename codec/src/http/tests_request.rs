//! Request head parsing: success, incremental and pipelined input, and every
//! refusal with its exact status.

use super::*;

fn parse(wire: &[u8]) -> Result<Option<(RequestHead, usize)>, HttpError> {
    parse_request_head(wire, &HttpLimits::default())
}

fn head(wire: &[u8]) -> RequestHead {
    let (h, n) = parse(wire).unwrap().unwrap();
    assert_eq!(n, wire.len());
    h
}

/// The refusal for `wire`, with its status.
fn refused(wire: &[u8]) -> (HttpError, u16) {
    let e = parse(wire).unwrap_err();
    (e, e.status())
}

const POST: &[u8] = b"POST /v1/streams/s1/events?x=1 HTTP/1.1\r\nHost: example.com\r\n\
Content-Type: application/json\r\nX-Mixed-Case: A\r\nContent-Length: 13\r\n\r\n";

#[test]
fn a_post_head_is_parsed_into_its_parts() {
    let h = head(POST);
    assert_eq!(h.method(), &Method::Post);
    assert_eq!(h.method().as_str(), "POST");
    assert_eq!(h.target(), "/v1/streams/s1/events?x=1");
    assert_eq!(h.path(), "/v1/streams/s1/events");
    assert_eq!(h.query(), Some("x=1"));
    assert_eq!(h.version(), Version::Http11);
    assert_eq!(h.content_length(), 13);
    assert_eq!(h.fields().len(), 4);
    assert_eq!(h.fields()[2].name, "X-Mixed-Case");
    assert_eq!(h.header("x-mixed-case"), Some("A"));
    assert_eq!(h.header("HOST"), Some("example.com"));
    assert_eq!(h.header("absent"), None);
}

#[test]
fn methods_versions_and_target_forms() {
    let cases: [(&[u8], Method, &str, Option<&str>); 7] = [
        (b"GET / HTTP/1.0\r\n\r\n", Method::Get, "/", None),
        (b"HEAD /a? HTTP/1.1\r\n\r\n", Method::Head, "/a", Some("")),
        (
            b"PUT http://h:8/a/b?q HTTP/1.1\r\n\r\n",
            Method::Put,
            "/a/b",
            Some("q"),
        ),
        (
            b"DELETE HTTPS://h HTTP/1.1\r\n\r\n",
            Method::Delete,
            "/",
            None,
        ),
        (b"OPTIONS * HTTP/1.1\r\n\r\n", Method::Options, "*", None),
        (
            b"PATCH http://h?z HTTP/1.1\r\n\r\n",
            Method::Patch,
            "/",
            Some("z"),
        ),
        (
            b"get /x HTTP/1.1\r\n\r\n",
            Method::Other("get".into()),
            "/x",
            None,
        ),
    ];
    for (wire, method, path, query) in cases {
        let h = head(wire);
        assert_eq!((h.method(), h.path(), h.query()), (&method, path, query));
    }
    assert_eq!(head(b"GET / HTTP/1.0\r\n\r\n").version(), Version::Http10);
}

#[test]
fn values_are_trimmed_and_non_utf8_values_are_bytes_only() {
    let h = head(b"GET / HTTP/1.1\r\nA:  x y \t\r\nB: \xff\xfe\r\nA: second\r\n\r\n");
    assert_eq!(h.header("a"), Some("x y"));
    assert_eq!(h.headers("A").collect::<Vec<_>>(), ["x y", "second"]);
    assert_eq!(h.header("b"), None);
    assert_eq!(h.fields()[1].value, b"\xff\xfe");
    assert_eq!(h.count("b"), 1);
}

#[test]
fn one_byte_at_a_time_is_incomplete_until_the_last_byte() {
    let limits = HttpLimits::default();
    for end in 0..POST.len() {
        assert_eq!(
            parse_request_head(&POST[..end], &limits),
            Ok(None),
            "at {end}"
        );
    }
    let (h, n) = parse_request_head(POST, &limits).unwrap().unwrap();
    assert_eq!(n, POST.len());
    assert_eq!(h, head(POST));
}

#[test]
fn pipelined_requests_and_a_body_are_left_after_the_head() {
    let first = b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
    let second = b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    let mut wire = first.to_vec();
    wire.extend_from_slice(b"hello");
    wire.extend_from_slice(second);
    let (h1, n1) = parse(&wire).unwrap().unwrap();
    assert_eq!((n1, h1.path(), h1.content_length()), (first.len(), "/a", 5));
    let rest = &wire[n1 + 5..];
    let (h2, n2) = parse(rest).unwrap().unwrap();
    assert_eq!(
        (n2, h2.path(), h2.content_length()),
        (second.len(), "/b", 0)
    );
}

#[test]
fn leading_empty_lines_and_bare_lf_are_accepted() {
    let wire = b"\r\n\nGET /x HTTP/1.1\nHost: h\n\n";
    let (h, n) = parse(wire).unwrap().unwrap();
    assert_eq!((h.path(), h.host(), n), ("/x", Some("h"), wire.len()));
}

#[test]
fn syntax_refusals_are_400() {
    let cases: [(&[u8], HttpError); 12] = [
        (b"GET  / HTTP/1.1\r\n\r\n", HttpError::Syntax),
        (b"GET /\r\n\r\n", HttpError::Syntax),
        (b"G(T / HTTP/1.1\r\n\r\n", HttpError::Syntax),
        (b"GET / HTTP/1.1\rX\n\r\n", HttpError::Syntax),
        (b"GET /\x01 HTTP/1.1\r\n\r\n", HttpError::Syntax),
        (b"GET / HTTP/1.1\r\nA : b\r\n\r\n", HttpError::InvalidHeader),
        (
            b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
            HttpError::InvalidHeader,
        ),
        (
            b"GET / HTTP/1.1\r\nA: b\x00c\r\n\r\n",
            HttpError::InvalidHeader,
        ),
        (
            b"GET / HTTP/1.1\r\nA: b\x7fc\r\n\r\n",
            HttpError::InvalidHeader,
        ),
        (
            b"GET / HTTP/1.1\r\nA\x01: b\r\n\r\n",
            HttpError::InvalidHeader,
        ),
        (b"GET / HTTP/1.1\r\n: b\r\n\r\n", HttpError::InvalidHeader),
        (
            b"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            HttpError::InvalidHeader,
        ),
    ];
    for (wire, want) in cases {
        assert_eq!(
            refused(wire),
            (want, 400),
            "{:?}",
            String::from_utf8_lossy(wire)
        );
    }
}

#[test]
fn target_refusals_are_400() {
    for wire in [
        &b"GET x HTTP/1.1\r\n\r\n"[..],
        b"GET * HTTP/1.1\r\n\r\n",
        b"GET ftp://h/ HTTP/1.1\r\n\r\n",
        b"GET http:///a HTTP/1.1\r\n\r\n",
        b"GET /a#f HTTP/1.1\r\n\r\n",
        "GET /\u{e9} HTTP/1.1\r\n\r\n".as_bytes(),
        b"CONNECT h:443 HTTP/1.1\r\n\r\n",
    ] {
        assert_eq!(refused(wire), (HttpError::InvalidTarget, 400));
    }
}

#[test]
fn unsupported_versions_are_505_and_malformed_ones_400() {
    for wire in [
        &b"GET / HTTP/2.0\r\n\r\n"[..],
        b"GET / HTTP/1.2\r\n\r\n",
        b"GET / HTTP/0.9\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ] {
        assert_eq!(refused(wire), (HttpError::VersionNotSupported, 505));
    }
    for wire in [
        &b"GET / HTTP/x.1\r\n\r\n"[..],
        b"GET / HTTP/1\r\n\r\n",
        b"GET / http/1.1\r\n\r\n",
    ] {
        assert_eq!(refused(wire), (HttpError::Syntax, 400));
    }
    // A prefix of a version that will be refused is still just incomplete.
    for wire in [&b"GET / HTTP/2"[..], b"GET / HTTP/2.", b"GET / HTTP/"] {
        assert_eq!(parse(wire), Ok(None));
    }
}

#[test]
fn too_many_headers_is_431() {
    let limits = HttpLimits {
        max_headers: 2,
        ..HttpLimits::default()
    };
    let ok = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n";
    assert!(parse_request_head(ok, &limits).unwrap().is_some());
    let wire = b"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    let e = parse_request_head(wire, &limits).unwrap_err();
    assert_eq!((e, e.status()), (HttpError::TooManyHeaders, 431));
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..65 {
        many.extend_from_slice(format!("H{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(refused(&many), (HttpError::TooManyHeaders, 431));
    // A limit above the inline slots works too.
    let big = HttpLimits {
        max_headers: 100,
        ..HttpLimits::default()
    };
    assert_eq!(
        parse_request_head(&many, &big)
            .unwrap()
            .unwrap()
            .0
            .fields()
            .len(),
        65
    );
}

#[test]
fn head_too_large_is_431_as_soon_as_the_limit_is_passed() {
    let limits = HttpLimits {
        max_head_bytes: 64,
        ..HttpLimits::default()
    };
    let mut wire = b"GET / HTTP/1.1\r\nA: ".to_vec();
    wire.resize(64, b'a');
    assert_eq!(parse_request_head(&wire, &limits), Ok(None));
    wire.push(b'a');
    let e = parse_request_head(&wire, &limits).unwrap_err();
    assert_eq!((e, e.status()), (HttpError::HeadTooLarge, 431));
    // A complete head that fits is accepted even with more bytes behind it.
    let mut fits = b"GET / HTTP/1.1\r\n\r\n".to_vec();
    fits.resize(1000, b'x');
    assert_eq!(parse_request_head(&fits, &limits).unwrap().unwrap().1, 18);
    // A complete head one byte past the limit is refused.
    let mut over = b"GET / HTTP/1.1\r\nA: ".to_vec();
    over.resize(61, b'a');
    over.extend_from_slice(b"\r\n\r\n");
    assert_eq!(over.len(), 65);
    assert_eq!(
        parse_request_head(&over, &limits),
        Err(HttpError::HeadTooLarge)
    );
    // One byte shorter, it fits exactly.
    let exact = [&over[..60], &b"\r\n\r\n"[..]].concat();
    assert_eq!(parse_request_head(&exact, &limits).unwrap().unwrap().1, 64);
}

#[test]
fn uri_too_long_is_414_even_before_the_head_is_complete() {
    let limits = HttpLimits {
        max_uri_len: 10,
        ..HttpLimits::default()
    };
    let ok = b"GET /123456789 HTTP/1.1\r\n\r\n";
    assert_eq!(
        parse_request_head(ok, &limits)
            .unwrap()
            .unwrap()
            .0
            .target()
            .len(),
        10
    );
    let wire = b"GET /1234567890 HTTP/1.1\r\n\r\n";
    let e = parse_request_head(wire, &limits).unwrap_err();
    assert_eq!((e, e.status()), (HttpError::UriTooLong, 414));
    assert_eq!(parse_request_head(b"GET /123456789", &limits), Ok(None));
    assert_eq!(
        parse_request_head(b"GET /1234567890", &limits),
        Err(HttpError::UriTooLong)
    );
    // Under the default limits, a 5 KiB target inside a 16 KiB head.
    let mut long = b"GET /".to_vec();
    long.resize(5000, b'a');
    assert_eq!(refused(&long), (HttpError::UriTooLong, 414));
    long.extend_from_slice(b" HTTP/1.1\r\n\r\n");
    assert_eq!(refused(&long), (HttpError::UriTooLong, 414));
}

#[test]
fn content_length_refusals() {
    let cases: [(&[u8], HttpError, u16); 9] = [
        (
            b"Content-Length: 5\r\nContent-Length: 5\r\n",
            HttpError::DuplicateContentLength,
            400,
        ),
        (
            b"Content-Length: 5\r\ncontent-length: 6\r\n",
            HttpError::DuplicateContentLength,
            400,
        ),
        (
            b"Content-Length: 5, 5\r\n",
            HttpError::InvalidContentLength,
            400,
        ),
        (
            b"Content-Length: -1\r\n",
            HttpError::InvalidContentLength,
            400,
        ),
        (
            b"Content-Length: +1\r\n",
            HttpError::InvalidContentLength,
            400,
        ),
        (b"Content-Length:\r\n", HttpError::InvalidContentLength, 400),
        (b"Content-Length: 65537\r\n", HttpError::BodyTooLarge, 413),
        (
            b"Content-Length: 99999999999999999999999\r\n",
            HttpError::BodyTooLarge,
            413,
        ),
        (b"Host: a\r\nHost: b\r\n", HttpError::DuplicateHost, 400),
    ];
    for (fields, want, status) in cases {
        let wire = [b"POST / HTTP/1.1\r\n", fields, b"\r\n"].concat();
        assert_eq!(
            refused(&wire),
            (want, status),
            "{:?}",
            String::from_utf8_lossy(fields)
        );
    }
    let max = [&b"POST / HTTP/1.1\r\nContent-Length: 0065536\r\n\r\n"[..]].concat();
    assert_eq!(head(&max).content_length(), 65536);
}

#[test]
fn transfer_encoding_refusals() {
    let te = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(
        refused(te),
        (HttpError::TransferEncodingNotImplemented, 501)
    );
    let te_id = b"POST / HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n";
    assert_eq!(
        refused(te_id),
        (HttpError::TransferEncodingNotImplemented, 501)
    );
    for wire in [
        &b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
        assert_eq!(
            refused(wire),
            (HttpError::ContentLengthWithTransferEncoding, 400)
        );
    }
}

#[test]
fn errors_render_without_echoing_input() {
    let e = refused(b"GET / HTTP/1.1\r\nEvil\x01Header: x\r\n\r\n").0;
    assert_eq!(e.to_string(), "400 invalid header field");
    assert_eq!(
        HttpError::VersionNotSupported.to_string(),
        "505 only HTTP/1.0 and HTTP/1.1 are supported"
    );
}
