//! HTTP answers of the realtime front end.

use dtp_codec::http::{ResponseHead, write_chunk, write_last_chunk};

use crate::service::Outbox;

/// Writes a whole response: `status`, the headers, `Content-Length` and
/// `body`; `Connection: close` when the connection will not be kept.
/// Header values are ours (validated names, numbers, entity tags); one that
/// a response head refuses is left out and logged, never sent broken.
pub(super) fn reply(
    out: &mut Outbox<'_>,
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    keep_alive: bool,
    extra: &[(&str, &str)],
) {
    let mut head = ResponseHead::new(status);
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(extra.len() + 3);
    if let Some(t) = content_type {
        headers.push(("Content-Type", t));
    }
    headers.push(("Cache-Control", "no-store"));
    headers.extend_from_slice(extra);
    if !keep_alive {
        headers.push(("Connection", "close"));
    }
    for (name, value) in headers {
        head = match head.clone().header(name, value) {
            Ok(h) => h,
            Err(_) => {
                tracing::warn!(name, "a response header was refused");
                head
            }
        };
    }
    head.content_length(body.len() as u64).write(out.wire());
    out.wire().extend_from_slice(body);
    if !keep_alive {
        out.close();
    }
}

/// A refusal with a JSON body naming its failure kind (SPEC RT-14):
/// `{"error":"FORBIDDEN"}`.
pub(super) fn refuse(
    out: &mut Outbox<'_>,
    status: u16,
    kind: &str,
    keep_alive: bool,
    extra: &[(&str, &str)],
) {
    let body = format!("{{\"error\":\"{kind}\"}}");
    reply(
        out,
        status,
        Some("application/json"),
        body.as_bytes(),
        keep_alive,
        extra,
    );
}

/// Starts a streamed (chunked) response: the head only.
pub(super) fn start_stream(out: &mut Outbox<'_>, content_type: &str) {
    let mut head = ResponseHead::new(200).chunked();
    for (name, value) in [
        ("Content-Type", content_type),
        ("Cache-Control", "no-store, no-transform"),
        // Nginx and similar proxies: do not buffer the stream.
        ("X-Accel-Buffering", "no"),
    ] {
        head = match head.clone().header(name, value) {
            Ok(h) => h,
            Err(_) => head,
        };
    }
    head.write(out.wire());
}

/// One chunk of a streamed response (nothing for empty `data`).
pub(super) fn chunk(out: &mut Outbox<'_>, data: &[u8]) {
    write_chunk(out.wire(), data);
}

/// Ends a streamed response and closes the connection after it.
pub(super) fn end_stream(out: &mut Outbox<'_>) {
    write_last_chunk(out.wire());
    out.close();
}
