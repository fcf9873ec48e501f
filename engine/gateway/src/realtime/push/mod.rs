//! SPEC RT-12: Web Push registrations and notifications on the control
//! thread, beside the stream ledgers. The shards parse and authorise the
//! `/v1/push/...` requests and forward them ([`PushCall`]); this plane
//! keeps the [`Registry`] (its one writer), answers each request with a
//! status and a JSON body ([`RtDecision::PushAnswer`]), and hands each
//! accepted notification to the sender ([`PushPort`], the worker threads
//! of [`crate::push::PushSender`]). The sender's outcomes come back at the
//! next tick, after a worker woke the control thread: a 404/410 marks the
//! registration GONE, and every outcome is counted ([`PushMetrics`]).
//!
//! Registration ids are `N.MAC`: the registry's number and a keyed MAC of
//! it (HMAC-SHA-256 under a key drawn at start, 96 bits), so an id cannot
//! be guessed or forged; GET and DELETE answer only the owner of a live
//! registration. Association epochs are per client and derived under the
//! same key. The plane is sans-IO: its times are the control loop's, its
//! key is given at start.
//!
//! Never logged or answered: endpoints and keys. Logs carry the
//! registration id and the closed outcome.

mod durable;
mod metrics;
mod store;
mod streams;

pub use durable::Restored;
pub use metrics::{LATENCY_BUCKETS_MS, PushMetrics};
pub use store::{Line as StoreLine, PushStore, load as load_store};
pub use streams::{MAX_BOUND_STREAMS, StreamHint};

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use dtp_engine::ControlWaker;
use dtp_realtime::push::{
    AssociationEpoch, Outcome, PushSubscription, RegistrationState, Registry, RegistryConfig,
    Subscribed, SubscriptionId, Urgency, WebPushHint, base64url_encode, is_public_address,
};
use dtp_transports::ConnId;

use super::msg::RtDecision;
use crate::app::Decisions;
use crate::push::{PushDone, PushJob, PushSender, SendError};

/// The longest `installationId` accepted (an identifier, as the hint's).
pub const MAX_INSTALLATION_ID: usize = 128;

/// The longest notification lifetime a publisher may ask (the hint's
/// `expiresAt` is at most 24 h after `issuedAt`, SPEC RT-12).
pub const MAX_TTL_SECS: u32 = 24 * 3600;

/// The sender as the plane sees it: [`PushSender`], or a test's stand-in.
pub trait PushPort: Send {
    /// Queues a job; gives it back when the sender is full.
    fn submit(&mut self, job: PushJob) -> Result<(), Box<PushJob>>;
    /// The jobs finished since the last call.
    fn finished(&mut self) -> Vec<PushDone>;
}

impl PushPort for PushSender {
    fn submit(&mut self, job: PushJob) -> Result<(), Box<PushJob>> {
        PushSender::submit(self, job)
    }

    fn finished(&mut self) -> Vec<PushDone> {
        PushSender::finished(self)
    }
}

/// Where the control thread's waker will be: set when the plane is
/// attached, read by the sender's workers after each job (a wake before
/// then is not needed: the first tick looks anyway).
#[derive(Clone, Debug, Default)]
pub struct PushWake(Arc<OnceLock<ControlWaker>>);

impl PushWake {
    /// The callback a [`PushSender`] is started with.
    pub fn callback(&self) -> Arc<dyn Fn() + Send + Sync> {
        let slot = self.0.clone();
        Arc::new(move || {
            if let Some(w) = slot.get() {
                w.wake();
            }
        })
    }

    fn set(&self, waker: ControlWaker) {
        let _ = self.0.set(waker);
    }
}

/// A `/v1/push/...` request, parsed and authorised by the shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushCall {
    /// `POST /v1/push/subscriptions`.
    Register {
        /// The connection that asked.
        conn: ConnId,
        /// The authenticated client (the registration's owner).
        client: usize,
        /// Its authenticated session (see [`PushCall::State`]).
        session: u64,
        /// The browser installation (an identifier).
        installation: Box<str>,
        /// Its endpoint and keys, already checked (https, key lengths).
        subscription: PushSubscription,
        /// The streams whose publications it is sent hints of (ids the
        /// client may read, at most [`MAX_BOUND_STREAMS`]; checked against
        /// the hinted streams here).
        streams: Box<[Box<str>]>,
    },
    /// `GET /v1/push/subscriptions/{id}`.
    State {
        /// The connection that asked.
        conn: ConnId,
        /// The authenticated client.
        client: usize,
        /// Its authenticated session: 0 for a bearer token (the token is
        /// the session), a digest of the session cookie otherwise. The
        /// answer's `sessionBindingEpoch` is a MAC of it and the client.
        session: u64,
        /// The registration id as sent.
        id: Box<str>,
    },
    /// `DELETE /v1/push/subscriptions/{id}`.
    Revoke {
        /// The connection that asked.
        conn: ConnId,
        /// The authenticated client.
        client: usize,
        /// The registration id as sent.
        id: Box<str>,
    },
    /// `POST /v1/push/notifications` (a publisher).
    Notify {
        /// The connection that asked.
        conn: ConnId,
        /// The registration id.
        id: Box<str>,
        /// `notificationType` (an identifier; checked against the registry
        /// here).
        notification_type: Box<str>,
        /// `routeIntent` (an identifier; checked here).
        route_intent: Box<str>,
        /// `ttlSeconds`, 1..=[`MAX_TTL_SECS`].
        ttl_secs: u32,
        /// `urgency`.
        urgency: Urgency,
        /// `topic`, if any (checked by the sender's request builder too).
        topic: Option<Box<str>>,
    },
}

impl PushCall {
    /// The connection that asked.
    pub fn conn(&self) -> ConnId {
        match self {
            Self::Register { conn, .. }
            | Self::State { conn, .. }
            | Self::Revoke { conn, .. }
            | Self::Notify { conn, .. } => *conn,
        }
    }
}

/// The deployment's Web Push settings (`[realtime.push]`).
#[derive(Clone)]
pub struct PushSettings {
    /// Notification types a publisher may name (closed registry).
    pub notification_types: Vec<String>,
    /// Route intents a publisher may name (closed registry).
    pub route_intents: Vec<String>,
    /// Endpoints naming a loopback, private or link-local address are
    /// accepted (tests, private push services). The sender checks every
    /// resolved address again.
    pub allow_private_endpoints: bool,
    /// The registry's ceilings (`max_per_principal` is
    /// `max_subscriptions_per_client`).
    pub registry: RegistryConfig,
    /// The hints' `releaseEpoch`.
    pub release_epoch: String,
    /// The streams that send a hint for each publication.
    pub streams: Vec<StreamHint>,
    /// Each configured client's stable, opaque name (a keyed fingerprint
    /// of its token, in the order of the clients): how the store and the
    /// association epochs know a client across restarts.
    pub clients: Vec<String>,
    /// The key of registration ids and association epochs (random, drawn
    /// at start).
    pub key: [u8; 32],
    /// The registry's storage key: subscriptions are sealed and endpoints
    /// indexed by a keyed fingerprint under keys derived from it (random,
    /// drawn at start; seed §8.3). With a store it is this run's salt, and
    /// the key is derived from it and the store's secret
    /// ([`PushPlane::with_store`]).
    pub storage_key: [u8; 32],
}

impl fmt::Debug for PushSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushSettings")
            .field("notification_types", &self.notification_types)
            .field("route_intents", &self.route_intents)
            .field("allow_private_endpoints", &self.allow_private_endpoints)
            .field("registry", &self.registry)
            .field("streams", &self.streams)
            .finish_non_exhaustive()
    }
}

/// The closed outcome of one notification, as logs and metrics name it.
fn outcome_name(result: &Result<Outcome, SendError>) -> &'static str {
    match result {
        Ok(Outcome::Delivered { .. }) => "DELIVERED",
        Ok(Outcome::Gone { .. }) => "GONE",
        Ok(Outcome::Expired { .. }) => "EXPIRED",
        Ok(Outcome::RetriesExhausted { .. }) => "RETRIES_EXHAUSTED",
        Ok(Outcome::Rejected { .. }) => "REJECTED",
        Ok(Outcome::Unexpected { .. }) => "UNEXPECTED_STATUS",
        Err(SendError::Refused(_)) => "ENDPOINT_REFUSED",
        Err(_) => "NOT_SENT",
    }
}

/// A client as the registry knows it.
type Principal = usize;

/// What one hint says besides its ids and times.
struct HintSpec<'a> {
    notification_type: &'a str,
    route_intent: &'a str,
    ttl_secs: u32,
    urgency: Urgency,
    topic: Option<&'a str>,
}

/// The Web Push half of the realtime plane (see the module doc).
pub struct PushPlane {
    settings: PushSettings,
    /// [`PushSettings::key`] as an HMAC key.
    mac_key: ring::hmac::Key,
    registry: Registry<Principal>,
    /// Each registration's installation id (for the idempotent answer).
    installations: HashMap<SubscriptionId, Box<str>>,
    /// The hinted streams, by id.
    hints: HashMap<Box<str>, StreamHint>,
    /// Which registrations each hinted stream sends to.
    bindings: streams::Bindings,
    sender: Box<dyn PushPort>,
    wake: PushWake,
    metrics: Arc<PushMetrics>,
    /// Epochs issued per client so far (the next one is derived from it).
    epochs: HashMap<Principal, u64>,
    /// Notifications in the sender: job id → (registration, submitted at).
    pending: HashMap<u64, (SubscriptionId, Instant)>,
    next_job: u64,
    /// The store and what it has been given, when registrations persist.
    durable: Option<durable::Durable>,
}

impl fmt::Debug for PushPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushPlane")
            .field("registry", &self.registry)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

/// A refusal: status, closed code, one-line message (fixed text).
type Refusal = (u16, &'static str, &'static str);

const NOT_FOUND: Refusal = (404, "UNKNOWN_REGISTRATION", "no such registration");

impl PushPlane {
    /// The plane over `sender`, whose workers call `wake`'s callback.
    pub fn new(settings: PushSettings, sender: Box<dyn PushPort>, wake: PushWake) -> Self {
        let registry = Registry::with_storage_key(settings.registry, settings.storage_key);
        let mac_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &settings.key);
        let hints = settings
            .streams
            .iter()
            .map(|h| (Box::from(h.stream.as_str()), h.clone()))
            .collect();
        Self {
            mac_key,
            settings,
            registry,
            installations: HashMap::new(),
            hints,
            bindings: streams::Bindings::default(),
            sender,
            wake,
            metrics: Arc::default(),
            epochs: HashMap::new(),
            pending: HashMap::new(),
            next_job: 1,
            durable: None,
        }
    }

    /// Persists registrations in `store` (SPEC RT-12), their records sealed
    /// under a key derived from `secret` and this run's salt
    /// ([`PushSettings::storage_key`]). Call on a new plane, then
    /// [`PushPlane::restore`] with what the store held.
    pub fn with_store(mut self, store: PushStore, secret: [u8; 32]) -> Self {
        let key = durable::seal_key(&secret, &self.settings.storage_key);
        self.registry = Registry::with_storage_key(self.settings.registry, key);
        self.durable = Some(durable::Durable::new(store, secret));
        self
    }

    /// Client `client`'s stable name.
    fn client_name(&self, client: Principal) -> String {
        self.settings
            .clients
            .get(client)
            .cloned()
            .unwrap_or_else(|| format!("client-{client}"))
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<PushMetrics> {
        self.metrics.clone()
    }

    /// The control thread's waker, for the sender's workers.
    pub fn attach(&self, waker: ControlWaker) {
        self.wake.set(waker);
    }

    /// 96 bits of HMAC-SHA-256 of `label` and `n` under the plane's key,
    /// base64url.
    fn mac(&self, label: &[u8], n: u64) -> String {
        let mut ctx = ring::hmac::Context::with_key(&self.mac_key);
        ctx.update(label);
        ctx.update(&n.to_le_bytes());
        let tag = ctx.sign();
        base64url_encode(&tag.as_ref()[..12])
    }

    fn registration_id(&self, id: SubscriptionId) -> String {
        format!("{}.{}", id.get(), self.mac(b"registration", id.get()))
    }

    /// The registration an id names, if its MAC holds.
    fn parse_id(&self, text: &str) -> Option<SubscriptionId> {
        let (n, mac) = text.split_once('.')?;
        let n: u64 = n.parse().ok()?;
        let want = self.mac(b"registration", n);
        crate::secret::same_secret(mac.as_bytes(), want.as_bytes())
            .then(|| SubscriptionId::from_raw(n))
    }

    /// Handles one request at the control loop's `now` (Unix time
    /// `unix_ms`); its answer goes to `shard`.
    pub fn handle(
        &mut self,
        shard: usize,
        call: PushCall,
        (now, unix_ms): (Instant, u64),
        out: &mut Decisions,
    ) {
        let conn = call.conn();
        // A change is answered once it is durable (seed §8.3: the epoch
        // only after the commit), and refused while the store is down.
        let changes = matches!(call, PushCall::Register { .. } | PushCall::Revoke { .. });
        let served = if changes && !self.store_ok() {
            Err(durable::STORE_UNAVAILABLE)
        } else {
            self.serve(call, now, unix_ms)
        };
        let (status, body) = match served {
            Ok(answer) => answer,
            Err((status, code, message)) => {
                PushMetrics::bump(&self.metrics.refused);
                let body = serde_json::json!({"error": code, "message": message});
                (status, Bytes::from(body.to_string()))
            }
        };
        let d = RtDecision::PushAnswer { conn, status, body };
        if changes {
            self.answer_when_durable(shard, d, out);
        } else {
            out.push((shard, super::plane::rt_decision(d)));
        }
    }

    fn serve(
        &mut self,
        call: PushCall,
        now: Instant,
        unix_ms: u64,
    ) -> Result<(u16, Bytes), Refusal> {
        match call {
            PushCall::Register {
                client,
                session,
                installation,
                subscription,
                streams,
                ..
            } => self.register((client, session), (installation, streams), subscription),
            PushCall::State {
                client,
                session,
                id,
                ..
            } => {
                let id = self.parse_id(&id).ok_or(NOT_FOUND)?;
                let state = self.registry.state(id).ok_or(NOT_FOUND)?;
                if state == RegistrationState::Active && !self.owns(client, id) {
                    return Err(NOT_FOUND);
                }
                let epoch = self.registry.active_epoch(&client).map(|e| e.as_str());
                let body = serde_json::json!({
                    "registrationId": self.registration_id(id),
                    "state": state.as_str(),
                    "associationEpoch": epoch,
                    "sessionBindingEpoch": self.session_epoch(client, session),
                    "streams": self.bindings.streams(id),
                });
                Ok((200, Bytes::from(body.to_string())))
            }
            PushCall::Revoke { client, id, .. } => {
                let id = self.parse_id(&id).ok_or(NOT_FOUND)?;
                // Idempotent (seed §8.3): already revoked, gone or not the
                // caller's is ALREADY_GONE, a success too.
                if self.registry.revoke(&client, id) == dtp_realtime::push::Revoked::Removed {
                    PushMetrics::bump(&self.metrics.revoked);
                    self.forget(id);
                    self.note_end(id, RegistrationState::Revoked);
                    self.count_registrations();
                    tracing::info!(registration = id.get(), outcome = "REVOKED", "web push");
                }
                Ok((204, Bytes::new()))
            }
            PushCall::Notify {
                id,
                notification_type,
                route_intent,
                ttl_secs,
                urgency,
                topic,
                ..
            } => {
                let what = (notification_type, route_intent, ttl_secs);
                self.notify(&id, what, (urgency, topic), (now, unix_ms))
            }
        }
    }

    fn owns(&self, client: Principal, id: SubscriptionId) -> bool {
        self.registry.live_ids(&client).contains(&id)
    }

    fn count_registrations(&self) {
        let n = self.registry.len() as u64;
        self.metrics.registrations.store(n, Ordering::Relaxed);
    }

    /// Forgets what the plane keeps beside the registry of ended
    /// registration `id`.
    fn forget(&mut self, id: SubscriptionId) {
        self.installations.remove(&id);
        self.bindings.unbind(id);
    }

    /// The `sessionBindingEpoch` of `client`'s `session` (seed §8.3: an
    /// opaque exact-match value the authenticated server issues; it
    /// changes with the session, and stays across restarts for a token).
    fn session_epoch(&self, client: Principal, session: u64) -> String {
        let label = [b"session:".as_slice(), self.client_name(client).as_bytes()].concat();
        format!("s.{}", self.mac(&label, session))
    }

    fn register(
        &mut self,
        (client, session): (Principal, u64),
        (installation, streams): (Box<str>, Box<[Box<str>]>),
        subscription: PushSubscription,
    ) -> Result<(u16, Bytes), Refusal> {
        if streams.iter().any(|s| !self.hints.contains_key(s)) {
            return Err((
                400,
                "UNKNOWN_STREAM",
                "a stream named in streams sends no push hints",
            ));
        }
        if !self.settings.allow_private_endpoints && !endpoint_may_be_public(&subscription) {
            return Err((
                400,
                "ENDPOINT_REFUSED",
                "the endpoint names a loopback, private or link-local host",
            ));
        }
        if self.registry.active_epoch(&client).is_none() {
            let n = self.epochs.entry(client).or_insert(0);
            *n += 1;
            let seq = *n;
            let label = [
                b"association:".as_slice(),
                self.client_name(client).as_bytes(),
            ]
            .concat();
            let epoch = AssociationEpoch::parse(&format!("a.{}", self.mac(&label, seq)))
                .ok_or((500, "INTERNAL", "no association epoch"))?;
            self.registry
                .associate(&client, epoch)
                .map_err(|_| (409, "ASSOCIATION_REFUSED", "no new association epoch"))?;
            self.note_client(client);
        }
        let epoch = self.registry.active_epoch(&client).cloned().ok_or((
            500,
            "INTERNAL",
            "no association epoch",
        ))?;
        let done = self
            .registry
            .subscribe(&client, &epoch, subscription)
            .map_err(|e| match e {
                dtp_realtime::push::RegistryError::PrincipalFull { .. } => (
                    409,
                    "LIMIT_EXCEEDED",
                    "this client holds max_subscriptions_per_client registrations",
                ),
                dtp_realtime::push::RegistryError::Full { .. } => {
                    (503, "LIMIT_EXCEEDED", "the registry is full")
                }
                _ => (409, "ASSOCIATION_REFUSED", "the association was refused"),
            })?;
        let (id, status) = match done {
            Subscribed::Existing(id) => {
                // The same subscription again: the same registration. Another
                // installation's claim of this endpoint updates the record.
                (id, 200)
            }
            Subscribed::Created(id) | Subscribed::Rebound { id, .. } => {
                PushMetrics::bump(&self.metrics.registered);
                tracing::info!(registration = id.get(), outcome = "REGISTERED", "web push");
                (id, 201)
            }
        };
        if let Subscribed::Rebound { removed, .. } = done {
            self.forget(removed);
            self.note_end(removed, RegistrationState::Revoked);
        }
        self.installations.insert(id, installation);
        self.bindings.bind(id, streams);
        self.note_registration(id);
        self.count_registrations();
        let body = serde_json::json!({
            "registrationId": self.registration_id(id),
            "associationEpoch": epoch.as_str(),
            "sessionBindingEpoch": self.session_epoch(client, session),
        });
        Ok((status, Bytes::from(body.to_string())))
    }

    fn notify(
        &mut self,
        id: &str,
        (notification_type, route_intent, ttl_secs): (Box<str>, Box<str>, u32),
        (urgency, topic): (Urgency, Option<Box<str>>),
        (now, unix_ms): (Instant, u64),
    ) -> Result<(u16, Bytes), Refusal> {
        let s = &self.settings;
        if !s
            .notification_types
            .iter()
            .any(|t| **t == *notification_type)
        {
            return Err((
                400,
                "UNKNOWN_NOTIFICATION_TYPE",
                "the notification type is not registered",
            ));
        }
        if !s.route_intents.iter().any(|t| **t == *route_intent) {
            return Err((
                400,
                "UNKNOWN_ROUTE_INTENT",
                "the route intent is not registered",
            ));
        }
        let id = self.parse_id(id).ok_or(NOT_FOUND)?;
        match self.registry.state(id).ok_or(NOT_FOUND)? {
            RegistrationState::Active => {}
            RegistrationState::Gone => {
                return Err((
                    410,
                    "REGISTRATION_GONE",
                    "the push service ended this registration",
                ));
            }
            RegistrationState::Revoked => {
                return Err((410, "REGISTRATION_REVOKED", "the registration was revoked"));
            }
        }
        let hint = HintSpec {
            notification_type: &notification_type,
            route_intent: &route_intent,
            ttl_secs,
            urgency,
            topic: topic.as_deref(),
        };
        let notification_id = self.dispatch(id, &hint, (now, unix_ms))?;
        let body = serde_json::json!({ "notificationId": notification_id });
        Ok((202, Bytes::from(body.to_string())))
    }

    /// Hands one hint for active registration `id` to the sender; its
    /// notification id, or why not.
    fn dispatch(
        &mut self,
        id: SubscriptionId,
        spec: &HintSpec<'_>,
        (now, unix_ms): (Instant, u64),
    ) -> Result<String, Refusal> {
        let (Some(subscription), Some(epoch)) = (
            self.registry.get(id),
            self.owner_epoch(id).map(|e| e.as_str().to_owned()),
        ) else {
            return Err(NOT_FOUND);
        };
        let job_id = self.next_job;
        let notification_id = format!("n.{job_id}.{}", self.mac(b"notification", job_id));
        let ttl_ms = u64::from(spec.ttl_secs.clamp(1, MAX_TTL_SECS)) * 1000;
        let hint = WebPushHint {
            notification_type: spec.notification_type.into(),
            notification_id: notification_id.clone(),
            association_epoch: epoch,
            release_epoch: self.settings.release_epoch.clone(),
            issued_at_ms: unix_ms,
            expires_at_ms: unix_ms + ttl_ms,
            route_intent: spec.route_intent.into(),
        };
        let job = PushJob {
            id: job_id,
            subscription_id: id,
            subscription,
            hint,
            urgency: spec.urgency,
            topic: spec.topic.map(Into::into),
        };
        if self.sender.submit(job).is_err() {
            return Err((
                503,
                "QUEUE_OVERFLOW",
                "the push sender is at its in-flight ceiling; retry later",
            ));
        }
        self.next_job += 1;
        self.pending.insert(job_id, (id, now));
        PushMetrics::bump(&self.metrics.accepted);
        self.metrics
            .in_flight
            .store(self.pending.len() as u64, Ordering::Relaxed);
        Ok(notification_id)
    }

    /// An event was committed to `stream` (SPEC RT-12): when the stream is
    /// hinted, one hint goes to each registration bound to it. A hint the
    /// sender has no room for is counted failed (`QUEUE_OVERFLOW` in the
    /// log), never queued without bound.
    pub fn publication(&mut self, stream: &str, (now, unix_ms): (Instant, u64)) {
        let Some(h) = self.hints.get(stream) else {
            return;
        };
        let bound = self.bindings.bound(stream);
        if bound.is_empty() {
            return;
        }
        let h = h.clone();
        let spec = HintSpec {
            notification_type: &h.notification_type,
            route_intent: &h.route_intent,
            ttl_secs: h.ttl_secs,
            urgency: h.urgency,
            topic: h.topic.as_deref(),
        };
        for id in bound {
            if let Err((_, code, _)) = self.dispatch(id, &spec, (now, unix_ms)) {
                PushMetrics::bump(&self.metrics.failed);
                tracing::info!(registration = id.get(), outcome = code, "web push");
            }
        }
    }

    /// The active epoch of registration `id`'s owner.
    fn owner_epoch(&self, id: SubscriptionId) -> Option<&AssociationEpoch> {
        let owner = self.registry.owner(id)?;
        self.registry.active_epoch(owner)
    }

    /// Takes the sender's finished jobs (at every tick): a GONE marks the
    /// registration gone (never sent to again), every outcome is counted
    /// and logged with the registration id.
    pub fn poll(&mut self, now: Instant, out: &mut Decisions) {
        self.flush(out);
        let finished = self.sender.finished();
        if finished.is_empty() {
            return;
        }
        for done in finished {
            let m = &self.metrics;
            if let Some((_, at)) = self.pending.remove(&done.id) {
                m.observe(now.saturating_duration_since(at));
            }
            m.retried.fetch_add(
                u64::from(done.attempts.saturating_sub(1)),
                Ordering::Relaxed,
            );
            let outcome = outcome_name(&done.result);
            match &done.result {
                Ok(Outcome::Delivered { .. }) => PushMetrics::bump(&m.delivered),
                Ok(Outcome::Gone { .. }) => {
                    PushMetrics::bump(&m.gone);
                    self.registry.remove(done.subscription_id);
                    self.forget(done.subscription_id);
                    self.note_end(done.subscription_id, RegistrationState::Gone);
                }
                Ok(Outcome::Expired { .. }) => PushMetrics::bump(&m.expired),
                _ => PushMetrics::bump(&m.failed),
            }
            tracing::info!(
                registration = done.subscription_id.get(),
                outcome,
                attempts = done.attempts,
                "web push"
            );
        }
        self.count_registrations();
        self.metrics
            .in_flight
            .store(self.pending.len() as u64, Ordering::Relaxed);
        self.flush(out);
    }
}

/// Whether the endpoint's host may be public: an address literal must be
/// a public one, `localhost` is not; other names are checked by the
/// sender on every address they resolve to (no resolving on the control
/// thread).
fn endpoint_may_be_public(s: &PushSubscription) -> bool {
    let origin = s.audience().trim_start_matches("https://");
    let host = match origin.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => origin.rsplit_once(':').map_or(origin, |(h, _)| h),
    };
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return false;
    }
    host.parse::<IpAddr>().map_or(true, is_public_address)
}
