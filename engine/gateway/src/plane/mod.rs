//! The terminal control plane on the engine's control thread: a
//! [`ControlPlane`] that drives the sans-IO terminal machine
//! (`dtp_terminal`: sessions TS-1 … TS-17, liveness LIV-1 … LIV-6,
//! handover HO-1 … HO-10), answers its policy questions (`dtp_policy`:
//! HO-3a priority scripts, HO-3b AI model, HO-3c human decision) and writes
//! its audit records (`dtp_audit`: TS-12, HO-10).
//!
//! # Requests in
//!
//! | request | terminal input |
//! |---|---|
//! | `Up` | `Input::Up` (LIV-1) under a fresh [`dtp_terminal::ConnKey`] |
//! | `Down` | `Input::Down` (LIV-1); the key is then forgotten |
//! | `Identified` | `Terminal::identify` (the CAP-authenticated Fay, LIV-1) |
//! | `Message` | `Input::Message` (AuthRequest, Heartbeat, SessionRelease, SessionTransferRequest) |
//!
//! Keys are the plane's own numbers, not `ConnId::as_u64()`: connection ids
//! are per shard and collide across shards. Each key remembers its shard
//! and connection, so answers go back where the request came from.
//!
//! # What the plane does with each output
//!
//! | output | action |
//! |---|---|
//! | `Send` | [`GatewayDown::Send`] to the connection's shard (sealed in its DTP session by the gateway) |
//! | `Close` | [`Decision::Close`] |
//! | `Refused` | logged (`info`) and counted (`refused`): the codec has no generic error reply, and AuthRequests and handovers already get AuthResult / HandoverFailedNotification from the terminal, so what is left (heartbeat, release, transfer refusals) has no message that can carry it |
//! | `EvaluatePolicy` | asked of the policy engine (module `policy`): a verdict goes straight back through `policy_decided`; a model call goes to a worker; a human decision waits in the queue |
//! | `CancelPolicy` | the model call's reply will be dropped; the human decision is withdrawn |
//! | `StateChanged` | pushed on a bounded ring that observers drain ([`PlaneHandle::drain_state_changes`]) |
//! | `OsAccess` | handed to an OS worker (module `os_workers`); a full pool fails the step at once |
//! | `Audit` | queued for the audit thread, if a log is configured; a failure is logged and counted and never stops the plane (module `audit`) |
//!
//! # Threads
//!
//! - **The control thread** runs everything above: every terminal input,
//!   every policy answer, every admin command. It reads
//!   the wall clock once per call ([`Clock`]; a test passes an
//!   [`OffsetClock`] and drives virtual time) and runs priority scripts
//!   inline, each held to `dtp_policy::CONTROL_THREAD_BUDGET` (10 ms, far
//!   under HO-3a's 100 ms) by an operation limit and a wall-time check.
//! - **Model workers** (`model_workers` threads) run the blocking HTTP of
//!   HO-3b model calls and nothing else; each result comes back over a
//!   channel and wakes the control thread ([`ControlWaker`]).
//! - **OS workers** (`os_workers` threads, for a deferred access control
//!   such as [`CommandAccess`]) run the grants and revokes the terminal
//!   asks for (`OsAccess` outputs, SPEC TS-4); each answer comes back the
//!   same way, as `Terminal::os_access_done`. The control thread never
//!   waits for a process.
//! - **The audit thread** owns the audit log: appends, fsyncs, rotations
//!   and reopens happen there (module `audit`); records reach it over a
//!   bounded queue.
//! - **Admin threads** hold a [`PlaneHandle`]: each call is a command over a
//!   bounded channel, a wake-up, and a bounded wait for the answer.
//!
//! # Bounds
//!
//! Admin commands queued: `admin_queue` (more: [`PlaneError::Busy`]).
//! Model calls in flight: `model_workers` (more: treated as an unavailable
//! model, so the fallback script decides). Human decisions pending:
//! `human_queue` (more: reject). State changes kept: `state_changes`
//! (oldest dropped, counted). OS operations: `os_workers` running and
//! [`OS_QUEUE`] queued (more: the step fails at once). Audit records waiting for
//! the audit thread: [`AUDIT_QUEUE`] (more: lost, counted). Connection
//! keys: the connections up. The terminal bounds its own sessions, queues,
//! tombstones and OS operations (TS-17, HO-6, LIV-5; one operation per
//! session).

mod admin;
mod audit;
mod audit_log;
mod clock;
mod cluster_access;
mod cluster_mail;
mod config;
mod conns;
mod handle;
mod model_http;
mod observe;
mod os_command;
mod os_workers;
mod policy;
mod streams;
mod workers;

pub use audit::{AUDIT_QUEUE, REOPEN_AFTER_MS};
pub use audit_log::{AuditLog, open_audit_file};
pub use clock::{Clock, OffsetClock, OsRandom, SystemClock};
pub use cluster_access::{ClusterAccess, ClusterNode, ClusterSettings};
pub use cluster_mail::{ClusterMail, Incoming, MAIL_QUEUE};
pub use config::{AI_FALLBACK_HUMAN, AuditSection, FsyncPolicy, PlaneConfig, RotationSection};
pub use handle::{Admission, DEFAULT_ANSWER_TIMEOUT, Ended, PlaneError, PlaneHandle};
pub use model_http::{post_json, run_model_call};
pub use observe::{PlaneMetrics, PlaneSnapshot};
pub use os_command::CommandAccess;
pub use os_workers::OS_QUEUE;
pub use streams::{BUILT_IN_STREAMS, SESSIONS_TABLE, built_in_specs, built_in_table};

use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use dtp_crypto::cred::Verifier;
use dtp_terminal::{Input, OsAccess, Output, RandomSource, StateChange, Terminal, UnixMs};
use uuid::Uuid;

use crate::app::{Decisions, GatewayDown, GatewayPlane, GatewayUp, PlaneEvent};
use audit::AuditSink;
use conns::Conns;
use dtp_engine::{ControlPlane, ControlWaker, Decision, Request};
use handle::Command;
use observe::StateRing;
use os_workers::OsPool;
use policy::{Policies, Question};
use workers::ModelPool;

/// The control thread's waker once the loop attached it, shared with the
/// handles and the model workers (who wake nobody before that).
#[derive(Debug, Default)]
pub(crate) struct WakerSlot(Mutex<Option<ControlWaker>>);

impl WakerSlot {
    fn set(&self, waker: ControlWaker) {
        // A poisoned lock guards a plain Option: still sound.
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(waker);
    }

    /// Wakes the control thread, if it is attached yet.
    pub(crate) fn wake(&self) {
        if let Some(w) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            w.wake();
        }
    }
}

/// The terminal control plane (see the module docs); `A` is the OS access
/// control (SPEC TS-4).
pub struct TerminalPlane<A: OsAccess + Clone + Send + 'static> {
    terminal: Terminal<A>,
    clock: Box<dyn Clock>,
    conns: Conns,
    policies: Policies,
    /// The OS workers, for a deferred access control (SPEC TS-4).
    os: Option<OsPool>,
    audit: Option<AuditSink>,
    commands: Receiver<Command>,
    admin_queue: usize,
    handle: PlaneHandle,
    state_changes: Arc<StateRing>,
    /// Events for the built-in realtime streams, until drained; built only
    /// once a realtime plane drains them (`enable_events`).
    events: Vec<PlaneEvent>,
    events_on: bool,
    metrics: Arc<PlaneMetrics>,
    /// The other gateways' questions and answers (a cluster's).
    mail: Option<ClusterMail>,
    /// Who asked each question being answered here, at most
    /// [`MAIL_QUEUE`].
    asked_by: std::collections::HashMap<Uuid, String>,
}

impl<A: OsAccess + Clone + Send + 'static> TerminalPlane<A> {
    /// A plane on the system clock and the OS random generator: checks the
    /// whole `config` (a bad script, or a policy naming an unknown script,
    /// fails here with the key), opens the audit log and starts the model
    /// workers. Returns the plane (for [`dtp_engine::Engine::start_with_control`])
    /// and the admin's handle.
    pub fn new(
        config: PlaneConfig,
        verifier: Verifier,
        access: A,
    ) -> Result<(Self, PlaneHandle), PlaneError> {
        let clock = Box::new(SystemClock::default());
        Self::with_parts(config, verifier, access, clock, Box::new(OsRandom::new()))
    }

    /// As [`TerminalPlane::new`], with the clock and the random source
    /// given (tests: an [`OffsetClock`] and a seeded source).
    pub fn with_parts(
        config: PlaneConfig,
        verifier: Verifier,
        access: A,
        clock: Box<dyn Clock>,
        random: Box<dyn RandomSource + Send>,
    ) -> Result<(Self, PlaneHandle), PlaneError> {
        let (control, engine, audit_config) = config.checked()?;
        let terminal = Terminal::new(control, verifier, access, random)
            .map_err(|e| PlaneError::Config(format!("control: {e}")))?;
        let metrics = Arc::new(PlaneMetrics::default());
        let audit = match (config.audit, audit_config) {
            (Some(section), Some(c)) => Some(AuditSink::open(section.path, c, metrics.clone())?),
            _ => None,
        };
        let waker = Arc::new(WakerSlot::default());
        let models = ModelPool::start(config.model_workers, waker.clone())?;
        let os = if terminal.access().deferred() {
            Some(OsPool::start(
                config.os_workers,
                terminal.access(),
                waker.clone(),
            )?)
        } else {
            None
        };
        let (commands_tx, commands) = mpsc::sync_channel(config.admin_queue);
        let state_changes = Arc::new(StateRing::new(config.state_changes));
        let handle = PlaneHandle {
            commands: commands_tx,
            waker,
            state_changes: state_changes.clone(),
            metrics: metrics.clone(),
            timeout: DEFAULT_ANSWER_TIMEOUT,
        };
        let plane = TerminalPlane {
            terminal,
            clock,
            conns: Conns::default(),
            policies: Policies::new(engine, config.human_queue, models),
            os,
            audit,
            commands,
            admin_queue: config.admin_queue,
            handle: handle.clone(),
            state_changes,
            events: Vec::new(),
            events_on: false,
            metrics,
            mail: None,
            asked_by: std::collections::HashMap::new(),
        };
        Ok((plane, handle))
    }

    /// SPEC HO-1 across gateways: this gateway's mailbox, for handovers
    /// whose source and target are on different gateways.
    pub fn join_mail(&mut self, mail: ClusterMail) {
        let slot = self.handle.waker.clone();
        mail.attach_wake(Arc::new(move || slot.wake()));
        self.mail = Some(mail);
    }

    /// The terminal machine (read-only: inputs go through the plane).
    pub fn terminal(&self) -> &Terminal<A> {
        &self.terminal
    }

    /// Another admin handle.
    pub fn admin_handle(&self) -> PlaneHandle {
        self.handle.clone()
    }

    /// The state changes published since the last drain, oldest first.
    pub fn drain_state_changes(&self) -> Vec<StateChange> {
        self.state_changes.drain()
    }

    /// The plane's counters.
    pub fn metrics(&self) -> PlaneSnapshot {
        self.metrics.snapshot()
    }

    /// Waits (a few seconds at most) until the audit thread has written
    /// and synced every record handed to it so far — for tests and tools
    /// that read the log back; the plane itself never waits for it.
    pub fn sync_audit(&mut self) {
        if let Some(audit) = &mut self.audit {
            audit.flush();
        }
    }

    /// Connections the plane knows to be up.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Drains the terminal's outputs, acting on each (module docs).
    fn pump(&mut self, now: UnixMs, out: &mut Decisions) {
        while let Some(output) = self.terminal.poll_output() {
            match output {
                Output::Send { conn, msg } => match self.conns.route(conn) {
                    Some((shard, conn)) => {
                        PlaneMetrics::bump(&self.metrics.sent);
                        let msg = Box::new(msg);
                        out.push((shard, Decision::Service(GatewayDown::Send { conn, msg })));
                    }
                    None => self.unroutable(conn, msg.name()),
                },
                Output::Close { conn, code, reason } => match self.conns.route(conn) {
                    Some((shard, conn)) => {
                        PlaneMetrics::bump(&self.metrics.closed);
                        out.push((shard, Decision::Close { conn, code, reason }));
                    }
                    None => self.unroutable(conn, "close"),
                },
                Output::Refused { conn, refusal } => {
                    PlaneMetrics::bump(&self.metrics.refused);
                    tracing::info!(
                        conn = conn.0,
                        request = ?refusal.request,
                        session = ?refusal.session_id,
                        code = %refusal.code,
                        "terminal refused a request: {}",
                        refusal.message
                    );
                }
                Output::EvaluatePolicy {
                    handover_id,
                    policy_name,
                    policy,
                    deadline,
                    context,
                } => {
                    let question = Question {
                        handover_id,
                        policy_name: &policy_name,
                        kind: policy.kind(),
                        deadline,
                        context: &context,
                    };
                    if policy.kind() == dtp_terminal::PolicyKind::HumanDecision {
                        self.emit(|| {
                            streams::decision_pending(handover_id, &policy_name, deadline.0)
                        });
                    }
                    if let Some(answer) = self.policies.ask(question, now, &self.metrics) {
                        self.answer(handover_id, answer, now);
                    }
                }
                Output::CancelPolicy { handover_id } => {
                    self.emit(|| streams::decision_closed(handover_id));
                    self.policies.cancel(handover_id);
                }
                Output::StateChanged(change) => {
                    self.emit(|| streams::session_state(&change));
                    self.state_changes.push(change, &self.metrics);
                }
                Output::OsAccess {
                    op,
                    operation,
                    grant,
                    to,
                } => self.run_os(op, (operation, to), grant, now),
                Output::AskRemote(ask) => self.ask_remote(ask, now),
                Output::AnswerRemote { id, answer } => {
                    let sent = match (self.asked_by.remove(&id), &self.mail) {
                        (Some(to), Some(mail)) => mail.answer(to, id, answer),
                        _ => false,
                    };
                    if !sent {
                        // The asker's AuthRequest times out.
                        tracing::warn!(%id, "a remote handover's answer could not be sent");
                    }
                }
                Output::Audit(record) => {
                    if let dtp_terminal::AuditRecord::Handover(h) = &record {
                        self.emit(|| streams::handover_ended(h));
                    }
                    if let Some(audit) = &mut self.audit {
                        audit.append(now, &record, &self.metrics);
                    }
                }
            }
        }
    }

    /// Queues an event for the built-in realtime streams (drained by the
    /// pair plane after this call; see `streams`).
    fn emit(&mut self, make: impl FnOnce() -> PlaneEvent) {
        if !self.events_on {
            return;
        }
        if self.events.len() < streams::MAX_PENDING {
            self.events.push(make());
        } else {
            // Never reached while the pair plane drains after every call.
            PlaneMetrics::bump(&self.metrics.events_dropped);
        }
    }

    /// SPEC TS-4: hands an OS operation to a worker; a full pool (or an
    /// access control that is not deferred, which never asks) fails the
    /// step at once — nothing was changed.
    fn run_os(
        &mut self,
        op: dtp_terminal::OsOpId,
        (operation, to): (dtp_terminal::OsOperation, Option<Arc<str>>),
        grant: dtp_terminal::AccessGrant,
        now: UnixMs,
    ) {
        if let Some(pool) = &mut self.os
            && pool.submit(op, operation, grant, to)
        {
            PlaneMetrics::bump(&self.metrics.os_operations);
            return;
        }
        PlaneMetrics::bump(&self.metrics.os_busy);
        let busy = dtp_terminal::OsError::Failed("every OS access worker is busy".into());
        if let Err(e) = self.terminal.os_access_done(op, Err(busy), now) {
            tracing::warn!(op = op.0, error = %e, "OS operation answer refused");
        }
    }

    /// SPEC HO-1 across gateways: asks the gateway holding the resource;
    /// without a mailbox, or with its queue full, the AuthRequest is
    /// refused at once.
    fn ask_remote(&mut self, ask: dtp_terminal::RemoteHandover, now: UnixMs) {
        let id = ask.id;
        if self.mail.as_ref().is_some_and(|m| m.ask(ask)) {
            return;
        }
        let answer = dtp_terminal::RemoteAnswer::Refused {
            code: dtp_codec::ErrorCode::E_RESOURCE_BUSY,
            message: "the resource is held on another gateway, which cannot be asked now".into(),
        };
        let _ = self.terminal.remote_answered(id, answer, now);
    }

    /// The other gateways' messages arrived since the last look.
    fn mail_in(&mut self, now: UnixMs, out: &mut Decisions) {
        let Some(mail) = &self.mail else {
            return;
        };
        for message in mail.received() {
            match message {
                Incoming::Ask { from, ask } => {
                    if self.asked_by.len() >= MAIL_QUEUE {
                        tracing::warn!(from, "too many remote handovers at once: one dropped");
                        continue;
                    }
                    self.asked_by.insert(ask.id, from);
                    self.terminal.remote_handover(ask, now);
                }
                Incoming::Answer { id, answer } => {
                    if self.terminal.remote_answered(id, answer, now).is_err() {
                        tracing::info!(%id, "a remote handover's answer came after its wait");
                    }
                }
            }
            self.pump(now, out);
        }
    }

    /// The OS operations answered by the workers.
    fn os_answers(&mut self, now: UnixMs, out: &mut Decisions) {
        let Some(pool) = &mut self.os else {
            return;
        };
        for done in pool.finished() {
            if let Err(e) = &done.result {
                tracing::info!(op = done.op.0, error = %e, "OS access operation failed");
            }
            if let Err(e) = self.terminal.os_access_fenced(done.op, done.result, now) {
                tracing::warn!(op = done.op.0, error = %e, "OS operation answer refused");
            }
            self.pump(now, out);
        }
    }

    /// Gives the terminal a policy's answer.
    fn answer(&mut self, handover_id: Uuid, answer: dtp_terminal::PolicyOutcome, now: UnixMs) {
        if let Err(e) = self.terminal.policy_decided(handover_id, answer, now) {
            PlaneMetrics::bump(&self.metrics.policy_answers_refused);
            tracing::info!(%handover_id, error = %e, "policy answer refused");
        }
    }

    fn unroutable(&self, conn: dtp_terminal::ConnKey, what: &str) {
        PlaneMetrics::bump(&self.metrics.unroutable);
        tracing::debug!(
            conn = conn.0,
            what,
            "decision for a connection that is gone"
        );
    }
}

impl<A: OsAccess + Clone + Send + 'static> GatewayPlane for TerminalPlane<A> {
    fn enable_events(&mut self) {
        self.events_on = true;
    }

    fn drain_events(&mut self, out: &mut Vec<PlaneEvent>) {
        out.append(&mut self.events);
    }
}

impl<A: OsAccess + Clone + Send + 'static> ControlPlane<GatewayUp, GatewayDown>
    for TerminalPlane<A>
{
    fn handle(
        &mut self,
        shard: usize,
        request: Request<GatewayUp>,
        now: Instant,
        out: &mut Decisions,
    ) {
        let t = self.clock.unix_ms(now);
        PlaneMetrics::bump(&self.metrics.requests);
        match request {
            Request::Up { conn } => {
                let key = self.conns.key(shard, conn);
                self.terminal.handle(Input::Up(key), t);
            }
            Request::Down { conn } => {
                if let Some(key) = self.conns.find(shard, conn) {
                    self.terminal.handle(Input::Down(key), t);
                    self.pump(t, out);
                    self.conns.forget(key);
                }
            }
            Request::Service(GatewayUp::Identified { conn, fay_id }) => {
                let key = self.conns.key(shard, conn);
                if let Err(r) = self.terminal.identify(key, &fay_id, t) {
                    tracing::warn!(conn = key.0, error = %r, "connection not identified");
                }
            }
            Request::Service(GatewayUp::Message { conn, msg }) => {
                let key = self.conns.key(shard, conn);
                self.terminal.handle(Input::Message(key, *msg), t);
            }
            Request::Service(GatewayUp::Realtime(_)) => {
                // Not the terminal plane's: a composite plane routes these
                // to the realtime plane before they get here.
                tracing::debug!("a realtime request reached the terminal plane");
            }
        }
        self.pump(t, out);
    }

    fn tick(&mut self, now: Instant, out: &mut Decisions) -> Option<Instant> {
        let t = self.clock.unix_ms(now);
        let more_commands = self.run_commands(t, out);
        self.os_answers(t, out);
        self.mail_in(t, out);
        // A cluster member that may no longer hold grants ends them all
        // (SPEC HO-4 across gateways), before another gateway can.
        if !self.terminal.access().may_hold() {
            let ended = self.terminal.fence(t);
            if ended > 0 {
                tracing::error!(
                    ended,
                    "this gateway lost its cluster membership: its sessions were ended"
                );
            }
            self.pump(t, out);
        }
        for (id, answer) in self.policies.model_replies(t) {
            self.answer(id, answer, t);
            self.pump(t, out);
        }
        for (id, answer) in self.policies.expire_humans(t, &self.metrics) {
            self.answer(id, answer, t);
            self.pump(t, out);
        }
        if self.terminal.poll_timeout().is_some_and(|d| d <= t) {
            self.terminal.handle_timeout(t);
        }
        self.pump(t, out);
        if let Some(audit) = &mut self.audit {
            audit.handle_timeout(t);
        }
        self.policies.purge(t);
        if more_commands {
            return Some(now);
        }
        let audit = self.audit.as_ref().and_then(AuditSink::deadline);
        [
            self.terminal.poll_timeout(),
            self.policies.next_deadline(),
            audit,
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|d| clock::instant_of(d, now, t))
    }

    fn attach(&mut self, waker: ControlWaker) {
        self.handle.waker.set(waker);
        let slot = self.handle.waker.clone();
        self.terminal
            .access_mut()
            .attach_wake(Arc::new(move || slot.wake()));
    }
}
