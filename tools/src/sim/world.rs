//! The simulated world: one terminal with six resources under the three
//! policies, eight Fays' runtimes with their connections and credentials,
//! the policy side, and virtual time.
//!
//! Handover steps and the failures injected into them (SPEC HO-4, HO-5):
//! this terminal checks the target's credential again, then runs T0 … T5
//! within one input. Failures are injected at every step that can fail:
//! before T0 (the target's credential revoked while the policy decided),
//! T1 (the OS revoke of the source fails → rollback), T3 (the target is at
//! its per-Fay session limit → acquire failed), T4 (the OS grant fails →
//! acquire failed). T0, T2 and T5 are state changes with no OS call and
//! nothing that can fail in this machine, so there is nothing to inject
//! there; the checks still look at the states observers see at each.

use std::collections::{BTreeMap, BTreeSet};

use dtp_codec::SessionId;
use dtp_crypto::cred::{IssuerKeyPair, Verifier};
use dtp_terminal::{
    ConnKey, HandoverPolicyConfig, Output, PolicyRef, ResourceConfig, ScriptedAccess, SeededRandom,
    SessionInfo, Terminal, TerminalConfig, UnixMs,
};

use super::Rng;
use super::creds::{Cred, CredKind};
use super::notify::{Ctx, Watch};
use super::policy::PolicySide;
use super::report::SeedReport;

/// The terminal's id; its human user is [`HUMAN`].
pub(super) const TERMINAL_ID: &str = "t1";
/// SPEC HO-9: the terminal's human user.
pub(super) const HUMAN: &str = "human:t1";
/// How many Fays (runtimes) take part.
pub(super) const FAYS: usize = 8;
/// The resources and their policies (`None`: no handover possible).
pub(super) const RESOURCES: [(&str, Option<&str>); 6] = [
    ("arm", Some("rank")),
    ("cam", Some("model")),
    ("screen", Some("ask")),
    ("door", Some("ask-allow")),
    ("lamp", Some("seniority")),
    ("mic", None),
];
/// The heartbeat threshold (LIV-4); the interval is a third of it.
pub(super) const LIVENESS_MS: u64 = 6_000;
/// Virtual time at the start.
const START_MS: u64 = 1_700_000_000_000;

/// One session a runtime knows (it got the AuthResult).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Known {
    /// The next sequence number it will send.
    pub(super) next_seq: u64,
}

/// One Fay's runtime.
#[derive(Clone, Debug)]
pub(super) struct Fay {
    pub(super) id: String,
    /// Its connection, while up (a new one on every return).
    pub(super) conn: Option<ConnKey>,
    /// The sessions it knows.
    pub(super) known: BTreeMap<SessionId, Known>,
    /// Sessions it knew that ended (the latest few).
    pub(super) ended: Vec<SessionId>,
    /// Its credentials (indexes into the world's).
    pub(super) creds: Vec<usize>,
}

impl Fay {
    /// The runtime learned that `id` ended.
    pub(super) fn forget(&mut self, id: SessionId) {
        if self.known.remove(&id).is_some() {
            self.ended.push(id);
            if self.ended.len() > 8 {
                self.ended.remove(0);
            }
        }
    }
}

/// The whole simulation of one seed.
pub(super) struct World {
    /// The step being run (1-based).
    pub(super) step: u64,
    pub(super) now: UnixMs,
    start: UnixMs,
    pub(super) rng: Rng,
    pub(super) t: Terminal<ScriptedAccess>,
    pub(super) config: TerminalConfig,
    pub(super) issuer: IssuerKeyPair,
    pub(super) rogue: IssuerKeyPair,
    pub(super) creds: Vec<Cred>,
    pub(super) fays: Vec<Fay>,
    pub(super) policy: PolicySide,
    pub(super) watch: Watch,
    pub(super) report: SeedReport,
    pub(super) next_conn: u64,
    pub(super) next_request: u64,
    /// OS calls of the double already looked at.
    os_calls_seen: usize,
}

/// The terminal's configuration; the queueing rule varies with the seed.
pub(super) fn terminal_config(seed: u64) -> TerminalConfig {
    let mut c = TerminalConfig::new(TERMINAL_ID);
    c.liveness.heartbeat_interval_ms = LIVENESS_MS / 3;
    c.liveness.heartbeat_timeout_ms = LIVENESS_MS;
    c.limits.per_terminal = 24;
    c.limits.per_fay = 3;
    c.limits.reads_per_resource = 2;
    c.handover.queue_capacity = 3;
    c.handover.concurrent = if seed % 4 == 3 {
        dtp_terminal::ConcurrentHandovers::Reject
    } else {
        dtp_terminal::ConcurrentHandovers::Queue
    };
    c.revoke_retry_ms = 500;
    c.tombstones = 512;
    let script = |id: &str, params: &[(&str, &str)]| PolicyRef::PriorityScript {
        script_id: id.into(),
        parameters: params
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
    };
    let human = |secs: u32, default_action| PolicyRef::HumanDecision {
        ui_channel: dtp_terminal::UiChannel::ExternalPanel,
        decision_timeout_seconds: secs,
        default_action,
    };
    let mut add = |name: &str, policy, hard: u64, on_auth: bool, fallback: Option<&str>| {
        let mut p = HandoverPolicyConfig::new(policy);
        p.hard_timeout_ms = Some(hard);
        p.on_auth_request = on_auth;
        p.human_fallback = fallback.map(str::to_owned);
        c.policies.insert(name.into(), p);
    };
    add("rank", script("rank", &[]), 1_000, true, None);
    add(
        "seniority",
        script("seniority", &[("hold_s", "20")]),
        2_000,
        false,
        None,
    );
    let model = PolicyRef::AiModel {
        model_endpoint: "http://model.sim.invalid/decide".into(),
        context_fields: Vec::new(),
        decision_timeout_ms: 500,
    };
    add("model", model, 1_000, true, Some("ask"));
    add(
        "ask",
        human(10, dtp_terminal::DefaultAction::Reject),
        15_000,
        true,
        None,
    );
    let allow = human(30, dtp_terminal::DefaultAction::Allow);
    add("ask-allow", allow, 30_000, true, None);
    for (r, p) in RESOURCES {
        let mut rc = ResourceConfig::new(r);
        rc.handover_policy = p.map(str::to_owned);
        rc.metadata.insert("kind".into(), r.into());
        c.resources.push(rc);
    }
    c
}

impl World {
    /// A fresh world for `seed`: terminal, policies, Fays connected.
    pub(super) fn new(seed: u64) -> Result<Self, String> {
        let config = terminal_config(seed);
        let issuer = IssuerKeyPair::from_seed(&[7; 32]).map_err(|e| e.to_string())?;
        let rogue = IssuerKeyPair::from_seed(&[9; 32]).map_err(|e| e.to_string())?;
        let mut verifier = Verifier::new();
        verifier
            .trust(*issuer.public_key())
            .map_err(|e| e.to_string())?;
        let random = Box::new(SeededRandom::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D)));
        let t = Terminal::new(config.clone(), verifier, ScriptedAccess::new(), random)
            .map_err(|e| e.to_string())?;
        let policy = PolicySide::new(&config)?;
        let fays = (0..FAYS)
            .map(|i| Fay {
                id: format!("fay-{i}"),
                conn: None,
                known: BTreeMap::new(),
                ended: Vec::new(),
                creds: Vec::new(),
            })
            .collect();
        let mut w = World {
            step: 0,
            now: UnixMs(START_MS),
            start: UnixMs(START_MS),
            rng: Rng::new(seed),
            t,
            config,
            issuer,
            rogue,
            creds: Vec::new(),
            fays,
            policy,
            watch: Watch::default(),
            report: SeedReport::new(seed),
            next_conn: 1,
            next_request: 1,
            os_calls_seen: 0,
        };
        for f in 0..FAYS {
            w.connect(f);
            w.issue(f, CredKind::Full, 6 * 3600);
        }
        Ok(w)
    }

    /// The end of the run: the last checks, and the report.
    pub(super) fn finish(mut self) -> SeedReport {
        self.check_unanswered();
        self.report.steps = self.step;
        self.report.virtual_ms = self.now.since(self.start);
        self.report
    }

    /// Fay `fay`'s runtime connects (again) on a new connection and is
    /// identified by its CAP credential, as `dtp serve` does.
    pub(super) fn connect(&mut self, fay: usize) {
        let conn = ConnKey(self.next_conn);
        self.next_conn += 1;
        let Some(id) = self.fays.get(fay).map(|f| f.id.clone()) else {
            return;
        };
        if let Some(f) = self.fays.get_mut(fay) {
            f.conn = Some(conn);
        }
        let r = self.call(Ctx::Up(conn), |t, now| {
            t.connection_up(conn, now);
            t.identify(conn, &id, now)
        });
        if let Err(e) = r {
            self.violation(format!("identify({id}) refused: {e}"));
        }
    }

    /// The Fay whose runtime is on `conn`.
    pub(super) fn fay_on(&self, conn: ConnKey) -> Option<usize> {
        self.fays.iter().position(|f| f.conn == Some(conn))
    }

    /// The index of the Fay named `id`.
    pub(super) fn fay_index(&self, id: &str) -> Option<usize> {
        self.fays.iter().position(|f| f.id == id)
    }

    /// Records a violation at the current step.
    pub(super) fn violation(&mut self, what: String) {
        let step = self.step;
        self.report.violation(step, what);
    }

    /// Runs one input of the terminal and checks everything it caused.
    pub(super) fn call<R>(
        &mut self,
        ctx: Ctx,
        f: impl FnOnce(&mut Terminal<ScriptedAccess>, UnixMs) -> R,
    ) -> R {
        let before: BTreeMap<SessionId, SessionInfo> = self
            .t
            .sessions()
            .into_iter()
            .map(|s| (s.session_id, s))
            .collect();
        let resources = matches!(ctx, Ctx::Auth { .. }).then(|| self.t.resources());
        let result = f(&mut self.t, self.now);
        let mut outs: Vec<Output> = Vec::new();
        while let Some(o) = self.t.poll_output() {
            outs.push(o);
        }
        self.report.bump("check.inputs");
        self.count_os_failures();
        self.watch_outputs(&ctx, &before, resources.as_deref(), outs);
        self.check_state();
        result
    }

    /// Counts the OS calls the double failed since the last look.
    fn count_os_failures(&mut self) {
        let calls = self.t.access().calls();
        let (mut grants, mut revokes) = (0, 0);
        for c in calls.get(self.os_calls_seen..).unwrap_or_default() {
            match c {
                dtp_terminal::AccessCall::Grant(_, false) => grants += 1,
                dtp_terminal::AccessCall::Revoke(_, false) => revokes += 1,
                _ => {}
            }
        }
        self.os_calls_seen = calls.len();
        self.report.add("os.grant_failed", grants);
        self.report.add("os.revoke_failed", revokes);
    }

    /// Moves virtual time forward by `ms`, stopping at every instant
    /// something falls due: a terminal timer, a model's reply, a person's
    /// answer or a person's deadline.
    pub(super) fn advance(&mut self, ms: u64) {
        let target = self.now.plus(ms);
        for _ in 0..100_000 {
            let timer = self.t.poll_timeout();
            let event = self.policy.next_due();
            let Some(at) = [timer, event].into_iter().flatten().min() else {
                break;
            };
            if at > target {
                break;
            }
            self.now = self.now.max(at);
            if timer.is_some_and(|t| t <= self.now) {
                self.call(Ctx::Timeout, |t, now| t.handle_timeout(now));
            } else {
                self.run_due_policy_events();
            }
            self.settle();
        }
        if self.now < target {
            self.now = target;
        }
    }

    /// Live sessions' ids by holder, from the terminal.
    pub(super) fn live_by_fay(&self) -> BTreeMap<String, BTreeSet<SessionId>> {
        let mut m: BTreeMap<String, BTreeSet<SessionId>> = BTreeMap::new();
        for s in self.t.sessions() {
            m.entry(s.fay_id).or_default().insert(s.session_id);
        }
        m
    }
}
