//! SPEC RT-12: the Web Push endpoints of the realtime front end. The shard
//! authenticates, checks CSRF for a cookie session, parses and validates
//! the body, and forwards a [`PushCall`] to the realtime plane on the
//! control thread, which owns the registry and answers with a status and
//! a body ([`RtDecision::PushAnswer`](crate::realtime::RtDecision)).
//!
//! | request | who | answer |
//! |---|---|---|
//! | `POST /v1/push/subscriptions` | any client | 201 (200 when it existed) `{registrationId, associationEpoch, sessionBindingEpoch}` |
//! | `GET /v1/push/subscriptions/{id}` | its owner | 200 `{registrationId, state, associationEpoch, sessionBindingEpoch}` |
//! | `DELETE /v1/push/subscriptions/{id}` | its owner | 204, also when already revoked or gone |
//! | `POST /v1/push/notifications` | a publisher | 202 `{notificationId}` |
//!
//! CSRF (seed §8.3: "cookie session이면 exact CSRF profile이 필수"): a
//! request authenticated by the session cookie that changes state (POST,
//! DELETE) must carry `X-DTP-CSRF: 1` (a header a cross-site form cannot
//! send, and a cross-origin script only after a CORS preflight this
//! server never grants) and, when it has an `Origin`, an allowed one
//! exactly (as WebSocket upgrades). A bearer token needs neither.
//!
//! Refusals here use the closed codes `MALFORMED_REQUEST`,
//! `INVALID_SUBSCRIPTION`, `AUTH_REQUIRED`, `FORBIDDEN`, `UNSUPPORTED`;
//! the plane adds `UNKNOWN_REGISTRATION`, `UNKNOWN_NOTIFICATION_TYPE`,
//! `UNKNOWN_ROUTE_INTENT`, `REGISTRATION_GONE`, `REGISTRATION_REVOKED`,
//! `ENDPOINT_REFUSED`, `LIMIT_EXCEEDED`, `QUEUE_OVERFLOW`. Messages are
//! fixed text: never an endpoint, a key or a token.

use dtp_codec::http::{Method, RequestHead};
use dtp_codec::realtime::is_valid_id;
use dtp_realtime::push::{PushSubscription, SubscriptionError, Urgency, is_valid_topic};
use serde::Deserialize;

use super::http::NEED_CREDENTIALS;
use super::reply::refuse;
use super::{FrontMetrics, Phase, RealtimeFront, RtConn, Waiting};
use crate::app::GatewayUp;
use crate::realtime::RtRequest;
use crate::realtime::push::{MAX_BOUND_STREAMS, MAX_TTL_SECS, PushCall};
use dtp_engine::Outbox;

/// The header a cookie session's state-changing push request carries.
pub(super) const CSRF_HEADER: &str = "X-DTP-CSRF";

/// `POST /v1/push/subscriptions`: `PushSubscription.toJSON()` and the
/// installation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RegisterBody {
    installation_id: String,
    subscription: SubscriptionBody,
    /// Hinted streams to be sent a hint of each publication of.
    #[serde(default)]
    streams: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SubscriptionBody {
    endpoint: String,
    /// What `toJSON()` writes (`null`, or a time); not used.
    #[serde(default)]
    #[allow(dead_code, reason = "accepted as toJSON() writes it, not used")]
    expiration_time: Option<f64>,
    keys: KeysBody,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysBody {
    p256dh: String,
    auth: String,
}

/// `POST /v1/push/notifications`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NotifyBody {
    registration_id: String,
    notification_type: String,
    route_intent: String,
    ttl_seconds: u32,
    #[serde(default)]
    urgency: Option<String>,
    #[serde(default)]
    topic: Option<String>,
}

impl RealtimeFront {
    /// Routes a `/v1/push/...` request (`segs` after `v1`, `push`).
    pub(super) fn push_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        segs: &[&str],
        body: &[u8],
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let keep = head.keep_alive();
        let method = head.method().clone();
        let allow = match segs {
            ["subscriptions"] | ["notifications"] => "POST",
            ["subscriptions", _] => "GET, DELETE",
            _ => {
                return self.push_refuse(
                    c,
                    out,
                    (404, "UNSUPPORTED", "no endpoint at this path"),
                    keep,
                );
            }
        };
        let fits = match segs {
            ["subscriptions", _] => matches!(method, Method::Get | Method::Delete),
            _ => method == Method::Post,
        };
        if !fits {
            FrontMetrics::bump(&self.metrics.refused);
            let message = format!("this path takes {allow} only");
            refuse(out, 405, "UNSUPPORTED", &message, keep, &[("Allow", allow)]);
            if !keep {
                c.phase = Phase::Done;
            }
            return;
        }
        let Some(client) = self.authenticate(head, out.now()) else {
            FrontMetrics::bump(&self.metrics.refused);
            let extra = [("WWW-Authenticate", "Bearer")];
            refuse(out, 401, "AUTH_REQUIRED", NEED_CREDENTIALS, keep, &extra);
            if !keep {
                c.phase = Phase::Done;
            }
            return;
        };
        if method != Method::Get && head.bearer_token().is_none() && !self.csrf_ok(head) {
            let why = (
                403,
                "FORBIDDEN",
                "a cookie session's request needs X-DTP-CSRF: 1 and an allowed Origin",
            );
            return self.push_refuse(c, out, why, keep);
        }
        let conn = c.id;
        let session = session_digest(head, &self.config.cookie);
        let call = match (segs, &method) {
            (["subscriptions"], _) => match parse_register(body) {
                Ok((installation, subscription, streams)) => {
                    if !streams
                        .iter()
                        .all(|s| self.config.clients[client].may_read(s))
                    {
                        let why = (
                            403,
                            "FORBIDDEN",
                            "this client may not read a stream it named",
                        );
                        return self.push_refuse(c, out, why, keep);
                    }
                    PushCall::Register {
                        conn,
                        client,
                        session,
                        installation,
                        subscription,
                        streams,
                    }
                }
                Err(why) => return self.push_refuse(c, out, why, keep),
            },
            (["subscriptions", id], Method::Get) => PushCall::State {
                conn,
                client,
                session,
                id: (*id).into(),
            },
            (["subscriptions", id], _) => PushCall::Revoke {
                conn,
                client,
                id: (*id).into(),
            },
            _ => {
                if !self.config.clients[client].publish {
                    let why = (403, "FORBIDDEN", "this client may not send notifications");
                    return self.push_refuse(c, out, why, keep);
                }
                match parse_notify(conn, body) {
                    Ok(call) => call,
                    Err(why) => return self.push_refuse(c, out, why, keep),
                }
            }
        };
        out.to_control(GatewayUp::Realtime(Box::new(RtRequest::Push(call))));
        c.phase = Phase::Waiting(Waiting::Push { keep_alive: keep });
    }

    /// A cookie session's CSRF check (see the module doc).
    fn csrf_ok(&self, head: &RequestHead) -> bool {
        let marked = head.header(CSRF_HEADER).is_some_and(|v| v.trim() == "1");
        let origin_ok = head
            .header("Origin")
            .is_none_or(|o| self.config.origin_allowed(o));
        marked && origin_ok
    }

    fn push_refuse(
        &self,
        c: &mut RtConn,
        out: &mut Outbox<'_, GatewayUp>,
        (status, code, message): (u16, &str, &str),
        keep: bool,
    ) {
        FrontMetrics::bump(&self.metrics.refused);
        refuse(out, status, code, message, keep, &[]);
        if !keep {
            c.phase = Phase::Done;
        }
    }
}

type Why = (u16, &'static str, &'static str);

const MALFORMED_REGISTER: Why = (
    400,
    "MALFORMED_REQUEST",
    "the body must be {\"installationId\", \"subscription\": {\"endpoint\", \"keys\": {\"p256dh\", \"auth\"}}, \"streams\"?}",
);

/// A registration request: installation, subscription, bound streams.
type Registration = (Box<str>, PushSubscription, Box<[Box<str>]>);

fn parse_register(body: &[u8]) -> Result<Registration, Why> {
    let b: RegisterBody = serde_json::from_slice(body).map_err(|_| MALFORMED_REGISTER)?;
    if !is_valid_id(&b.installation_id) {
        return Err((
            400,
            "MALFORMED_REQUEST",
            "installationId is 1-128 characters of A-Z a-z 0-9 . _ : -",
        ));
    }
    let s = &b.subscription;
    let sub = PushSubscription::from_parts(&s.endpoint, &s.keys.p256dh, &s.keys.auth).map_err(
        |e| match e {
            SubscriptionError::InvalidEndpoint => (
                400,
                "INVALID_SUBSCRIPTION",
                "the endpoint is not an https URL of at most 2048 bytes",
            ),
            SubscriptionError::Key(_) => (
                400,
                "INVALID_SUBSCRIPTION",
                "p256dh must be a 65-byte uncompressed P-256 point and auth 16 bytes, base64url",
            ),
        },
    )?;
    let streams = &b.streams;
    let distinct = streams
        .iter()
        .enumerate()
        .all(|(i, s)| !streams[..i].contains(s));
    if streams.len() > MAX_BOUND_STREAMS || !distinct || !streams.iter().all(|s| is_valid_id(s)) {
        return Err((
            400,
            "MALFORMED_REQUEST",
            "streams is at most 8 distinct stream ids",
        ));
    }
    let streams = b.streams.into_iter().map(Into::into).collect();
    Ok((b.installation_id.into(), sub, streams))
}

fn parse_notify(conn: dtp_transports::ConnId, body: &[u8]) -> Result<PushCall, Why> {
    let b: NotifyBody = serde_json::from_slice(body).map_err(|_| {
        (
            400,
            "MALFORMED_REQUEST",
            "the body must be {\"registrationId\", \"notificationType\", \"routeIntent\", \"ttlSeconds\", \"urgency\"?, \"topic\"?}",
        )
    })?;
    if !is_valid_id(&b.notification_type) || !is_valid_id(&b.route_intent) {
        return Err((
            400,
            "MALFORMED_REQUEST",
            "notificationType and routeIntent are 1-128 characters of A-Z a-z 0-9 . _ : -",
        ));
    }
    if !(1..=MAX_TTL_SECS).contains(&b.ttl_seconds) {
        return Err((400, "MALFORMED_REQUEST", "ttlSeconds is 1..=86400"));
    }
    let urgency = match b.urgency.as_deref() {
        None => Urgency::default(),
        Some(u) => Urgency::parse(u).ok_or((
            400,
            "MALFORMED_REQUEST",
            "urgency is very-low, low, normal or high",
        ))?,
    };
    if b.topic.as_deref().is_some_and(|t| !is_valid_topic(t)) {
        return Err((
            400,
            "MALFORMED_REQUEST",
            "topic is 1-32 characters of A-Z a-z 0-9 - _",
        ));
    }
    Ok(PushCall::Notify {
        conn,
        id: b.registration_id.into(),
        notification_type: b.notification_type.into(),
        route_intent: b.route_intent.into(),
        ttl_secs: b.ttl_seconds,
        urgency,
        topic: b.topic.map(Into::into),
    })
}

/// The session a request is authenticated by, as [`PushCall::State`]
/// takes it: 0 for a bearer token, a digest of the session cookie
/// otherwise (the cookie itself never leaves the shard).
fn session_digest(head: &RequestHead, cookie: &str) -> u64 {
    if head.bearer_token().is_some() {
        return 0;
    }
    let Some(id) = head.cookie(cookie) else {
        return 0;
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let mut n = [0u8; 8];
    n.copy_from_slice(&digest.as_ref()[..8]);
    u64::from_le_bytes(n)
}
