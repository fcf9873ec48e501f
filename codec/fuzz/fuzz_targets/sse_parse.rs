//! Arbitrary bytes, in arbitrary chunks, into `SseParser` (SPEC RT-8/RT-13:
//! no event stream makes a client panic or hold more than its ceiling).
//!
//! Input: byte 0 picks the ceiling (bit 7: a tiny one, 16 + bits 0–5, else
//! the RT-13 128 KiB) and how many chunk lengths follow (bits 0–3); then
//! those lengths (one byte each); then the stream.
//!
//! The oracles: after every `feed` the parser holds no more than its
//! ceiling; every event has data, no NUL in its ids, and its own id equals
//! the last event ID; and the stream fed whole and fed in chunks of those
//! lengths (cycled; a zero length counts as one) yields the same events
//! and stops the same way.

#![no_main]

use dtp_codec::realtime::{SSE_MAX_BUFFER, SseParser};
use libfuzzer_sys::fuzz_target;

type Event = (String, String, Option<String>, String, Option<u64>);

fn run(max: usize, chunks: &mut dyn Iterator<Item = &[u8]>) -> (Vec<Event>, Option<String>) {
    let mut p = SseParser::with_max_buffer(max);
    let mut events = Vec::new();
    for chunk in chunks {
        let r = p.feed(chunk, |e| {
            assert!(!e.last_event_id.contains('\0'));
            if let Some(id) = e.id {
                assert_eq!(id, e.last_event_id);
            }
            events.push((
                e.event_type.to_owned(),
                e.data.to_owned(),
                e.id.map(str::to_owned),
                e.last_event_id.to_owned(),
                e.retry,
            ));
        });
        assert!(
            p.buffered_len() <= p.max_buffer(),
            "{} > {}",
            p.buffered_len(),
            max
        );
        if let Err(e) = r {
            // The variant, not the length: chunking changes how much of the
            // offending line had arrived when the ceiling was hit.
            let name = format!("{e:?}");
            let variant = name.split([' ', '{']).next().unwrap_or_default().to_owned();
            return (events, Some(variant));
        }
    }
    (events, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let max = if head & 0x80 != 0 {
        16 + usize::from(head & 0x3F)
    } else {
        SSE_MAX_BUFFER
    };
    let n = usize::from(head & 0x0F).min(rest.len());
    let (lens, stream) = rest.split_at(n);
    let whole = run(max, &mut std::iter::once(stream));
    let mut at = 0;
    let mut i = 0;
    let mut chunks = std::iter::from_fn(|| {
        if at >= stream.len() {
            return None;
        }
        let len = lens
            .get(i % lens.len().max(1))
            .map_or(stream.len(), |&l| usize::from(l))
            .max(1);
        i += 1;
        let end = (at + len).min(stream.len());
        let chunk = &stream[at..end];
        at = end;
        Some(chunk)
    });
    let pieces = run(max, &mut chunks);
    assert_eq!(whole, pieces);
});
