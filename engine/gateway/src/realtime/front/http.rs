//! HTTP/1.1 requests of the realtime front end: routing, authorisation,
//! and the answers that come back from the realtime plane.

use std::time::Instant;

use bytes::Bytes;
use dtp_codec::http::{EntityTag, Method, RequestHead, Version, parse_request_head};
use dtp_codec::realtime::{JsonLimits, Publication};
use dtp_realtime::registry::is_valid_name;

use super::reply::{refuse, refuse_head, reply};
use super::{FrontMetrics, Phase, RealtimeFront, RtConn, Waiting};
use crate::app::GatewayUp;
use crate::realtime::{RtDecision, RtRefusal, RtRequest};
use dtp_codec::ErrorCode;
use dtp_codec::realtime::FailureKind;
use dtp_engine::Outbox;

/// A refusal: status, failure kind (SPEC RT-14) and a short message for
/// people (fixed text; ids only when `is_valid_name` allowed them).
pub(super) type Why<'a> = (u16, FailureKind, &'a str);

/// The 401 message (never the token that was presented).
pub(super) const NEED_CREDENTIALS: &str = "a valid bearer token or session cookie is required";

/// `id` as a refusal's message may name it: itself if it is a valid
/// stream id or event type (bounded, `[A-Za-z0-9._-]`), else a placeholder.
pub(super) fn shown(id: &str) -> &str {
    if is_valid_name(id) {
        id
    } else {
        "(not a valid name)"
    }
}

/// What a request needs its client to be allowed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    Read,
    Publish,
    Admin,
}

impl RealtimeFront {
    /// Parses and serves the next request of `c`. Returns whether more of
    /// its input may be used at once: another request, or the frames a
    /// client sent right behind its WebSocket upgrade (false: more bytes
    /// are needed, or the connection left the request phase otherwise).
    pub(super) fn next_request(
        &mut self,
        c: &mut RtConn,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Result<bool, ErrorCode> {
        let limits = self.config.limits.http;
        let (head, n) = match parse_request_head(&c.input, &limits) {
            Ok(None) => return Ok(false),
            Ok(Some(parsed)) => parsed,
            Err(e) => {
                FrontMetrics::bump(&self.metrics.refused);
                refuse_head(out, e);
                c.phase = Phase::Done;
                return Ok(false);
            }
        };
        // Bounded by the head's parser (413 above the body ceiling).
        let body_len = usize::try_from(head.content_length()).unwrap_or(usize::MAX);
        if c.input.len() - n < body_len {
            return Ok(false);
        }
        let _ = c.input.split_to(n);
        let body = c.input.split_to(body_len).freeze();
        if c.input.is_empty() {
            c.input = bytes::BytesMut::new(); // hold nothing between requests
        }
        out.set_timer(Some(out.now() + self.config.limits.idle_timeout));
        self.route(c, &head, body, out);
        Ok(matches!(c.phase, Phase::Http | Phase::Ws(_)))
    }

    fn route(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        body: Bytes,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        use FailureKind::{MalformedEvent, ProviderUnavailable, Unsupported};
        let keep = head.keep_alive();
        if head.version() == Version::Http11 && head.host().is_none() {
            // RFC 9112 §3.2: a request without Host is refused.
            let why = (400, MalformedEvent, "a request without Host is refused");
            return self.refuse(c, out, why, false, &[]);
        }
        let method = head.method();
        if let Method::Other(_) = method {
            // RFC 9110 §15.6.2: a method this server does not know at all.
            let why = (501, Unsupported, "this method is not implemented");
            return self.refuse(c, out, why, keep, &[]);
        }
        match (method, head.path()) {
            (Method::Get, "/") => {
                let page = super::page::DEMO_PAGE.as_bytes();
                return reply(out, 200, Some("text/html; charset=utf-8"), page, keep, &[]);
            }
            (Method::Get, "/favicon.ico") => {
                let icon = super::page::FAVICON.as_bytes();
                return reply(out, 200, Some("image/svg+xml"), icon, keep, &[]);
            }
            (_, "/" | "/favicon.ico") => return self.wrong_method(c, out, "GET", keep),
            _ => {}
        }
        // The browser client: public code, served while stopping too.
        if let Some(asset) = super::web::find(head.path()) {
            return if matches!(method, Method::Get) {
                super::web::serve(out, asset, head, keep);
            } else {
                self.wrong_method(c, out, "GET", keep);
            };
        }
        if self.stopping {
            // Going away: come back (to another instance) in a second.
            let extra = [("Retry-After", "1")];
            let why = (
                503,
                ProviderUnavailable,
                "the server is stopping; retry in a second",
            );
            return self.refuse(c, out, why, false, &extra);
        }
        let no_endpoint = (404, Unsupported, "no endpoint at this path");
        let Some(segs) = head.path_segments() else {
            return self.refuse(c, out, no_endpoint, keep, &[]);
        };
        let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
        match (method, segs.as_slice()) {
            (Method::Get, ["v1", "streams", id, "sse"]) => self.sse_request(c, head, id, keep, out),
            (Method::Get, ["v1", "streams", id, "snapshot"]) => {
                self.snapshot_request(c, head, id, keep, out);
            }
            (Method::Post, ["v1", "streams", id, "events"]) => {
                self.publish_request(c, head, id, &body, keep, out);
            }
            (Method::Post, ["v1", "streams", id, "cut"]) => {
                self.admin_request(c, head, id, true, keep, out);
            }
            (Method::Post, ["v1", "streams", id, "kick"]) => {
                self.admin_request(c, head, id, false, keep, out);
            }
            (Method::Post, ["v1", "login"]) => self.login(c, head, keep, out),
            (_, ["v1", "push", rest @ ..]) => self.push_request(c, head, rest, &body, out),

            (Method::Get, ["v1", "ws"]) => self.ws_request(c, head, false, out),
            (Method::Get, ["v1", "echo"]) if self.config.echo_max_message.is_some() => {
                self.ws_request(c, head, true, out);
            }
            (Method::Get, ["v1", "health"]) => {
                reply(
                    out,
                    200,
                    Some("application/json"),
                    b"{\"status\":\"ok\"}",
                    keep,
                    &[],
                );
            }
            (_, ["v1", "streams", _, "sse" | "snapshot"] | ["v1", "ws" | "health"]) => {
                self.wrong_method(c, out, "GET", keep);
            }
            (_, ["v1", "streams", _, "events" | "cut" | "kick"] | ["v1", "login"]) => {
                self.wrong_method(c, out, "POST", keep);
            }
            _ => self.refuse(c, out, no_endpoint, keep, &[]),
        }
    }

    /// 405 with `Allow`: a method this server knows, on a path that takes
    /// another one.
    fn wrong_method(
        &self,
        c: &mut RtConn,
        out: &mut Outbox<'_, GatewayUp>,
        allow: &str,
        keep: bool,
    ) {
        let message = format!("this path takes {allow} only");
        let why = (405, FailureKind::Unsupported, message.as_str());
        self.refuse(c, out, why, keep, &[("Allow", allow)]);
    }

    /// Refuses the request (counted); a connection not kept is done.
    pub(super) fn refuse(
        &self,
        c: &mut RtConn,
        out: &mut Outbox<'_, GatewayUp>,
        (status, kind, message): Why<'_>,
        keep: bool,
        extra: &[(&str, &str)],
    ) {
        FrontMetrics::bump(if status == 429 {
            &self.metrics.rate_limited
        } else {
            &self.metrics.refused
        });
        refuse(out, status, kind.as_str(), message, keep, extra);
        if !keep {
            c.phase = Phase::Done;
        }
    }

    /// The client of the request's bearer token or session cookie (a
    /// session id `POST /v1/login` issued, unexpired at `now`).
    pub(super) fn authenticate(&self, head: &RequestHead, now: Instant) -> Option<usize> {
        match head.bearer_token() {
            Some(token) => self.config.client(token),
            None => head
                .cookie(&self.config.cookie)
                .and_then(|id| self.config.login.verify(id, now))
                .filter(|&i| i < self.config.clients.len()),
        }
    }

    /// Authorises the request for `need` on `stream` (SPEC RT-6: at every
    /// connect, subscribe, resume and publish); refuses it otherwise.
    pub(super) fn authorise(
        &self,
        c: &mut RtConn,
        head: &RequestHead,
        stream: &str,
        need: Need,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Option<usize> {
        let keep = head.keep_alive();
        let Some(client) = self.authenticate(head, out.now()) else {
            let why = (401, FailureKind::AuthRequired, NEED_CREDENTIALS);
            self.refuse(c, out, why, keep, &[("WWW-Authenticate", "Bearer")]);
            return None;
        };
        let grants = &self.config.clients[client];
        let allowed = grants.may_read(stream)
            && match need {
                Need::Read => true,
                Need::Publish => grants.publish,
                Need::Admin => grants.admin,
            };
        if !allowed {
            let verb = match need {
                Need::Read => "read",
                Need::Publish => "publish to",
                Need::Admin => "administer",
            };
            let message = format!("this client may not {verb} stream {}", shown(stream));
            self.refuse(c, out, (403, FailureKind::Forbidden, &message), keep, &[]);
            return None;
        }
        if !is_valid_name(stream) {
            let why = (
                404,
                FailureKind::Unsupported,
                "stream ids are 1-64 characters of [A-Za-z0-9._-]",
            );
            self.refuse(c, out, why, keep, &[]);
            return None;
        }
        Some(client)
    }

    /// `POST /v1/login` with a bearer token: answers 204 with the session
    /// cookie (HttpOnly, SameSite=Strict, Max-Age its lifetime), so a
    /// browser page's EventSource and WebSocket authenticate without the
    /// token in script reach. The cookie holds a fresh random session id
    /// naming the token's client, never the token (SPEC RT-9).
    fn login(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        keep: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let Some(client) = head.bearer_token().and_then(|t| self.config.client(t)) else {
            let extra = [("WWW-Authenticate", "Bearer")];
            let why = (
                401,
                FailureKind::AuthRequired,
                "login needs a valid bearer token",
            );
            return self.refuse(c, out, why, keep, &extra);
        };
        let mut nonce = [0u8; 16];
        if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).is_err() {
            let why = (
                503,
                FailureKind::ProviderUnavailable,
                "no randomness for a session id",
            );
            return self.refuse(c, out, why, false, &[]);
        }
        let id = self.config.login.issue(client, out.now(), nonce);
        let cookie = format!(
            "{}={id}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict",
            self.config.cookie,
            crate::realtime::LOGIN_LIFETIME.as_secs()
        );
        reply(out, 204, None, b"", keep, &[("Set-Cookie", &cookie)]);
    }

    fn ask(&self, c: &mut RtConn, out: &mut Outbox<'_, GatewayUp>, r: RtRequest, waiting: Waiting) {
        out.to_control(GatewayUp::Realtime(Box::new(r)));
        c.phase = Phase::Waiting(waiting);
    }

    fn sse_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        stream: &str,
        keep: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let Some(client) = self.authorise(c, head, stream, Need::Read, out) else {
            return;
        };
        c.client = Some(client);
        // A reconnecting EventSource sends Last-Event-ID; a first connect
        // may name its cursor in the query (SPEC RT-8).
        let cursor = head
            .last_event_id()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .or_else(|| head.query_param("cursor"))
            .map(String::into_boxed_str);
        let r = RtRequest::Subscribe {
            conn: c.id,
            key: 0,
            stream: stream.into(),
            cursor,
            page: crate::realtime::PageSize::NONE,
        };
        let waiting = Waiting::Sse {
            keep_alive: keep,
            stream: stream.into(),
        };
        self.ask(c, out, r, waiting);
    }

    fn snapshot_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        stream: &str,
        keep: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let Some(client) = self.authorise(c, head, stream, Need::Read, out) else {
            return;
        };
        if let Some(wait) = self.poll_rate_limited(client, out.now()) {
            let secs = wait.as_secs().max(1).to_string();
            let message = format!("too many snapshot polls; retry after {secs} s");
            let why = (429, FailureKind::RateLimited, message.as_str());
            return self.refuse(c, out, why, keep, &[("Retry-After", &secs)]);
        }
        let r = RtRequest::Snapshot {
            conn: c.id,
            stream: stream.into(),
        };
        let waiting = Waiting::Snapshot {
            if_none_match: head.if_none_match(),
            keep_alive: keep,
            stream: stream.into(),
        };
        self.ask(c, out, r, waiting);
    }

    /// Counts a snapshot poll of `client`; `Some(wait)` if over its budget
    /// (RT-11: `poll_burst` per `poll_interval`, per client, per core).
    fn poll_rate_limited(&mut self, client: usize, now: Instant) -> Option<std::time::Duration> {
        let l = &self.config.limits;
        let (start, n) = self.polls.entry(client).or_insert((now, 0));
        if now.duration_since(*start) >= l.poll_interval {
            *start = now;
            *n = 0;
        }
        if *n >= l.poll_burst {
            return Some(l.poll_interval.saturating_sub(now.duration_since(*start)));
        }
        *n += 1;
        None
    }

    fn publish_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        stream: &str,
        body: &[u8],
        keep: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        if self
            .authorise(c, head, stream, Need::Publish, out)
            .is_none()
        {
            return;
        }
        let json = head.header("Content-Type").is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json {
            let why = (
                415,
                FailureKind::Unsupported,
                "a publication is sent as Content-Type: application/json",
            );
            return self.refuse(c, out, why, keep, &[]);
        }
        let Some((event_type, payload)) = parse_publication(body) else {
            let why = (
                400,
                FailureKind::MalformedEvent,
                "the body must be exactly {\"eventType\": <name>, \"payload\": {...}}",
            );
            return self.refuse(c, out, why, keep, &[]);
        };
        let event_type: Box<str> = event_type.into();
        let r = RtRequest::Publish {
            conn: c.id,
            stream: stream.into(),
            event_type: event_type.clone(),
            payload,
        };
        let waiting = Waiting::Write {
            keep_alive: keep,
            stream: stream.into(),
            event_type: Some(event_type),
        };
        self.ask(c, out, r, waiting);
    }

    /// A forced retention cut (`cut`) or an end of every subscription
    /// (`kick`) of `stream`: operator actions.
    fn admin_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        stream: &str,
        cut: bool,
        keep: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        if self.authorise(c, head, stream, Need::Admin, out).is_none() {
            return;
        }
        let waiting = Waiting::Write {
            keep_alive: keep,
            stream: stream.into(),
            event_type: None,
        };
        let (conn, stream) = (c.id, stream.into());
        let r = if cut {
            RtRequest::Cut { conn, stream }
        } else {
            RtRequest::Kick { conn, stream }
        };
        self.ask(c, out, r, waiting);
    }

    /// Answers the request that waited for `d` (a decision for a request
    /// no longer waiting is dropped: the connection moved on or closed).
    pub(super) fn answer(
        &mut self,
        c: &mut RtConn,
        d: RtDecision,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        if let Phase::Ws(_) = c.phase {
            return self.ws_answer(c, d, out);
        }
        let Phase::Waiting(w) = std::mem::replace(&mut c.phase, Phase::Http) else {
            return;
        };
        match (w, d) {
            (
                Waiting::Sse { .. },
                RtDecision::Subscribed {
                    stream,
                    epoch,
                    next,
                    replay,
                    reset,
                    ..
                },
            ) => {
                self.sse_open(c, (stream, epoch, next), replay, reset, out);
            }
            (
                Waiting::Snapshot {
                    if_none_match,
                    keep_alive,
                    ..
                },
                RtDecision::Snapshot { body, etag, .. },
            ) => {
                let tag = EntityTag::parse(&etag);
                let fresh = match (&if_none_match, &tag) {
                    (Some(inm), Some(tag)) => inm.matches(tag),
                    _ => false,
                };
                let headers = [("ETag", &*etag)];
                FrontMetrics::bump(&self.metrics.polls);
                if fresh {
                    FrontMetrics::bump(&self.metrics.poll_not_modified);
                    reply(out, 304, None, b"", keep_alive, &headers);
                } else {
                    reply(
                        out,
                        200,
                        Some("application/json"),
                        &body,
                        keep_alive,
                        &headers,
                    );
                }
                if !keep_alive {
                    c.phase = Phase::Done;
                }
            }
            (Waiting::Push { keep_alive }, RtDecision::PushAnswer { status, body, .. }) => {
                if status >= 400 {
                    FrontMetrics::bump(&self.metrics.refused);
                }
                let kind = (!body.is_empty()).then_some("application/json");
                reply(out, status, kind, &body, keep_alive, &[]);
                if !keep_alive {
                    c.phase = Phase::Done;
                }
            }
            (
                Waiting::Write {
                    keep_alive,
                    event_type,
                    ..
                },
                RtDecision::Published { body, .. },
            ) => {
                // A publication created an event; an operator action did not.
                let status = if event_type.is_some() { 201 } else { 200 };
                reply(
                    out,
                    status,
                    Some("application/json"),
                    &body,
                    keep_alive,
                    &[],
                );
                if !keep_alive {
                    c.phase = Phase::Done;
                }
            }
            (w, RtDecision::Refused { why, .. }) => {
                let status = match why {
                    RtRefusal::UnknownStream => 404,
                    RtRefusal::TooLarge | RtRefusal::TableFull => 413,
                    RtRefusal::Unavailable => 503,
                    _ => 400,
                };
                let event_type = match &w {
                    Waiting::Write { event_type, .. } => event_type.as_deref(),
                    _ => None,
                };
                let message = refusal_message(why, w.stream(), event_type);
                let why = (status, why.failure_kind(), message.as_str());
                self.refuse(c, out, why, w.keep_alive(), &[]);
            }
            (w, d) => {
                tracing::warn!(?w, ?d, "a realtime answer that does not fit its request");
                c.phase = Phase::Done;
                out.close();
            }
        }
    }
}

/// What a refusal of the realtime plane tells people: fixed text naming
/// the stream and event type the client sent (valid names, checked before
/// the request was forwarded).
fn refusal_message(why: RtRefusal, stream: &str, event_type: Option<&str>) -> String {
    let stream = shown(stream);
    match why {
        RtRefusal::UnknownStream => format!("no stream {stream}"),
        RtRefusal::UnknownEventType => format!(
            "event type {} is not registered for stream {stream}",
            shown(event_type.unwrap_or_default())
        ),
        RtRefusal::TooLarge => {
            format!(
                "the event's envelope would pass the 64 KiB event ceiling (SPEC RT-13) of stream {stream}"
            )
        }
        RtRefusal::CursorExpired | RtRefusal::CursorInvalid => {
            format!("the cursor cannot be resumed on stream {stream}; take a snapshot")
        }
        RtRefusal::NotResumable => format!("stream {stream} keeps no cursors"),
        RtRefusal::NotARow => {
            format!("stream {stream} keeps a table: the payload must name its row")
        }
        RtRefusal::TableFull => format!("the table of stream {stream} is full"),
        RtRefusal::Unavailable => {
            format!("the log of stream {stream} cannot be reached; nothing was published")
        }
    }
}

/// A publication body (SPEC RT-3, [`Publication::decode`]) whose event
/// type is also a registry name. Returns the event type and the payload,
/// compact.
fn parse_publication(body: &[u8]) -> Option<(String, Bytes)> {
    let p = Publication::decode(body, &JsonLimits::default()).ok()?;
    is_valid_name(&p.event_type).then(|| (p.event_type, Bytes::from(p.payload)))
}

#[cfg(test)]
mod tests {
    use super::parse_publication;

    /// The codec's tests cover the body's rules; this one the registry's
    /// narrower names on top.
    #[test]
    fn publication_bodies_are_exact() {
        let (t, p) = parse_publication(br#"{"eventType":"demo.tick","payload":{"n": 1}}"#).unwrap();
        assert_eq!(t, "demo.tick");
        assert_eq!(&p[..], br#"{"n":1}"#);
        for bad in [
            &br#"{"eventType":"demo.tick"}"#[..],
            br#"{"eventType":"demo.tick","payload":{},"extra":1}"#,
            br#"{"eventType":"demo.tick","payload":[1]}"#,
            br#"{"eventType":"bad type","payload":{}}"#,
            br#"{"eventType":"has:colon","payload":{}}"#,
            br#"{"eventType":7,"payload":{}}"#,
            br#"[]"#,
            br#"{"eventType":"tick","eventType":"big","payload":{}}"#,
            br#"{"eventType":"tick","payload":{"n":1,"n":2}}"#,
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
}
