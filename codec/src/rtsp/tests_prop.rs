//! Property tests: generated messages, packets and header values round
//! trip; a stream cut at arbitrary points decodes as the whole does; a
//! prefix of any input is refused exactly as the whole is, or needs more;
//! arbitrary bytes never panic.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use proptest::prelude::*;

use super::*;

fn small() -> RtspLimits {
    RtspLimits {
        max_head_bytes: 96,
        max_headers: 3,
        max_uri_len: 24,
        max_body_bytes: 10,
    }
}

fn token() -> impl Strategy<Value = String> {
    "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}"
}

fn value() -> impl Strategy<Value = String> {
    "[ -~\u{e9}\u{4e2d}\t]{0,24}".prop_map(|v| v.trim_matches([' ', '\t']).to_owned())
}

fn headers() -> impl Strategy<Value = Headers> {
    let name = token().prop_filter("a field of its own", |n| {
        !n.eq_ignore_ascii_case("cseq") && !n.eq_ignore_ascii_case("content-length")
    });
    proptest::collection::vec((name, value()), 0..5)
        .prop_map(|v| Headers(v.into_iter().map(|(n, v)| Header::new(n, v)).collect()))
}

fn version() -> impl Strategy<Value = Version> {
    (0u8..10, 0u8..10).prop_map(|(major, minor)| Version { major, minor })
}

fn request() -> impl Strategy<Value = Request> {
    (
        // A method starting with `$` would read as a packet.
        token().prop_filter("not a packet", |t| !t.starts_with('$')),
        "[!-~]{1,40}",
        version(),
        any::<Option<u32>>(),
        headers(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(m, uri, version, cseq, headers, body)| Request {
            method: Method::from_token(&m),
            uri,
            version,
            cseq,
            headers,
            body,
        })
}

fn response() -> impl Strategy<Value = Response> {
    (
        version(),
        100u16..600,
        value(),
        any::<Option<u32>>(),
        headers(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(version, status, reason, cseq, headers, body)| Response {
            version,
            status,
            reason,
            cseq,
            headers,
            body,
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        request().prop_map(Message::Request),
        response().prop_map(Message::Response)
    ]
}

/// A stream item: a message, or a payload on a channel (written as one
/// packet or more).
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Message(Message),
    Packet(u8, Vec<u8>),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        message().prop_map(Piece::Message),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(c, p)| Piece::Packet(c, p)),
    ]
}

/// Decodes `chunks` fed one after another, as a transport would: whole
/// packets rebuilt from their `Data` pieces.
fn decode_chunked(chunks: &[&[u8]]) -> (Vec<Piece>, Option<InterleaveError>, usize) {
    let mut dec = InterleavedDecoder::new(RtspLimits::default());
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut packet: Option<(u8, Vec<u8>)> = None;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match dec.decode(&buf) {
                Ok((Item::Message(m), n)) => {
                    out.push(Piece::Message(m));
                    buf.drain(..n);
                }
                Ok((
                    Item::Data {
                        channel,
                        skip,
                        len,
                        last,
                    },
                    n,
                )) => {
                    assert_eq!(n, skip + len);
                    let p = packet.get_or_insert_with(|| (channel, Vec::new()));
                    p.1.extend_from_slice(&buf[skip..n]);
                    if last {
                        let (c, p) = packet.take().unwrap();
                        out.push(Piece::Packet(c, p));
                    }
                    buf.drain(..n);
                }
                Err(InterleaveError::Incomplete { more }) => {
                    assert!(more >= 1);
                    break;
                }
                // What is left behind an error depends on the cuts.
                Err(e) => return (out, Some(e), 0),
            }
        }
    }
    (out, None, buf.len())
}

fn cut<'a>(stream: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for p in points {
        out.push(&stream[at..p]);
        at = p;
    }
    out.push(&stream[at..]);
    out
}

/// A prefix is refused as the whole is, or needs more.
fn check_prefixes(data: &[u8], limits: &RtspLimits) {
    let whole = parse_message(data, limits);
    for end in 0..data.len() {
        match parse_message(&data[..end], limits) {
            Ok(Parse::NeedMore(more)) => assert!(more >= 1),
            Err(e) => assert_eq!(whole, Err(e), "prefix of {end} bytes"),
            Ok(done) => assert_eq!(whole.as_ref().ok(), Some(&done), "prefix of {end} bytes"),
        }
    }
}

proptest! {
    #[test]
    fn requests_and_responses_round_trip(m in message()) {
        let mut wire = Vec::new();
        m.write(&mut wire).unwrap();
        prop_assert_eq!(parse_message(&wire, &RtspLimits::default()), Ok(Parse::Done(m, wire.len())));
        check_prefixes(&wire, &RtspLimits::default());
    }

    #[test]
    fn streams_cut_anywhere_decode_as_the_whole(
        pieces in proptest::collection::vec(piece(), 0..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for p in &pieces {
            match p {
                Piece::Message(m) => {
                    m.write(&mut stream).unwrap();
                    want.push(p.clone());
                }
                Piece::Packet(c, payload) => {
                    let header = packet_header(*c, payload.len()).unwrap();
                    stream.extend_from_slice(&header);
                    stream.extend_from_slice(payload);
                    want.push(p.clone());
                }
            }
        }
        let whole = decode_chunked(&[&stream]);
        prop_assert_eq!(&whole.0, &want);
        prop_assert_eq!(&whole.1, &None);
        prop_assert_eq!(whole.2, 0);
        prop_assert_eq!(decode_chunked(&cut(&stream, &cuts)), whole);
    }

    #[test]
    fn long_payloads_split_into_packets_and_join_back(
        len in 0usize..200_000,
        channel in any::<u8>(),
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let mut wire = Vec::new();
        let n = write_interleaved(channel, &payload, &mut wire);
        prop_assert_eq!(n, len.div_ceil(MAX_PAYLOAD));
        prop_assert_eq!(wire.len(), interleaved_len(len));
        let (pieces, err, left) = decode_chunked(&[&wire]);
        prop_assert_eq!((err, left), (None, 0));
        let joined: Vec<u8> = pieces
            .into_iter()
            .flat_map(|p| match p {
                Piece::Packet(c, p) if c == channel => p,
                other => panic!("{other:?}"),
            })
            .collect();
        prop_assert!(joined == payload);
    }

    #[test]
    fn header_values_round_trip(
        id in "[A-Za-z0-9$_.+-]{1,40}",
        timeout in any::<Option<u32>>(),
        lower in proptest::option::of(prop_oneof![Just("TCP"), Just("UDP")]),
        interleaved in proptest::option::of((any::<u8>(), any::<Option<u8>>())),
        mode in proptest::option::of("[A-Z]{1,8}"),
        port in proptest::option::of((any::<u16>(), any::<u16>())),
    ) {
        let s = Session { id, timeout };
        prop_assert_eq!(Session::parse(&s.to_string()), Ok(s));
        let spec = TransportSpec {
            protocol: "RTP".into(),
            profile: "AVP".into(),
            lower: lower.map(str::to_owned),
            delivery: Some(Delivery::Unicast),
            interleaved: interleaved.map(|(first, last)| Channels { first, last }),
            mode,
            other: port
                .map(|(a, b)| vec![("client_port".to_owned(), Some(format!("{a}-{b}")))])
                .unwrap_or_default(),
        };
        let specs = vec![spec.clone(), spec];
        prop_assert_eq!(parse_transport(&format_transport(&specs)), Ok(specs));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_prefixes_agree(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        for limits in [small(), RtspLimits::default()] {
            if let Ok(Parse::Done(m, n)) = parse_message(&data, &limits) {
                prop_assert!(n <= data.len());
                let _ = (m.headers().session(), m.headers().transport());
            }
            check_prefixes(&data, &limits);
        }
        let whole = decode_chunked(&[&data]);
        prop_assert_eq!(decode_chunked(&cut(&data, &cuts)), whole);
        let text = String::from_utf8_lossy(&data);
        let _ = (Session::parse(&text), parse_transport(&text));
    }

    #[test]
    fn near_valid_heads_never_panic_and_prefixes_agree(
        m in message(),
        at in any::<usize>(),
        byte in any::<u8>(),
    ) {
        let mut wire = m.write_vec();
        let i = at % wire.len();
        wire[i] = byte;
        for limits in [small(), RtspLimits::default()] {
            check_prefixes(&wire, &limits);
        }
    }
}

impl Message {
    fn write_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out).unwrap();
        out
    }
}
