//! The small JSON bodies of the realtime HTTP endpoints (compact, fixed
//! member order).

use bytes::{BufMut, Bytes, BytesMut};
use dtp_codec::realtime::{SnapshotCheckpoint, write_receipt};

/// Appends `s` as a JSON string.
fn string(buf: &mut BytesMut, s: &str) {
    // serde_json escapes exactly as JSON requires; a String never fails.
    match serde_json::to_writer(buf.writer(), s) {
        Ok(()) | Err(_) => {}
    }
}

/// The answer to a publication (SPEC RT-6, [`write_receipt`]). The
/// ledger's values passed the same checks when the event's envelope was
/// encoded, so the receipt cannot be refused; if it were, the body would be
/// empty rather than malformed.
pub(crate) fn published_body(
    stream: &str,
    epoch: &str,
    sequence: u64,
    cursor: Option<&str>,
) -> Bytes {
    let mut b = BytesMut::with_capacity(160);
    if write_receipt(&mut b, stream, epoch, sequence, cursor).is_err() {
        b.clear();
    }
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
