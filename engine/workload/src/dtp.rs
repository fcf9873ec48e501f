//! The benchmark workloads over the full DTP protocol (SPEC §1): CAP,
//! an agreement, encrypted fragments, resume acks.
//!
//! This module owns the application rules of the DTP workloads and nothing
//! else: [`DtpResponder`] is *the* server application of `dtp serve --dtp`
//! and of every benchmarked DTP server (our gateway's `DtpGateway`, which
//! runs it as a `DtpApp`, and the tokio peer), so a CPU-per-operation ratio
//! compares their IO paths and not two implementations of the protocol.
//! Sans-IO: an event and the endpoint in, the endpoint's calls out; the one
//! outside input is the random agreement ids, drawn from `ring`'s system
//! generator.
//!
//! # The protocol
//!
//! The Fay (the load generator) runs CAP, then requests a **collection**
//! whose terms name the workload: `{"workload": "pingpong" | "stream"}`
//! ([`WORKLOAD_TERM`]). The server accepts those and rejects anything else.
//! Then, on that agreement:
//! - **`pingpong`**: the Fay sends a fragment; the server answers with a
//!   fragment carrying the same fragment id and payload, on the same
//!   agreement. One fragment in flight per connection.
//! - **`stream`**: the Fay sends fragments; the server consumes them. Flow
//!   control is DTP's own: the Fay's resume cache fills until the server's
//!   cumulative acks (RES-2) free it, and `BUFFER_FULL` (6001) pauses it.
//!
//! A server that cannot answer a `pingpong` fragment because its own resume
//! cache is full closes the connection: a well-behaved Fay never has more
//! than one fragment in flight, so that is a protocol violation.

use std::collections::HashMap;
use std::time::Instant;

use dtp_codec::{AgreementId, ErrorCode, Terms};
use dtp_endpoint::{DtpEndpoint, DtpEvent};
use ring::rand::{SecureRandom, SystemRandom};

/// The agreement term that names the workload.
pub const WORKLOAD_TERM: &str = "workload";

/// A DTP workload, as named in an agreement's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtpWorkload {
    /// Request/response of fragments.
    Pingpong,
    /// One-way fragments, Fay to server.
    Stream,
}

impl DtpWorkload {
    /// The value of [`WORKLOAD_TERM`].
    pub fn name(self) -> &'static str {
        match self {
            Self::Pingpong => "pingpong",
            Self::Stream => "stream",
        }
    }

    /// The terms a Fay requests the workload with.
    pub fn terms(self) -> Terms {
        Terms::from([(WORKLOAD_TERM.to_owned(), self.name().to_owned())])
    }

    /// The workload named by `terms`, if any.
    pub fn from_terms(terms: &Terms) -> Option<Self> {
        match terms.get(WORKLOAD_TERM).map(String::as_str) {
            Some("pingpong") => Some(Self::Pingpong),
            Some("stream") => Some(Self::Stream),
            _ => None,
        }
    }
}

/// The server application of the DTP workloads.
pub struct DtpResponder {
    rng: SystemRandom,
}

impl Default for DtpResponder {
    fn default() -> Self {
        Self {
            rng: SystemRandom::new(),
        }
    }
}

/// One connection's workload state.
#[derive(Debug, Default)]
pub struct ResponderSession {
    /// Active agreements and their workloads (a resumed session's come back
    /// with it: looked up from the endpoint on first use).
    workloads: HashMap<AgreementId, DtpWorkload>,
    /// Fragments received (both workloads).
    pub fragments: u64,
}

impl ResponderSession {
    fn workload(&mut self, ep: &DtpEndpoint, id: AgreementId) -> Option<DtpWorkload> {
        if let Some(w) = self.workloads.get(&id) {
            return Some(*w);
        }
        let w = ep
            .agreements()
            .find(|a| a.id == id)
            .and_then(|a| DtpWorkload::from_terms(&a.terms))?;
        self.workloads.insert(id, w);
        Some(w)
    }
}

impl DtpResponder {
    /// One event of a connection's endpoint (resume requests are the
    /// driver's): agreements naming a workload are accepted, others
    /// rejected; `pingpong` fragments are answered.
    pub fn event(
        &mut self,
        s: &mut ResponderSession,
        ep: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
    ) {
        match event {
            DtpEvent::AgreementRequested {
                request_id, terms, ..
            } => {
                let answer = match DtpWorkload::from_terms(&terms) {
                    Some(_) => {
                        let mut random = [0u8; 16];
                        match self.rng.fill(&mut random) {
                            Ok(()) => ep.accept(request_id, random, now).map(|_| ()),
                            Err(_) => ep.reject(request_id, "no randomness for an id", now),
                        }
                    }
                    None => ep.reject(request_id, "unknown workload", now),
                };
                if let Err(e) = answer {
                    tracing::debug!(error = %e, "could not answer an agreement request");
                }
            }
            DtpEvent::AgreementActive {
                agreement_id,
                terms,
                ..
            } => {
                if let Some(w) = DtpWorkload::from_terms(&terms) {
                    s.workloads.insert(agreement_id, w);
                }
            }
            DtpEvent::AgreementEnded { agreement_id, .. } => {
                s.workloads.remove(&agreement_id);
            }
            DtpEvent::Fragment {
                agreement_id,
                fragment_id,
                payload,
                ..
            } => {
                s.fragments += 1;
                if s.workload(ep, agreement_id) == Some(DtpWorkload::Pingpong)
                    && let Err(e) = ep.send_fragment(agreement_id, fragment_id, vec![], payload)
                {
                    if e.code() == ErrorCode::BUFFER_FULL {
                        ep.close("pingpong: more than one fragment in flight");
                    } else {
                        tracing::debug!(error = %e, "could not answer a pingpong fragment");
                    }
                }
            }
            _ => {}
        }
    }
}
