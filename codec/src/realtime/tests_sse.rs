//! SSE (SPEC RT-8): the encoder's exact bytes, and the parser against the
//! WHATWG event-stream interpretation and the RT-13 ceiling.

use bytes::BytesMut;

use super::tests_envelope::sample;
use super::*;

/// An owned copy of a dispatched event: (type, data, own id, last id).
type Ev = (String, String, Option<String>, String);

fn own(e: SseEvent<'_>) -> Ev {
    (
        e.event_type.to_owned(),
        e.data.to_owned(),
        e.id.map(str::to_owned),
        e.last_event_id.to_owned(),
    )
}

/// Feeds `chunks` to a fresh parser.
fn parse(chunks: &[&[u8]]) -> (Vec<Ev>, SseParser, Result<(), SseError>) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    for c in chunks {
        if let Err(e) = p.feed(c, |e| out.push(own(e))) {
            return (out, p, Err(e));
        }
    }
    (out, p, Ok(()))
}

fn ev(ty: &str, data: &str, id: Option<&str>, last: &str) -> Ev {
    (ty.into(), data.into(), id.map(Into::into), last.into())
}

#[test]
fn encoder_writes_exact_blocks() {
    let mut buf = BytesMut::new();
    write_sse_event(&mut buf, Some("c/42"), br#"{"a":1}"#).unwrap();
    write_sse_event(&mut buf, None, br#"{"b":2}"#).unwrap();
    write_sse_control(
        &mut buf,
        &SseControl::ResetRequired {
            reason: FailureKind::CursorExpired,
        },
    )
    .unwrap();
    write_sse_control(
        &mut buf,
        &SseControl::Gap {
            stream_epoch: "e7".into(),
            after_sequence: 41,
        },
    )
    .unwrap();
    write_sse_control(
        &mut buf,
        &SseControl::Close {
            category: CloseCategory::Restart,
        },
    )
    .unwrap();
    write_sse_heartbeat(&mut buf);
    write_sse_comment(&mut buf, "").unwrap();
    write_sse_retry(&mut buf, 3000);
    let want = concat!(
        "id: c/42\ndata: {\"a\":1}\n\n",
        "data: {\"b\":2}\n\n",
        "event: control\ndata: {\"type\":\"RESET_REQUIRED\",\"reason\":\"CURSOR_EXPIRED\"}\n\n",
        "event: control\ndata: {\"type\":\"GAP\",\"streamEpoch\":\"e7\",\"afterSequence\":\"41\"}\n\n",
        "event: control\ndata: {\"type\":\"CLOSE\",\"category\":\"RESTART\"}\n\n",
        ": heartbeat\n\n",
        ":\n\n",
        "retry: 3000\n\n",
    );
    assert_eq!(std::str::from_utf8(&buf).unwrap(), want);

    let (events, p, r) = parse(&[&buf]);
    assert_eq!(r, Ok(()));
    assert_eq!(p.retry(), Some(3000));
    assert_eq!(events.len(), 5);
    assert_eq!(events[0], ev("message", "{\"a\":1}", Some("c/42"), "c/42"));
    // No id of its own, though the last event ID persists.
    assert_eq!(events[1], ev("message", "{\"b\":2}", None, "c/42"));
    for (e, want) in events[2..].iter().zip([
        SseControl::ResetRequired {
            reason: FailureKind::CursorExpired,
        },
        SseControl::Gap {
            stream_epoch: "e7".into(),
            after_sequence: 41,
        },
        SseControl::Close {
            category: CloseCategory::Restart,
        },
    ]) {
        assert_eq!(e.0, SSE_CONTROL_EVENT);
        assert_eq!(
            SseControl::decode(e.1.as_bytes(), &JsonLimits::default()),
            Ok(want)
        );
    }
}

#[test]
fn envelope_blocks_carry_their_cursor_as_id_only_for_cursor() {
    let mut buf = Vec::new();
    let e = sample(RecoveryMode::Cursor);
    write_sse_envelope(&mut buf, &e).unwrap();
    let json = String::from_utf8(e.to_json_bytes().unwrap()).unwrap();
    assert_eq!(
        String::from_utf8(buf).unwrap(),
        format!("id: c/42\ndata: {json}\n\n")
    );
    let mut buf = Vec::new();
    let e = sample(RecoveryMode::SnapshotOnly);
    write_sse_envelope(&mut buf, &e).unwrap();
    let json = String::from_utf8(e.to_json_bytes().unwrap()).unwrap();
    assert_eq!(String::from_utf8(buf).unwrap(), format!("data: {json}\n\n"));
}

#[test]
fn control_refusals() {
    let l = JsonLimits::default();
    assert_eq!(
        SseControl::decode(br#"{"type":"PING"}"#, &l),
        Err(Refusal::UnknownType)
    );
    assert_eq!(
        SseControl::decode(
            br#"{"type":"GAP","streamEpoch":"e","afterSequence":"01"}"#,
            &l
        ),
        Err(Refusal::NonCanonicalSequence("afterSequence"))
    );
    assert_eq!(
        SseControl::decode(br#"{"type":"CLOSE","category":"RESTART","x":1}"#, &l),
        Err(Refusal::UnknownKey)
    );
    assert_eq!(
        SseControl::decode(br#"{"reason":"CLOSED"}"#, &l),
        Err(Refusal::MissingKey("type"))
    );
}

#[test]
#[cfg_attr(debug_assertions, should_panic(expected = "SSE id must be"))]
fn id_with_a_line_break_is_refused() {
    let mut buf = Vec::new();
    assert_eq!(
        write_sse_event(&mut buf, Some("a\nb"), b"{}"),
        Err(SseEncodeError::InvalidId)
    );
    assert_eq!(
        write_sse_event(&mut buf, Some(""), b"{}"),
        Err(SseEncodeError::InvalidId)
    );
    assert!(buf.is_empty());
}

#[test]
#[cfg_attr(debug_assertions, should_panic(expected = "SSE data must be one line"))]
fn data_with_a_line_break_is_refused() {
    let mut buf = Vec::new();
    assert_eq!(
        write_sse_event(&mut buf, None, b"{\r}"),
        Err(SseEncodeError::LineBreak)
    );
    assert!(buf.is_empty());
}

#[test]
fn whatwg_multi_line_data_and_comments() {
    // WHATWG §9.2.6 examples.
    let (events, _, r) = parse(&[b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n"]);
    assert_eq!(r, Ok(()));
    assert_eq!(
        events,
        [
            ev("message", "first event", Some("1"), "1"),
            ev("message", "second event", Some(""), ""),
            ev("message", " third event", None, ""),
        ]
    );
    let (events, _, _) = parse(&[b"data: YHOO\ndata: +2\ndata: 10\n\n"]);
    assert_eq!(events, [ev("message", "YHOO\n+2\n10", None, "")]);
    // `data` without colon is an empty line of data; two of them make "\n".
    // WHATWG: the first block is an event with empty data, the second one
    // with a single newline, the third is discarded (no blank line after it).
    let (events, _, _) = parse(&[b"data\n\ndata\ndata\n\ndata:"]);
    assert_eq!(
        events,
        [ev("message", "", None, ""), ev("message", "\n", None, "")]
    );
}

#[test]
fn line_ends_cr_lf_and_crlf_even_across_chunks() {
    let want = vec![
        ev("message", "a", None, ""),
        ev("message", "b", None, ""),
        ev("message", "c", None, ""),
    ];
    for chunks in [
        vec![&b"data: a\r\rdata: b\n\ndata: c\r\n\r\n"[..]],
        vec![b"data: a\r", b"\rdata: b\n", b"\ndata: c\r", b"\n\r", b"\n"],
        vec![b"data: a\r", b"", b"\r", b"data: b\n\ndata: c\r\n\r", b"\n"],
    ] {
        let (events, _, r) = parse(&chunks);
        assert_eq!(r, Ok(()));
        assert_eq!(events, want, "{chunks:?}");
    }
    // A CR at the end of one chunk and an LF at the start of the next are
    // ONE line end: no blank line, no early dispatch.
    let (events, _, _) = parse(&[b"data: x\r", b"\ndata: y\r", b"\n\r\n"]);
    assert_eq!(events, [ev("message", "x\ny", None, "")]);
}

#[test]
fn bom_only_at_the_start() {
    let (events, _, r) = parse(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]);
    assert_eq!(r, Ok(()));
    assert_eq!(events, [ev("message", "a", None, "")]);
    // A second BOM is part of the field name, which is then unknown.
    let (events, _, _) = parse(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"]);
    assert_eq!(events, [ev("message", "b", None, "")]);
}

#[test]
fn fields_that_are_ignored() {
    let (events, p, r) =
        parse(&[b"retry: abc\nretry: 12a\nretry:\nid: x\0y\nfoo: bar\nevent: update\ndata: d\n\n"]);
    assert_eq!(r, Ok(()));
    assert_eq!(p.retry(), None);
    assert_eq!(events, [ev("update", "d", None, "")]);
    let (_, p, _) = parse(&[b"retry: 1500\n\nretry: 99999999999999999999999\n\n"]);
    assert_eq!(p.retry(), Some(1500));
    // Only the one space after the colon is dropped; the event type resets.
    let (events, _, _) = parse(&[b"event:  x\ndata:\t1\n\ndata: 2\n\n"]);
    assert_eq!(
        events,
        [ev(" x", "\t1", None, ""), ev("message", "2", None, "")]
    );
}

#[test]
fn id_persists_and_an_empty_block_dispatches_nothing() {
    let (events, p, _) = parse(&[b"id: 7\n\ndata: a\n\nid: 8\ndata: b\n\nid\ndata: c\n\n"]);
    assert_eq!(
        events,
        [
            ev("message", "a", None, "7"),
            ev("message", "b", Some("8"), "8"),
            ev("message", "c", Some(""), ""),
        ]
    );
    assert_eq!(p.last_event_id(), "");
}

#[test]
fn eof_discards_the_incomplete_event_and_keeps_the_cursor() {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    p.feed(b"id: c1\ndata: a\n\nid: c2\ndata: half", |e| {
        out.push(own(e))
    })
    .unwrap();
    p.finish();
    assert_eq!(p.buffered_len(), "c2".len());
    assert_eq!(p.last_event_id(), "c2");
    p.feed(b"\n\ndata: b\n\n", |e| out.push(own(e))).unwrap();
    assert_eq!(
        out,
        [
            ev("message", "a", Some("c1"), "c1"),
            ev("message", "b", None, "c2")
        ]
    );
}

#[test]
fn invalid_utf8_fails_and_stays_failed() {
    let (events, mut p, r) = parse(&[b"data: a\n\ndata: \xC3\x28\n\n"]);
    assert_eq!(events, [ev("message", "a", None, "")]);
    assert_eq!(r, Err(SseError::InvalidUtf8));
    assert_eq!(p.feed(b"data: b\n\n", |_| {}), Err(SseError::InvalidUtf8));
    assert_eq!(
        SseError::InvalidUtf8.failure_kind(),
        FailureKind::MalformedEvent
    );
}

#[test]
fn ceiling_is_enforced_whatever_the_chunking() {
    let max = SSE_MAX_BUFFER;
    // One line longer than the ceiling, in one chunk or byte-sized pieces.
    let mut line = b"data: ".to_vec();
    line.resize(max + 1, b'x');
    line.push(b'\n');
    let (_, _, r) = parse(&[&line]);
    assert_eq!(r, Err(SseError::BufferExceeded { len: max + 1, max }));
    let mut p = SseParser::new();
    let mut failed = None;
    for piece in line.chunks(1000) {
        if let Err(e) = p.feed(piece, |_| {}) {
            failed = Some(e);
            break;
        }
        assert!(p.buffered_len() <= max);
    }
    assert_eq!(failed, Some(SseError::BufferExceeded { len: max + 1, max }));
    assert_eq!(
        SseError::BufferExceeded { len: 0, max: 0 }.failure_kind(),
        FailureKind::EventTooLarge
    );
    // Many data lines of one event add up; a dispatch frees them.
    let mut p = SseParser::with_max_buffer(64);
    let r = p.feed(
        b"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n",
        |_| {},
    );
    assert_eq!(r, Ok(()));
    assert_eq!(p.buffered_len(), 0);
    // Five lines hold 5 × 11 bytes; the sixth would need 55 + 16.
    let r = p.feed("data: 0123456789\n".repeat(6).as_bytes(), |_| {});
    assert_eq!(r, Err(SseError::BufferExceeded { len: 71, max: 64 }));
    assert_eq!(SseParser::with_max_buffer(usize::MAX).max_buffer(), max);
}

/// The chunk built in place is byte for byte the block `write_sse_event`
/// writes, framed by `write_chunk`; the range is the data; sizes across a
/// hex digit boundary and both kinds of refusal.
#[test]
fn a_chunk_built_in_place_equals_the_block_then_framed() {
    for (id, len) in [
        (Some("c1.ab.7.ff"), 1),
        (None, 9),
        (Some("x"), 4090),
        (None, 70_000),
    ] {
        let data = vec![b'a'; len];
        let (chunk, range) = sse_chunk_with(id, 16, |b| {
            b.extend_from_slice(&data);
            Ok(())
        })
        .unwrap();
        let mut block = BytesMut::new();
        write_sse_event(&mut block, id, &data).unwrap();
        let mut framed = BytesMut::new();
        crate::http::write_chunk(&mut framed, &block);
        assert_eq!(&chunk[..], &framed[..], "id {id:?}, {len} bytes");
        assert_eq!(&chunk[range], &data[..]);
    }
    // A line break: a debug build asserts (the bug report there); a
    // release build refuses.
    if !cfg!(debug_assertions) {
        let broken = sse_chunk_with(None, 4, |b| {
            b.extend_from_slice(b"a\nb");
            Ok(())
        });
        assert_eq!(broken.err(), Some(SseEncodeError::LineBreak));
    }
    let refused = sse_chunk_with(Some("ok"), 4, |_| Err(Refusal::RecoveryCursorMismatch));
    assert!(matches!(refused, Err(SseEncodeError::Refused(_))));
}
