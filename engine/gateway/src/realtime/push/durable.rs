//! The push plane's side of its store ([`PushStore`], SPEC RT-12):
//! which lines each change writes, answers held until their lines are
//! durable, the rewrite of the whole state, and the rebuild at start.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use dtp_realtime::push::{
    AssociationEpoch, RegistrationState, Registry, SubscriptionId, base64url_decode,
    base64url_encode,
};

use super::store::{Line, PushStore};
use super::{Principal, PushPlane, Refusal};
use crate::app::Decisions;
use crate::realtime::msg::RtDecision;

/// Lines written since the last rewrite before the file is rewritten from
/// the state, at least (and at least four lines per live record).
const REWRITE_AFTER: u64 = 4_096;

/// Lines not yet handed to the store, or answers waiting for theirs, at
/// most: past it (a store slower than the requests), changes are refused
/// with [`STORE_UNAVAILABLE`] rather than queued without bound.
const MAX_WAITING: usize = 4_096;

/// The refusal while the store cannot take a change.
pub(super) const STORE_UNAVAILABLE: Refusal = (
    503,
    "STORE_UNAVAILABLE",
    "registrations cannot be stored now; retry later",
);

/// What a start found in the store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Registrations restored, active.
    pub registrations: usize,
    /// Registrations dropped: their client is no longer configured, their
    /// record does not open under the store's secret (another VAPID key),
    /// or a ceiling is lower now.
    pub dropped: usize,
}

/// The store's view from the plane: the writer and what it has been given.
#[derive(Debug)]
pub(super) struct Durable {
    pub(super) store: PushStore,
    /// The store's secret (derived from the VAPID key).
    pub(super) secret: [u8; 32],
    /// Lines made and not yet handed to the store.
    unsaved: Vec<Line>,
    /// Lines made in all.
    made: u64,
    /// Lines written since the last rewrite.
    since_rewrite: u64,
    /// Answers waiting for their lines: (lines made then, shard, answer).
    parked: std::collections::VecDeque<(u64, usize, RtDecision)>,
}

impl Durable {
    pub(super) fn new(store: PushStore, secret: [u8; 32]) -> Self {
        Self {
            store,
            secret,
            unsaved: Vec::new(),
            made: 0,
            since_rewrite: 0,
            parked: std::collections::VecDeque::new(),
        }
    }
}

/// The key a run with `salt` sealed its records under.
pub(super) fn seal_key(secret: &[u8; 32], salt: &[u8]) -> [u8; 32] {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let mut ctx = ring::hmac::Context::with_key(&key);
    ctx.update(b"dtp push store seal");
    ctx.update(salt);
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// A registration line, folded at load.
struct Reg {
    owner: String,
    installation: String,
    streams: Vec<String>,
    salt: String,
    sealed: String,
}

impl PushPlane {
    /// Whether a change may be made now: no store, or one that works and
    /// is not [`MAX_WAITING`] behind.
    pub(super) fn store_ok(&self) -> bool {
        self.durable.as_ref().is_none_or(|d| {
            !d.store.failed() && d.unsaved.len() < MAX_WAITING && d.parked.len() < MAX_WAITING
        })
    }

    fn note(&mut self, line: Line) {
        if let Some(d) = &mut self.durable {
            d.unsaved.push(line);
            d.made += 1;
        }
    }

    /// Notes `client`'s association state.
    pub(super) fn note_client(&mut self, client: Principal) {
        if self.durable.is_none() {
            return;
        }
        let line = self.client_line(client);
        self.note(line);
    }

    fn client_line(&self, client: Principal) -> Line {
        Line::Client {
            c: self.client_name(client),
            issued: self.epochs.get(&client).copied().unwrap_or(0),
            epoch: self
                .registry
                .active_epoch(&client)
                .map(|e| e.as_str().to_owned()),
        }
    }

    /// Notes live registration `id` as it stands.
    pub(super) fn note_registration(&mut self, id: SubscriptionId) {
        if self.durable.is_none() {
            return;
        }
        if let Some(line) = self.registration_line(id) {
            self.note(line);
        }
    }

    fn registration_line(&self, id: SubscriptionId) -> Option<Line> {
        let owner = *self.registry.owner(id)?;
        Some(Line::Reg {
            id: id.get(),
            c: self.client_name(owner),
            inst: self.installations.get(&id)?.to_string(),
            streams: self
                .bindings
                .streams(id)
                .iter()
                .map(ToString::to_string)
                .collect(),
            salt: base64url_encode(&self.settings.storage_key),
            sealed: base64url_encode(self.registry.sealed(id)?),
        })
    }

    /// Notes that registration `id` ended as `state`.
    pub(super) fn note_end(&mut self, id: SubscriptionId, state: RegistrationState) {
        self.note(Line::End {
            id: id.get(),
            state: state.as_str().to_owned(),
        });
    }

    /// Sends `d` to `shard` once every line made so far is durable (at
    /// once without a store).
    pub(super) fn answer_when_durable(&mut self, shard: usize, d: RtDecision, out: &mut Decisions) {
        match &mut self.durable {
            None => out.push((shard, crate::realtime::plane::rt_decision(d))),
            Some(durable) => {
                durable.parked.push_back((durable.made, shard, d));
                self.flush(out);
            }
        }
    }

    /// Hands the unsaved lines to the store (the whole state instead, when
    /// the file has grown well past it), then answers what is durable; if
    /// the store failed, every held answer becomes a 503.
    pub(super) fn flush(&mut self, out: &mut Decisions) {
        let live = self.registry.len() as u64 + self.epochs.len() as u64;
        let rewrite = self
            .durable
            .as_ref()
            .is_some_and(|d| d.since_rewrite > REWRITE_AFTER.max(4 * live));
        if rewrite {
            self.rewrite();
        }
        let Some(d) = &mut self.durable else {
            return;
        };
        if !d.unsaved.is_empty() && d.store.append(d.made, &d.unsaved) {
            d.since_rewrite += d.unsaved.len() as u64;
            d.unsaved.clear();
        }
        let durable = d.store.durable();
        let failed = d.store.failed();
        while let Some(&(need, _, _)) = d.parked.front() {
            if need > durable && !failed {
                break;
            }
            let Some((_, shard, mut answer)) = d.parked.pop_front() else {
                break;
            };
            if need > durable {
                let (status, code, message) = STORE_UNAVAILABLE;
                if let RtDecision::PushAnswer {
                    status: s, body, ..
                } = &mut answer
                {
                    *s = status;
                    let refusal = serde_json::json!({"error": code, "message": message});
                    *body = Bytes::from(refusal.to_string());
                }
            }
            out.push((shard, crate::realtime::plane::rt_decision(answer)));
        }
    }

    /// Hands the store the whole state in place of its file.
    fn rewrite(&mut self) {
        if self.durable.is_none() {
            return;
        }
        let mut clients: Vec<Principal> = self.epochs.keys().copied().collect();
        clients.sort_unstable();
        let mut lines = Vec::new();
        for &client in &clients {
            lines.push(self.client_line(client));
            for &id in self.registry.live_ids(&client) {
                lines.extend(self.registration_line(id));
            }
        }
        for (id, state) in self.registry.ended() {
            lines.push(Line::End {
                id: id.get(),
                state: state.as_str().to_owned(),
            });
        }
        lines.push(Line::Next {
            id: self.registry.next_id(),
        });
        if let Some(d) = &mut self.durable
            && d.store.rewrite(d.made, &lines)
        {
            d.unsaved.clear();
            d.since_rewrite = 0;
        }
    }

    /// Rebuilds the registrations from the store's `lines` (at start,
    /// before any request), then rewrites the store from them.
    pub fn restore(&mut self, lines: Vec<Line>) -> Restored {
        let Some(secret) = self.durable.as_ref().map(|d| d.secret) else {
            return Restored::default();
        };
        let mut clients: HashMap<String, (u64, Option<String>)> = HashMap::new();
        let mut regs: BTreeMap<u64, Reg> = BTreeMap::new();
        let mut ended: Vec<(u64, RegistrationState)> = Vec::new();
        let mut next = 1;
        for line in lines {
            match line {
                Line::Client { c, issued, epoch } => {
                    clients.insert(c, (issued, epoch));
                }
                Line::Reg {
                    id,
                    c,
                    inst,
                    streams,
                    salt,
                    sealed,
                } => {
                    let reg = Reg {
                        owner: c,
                        installation: inst,
                        streams,
                        salt,
                        sealed,
                    };
                    regs.insert(id, reg);
                    next = next.max(id + 1);
                }
                Line::End { id, state } => {
                    regs.remove(&id);
                    let state = if state == "GONE" {
                        RegistrationState::Gone
                    } else {
                        RegistrationState::Revoked
                    };
                    ended.push((id, state));
                    next = next.max(id + 1);
                }
                Line::Next { id } => next = next.max(id),
            }
        }
        let index: HashMap<String, Principal> = (0..self.settings.clients.len())
            .map(|i| (self.client_name(i), i))
            .collect();
        for (name, (issued, epoch)) in clients {
            let Some(&client) = index.get(&name) else {
                continue;
            };
            self.epochs.insert(client, issued);
            if let Some(e) = epoch.as_deref().and_then(AssociationEpoch::parse) {
                let _ = self.registry.associate(&client, e);
            }
        }
        let mut done = Restored::default();
        let mut keys: HashMap<String, [u8; 32]> = HashMap::new();
        for (id, reg) in regs {
            let id = SubscriptionId::from_raw(id);
            let key = *keys.entry(reg.salt.clone()).or_insert_with(|| {
                seal_key(&secret, &base64url_decode(&reg.salt).unwrap_or_default())
            });
            let opened = base64url_decode(&reg.sealed)
                .and_then(|sealed| Registry::<Principal>::open_with(&key, id, &sealed));
            let restored = match (index.get(&reg.owner), opened) {
                (Some(client), Some(sub)) => self.registry.restore(client, id, &sub).is_ok(),
                _ => false,
            };
            if !restored {
                done.dropped += 1;
                continue;
            }
            done.registrations += 1;
            self.installations.insert(id, reg.installation.into());
            let streams = reg
                .streams
                .into_iter()
                .filter(|s| self.hints.contains_key(s.as_str()))
                .map(Into::into)
                .collect();
            self.bindings.bind(id, streams);
        }
        for (id, state) in ended {
            self.registry
                .restore_ended(SubscriptionId::from_raw(id), state);
        }
        self.registry.reserve_ids(next);
        self.count_registrations();
        self.rewrite();
        done
    }
}
