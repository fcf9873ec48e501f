//! The client side: response heads read back, their framing, and the
//! refusals with their ceilings.

use super::*;

fn parse(wire: &[u8]) -> Result<Option<(ParsedResponse, usize)>, ResponseError> {
    parse_response_head(wire, &ResponseLimits::default())
}

fn whole(wire: &[u8]) -> (ParsedResponse, usize) {
    parse(wire).unwrap().unwrap()
}

#[test]
fn a_response_head_reads_back() {
    let wire = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\ncontent-length: 18\r\nX-A: 1\r\nx-a: 2\r\n\r\n{\"error\":\"NOPE\"}";
    let (head, n) = whole(wire);
    assert_eq!(&wire[n..], b"{\"error\":\"NOPE\"}");
    assert_eq!(head.status(), 404);
    assert_eq!(head.reason(), "Not Found");
    assert_eq!(head.version(), Version::Http11);
    assert_eq!(head.header("CONTENT-TYPE"), Some("application/json"));
    assert_eq!(head.headers("x-A").collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(head.header("missing"), None);
    assert_eq!(head.fields().len(), 4);
    assert_eq!(head.content_length(), Some(18));
    assert!(!head.is_chunked());
    assert_eq!(head.framing(), BodyFraming::Length(18));
}

#[test]
fn every_prefix_of_a_head_asks_for_more() {
    let wire = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n";
    for end in 0..wire.len() {
        assert_eq!(parse(&wire[..end]), Ok(None), "{end}");
    }
    let (head, n) = whole(wire);
    assert_eq!((head.version(), n), (Version::Http10, wire.len()));
}

#[test]
fn framing_follows_rfc_9112() {
    let framing = |wire: &[u8]| whole(wire).0.framing();
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"),
        BodyFraming::Chunked
    );
    assert_eq!(
        framing(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
        BodyFraming::UntilClose
    );
    assert_eq!(framing(b"HTTP/1.1 200 OK\r\n\r\n"), BodyFraming::UntilClose);
    assert_eq!(
        framing(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
        BodyFraming::Length(0)
    );
    assert_eq!(
        framing(b"HTTP/1.1 204 No Content\r\n\r\n"),
        BodyFraming::Length(0)
    );
    assert_eq!(
        framing(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"),
        BodyFraming::Length(0)
    );
    let (head, _) = whole(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n");
    assert_eq!(head.content_length(), Some(3));
    let (head, _) = whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(head.is_chunked() && head.has_transfer_encoding());
    assert_eq!(head.content_length(), None);
}

#[test]
fn bad_heads_are_refused_with_their_reason() {
    for (wire, want) in [
        (
            &b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"[..],
            ResponseError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
            ResponseError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            ResponseError::InvalidContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            ResponseError::ConflictingContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            ResponseError::ContentLengthWithTransferEncoding,
        ),
        (b"NOT HTTP\r\n\r\n", ResponseError::Syntax),
        (b"HTTP/1.1 2000 OK\r\n\r\n", ResponseError::Syntax),
        (
            b"HTTP/2.0 200 OK\r\n\r\n",
            ResponseError::UnsupportedVersion,
        ),
        (
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            ResponseError::InvalidHeader,
        ),
        (
            b"HTTP/1.1 200 OK\r\nA: \x01\r\n\r\n",
            ResponseError::InvalidHeader,
        ),
    ] {
        assert_eq!(
            parse(wire).unwrap_err(),
            want,
            "{:?}",
            String::from_utf8_lossy(wire)
        );
        assert!(!want.to_string().is_empty());
    }
}

#[test]
fn the_ceilings_are_enforced_and_named() {
    let limits = ResponseLimits {
        max_head_bytes: 40,
        max_headers: 2,
    };
    let many = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(
        parse_response_head(many, &limits).unwrap_err(),
        ResponseError::TooManyHeaders { max: 2 }
    );
    assert_eq!(
        ResponseError::TooManyHeaders { max: 2 }.to_string(),
        "more than 2 header fields in the response"
    );
    let long = format!("HTTP/1.1 200 OK\r\nA: {}", "x".repeat(40));
    assert_eq!(
        parse_response_head(long.as_bytes(), &limits).unwrap_err(),
        ResponseError::HeadTooLarge { max: 40 }
    );
    // Under the byte ceiling, a partial head is only incomplete.
    assert_eq!(
        parse_response_head(&long.as_bytes()[..40], &limits),
        Ok(None)
    );
    // More slots than are kept on the stack.
    let big = ResponseLimits {
        max_head_bytes: 64 * 1024,
        max_headers: 200,
    };
    let mut wire = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..150 {
        wire.push_str(&format!("H{i}: {i}\r\n"));
    }
    wire.push_str("\r\n");
    let (head, _) = parse_response_head(wire.as_bytes(), &big).unwrap().unwrap();
    assert_eq!(head.header("h149"), Some("149"));
}

#[test]
fn written_heads_read_back() {
    let head = ResponseHead::new(201)
        .header("Location", "/v1/x")
        .unwrap()
        .content_length(7)
        .to_bytes();
    let (parsed, n) = whole(&head);
    assert_eq!(n, head.len());
    assert_eq!((parsed.status(), parsed.reason()), (201, "Created"));
    assert_eq!(parsed.header("location"), Some("/v1/x"));
    assert_eq!(parsed.framing(), BodyFraming::Length(7));
    let sse = ResponseHead::new(200).chunked().to_bytes();
    assert_eq!(whole(&sse).0.framing(), BodyFraming::Chunked);
}

#[test]
fn closed_responses_split_into_head_and_body() {
    let limits = ResponseLimits::default();
    let raw = b"HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nnopeextra";
    let (head, body) = parse_closed_response(raw, &limits).unwrap();
    assert_eq!((head.status(), body), (404, &b"nope"[..]));
    let (_, body) = parse_closed_response(b"HTTP/1.1 200 OK\r\n\r\nall of it", &limits).unwrap();
    assert_eq!(body, b"all of it");
    let (_, body) = parse_closed_response(b"HTTP/1.1 204 No Content\r\n\r\n", &limits).unwrap();
    assert!(body.is_empty());
    for short in [
        &b"HTTP/1.1 200 OK\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
        b"",
    ] {
        assert_eq!(
            parse_closed_response(short, &limits).unwrap_err(),
            ResponseError::EndedEarly
        );
    }
}
