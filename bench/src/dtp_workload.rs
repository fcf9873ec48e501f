//! The benchmark workloads over the full DTP protocol (SPEC §1): CAP,
//! an agreement, encrypted fragments, resume acks.
//!
//! This module owns the application rules of the DTP workloads and nothing
//! else: [`DtpResponder`] is *the* server application of every benchmarked
//! DTP server (our gateway's [`DtpGateway`](dtp_gateway::dtp::DtpGateway) and
//! the tokio peer), so a CPU-per-operation ratio compares their IO paths and
//! not two implementations of the protocol.
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
use dtp_gateway::dtp::{DtpApp, DtpEndpoint, DtpEvent};
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

impl DtpApp for DtpResponder {
    type Session = ResponderSession;

    fn event(
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

/// Ephemeral keys and a credential for a benchmark or a test run: an issuer,
/// the Fay's and the terminal's Noise keys, and the Fay's credential (valid
/// for a day), all fresh from the system generator. Real deployments make
/// theirs with `dtp cred`.
pub struct BenchKeys {
    /// The issuer that signed the credential.
    pub issuer: dtp_crypto::cred::IssuerKeyPair,
    /// The Fay's Noise static key pair (the credential names its public half).
    pub fay_noise: dtp_crypto::cap::NoiseKeypair,
    /// The terminal's Noise static key pair.
    pub terminal_noise: dtp_crypto::cap::NoiseKeypair,
    /// The Fay's credential.
    pub credential: dtp_crypto::cred::Credential,
}

impl BenchKeys {
    /// Fresh keys; fails only if the system generator or the clock does.
    pub fn generate() -> Result<Self, String> {
        use dtp_crypto::cap::NoiseKeypair;
        use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair};
        let rng = SystemRandom::new();
        let random32 = || -> Result<[u8; 32], String> {
            let mut b = [0u8; 32];
            rng.fill(&mut b)
                .map_err(|_| "no system randomness".to_owned())?;
            Ok(b)
        };
        let issuer = IssuerKeyPair::from_seed(&random32()?).map_err(|e| e.to_string())?;
        let fay_noise = NoiseKeypair::from_private(random32()?).map_err(|e| e.to_string())?;
        let terminal_noise = NoiseKeypair::from_private(random32()?).map_err(|e| e.to_string())?;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs();
        let mut id = [0u8; 16];
        rng.fill(&mut id)
            .map_err(|_| "no system randomness".to_owned())?;
        let credential = issuer
            .issue(
                CredentialRequest {
                    fay_id: "bench-fay".into(),
                    noise_key: *fay_noise.public(),
                    grants: vec![Grant {
                        resource_id: "bench".into(),
                        modes: [dtp_codec::AccessMode::Read].into_iter().collect(),
                    }],
                    not_before: unix.saturating_sub(60),
                    not_after: unix + 86_400,
                },
                id,
            )
            .map_err(|e| e.to_string())?;
        Ok(Self {
            issuer,
            fay_noise,
            terminal_noise,
            credential,
        })
    }

    /// The Fay's configuration: these keys, AES-256-GCM preferred, the
    /// terminal's key pinned.
    pub fn fay_config(&self) -> dtp_gateway::dtp::FayConfig {
        dtp_gateway::dtp::FayConfig {
            cap: dtp_crypto::cap::InitiatorConfig {
                static_keypair: self.fay_noise.clone(),
                credential: self.credential.clone(),
                algorithms: vec![
                    dtp_codec::AeadAlgorithm::Aes256Gcm,
                    dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
                ],
                pinned_responder_key: Some(*self.terminal_noise.public()),
                handshake_timeout: dtp_crypto::cap::DEFAULT_HANDSHAKE_TIMEOUT,
            },
            endpoint: dtp_gateway::dtp::EndpointConfig::fay(),
        }
    }

    /// The terminal's configuration: these keys, trusting this issuer.
    pub fn terminal_config(&self) -> Result<dtp_gateway::dtp::TerminalConfig, String> {
        let mut verifier = dtp_crypto::cred::Verifier::new();
        verifier
            .trust(*self.issuer.public_key())
            .map_err(|e| e.to_string())?;
        Ok(dtp_gateway::dtp::TerminalConfig {
            cap: dtp_crypto::cap::ResponderConfig {
                static_keypair: self.terminal_noise.clone(),
                algorithms: vec![
                    dtp_codec::AeadAlgorithm::Aes256Gcm,
                    dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
                ],
                handshake_timeout: dtp_crypto::cap::DEFAULT_HANDSHAKE_TIMEOUT,
            },
            verifier: std::sync::Arc::new(verifier),
            endpoint: dtp_gateway::dtp::EndpointConfig::terminal(),
        })
    }
}
