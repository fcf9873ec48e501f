//! Response heads, chunked bodies and canned responses.

use bytes::BytesMut;

use super::*;

fn text(b: &BytesMut) -> &str {
    std::str::from_utf8(b).unwrap()
}

#[test]
fn every_code_we_send_has_its_reason() {
    let codes: [(u16, &str); 26] = [
        (101, "Switching Protocols"),
        (200, "OK"),
        (201, "Created"),
        (202, "Accepted"),
        (204, "No Content"),
        (304, "Not Modified"),
        (400, "Bad Request"),
        (401, "Unauthorized"),
        (403, "Forbidden"),
        (404, "Not Found"),
        (405, "Method Not Allowed"),
        (409, "Conflict"),
        (410, "Gone"),
        (411, "Length Required"),
        (413, "Content Too Large"),
        (414, "URI Too Long"),
        (415, "Unsupported Media Type"),
        (426, "Upgrade Required"),
        (429, "Too Many Requests"),
        (431, "Request Header Fields Too Large"),
        (500, "Internal Server Error"),
        (501, "Not Implemented"),
        (502, "Bad Gateway"),
        (503, "Service Unavailable"),
        (504, "Gateway Timeout"),
        (505, "HTTP Version Not Supported"),
    ];
    for (code, reason) in codes {
        assert_eq!(reason_phrase(code), reason);
    }
    assert_eq!(reason_phrase(299), "");
    assert_eq!(
        text(&ResponseHead::new(299).to_bytes()),
        "HTTP/1.1 299 \r\n\r\n"
    );
    assert_eq!(ResponseHead::new(1000).status(), 500);
    assert_eq!(ResponseHead::new(99).status(), 500);
}

#[test]
fn an_sse_head_with_chunks() {
    let head = ResponseHead::new(200)
        .header("Content-Type", "text/event-stream")
        .unwrap()
        .header("Cache-Control", "no-store")
        .unwrap()
        .content_length(5)
        .chunked();
    let mut out = BytesMut::new();
    head.write(&mut out);
    write_chunk(&mut out, b"data: x\n\n");
    write_chunk(&mut out, b"");
    write_chunk(&mut out, &[b'a'; 26]);
    write_last_chunk(&mut out);
    assert_eq!(
        text(&out),
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
Transfer-Encoding: chunked\r\n\r\n9\r\ndata: x\n\n\r\n1a\r\n{}\r\n0\r\n\r\n",
            "a".repeat(26)
        )
    );
}

#[test]
fn content_length_framing_and_bodiless_statuses() {
    let h = ResponseHead::new(200).chunked().content_length(42);
    assert_eq!(
        text(&h.to_bytes()),
        "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n"
    );
    for code in [101, 204, 304] {
        let h = ResponseHead::new(code)
            .header("ETag", "\"v1\"")
            .unwrap()
            .content_length(3);
        let want = format!(
            "HTTP/1.1 {code} {}\r\nETag: \"v1\"\r\n\r\n",
            reason_phrase(code)
        );
        assert_eq!(text(&h.to_bytes()), want);
        assert_eq!(
            text(&ResponseHead::new(code).chunked().to_bytes()),
            want.replace("ETag: \"v1\"\r\n", "")
        );
    }
}

#[test]
fn header_injection_is_refused() {
    let bad: [(&str, &str); 10] = [
        ("X", "a\r\nSet-Cookie: evil"),
        ("X", "a\nb"),
        ("X", "a\rb"),
        ("X", "a\0b"),
        ("X", "a\x7fb"),
        ("X\r\nY", "v"),
        ("X Y", "v"),
        ("", "v"),
        ("Content-Length", "1"),
        ("transfer-encoding", "chunked"),
    ];
    for (name, value) in bad {
        let e = ResponseHead::new(200).header(name, value).unwrap_err();
        assert_eq!(
            (e, e.status()),
            (HttpError::InvalidResponseHeader, 500),
            "{name:?}: {value:?}"
        );
    }
    let ok = ResponseHead::new(200)
        .header("X-Tab", "a\tb \u{e9}")
        .unwrap();
    assert_eq!(
        text(&ok.to_bytes()),
        "HTTP/1.1 200 OK\r\nX-Tab: a\tb \u{e9}\r\n\r\n"
    );
}

#[test]
fn simple_responses() {
    let r = simple_response(200, "application/json", b"{\"a\":1}", true);
    assert_eq!(
        text(&r),
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n\
Content-Length: 7\r\n\r\n{\"a\":1}"
    );
    let r = simple_response(404, "", b"", false);
    assert_eq!(
        text(&r),
        "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    let r = simple_response(400, "text/plain\r\nX: y", b"no", false);
    assert_eq!(
        text(&r),
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\
Content-Length: 2\r\n\r\nno"
    );
    let r = simple_response(304, "text/plain", b"ignored", true);
    assert_eq!(
        text(&r),
        "HTTP/1.1 304 Not Modified\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\r\n"
    );
}

#[test]
fn every_refusal_renders_a_parseable_response() {
    use HttpError::*;
    for e in [
        Syntax,
        InvalidHeader,
        InvalidTarget,
        TooManyHeaders,
        HeadTooLarge,
        UriTooLong,
        VersionNotSupported,
        InvalidContentLength,
        DuplicateContentLength,
        ContentLengthWithTransferEncoding,
        TransferEncodingNotImplemented,
        BodyTooLarge,
        DuplicateHost,
        WsMethodNotAllowed,
        WsNotHttp11,
        WsMissingHost,
        WsMissingUpgrade,
        WsMissingConnectionUpgrade,
        WsInvalidKey,
        WsUnsupportedVersion,
        WsInvalidHandshakeField,
        InvalidResponseHeader,
    ] {
        let wire = e.to_response();
        let (resp, n) = parse_response_head(&wire, &ResponseLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), e.status());
        assert_eq!(resp.reason(), reason_phrase(e.status()));
        assert!(!resp.reason().is_empty());
        assert_eq!(resp.framing(), BodyFraming::Length(e.reason().len() as u64));
        assert_eq!(&wire[n..], e.reason().as_bytes());
    }
}

#[test]
fn chunk_sizes_are_lowercase_hex_without_leading_zeros() {
    for (len, hex) in [
        (1usize, "1"),
        (15, "f"),
        (16, "10"),
        (255, "ff"),
        (65_536, "10000"),
    ] {
        let mut out = BytesMut::new();
        write_chunk(&mut out, &vec![b'x'; len]);
        let head = format!("{hex}\r\n");
        assert!(out.starts_with(head.as_bytes()), "{len}");
        assert_eq!(out.len(), head.len() + len + 2);
        assert!(out.ends_with(b"\r\n"));
    }
}
