//! HTTP answers of the realtime front end.

use dtp_codec::http::{HttpError, ResponseHead, write_chunk, write_last_chunk};
use dtp_codec::realtime::FailureKind;

use crate::app::GatewayUp;
use dtp_engine::Outbox;

/// Writes a whole response: `status`, the headers, `Content-Length` and
/// `body`; `Connection: close` when the connection will not be kept.
/// Header values are ours (validated names, numbers, entity tags); one that
/// a response head refuses is left out and logged, never sent broken.
pub(super) fn reply(
    out: &mut Outbox<'_, GatewayUp>,
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    keep_alive: bool,
    extra: &[(&str, &str)],
) {
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(extra.len() + 3);
    if let Some(t) = content_type {
        headers.push(("Content-Type", t));
    }
    headers.push(("Cache-Control", "no-store"));
    headers.extend_from_slice(extra);
    if !keep_alive {
        headers.push(("Connection", "close"));
    }
    with_headers(ResponseHead::new(status), &headers)
        .content_length(body.len() as u64)
        .write(out.wire());
    out.wire().extend_from_slice(body);
    if !keep_alive {
        out.close();
    }
}

/// `head` with `headers` added; one the head refuses is left out and
/// logged, never sent broken.
pub(super) fn with_headers(mut head: ResponseHead, headers: &[(&str, &str)]) -> ResponseHead {
    for &(name, value) in headers {
        head = match head.clone().header(name, value) {
            Ok(h) => h,
            Err(_) => {
                tracing::warn!(name, "a response header was refused");
                head
            }
        };
    }
    head
}

/// The longest `message` of a refusal, in bytes: messages are short and
/// fixed in form, naming at most ids the client sent that are valid names.
const MAX_MESSAGE: usize = 200;

/// A refusal with a JSON body naming its failure kind (SPEC RT-14) and,
/// for people, what was wrong:
/// `{"error":"FORBIDDEN","message":"this client may not read stream demo"}`.
/// The message never holds a token, a cursor or a payload: callers build it
/// from fixed text and ids checked by `is_valid_name`.
pub(super) fn refuse(
    out: &mut Outbox<'_, GatewayUp>,
    status: u16,
    kind: &str,
    message: &str,
    keep_alive: bool,
    extra: &[(&str, &str)],
) {
    let body = error_body(kind, message);
    reply(
        out,
        status,
        Some("application/json"),
        &body,
        keep_alive,
        extra,
    );
}

/// A request head the codec refused ([`HttpError`]), answered in the same
/// JSON form as every other refusal; the connection is closed after it
/// (the framing of what follows is unknown).
pub(super) fn refuse_head(out: &mut Outbox<'_, GatewayUp>, e: HttpError) {
    let kind = match e {
        HttpError::BodyTooLarge => FailureKind::EventTooLarge,
        HttpError::VersionNotSupported
        | HttpError::TransferEncodingNotImplemented
        | HttpError::WsMethodNotAllowed
        | HttpError::WsUnsupportedVersion => FailureKind::Unsupported,
        HttpError::WsNotHttp11
        | HttpError::WsMissingHost
        | HttpError::WsMissingUpgrade
        | HttpError::WsMissingConnectionUpgrade
        | HttpError::WsInvalidKey
        | HttpError::WsInvalidHandshakeField => FailureKind::ProtocolMismatch,
        _ => FailureKind::MalformedEvent,
    };
    refuse(
        out,
        e.status(),
        kind.as_str(),
        e.reason(),
        false,
        e.extra_headers(),
    );
}

/// `{"error":kind,"message":message}`, the message cut to [`MAX_MESSAGE`]
/// bytes (on a character boundary).
fn error_body(kind: &str, message: &str) -> Vec<u8> {
    let mut end = message.len().min(MAX_MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    // Strings only: serialising them cannot fail.
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "{{\"error\":{},\"message\":{}}}",
        quoted(kind),
        quoted(&message[..end])
    )
    .into_bytes()
}

/// Starts a streamed (chunked) response: the head only.
pub(super) fn start_stream(out: &mut Outbox<'_, GatewayUp>, content_type: &str) {
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
pub(super) fn chunk(out: &mut Outbox<'_, GatewayUp>, data: &[u8]) {
    write_chunk(out.wire(), data);
}

/// Ends a streamed response and closes the connection after it.
pub(super) fn end_stream(out: &mut Outbox<'_, GatewayUp>) {
    write_last_chunk(out.wire());
    out.close();
}
