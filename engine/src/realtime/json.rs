//! The small JSON bodies of the realtime HTTP endpoints (compact, fixed
//! member order).

use bytes::{BufMut, Bytes, BytesMut};
use dtp_codec::realtime::SnapshotCheckpoint;

/// Appends `s` as a JSON string.
fn string(buf: &mut BytesMut, s: &str) {
    // serde_json escapes exactly as JSON requires; a String never fails.
    match serde_json::to_writer(buf.writer(), s) {
        Ok(()) | Err(_) => {}
    }
}

/// The answer to a publication: `{"streamId","streamEpoch","sequence","resumeCursor"}`
/// (the sequence as a canonical decimal string, as in envelopes).
pub(crate) fn published_body(
    stream: &str,
    epoch: &str,
    sequence: u64,
    cursor: Option<&str>,
) -> Bytes {
    let mut b = BytesMut::with_capacity(160);
    b.put_slice(b"{\"streamId\":");
    string(&mut b, stream);
    b.put_slice(b",\"streamEpoch\":");
    string(&mut b, epoch);
    b.put_slice(b",\"sequence\":\"");
    b.put_slice(sequence.to_string().as_bytes());
    b.put_slice(b"\",\"resumeCursor\":");
    match cursor {
        Some(c) => string(&mut b, c),
        None => b.put_slice(b"null"),
    }
    b.put_u8(b'}');
    b.freeze()
}

/// A snapshot: `{"streamId","scopeBinding","checkpoint":{…},"state":<state>}`
/// (SPEC RT-6: the checkpoint is the state's commit point; the scope
/// binding is what a `realtime.v1` SUBSCRIBE must present).
pub(crate) fn snapshot_body(
    stream: &str,
    scope: &str,
    checkpoint: &SnapshotCheckpoint,
    state: &[u8],
) -> Bytes {
    let mut b = BytesMut::with_capacity(256 + state.len());
    b.put_slice(b"{\"streamId\":");
    string(&mut b, stream);
    b.put_slice(b",\"scopeBinding\":");
    string(&mut b, scope);
    b.put_slice(b",\"checkpoint\":");
    if checkpoint.encode_into(&mut b).is_err() {
        b.put_slice(b"null");
    }
    b.put_slice(b",\"state\":");
    b.put_slice(state);
    b.put_u8(b'}');
    b.freeze()
}
