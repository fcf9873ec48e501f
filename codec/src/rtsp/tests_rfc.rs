//! RFC 2326's own examples as test vectors: each test names the section
//! its messages come from. The RFC indents its examples and writes them
//! with bare line ends; here they are written with CRLF, and where the
//! RFC's `Content-Length` does not count its own example body (§10.2,
//! §10.8), the body's real length is used.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use super::*;

fn crlf(text: &str) -> Vec<u8> {
    text.replace('\n', "\r\n").into_bytes()
}

fn limits() -> RtspLimits {
    RtspLimits::default()
}

/// Parses a whole message and checks that it writes back to bytes that
/// parse to the same message.
fn message(text: &str) -> Message {
    let wire = crlf(text);
    match parse_message(&wire, &limits()).unwrap() {
        Parse::Done(m, n) => {
            assert_eq!(n, wire.len());
            let mut again = Vec::new();
            m.write(&mut again).unwrap();
            assert_eq!(
                parse_message(&again, &limits()),
                Ok(Parse::Done(m.clone(), again.len()))
            );
            m
        }
        Parse::NeedMore(n) => panic!("incomplete ({n}): {text}"),
    }
}

fn request(text: &str) -> Request {
    match message(text) {
        Message::Request(r) => r,
        other => panic!("not a request: {other:?}"),
    }
}

fn response(text: &str) -> Response {
    match message(text) {
        Message::Response(r) => r,
        other => panic!("not a response: {other:?}"),
    }
}

#[test]
fn rfc2326_10_1_options_request_and_public_answer() {
    let req = request(
        "OPTIONS * RTSP/1.0\nCSeq: 1\nRequire: implicit-play\nProxy-Require: gzipped-messages\n\n",
    );
    assert_eq!(req.method, Method::Options);
    assert_eq!((req.uri.as_str(), req.version), ("*", Version::RTSP_1_0));
    assert_eq!(req.cseq, Some(1));
    assert_eq!(req.headers.get("require"), Some("implicit-play"));
    assert_eq!(req.headers.get("Proxy-Require"), Some("gzipped-messages"));
    let resp =
        response("RTSP/1.0 200 OK\nCSeq: 1\nPublic: DESCRIBE, SETUP, TEARDOWN, PLAY, PAUSE\n\n");
    assert_eq!(
        (resp.status, resp.reason.as_str(), resp.cseq),
        (200, "OK", Some(1))
    );
    assert_eq!(
        resp.headers.get("Public"),
        Some("DESCRIBE, SETUP, TEARDOWN, PLAY, PAUSE")
    );
}

const SDP_10_2: &str = "v=0\r\no=mhandley 2890844526 2890842807 IN IP4 126.16.64.4\r\n\
s=SDP Seminar\r\ni=A Seminar on the session description protocol\r\n\
u=http://www.cs.ucl.ac.uk/staff/M.Handley/sdp.03.ps\r\ne=mjh@isi.edu (Mark Handley)\r\n\
c=IN IP4 224.2.17.12/127\r\nt=2873397496 2873404696\r\na=recvonly\r\n\
m=audio 3456 RTP/AVP 0\r\nm=video 2232 RTP/AVP 31\r\nm=whiteboard 32416 UDP WB\r\n\
a=orient:portrait\r\n";

#[test]
fn rfc2326_10_2_describe_with_an_sdp_body() {
    let req = request(
        "DESCRIBE rtsp://server.example.com/fizzle/foo RTSP/1.0\nCSeq: 312\n\
         Accept: application/sdp, application/rtsl, application/mheg\n\n",
    );
    assert_eq!(req.method, Method::Describe);
    assert_eq!(req.uri, "rtsp://server.example.com/fizzle/foo");
    let head = format!(
        "RTSP/1.0 200 OK\r\nCSeq: 312\r\nDate: 23 Jan 1997 15:35:06 GMT\r\n\
         Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n",
        SDP_10_2.len()
    );
    let wire = [head.as_bytes(), SDP_10_2.as_bytes()].concat();
    // The body is part of the message: a head without it needs exactly it.
    assert_eq!(
        parse_response(&wire[..head.len()], &limits()),
        Ok(Parse::NeedMore(SDP_10_2.len()))
    );
    let Ok(Parse::Done(resp, n)) = parse_response(&wire, &limits()) else {
        panic!()
    };
    assert_eq!(n, wire.len());
    assert_eq!(resp.body, SDP_10_2.as_bytes());
    assert_eq!(resp.headers.get("content-type"), Some("application/sdp"));
    assert_eq!(resp.to_bytes().unwrap(), wire);
}

#[test]
fn rfc2326_10_4_setup_with_a_folded_transport_line() {
    let req = request(
        "SETUP rtsp://example.com/foo/bar/baz.rm RTSP/1.0\nCSeq: 302\n\
         Transport: RTP/AVP;unicast;client_port=4588-4589\n\n",
    );
    let spec = &req.headers.transport().unwrap().unwrap()[0];
    assert_eq!(
        (spec.protocol.as_str(), spec.profile.as_str()),
        ("RTP", "AVP")
    );
    assert_eq!(
        (spec.lower.as_deref(), spec.delivery),
        (None, Some(Delivery::Unicast))
    );
    assert_eq!(
        spec.other,
        [("client_port".to_owned(), Some("4588-4589".to_owned()))]
    );
    assert!(!spec.is_rtp_avp_tcp());
    // The RFC folds the answer's Transport onto a second line.
    let resp = response(
        "RTSP/1.0 200 OK\nCSeq: 302\nDate: 23 Jan 1997 15:35:06 GMT\nSession: 47112344\n\
         Transport: RTP/AVP;unicast;\n  client_port=4588-4589;server_port=6256-6257\n\n",
    );
    let session = resp.headers.session().unwrap().unwrap();
    assert_eq!((session.id.as_str(), session.timeout), ("47112344", None));
    assert_eq!(session.timeout_or_default(), 60);
    let spec = &resp.headers.transport().unwrap().unwrap()[0];
    assert_eq!(
        spec.other,
        [
            ("client_port".to_owned(), Some("4588-4589".to_owned())),
            ("server_port".to_owned(), Some("6256-6257".to_owned()))
        ]
    );
}

#[test]
fn rfc2326_10_5_play_with_a_range() {
    let req = request(
        "PLAY rtsp://audio.example.com/twister.en RTSP/1.0\nCSeq: 833\nSession: 12345678\n\
         Range: smpte=0:10:20-;time=19970123T153600Z\n\n",
    );
    assert_eq!((req.method.clone(), req.cseq), (Method::Play, Some(833)));
    assert_eq!(req.headers.session().unwrap().unwrap().id, "12345678");
    assert_eq!(
        req.headers.get("range"),
        Some("smpte=0:10:20-;time=19970123T153600Z")
    );
    response(
        "RTSP/1.0 200 OK\nCSeq: 833\nDate: 23 Jan 1997 15:35:06 GMT\n\
         Range: smpte=0:10:22-;time=19970123T153600Z\n\n",
    );
}

#[test]
fn rfc2326_10_7_teardown_and_10_11_record() {
    let req = request(
        "TEARDOWN rtsp://example.com/fizzle/foo RTSP/1.0\nCSeq: 892\nSession: 12345678\n\n",
    );
    assert_eq!(req.method, Method::Teardown);
    assert_eq!(response("RTSP/1.0 200 OK\nCSeq: 892\n\n").cseq, Some(892));
    let req = request(
        "RECORD rtsp://example.com/meeting/audio.en RTSP/1.0\nCSeq: 954\nSession: 12345678\n\
         Conference: 128.16.64.19/32492374\n\n",
    );
    assert_eq!((req.method, req.cseq), (Method::Record, Some(954)));
}

#[test]
fn rfc2326_10_8_get_parameter_with_bodies_both_ways() {
    let body = "packets_received\r\njitter\r\n";
    let wire = format!(
        "GET_PARAMETER rtsp://example.com/fizzle/foo RTSP/1.0\r\nCSeq: 431\r\n\
         Content-Type: text/parameters\r\nSession: 12345678\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let Ok(Parse::Done(req, n)) = parse_request(wire.as_bytes(), &limits()) else {
        panic!()
    };
    assert_eq!((req.method.clone(), n), (Method::GetParameter, wire.len()));
    assert_eq!(req.body, body.as_bytes());
    let answer = "packets_received: 10\r\njitter: 0.3838\r\n";
    let resp = Response::new(200, Some(431)).with("Content-Type", "text/parameters");
    let resp = Response {
        body: answer.into(),
        ..resp
    };
    let wire = resp.to_bytes().unwrap();
    assert!(wire.starts_with(b"RTSP/1.0 200 OK\r\nCSeq: 431\r\n"));
    assert_eq!(
        parse_response(&wire, &limits()),
        Ok(Parse::Done(resp, wire.len()))
    );
}

/// §10.12: SETUP for interleaved TCP, PLAY, then `$` packets on channels
/// 0 (RTP) and 1 (RTCP) after the PLAY answer, on the one connection.
#[test]
fn rfc2326_10_12_interleaved_binary_data_after_play() {
    let req = request(
        "SETUP rtsp://foo.com/bar.file RTSP/1.0\nCSeq: 2\nTransport: RTP/AVP/TCP;interleaved=0-1\n\n",
    );
    let spec = &req.headers.transport().unwrap().unwrap()[0];
    assert!(spec.is_rtp_avp_tcp());
    assert_eq!(
        spec.interleaved,
        Some(Channels {
            first: 0,
            last: Some(1)
        })
    );
    assert_eq!(spec.to_string(), "RTP/AVP/TCP;interleaved=0-1");
    response(
        "RTSP/1.0 200 OK\nCSeq: 2\nDate: 05 Jun 1997 18:57:18 GMT\n\
         Transport: RTP/AVP/TCP;interleaved=0-1\nSession: 12345678\n\n",
    );
    request("PLAY rtsp://foo.com/bar.file RTSP/1.0\nCSeq: 3\nSession: 12345678\n\n");
    let play_ok = crlf(
        "RTSP/1.0 200 OK\nCSeq: 3\nSession: 12345678\nDate: 05 Jun 1997 18:59:15 GMT\n\
         RTP-Info: url=rtsp://foo.com/bar.file;\n  seq=232433;rtptime=972948234\n\n",
    );
    let mut stream = play_ok.clone();
    write_interleaved(0, b"rtp one", &mut stream);
    write_interleaved(0, b"rtp two", &mut stream);
    write_interleaved(1, b"rtcp", &mut stream);
    assert_eq!(&stream[play_ok.len()..play_ok.len() + 4], b"$\x00\x00\x07");
    let mut dec = InterleavedDecoder::new(limits());
    let mut at = 0;
    let mut got = Vec::new();
    while at < stream.len() {
        let (item, used) = dec.decode(&stream[at..]).unwrap();
        match item {
            Item::Message(Message::Response(r)) => {
                assert_eq!(
                    r.headers.get("rtp-info"),
                    Some("url=rtsp://foo.com/bar.file; seq=232433;rtptime=972948234")
                );
                got.push((255, Vec::new()));
            }
            Item::Data {
                channel,
                skip,
                len,
                last,
            } => {
                assert!(last);
                got.push((channel, stream[at + skip..at + skip + len].to_vec()));
            }
            Item::Message(m) => panic!("{m:?}"),
        }
        at += used;
    }
    let want: Vec<(u8, Vec<u8>)> = vec![
        (255, vec![]),
        (0, b"rtp one".to_vec()),
        (0, b"rtp two".to_vec()),
        (1, b"rtcp".to_vec()),
    ];
    assert_eq!(got, want);
    assert_eq!(
        dec.decode(&[]),
        Err(InterleaveError::Incomplete { more: 1 })
    );
    assert_eq!(
        dec.decode(b"$\x00"),
        Err(InterleaveError::Incomplete { more: 2 })
    );
}

/// §12.37 (Session, with the timeout DTP announces) and §12.39 (a
/// Transport list of two specs, with quoted modes).
#[test]
fn rfc2326_12_37_session_and_12_39_transport_lists() {
    let s = Session::parse("12345678;timeout=60").unwrap();
    assert_eq!((s.id.as_str(), s.timeout), ("12345678", Some(60)));
    assert_eq!(s.to_string(), "12345678;timeout=60");
    assert_eq!(Session::parse("a b"), Err(1));
    assert_eq!(Session::parse("abc;timeout=x"), Err(12));
    let specs = parse_transport(
        "RTP/AVP;multicast;ttl=127;mode=\"PLAY\",\n RTP/AVP;unicast;client_port=3456-3457;mode=\"PLAY\"",
    );
    // A raw LF is not in a parsed value (the parser joins folded lines).
    assert!(specs.is_err());
    let specs = parse_transport(
        "RTP/AVP;multicast;ttl=127;mode=\"PLAY\", RTP/AVP;unicast;client_port=3456-3457;mode=\"PLAY\"",
    )
    .unwrap();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].delivery, Some(Delivery::Multicast));
    assert_eq!(specs[1].mode.as_deref(), Some("PLAY"));
    assert_eq!(parse_transport(&format_transport(&specs)), Ok(specs));
    let dtp = TransportSpec::tcp_interleaved(0, 1);
    assert_eq!(dtp.to_string(), "RTP/AVP/TCP;unicast;interleaved=0-1");
}

#[test]
fn malformed_heads_are_refused_at_the_byte_where_they_go_wrong() {
    let err = |text: &[u8]| match parse_message(text, &limits()) {
        Err(e) => (e.kind, e.offset),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        err(b"OPT\x01IONS * RTSP/1.0\r\n"),
        (RtspErrorKind::InvalidByte, 3)
    );
    assert_eq!(
        err(b"OPTIONS * HTTP/1.1\r\n\r\n"),
        (RtspErrorKind::Version, 10)
    );
    assert_eq!(err(b"OPTIONS  RTSP/1.0\r\n"), (RtspErrorKind::Uri, 8));
    assert_eq!(err(b"RTSP/1.0 999 No\r\n\r\n"), (RtspErrorKind::Status, 9));
    assert_eq!(
        err(b"OPTIONS * RTSP/1.0\r\nCSeq: x\r\n\r\n"),
        (RtspErrorKind::CSeq, 26)
    );
    assert_eq!(
        err(b"OPTIONS * RTSP/1.0\r\nBad Name: 1\r\n"),
        (RtspErrorKind::HeaderName, 23)
    );
    assert_eq!(
        err(b"OPTIONS * RTSP/1.0\r\n folded\r\n"),
        (RtspErrorKind::Folding, 20)
    );
    assert_eq!(err(b"OPTIONS * RTSP/1.0\rX"), (RtspErrorKind::LoneCr, 18));
    let big = format!("OPTIONS * RTSP/1.0\r\nContent-Length: {}\r\n\r\n", 1 << 20);
    assert_eq!(err(big.as_bytes()), (RtspErrorKind::BodyTooLarge, 36));
    let req = b"OPTIONS * RTSP/1.0\r\nSession: a;timeout=\r\n\r\n";
    let Ok(Parse::Done(Message::Request(r), _)) = parse_message(req, &limits()) else {
        panic!()
    };
    let e = r.headers.session().unwrap_err();
    assert_eq!((e.kind, e.offset), (RtspErrorKind::Session, 39));
    assert_eq!(e.to_string(), "RTSP: invalid Session header at byte 39");
}

#[test]
fn ceilings_on_head_size_header_count_and_uri_hold() {
    let small = RtspLimits {
        max_head_bytes: 64,
        max_headers: 2,
        max_uri_len: 8,
        max_body_bytes: 4,
    };
    let err = |text: &[u8]| parse_message(text, &small).map_err(|e| (e.kind, e.offset));
    assert_eq!(
        err(b"OPTIONS rtsp://long RTSP/1.0\r\n"),
        Err((RtspErrorKind::UriTooLong, 16))
    );
    assert_eq!(
        err(b"OPTIONS * RTSP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        Err((RtspErrorKind::TooManyHeaders, 32))
    );
    let long = [b"OPTIONS * RTSP/1.0\r\nA: ".as_slice(), &[b'x'; 60]].concat();
    assert_eq!(err(&long[..64]), Ok(Parse::NeedMore(1)));
    assert_eq!(err(&long), Err((RtspErrorKind::HeadTooLarge, 64)));
}

#[test]
fn our_own_bad_fields_are_refused_when_written() {
    let mut out = b"keep".to_vec();
    let bad = Request::new(Method::Options, "*", 1).with("X", "a\r\nInjected: 1");
    assert_eq!(
        bad.write(&mut out).unwrap_err().kind,
        RtspErrorKind::Outgoing
    );
    assert_eq!(out, b"keep");
    let bad = Request::new(Method::Options, "*", 1).with("Content-Length", "3");
    assert!(bad.to_bytes().is_err());
    assert!(Request::new(Method::Options, "a b", 1).to_bytes().is_err());
    assert!(Response::new(700, None).to_bytes().is_err());
}

/// Found by the `rtsp_interleave` fuzz target: after an empty line, `$`
/// starts a packet (it was read as the first byte of a method, which then
/// wrote back as a packet).
#[test]
fn a_packet_after_empty_lines_is_a_packet() {
    let mut dec = InterleavedDecoder::new(limits());
    let wire = b"\r\n\n$\x01\x00\x02okGET_PARAMETER * RTSP/1.0\r\n\r\n";
    let (item, used) = dec.decode(wire).unwrap();
    let data = Item::Data {
        channel: 1,
        skip: 7,
        len: 2,
        last: true,
    };
    assert_eq!((item, used), (data, 9));
    assert_eq!(
        dec.decode(b"\r\n$\x00"),
        Err(InterleaveError::Incomplete { more: 2 })
    );
    let (item, _) = dec.decode(&wire[9..]).unwrap();
    assert!(matches!(item, Item::Message(Message::Request(_))));
}
