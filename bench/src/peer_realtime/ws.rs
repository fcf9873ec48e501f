//! `realtime.v1` over axum's WebSocket (tokio-tungstenite) (SPEC RT-9,
//! RT-10): one task per connection, a `select!` over the socket, the
//! subscriptions' broadcast receivers (a `StreamMap`) and an idle timer.
//!
//! Events are fed to the socket and flushed once no further event is ready
//! (at most [`WRITE_BATCH`] at a time), the way a careful tokio user
//! batches writes; control answers are sent (fed and flushed) at once.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{
    CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade,
    rejection::WebSocketUpgradeRejection,
};
use axum::http::header::{SEC_WEBSOCKET_VERSION, UPGRADE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use dtp_codec::realtime::{
    ClientMessage, CloseCategory, ConnectionLimits, FailureKind, HeartbeatPolicy, JsonLimits,
    SUBPROTOCOL, ServerMessage, write_event_message,
};
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio_stream::StreamMap;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::http::{authorised, refuse};
use super::state::{App, Event};
use super::{MAX_MESSAGE, MAX_SUBSCRIPTIONS, WS_HEARTBEAT_MAX, WS_HEARTBEAT_MIN};

/// Most events written before a flush.
pub(super) const WRITE_BATCH: usize = 64;
/// The socket's read buffer. tungstenite's default (128 KiB, allocated and
/// zeroed at once) would make memory per subscriber mostly an idle read
/// buffer; a fan-out server whose clients send only small control messages
/// lowers it, as a careful user does. Larger messages still fit: the buffer
/// grows for a frame that needs it.
pub(super) const READ_BUFFER: usize = 4 * 1024;
/// A connection silent this long is closed (1001), as ours: twice the
/// heartbeat's maximum interval.
const IDLE: Duration = Duration::from_secs(2 * WS_HEARTBEAT_MAX.as_secs());

/// `GET /v1/ws` (SPEC RT-9): authenticated at the upgrade (bearer token),
/// the `realtime.v1` subprotocol required (400 PROTOCOL_MISMATCH otherwise).
pub(super) async fn upgrade(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Ok(ws) = ws else {
        let mut r = refuse(StatusCode::UPGRADE_REQUIRED, FailureKind::Unsupported);
        let h = r.headers_mut();
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        return r;
    };
    if !authorised(&headers, &app.token) {
        return refuse(StatusCode::UNAUTHORIZED, FailureKind::AuthRequired);
    }
    let ws = ws.protocols([SUBPROTOCOL]);
    if ws.selected_protocol().is_none() {
        return refuse(StatusCode::BAD_REQUEST, FailureKind::ProtocolMismatch);
    }
    ws.read_buffer_size(READ_BUFFER)
        .max_message_size(MAX_MESSAGE)
        .max_frame_size(MAX_MESSAGE)
        .on_upgrade(move |socket| Session::new(app, socket).run())
}

/// Whether a session goes on.
enum Flow {
    Continue,
    End,
}

/// One `realtime.v1` connection.
struct Session {
    app: Arc<App>,
    socket: WebSocket,
    /// Live subscriptions by `subscriptionId`.
    subs: StreamMap<Arc<str>, BroadcastStream<Arc<Event>>>,
}

impl Session {
    fn new(app: Arc<App>, socket: WebSocket) -> Self {
        Self {
            app,
            socket,
            subs: StreamMap::new(),
        }
    }

    async fn run(mut self) {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let welcome = ServerMessage::Welcome {
            connection_id: format!("c{}", self.app.next_serial()),
            heartbeat: HeartbeatPolicy {
                min_interval_ms: ms(WS_HEARTBEAT_MIN),
                max_interval_ms: ms(WS_HEARTBEAT_MAX),
                ack_timeout_ms: ms(WS_HEARTBEAT_MAX),
            },
            limits: ConnectionLimits::RT13,
        };
        if let Flow::End = self.send(&welcome).await {
            return;
        }
        let idle = tokio::time::sleep(IDLE);
        tokio::pin!(idle);
        loop {
            let flow = tokio::select! {
                input = self.socket.recv() => match input {
                    Some(Ok(msg)) => {
                        idle.as_mut().reset(tokio::time::Instant::now() + IDLE);
                        self.on_message(msg).await
                    }
                    // Gone, or a protocol error tungstenite already answered.
                    Some(Err(_)) | None => Flow::End,
                },
                Some((id, item)) = self.subs.next(), if !self.subs.is_empty() => {
                    self.on_event(id, item).await
                }
                () = &mut idle => {
                    let _ = self.close_frame(1001).await;
                    Flow::End
                }
            };
            if let Flow::End = flow {
                return;
            }
        }
    }

    /// An event (or a lag) of subscription `id`, then whatever else is
    /// ready, then one flush.
    async fn on_event(
        &mut self,
        id: Arc<str>,
        item: Result<Arc<Event>, BroadcastStreamRecvError>,
    ) -> Flow {
        let mut item = (id, item);
        for _ in 0..WRITE_BATCH {
            let (id, ev) = match item {
                (id, Ok(ev)) => (id, ev),
                (_, Err(BroadcastStreamRecvError::Lagged(_))) => return self.overloaded().await,
            };
            let Some(msg) = event_message(&id, &ev) else {
                return Flow::End;
            };
            if self.socket.feed(msg).await.is_err() {
                return Flow::End;
            }
            match self.subs.next().now_or_never() {
                Some(Some(next)) => item = next,
                _ => break,
            }
        }
        match self.socket.flush().await {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::End,
        }
    }

    /// A slow consumer (SPEC RT-10): CLOSE{OVERLOADED}, close code 1013.
    async fn overloaded(&mut self) -> Flow {
        self.close_session(CloseCategory::Overloaded).await
    }

    async fn on_message(&mut self, msg: Message) -> Flow {
        match msg {
            Message::Text(t) => match ClientMessage::decode(t.as_bytes(), &JsonLimits::default()) {
                Ok(m) => self.on_client(m).await,
                Err(_) => self.close_session(CloseCategory::ProtocolMismatch).await,
            },
            // realtime.v1 is text only (RT-9 baseline): 1003.
            Message::Binary(_) => {
                let _ = self.close_frame(1003).await;
                Flow::End
            }
            // tungstenite queued the pong (or the close echo): send it.
            Message::Ping(_) => match self.socket.flush().await {
                Ok(()) => Flow::Continue,
                Err(_) => Flow::End,
            },
            Message::Pong(_) => Flow::Continue,
            Message::Close(_) => {
                let _ = self.socket.flush().await;
                Flow::End
            }
        }
    }

    async fn on_client(&mut self, msg: ClientMessage) -> Flow {
        match msg {
            ClientMessage::Subscribe {
                subscription_id,
                stream_id,
                cursor,
                scope_binding,
            } => {
                self.subscribe(
                    subscription_id,
                    &stream_id,
                    cursor.as_deref(),
                    &scope_binding,
                )
                .await
            }
            ClientMessage::Unsubscribe { subscription_id } => {
                // Idempotent: an id not (or no longer) subscribed is answered
                // too, so the client's tombstone ends.
                self.subs.remove(subscription_id.as_str());
                self.send(&ServerMessage::Unsubscribed { subscription_id })
                    .await
            }
            ClientMessage::Heartbeat { nonce } => {
                self.send(&ServerMessage::HeartbeatAck { nonce }).await
            }
            ClientMessage::Close { .. } => {
                let _ = self.close_frame(1000).await;
                Flow::End
            }
        }
    }

    /// SUBSCRIBE (SPEC RT-9): SUBSCRIBED, the replay and then live events,
    /// or RESET_REQUIRED with the reason our server gives.
    async fn subscribe(
        &mut self,
        subscription_id: String,
        stream_id: &str,
        cursor: Option<&str>,
        scope: &str,
    ) -> Flow {
        if self.subs.contains_key(subscription_id.as_str()) {
            // The same id twice: the client lost track (RT-9).
            return self.close_session(CloseCategory::ProtocolMismatch).await;
        }
        let app = Arc::clone(&self.app);
        let attached = if self.subs.len() >= MAX_SUBSCRIPTIONS {
            Err(FailureKind::QueueOverflow)
        } else {
            match app.stream(stream_id) {
                None => Err(FailureKind::Unsupported),
                Some(s) if *s.scope != *scope => Err(FailureKind::ScopeProtocolViolation),
                Some(s) => Ok(s.attach(cursor)),
            }
        };
        let a = match attached {
            Ok(a) if a.reset.is_none() => a,
            Ok(a) => return self.reset(subscription_id, a.reset).await,
            Err(reason) => return self.reset(subscription_id, Some(reason)).await,
        };
        let subscribed = ServerMessage::Subscribed {
            subscription_id: subscription_id.clone(),
            stream_epoch: a.epoch,
            accepted_cursor: a.accepted,
            next_expected_sequence: a.next,
        };
        if let Flow::End = self.send(&subscribed).await {
            return Flow::End;
        }
        for ev in &a.replay {
            let Some(msg) = event_message(&subscription_id, ev) else {
                return Flow::End;
            };
            if self.socket.feed(msg).await.is_err() {
                return Flow::End;
            }
        }
        if self.socket.flush().await.is_err() {
            return Flow::End;
        }
        self.subs
            .insert(subscription_id.into(), BroadcastStream::new(a.rx));
        Flow::Continue
    }

    async fn reset(&mut self, subscription_id: String, reason: Option<FailureKind>) -> Flow {
        let reason = reason.unwrap_or(FailureKind::CursorExpired);
        self.send(&ServerMessage::ResetRequired {
            subscription_id,
            reason,
        })
        .await
    }

    /// Sends one message now (fed and flushed).
    async fn send(&mut self, msg: &ServerMessage) -> Flow {
        let Some(text) = msg.encode().ok().and_then(|b| Utf8Bytes::try_from(b).ok()) else {
            return Flow::End;
        };
        match self.socket.send(Message::Text(text)).await {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::End,
        }
    }

    /// CLOSE{category}, then the close frame with the category's code.
    async fn close_session(&mut self, category: CloseCategory) -> Flow {
        if let Flow::Continue = self
            .send(&ServerMessage::Close {
                category,
                retry_after_ms: None,
            })
            .await
        {
            let code = category.close_code().map_or(1000, |c| c.0);
            let _ = self.close_frame(code).await;
        }
        Flow::End
    }

    async fn close_frame(&mut self, code: u16) -> Result<(), axum::Error> {
        let frame = CloseFrame {
            code,
            reason: Utf8Bytes::default(),
        };
        self.socket.send(Message::Close(Some(frame))).await
    }
}

/// The EVENT message of `ev` for subscription `id`, framed around the
/// shared envelope without re-encoding it.
fn event_message(id: &str, ev: &Event) -> Option<Message> {
    let mut buf = Vec::with_capacity(ev.envelope.len() + id.len() + 48);
    write_event_message(&mut buf, id, ev.envelope.as_bytes()).ok()?;
    Utf8Bytes::try_from(buf).ok().map(Message::Text)
}
