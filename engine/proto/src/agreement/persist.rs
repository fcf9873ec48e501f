//! SPEC SES-2, SES-3, AGR-2: an [`AgreementSnapshot`] as bytes.
//!
//! Layout, in order (see [`crate::persist`] for the encoding of each kind
//! of field):
//!
//! | field | encoding |
//! |---|---|
//! | `agreements` | count ≤ `max_active_agreements`; each: id (16), kind (1: collection, 2: injection), initiator (1: Master, 2: Slave), terms |
//! | `terminating` | count ≤ `max_outstanding_requests` + answers kept; each: id (16) |
//! | `next_request_id`, `highest_peer_request_id` | u64, u64 |
//! | `in_flight` | count (with `terminating`, ≤ `max_outstanding_requests` + answers kept); each: a request |
//! | `expired` | count ≤ answers kept; each: a request |
//! | `answers` | count ≤ answers kept; each: request id (u64), decision tag (1 accepted: id (16); 2 rejected: reason string; 3 counter-proposal: terms) |
//! | `undecided` | count ≤ `max_pending_incoming`; each: u64 |
//!
//! A request is: id (u64), flag, the adjusted agreement's id (16) when the
//! flag is 1, terms. Terms are: count ≤ `max_terms`, then key and value
//! strings (≤ the codec's `max_string_len` each), in key order. "Answers
//! kept" is [`ANSWERS_FACTOR`] × `max_outstanding_requests` (at least 1),
//! the window the manager keeps. The answer's fields are written directly:
//! the codec's body encoder is not public, and a whole frame would carry a
//! header for nothing.
//!
//! What is checked here: every count and length. What the snapshot means —
//! UUID v4 ids, no duplicate agreement, in-flight ids below the next id —
//! is checked by [`AgreementManager::restore`](super::AgreementManager::restore),
//! which a restoring driver runs on the snapshot.

use dtp_codec::{Decision, ResponseFrame, Terms};

use super::{
    ANSWERS_FACTOR, AgreementConfig, AgreementKind, AgreementSnapshot, PersistedAgreement,
    PersistedRequest, Role,
};
use crate::persist::{PersistError, Reader, Writer};

/// The smallest encodings, to bound counts by the bytes left.
const MIN_AGREEMENT: usize = 16 + 1 + 1 + 4;
const MIN_REQUEST: usize = 8 + 1 + 4;
const MIN_ANSWER: usize = 8 + 1 + 4;

impl AgreementSnapshot {
    /// SPEC SES-2: appends the snapshot to `w` (layout in the module docs).
    pub fn persist(&self, w: &mut Writer) {
        w.count(self.agreements.len());
        for a in &self.agreements {
            w.uuid(a.id);
            w.u8(match a.kind {
                AgreementKind::Collection => 1,
                AgreementKind::Injection => 2,
            });
            w.u8(role_byte(a.initiator));
            write_terms(w, &a.terms);
        }
        w.count(self.terminating.len());
        for id in &self.terminating {
            w.uuid(*id);
        }
        w.u64(self.next_request_id);
        w.u64(self.highest_peer_request_id);
        for list in [&self.in_flight, &self.expired] {
            w.count(list.len());
            for r in list {
                w.u64(r.request_id);
                w.flag(r.adjusts.is_some());
                if let Some(id) = r.adjusts {
                    w.uuid(id);
                }
                write_terms(w, &r.terms);
            }
        }
        w.count(self.answers.len());
        for answer in &self.answers {
            w.u64(answer.request_id);
            match &answer.decision {
                Decision::Accepted { agreement_id } => {
                    w.u8(1);
                    w.uuid(*agreement_id);
                }
                Decision::Rejected { reason } => {
                    w.u8(2);
                    w.str(reason);
                }
                Decision::CounterProposal { terms } => {
                    w.u8(3);
                    write_terms(w, terms);
                }
            }
        }
        w.count(self.undecided.len());
        for id in &self.undecided {
            w.u64(*id);
        }
    }

    /// SPEC SES-3: reads a snapshot written by [`AgreementSnapshot::persist`]
    /// from untrusted bytes, every count within `config`'s ceilings and
    /// every string within `max_string_len` bytes.
    pub fn restore_persisted(
        r: &mut Reader<'_>,
        config: &AgreementConfig,
        max_string_len: usize,
    ) -> Result<Self, PersistError> {
        let kept = ANSWERS_FACTOR
            .saturating_mul(config.max_outstanding_requests)
            .max(1);
        let requests_max = config.max_outstanding_requests.saturating_add(kept);
        let bounds = Bounds {
            max_terms: config.max_terms,
            max_string_len,
        };
        let n = r.count("agreements", config.max_active_agreements, MIN_AGREEMENT)?;
        let mut agreements = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.uuid("agreement id")?;
            let offset = r.offset();
            let kind = match r.u8("agreement kind")? {
                1 => AgreementKind::Collection,
                2 => AgreementKind::Injection,
                _ => {
                    return Err(PersistError::InvalidValue {
                        what: "agreement kind",
                        offset,
                    });
                }
            };
            let initiator = Role::restore_persisted(r)?;
            let terms = bounds.terms(r)?;
            agreements.push(PersistedAgreement {
                id,
                kind,
                initiator,
                terms,
            });
        }
        let n = r.count("terminating agreements", requests_max, 16)?;
        let mut terminating = Vec::with_capacity(n);
        for _ in 0..n {
            terminating.push(r.uuid("terminating agreement id")?);
        }
        let next_request_id = r.u64("next request id")?;
        let highest_peer_request_id = r.u64("highest peer request id")?;
        let in_flight_max = requests_max - terminating.len();
        let in_flight = bounds.requests(r, "requests in flight", in_flight_max)?;
        let expired = bounds.requests(r, "expired requests", kept)?;
        let n = r.count("answers", kept, MIN_ANSWER)?;
        let mut answers = Vec::with_capacity(n);
        for _ in 0..n {
            let request_id = r.u64("answer request id")?;
            let offset = r.offset();
            let decision = match r.u8("answer decision")? {
                1 => Decision::Accepted {
                    agreement_id: r.uuid("accepted agreement id")?,
                },
                2 => Decision::Rejected {
                    reason: r.string("rejection reason", max_string_len)?,
                },
                3 => Decision::CounterProposal {
                    terms: bounds.terms(r)?,
                },
                _ => {
                    return Err(PersistError::InvalidValue {
                        what: "answer decision",
                        offset,
                    });
                }
            };
            answers.push(ResponseFrame {
                request_id,
                decision,
            });
        }
        let n = r.count("undecided peer requests", config.max_pending_incoming, 8)?;
        let mut undecided = Vec::with_capacity(n);
        for _ in 0..n {
            undecided.push(r.u64("undecided request id")?);
        }
        Ok(Self {
            agreements,
            terminating,
            next_request_id,
            highest_peer_request_id,
            in_flight,
            expired,
            answers,
            undecided,
        })
    }
}

impl Role {
    /// SPEC SEQ-3a/3b, SES-2: writes the role as one byte (1: Master,
    /// 2: Slave).
    pub fn persist(self, w: &mut Writer) {
        w.u8(role_byte(self));
    }

    /// SPEC SEQ-3a/3b, SES-3: reads a role written by [`Role::persist`].
    pub fn restore_persisted(r: &mut Reader<'_>) -> Result<Self, PersistError> {
        let offset = r.offset();
        match r.u8("role")? {
            1 => Ok(Role::Master),
            2 => Ok(Role::Slave),
            _ => Err(PersistError::InvalidValue {
                what: "role",
                offset,
            }),
        }
    }
}

fn role_byte(role: Role) -> u8 {
    match role {
        Role::Master => 1,
        Role::Slave => 2,
    }
}

fn write_terms(w: &mut Writer, terms: &Terms) {
    w.count(terms.len());
    for (k, v) in terms {
        w.str(k);
        w.str(v);
    }
}

/// The ceilings of terms.
struct Bounds {
    max_terms: usize,
    max_string_len: usize,
}

impl Bounds {
    fn terms(&self, r: &mut Reader<'_>) -> Result<Terms, PersistError> {
        let n = r.count("terms entries", self.max_terms, 8)?;
        let mut terms = Terms::new();
        for _ in 0..n {
            let key = r.string("terms key", self.max_string_len)?;
            let value = r.string("terms value", self.max_string_len)?;
            // Keys in strictly increasing order: one encoding per terms map.
            if terms.last_key_value().is_some_and(|(last, _)| *last >= key) {
                return Err(PersistError::Inconsistent(
                    "terms keys are not in strictly increasing order",
                ));
            }
            terms.insert(key, value);
        }
        Ok(terms)
    }

    fn requests(
        &self,
        r: &mut Reader<'_>,
        what: &'static str,
        max: usize,
    ) -> Result<Vec<PersistedRequest>, PersistError> {
        let n = r.count(what, max, MIN_REQUEST)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let request_id = r.u64("request id")?;
            let adjusts = match r.flag("request adjusts an agreement")? {
                true => Some(r.uuid("adjusted agreement id")?),
                false => None,
            };
            let terms = self.terms(r)?;
            out.push(PersistedRequest {
                request_id,
                adjusts,
                terms,
            });
        }
        Ok(out)
    }
}
