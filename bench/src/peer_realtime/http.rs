//! The HTTP endpoints: the router, publication (`POST …/events`), SSE
//! (`GET …/sse`, SPEC RT-8) and health, as axum handlers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::header::{AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use dtp_codec::realtime::{FailureKind, JsonLimits, Publication, SseControl, write_receipt};
use dtp_realtime::registry::is_valid_name;
use futures_util::{Stream as FutStream, StreamExt, stream};
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::state::{App, Event, PublishRefusal, Published};
use super::{SSE_HEARTBEAT, SSE_RETRY};

/// The largest request body (our server's HTTP ceiling, 64 KiB).
const MAX_BODY: usize = 64 * 1024;

/// The peer's routes.
pub(super) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/streams/{stream}/events", post(publish))
        .route("/v1/streams/{stream}/sse", get(sse))
        .route("/v1/ws", get(super::ws::upgrade))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

async fn health() -> Response {
    reply(StatusCode::OK, b"{\"status\":\"ok\"}".as_slice())
}

/// A JSON answer with `Cache-Control: no-store`, as ours.
pub(super) fn reply(status: StatusCode, body: impl Into<Body>) -> Response {
    let mut r = (status, body.into()).into_response();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// A refusal `{"error":"<KIND>"}` (SPEC RT-14 vocabulary).
pub(super) fn refuse(status: StatusCode, kind: FailureKind) -> Response {
    let mut r = reply(status, format!("{{\"error\":\"{}\"}}", kind.as_str()));
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// Whether `headers` carry `Authorization: Bearer <token>` exactly.
pub(super) fn authorised(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .is_some_and(|t| t == token)
}

/// The token of an `Authorization` value `Bearer <token>` (scheme case
/// insensitive, RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// `POST /v1/streams/{stream}/events`: `201` with
/// `{"streamId","streamEpoch","sequence","resumeCursor"}` (SPEC RT-6).
async fn publish(
    State(app): State<Arc<App>>,
    Path(stream): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorised(&headers, &app.token) {
        return refuse(StatusCode::UNAUTHORIZED, FailureKind::AuthRequired);
    }
    let Some(s) = app.stream(&stream) else {
        return refuse(StatusCode::NOT_FOUND, FailureKind::Unsupported);
    };
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, FailureKind::Unsupported);
    }
    let Some((event_type, payload)) = parse_publication(&body) else {
        return refuse(StatusCode::BAD_REQUEST, FailureKind::MalformedEvent);
    };
    match s.publish(&event_type, &payload) {
        Ok(p) => reply(StatusCode::CREATED, published_body(&s.id, &p)),
        Err(PublishRefusal::UnknownEventType) => refuse(
            StatusCode::BAD_REQUEST,
            FailureKind::MappingContractViolation,
        ),
        Err(PublishRefusal::Unencodable) => {
            refuse(StatusCode::PAYLOAD_TOO_LARGE, FailureKind::EventTooLarge)
        }
    }
}

/// A publication body (SPEC RT-3, [`Publication::decode`]) whose event
/// type is also a registry name; returns the event type and the payload,
/// compact — the same function as our server's.
pub(super) fn parse_publication(body: &[u8]) -> Option<(String, Vec<u8>)> {
    let p = Publication::decode(body, &JsonLimits::default()).ok()?;
    is_valid_name(&p.event_type).then_some((p.event_type, p.payload))
}

/// `{"streamId","streamEpoch","sequence","resumeCursor"}`, written by the
/// codec as our server writes it ([`write_receipt`]).
pub(super) fn published_body(stream: &str, p: &Published) -> String {
    let mut buf = Vec::with_capacity(160);
    // The ledger's values passed the envelope's checks; a refusal writes
    // nothing.
    let _ = write_receipt(&mut buf, stream, &p.epoch, p.sequence, p.cursor.as_deref());
    String::from_utf8(buf).unwrap_or_default()
}

/// `GET /v1/streams/{stream}/sse` (SPEC RT-8): `retry`, a RESET_REQUIRED
/// control block if `Last-Event-ID` could not be resumed, the replay, then
/// every event live; a subscriber that falls [`super::BROADCAST_CAPACITY`]
/// events behind gets `event: control` RESET_REQUIRED/QUEUE_OVERFLOW and
/// its stream ends (SPEC RT-10: never a silent skip).
async fn sse(
    State(app): State<Arc<App>>,
    Path(stream): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorised(&headers, &app.token) {
        return refuse(StatusCode::UNAUTHORIZED, FailureKind::AuthRequired);
    }
    let Some(s) = app.stream(&stream) else {
        return refuse(StatusCode::NOT_FOUND, FailureKind::Unsupported);
    };
    let cursor = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|c| !c.is_empty());
    let a = s.attach(cursor);
    let mut first = vec![SseEvent::default().retry(SSE_RETRY)];
    if let Some(reason) = a.reset {
        first.extend(control(&SseControl::ResetRequired { reason }));
    }
    first.extend(a.replay.iter().map(|e| event_block(e)));
    let events = stream::iter(first)
        .chain(live(a.rx))
        .map(Ok::<_, Infallible>);
    let keep_alive = KeepAlive::new().interval(SSE_HEARTBEAT).text("heartbeat");
    let mut r = Sse::new(events).keep_alive(keep_alive).into_response();
    let h = r.headers_mut();
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("no-store, no-transform"),
    );
    h.insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    r
}

/// Every event received, until the receiver lags (one control block, then
/// the end) or the stream's sender is gone.
fn live(rx: Receiver<Arc<Event>>) -> impl FutStream<Item = SseEvent> + Send {
    stream::unfold(Some(rx), |rx| async move {
        let mut rx = rx?;
        match rx.recv().await {
            Ok(ev) => Some((event_block(&ev), Some(rx))),
            Err(RecvError::Lagged(_)) => {
                let overflow = SseControl::ResetRequired {
                    reason: FailureKind::QueueOverflow,
                };
                control(&overflow).map(|block| (block, None))
            }
            Err(RecvError::Closed) => None,
        }
    })
}

/// `id: <resumeCursor>` + `data: <envelope>`. The cursor is a ledger-issued
/// token of visible ASCII and the envelope one line, so axum's field checks
/// (which panic on CR, LF or NUL) cannot trip.
fn event_block(ev: &Event) -> SseEvent {
    let block = SseEvent::default();
    let block = match ev.cursor.as_deref() {
        Some(c) => block.id(c),
        None => block,
    };
    block.data(&*ev.envelope)
}

/// `event: control` + `data: <json>`.
fn control(c: &SseControl) -> Option<SseEvent> {
    let json = c.encode().ok()?;
    let json = String::from_utf8(json).ok()?;
    Some(SseEvent::default().event("control").data(json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publication_bodies_are_exact() {
        let (t, p) = parse_publication(br#"{"eventType":"demo.tick","payload":{"n": 1}}"#).unwrap();
        assert_eq!(t, "demo.tick");
        assert_eq!(p, br#"{"n":1}"#);
        for bad in [
            &br#"{"eventType":"demo.tick"}"#[..],
            br#"{"eventType":"demo.tick","payload":{},"extra":1}"#,
            br#"{"eventType":"demo.tick","payload":[1]}"#,
            br#"{"eventType":"bad type","payload":{}}"#,
            br#"{"eventType":7,"payload":{}}"#,
            br#"[]"#,
            b"{\"eventType\":\"a\",\"payload\":{\"x\":\"\xff\"}}",
            b"not json",
        ] {
            assert_eq!(
                parse_publication(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token(""), None);
    }

    #[test]
    fn published_body_matches_ours() {
        let p = Published {
            epoch: "e1".into(),
            sequence: 7,
            cursor: Some("c.7".into()),
        };
        assert_eq!(
            published_body("demo", &p),
            r#"{"streamId":"demo","streamEpoch":"e1","sequence":"7","resumeCursor":"c.7"}"#
        );
        let p = Published { cursor: None, ..p };
        assert_eq!(
            published_body("demo", &p),
            r#"{"streamId":"demo","streamEpoch":"e1","sequence":"7","resumeCursor":null}"#
        );
    }

    /// Arbitrary bytes never panic the body and header parsers (a seeded
    /// xorshift generator: proptest is not a dev-dependency of this crate).
    #[test]
    fn arbitrary_input_never_panics() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = br#"{}[]":, eventTypepayload.01\"#;
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 4 == 0 {
                        (r >> 8) as u8
                    } else {
                        alphabet[(r >> 8) as usize % alphabet.len()]
                    }
                })
                .collect();
            let _ = parse_publication(&bytes);
            let _ = bearer_token(&String::from_utf8_lossy(&bytes));
        }
    }
}
