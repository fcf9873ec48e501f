//! The two sans-IO CAP machines. Driver order, as in quinn-proto: feed
//! `handle_message` / `handle_timeout`, then drain `poll_transmit` (until
//! `None`), `poll_timeout`, `poll_outcome`.

use std::time::Instant;

use bytes::Bytes;
use dtp_codec::AeadAlgorithm;
use uuid::Uuid;

use super::msg::{self, Outcome};
use super::noise::{Finished, Noise};
use super::{
    CapError, CapOutcome, CapState, InitiatorConfig, ResponderConfig, ResponderContext, TerminalKey,
};
use crate::cred::{Credential, VerifiedCredential};

/// Result the machine hands out once.
type Pending<P> = Option<Result<CapOutcome<P>, CapError>>;

/// Maps snow's errors on message `message`.
fn noise_error(e: snow::Error, message: u8) -> CapError {
    match e {
        snow::Error::Decrypt => CapError::Decrypt { message },
        snow::Error::Input => CapError::Malformed {
            message,
            reason: "message too short",
            offset: 0,
        },
        snow::Error::Dh => CapError::Malformed {
            message,
            reason: "invalid public key",
            offset: 0,
        },
        _ => CapError::Internal("Noise handshake state"),
    }
}

/// Refuses a message over its ceiling before any work.
fn check_len(message: u8, len: usize, max: usize) -> Result<(), CapError> {
    if len > max {
        Err(CapError::MessageTooLarge { message, len, max })
    } else {
        Ok(())
    }
}

/// Writes a handshake message with `payload`.
fn write(noise: &mut Noise, payload: &[u8]) -> Result<Bytes, CapError> {
    let mut buf = vec![0u8; payload.len() + 128];
    let n = noise
        .hs
        .write_message(payload, &mut buf)
        .map_err(|_| CapError::Internal("Noise write"))?;
    buf.truncate(n);
    Ok(Bytes::from(buf))
}

/// Reads a handshake message; returns its payload.
fn read(noise: &mut Noise, message: u8, bytes: &[u8]) -> Result<Vec<u8>, CapError> {
    let mut payload = vec![0u8; bytes.len()];
    let n = noise
        .hs
        .read_message(bytes, &mut payload)
        .map_err(|e| noise_error(e, message))?;
    payload.truncate(n);
    Ok(payload)
}

enum InitState {
    AwaitMsg2(Box<Noise>),
    AwaitOutcome(Box<Finished>),
    Established,
    Failed,
}

/// SPEC SEQ-1: the Fay's (initiator's) CAP machine.
///
/// Created with message 1 queued. Feed it the terminal's messages 2 and 4;
/// it queues message 3 after message 2.
pub struct CapInitiator {
    state: InitState,
    deadline: Instant,
    transmit: Option<Bytes>,
    outcome: Pending<TerminalKey>,
    credential: Bytes,
    offered: Vec<AeadAlgorithm>,
    pinned: Option<[u8; 32]>,
}

impl std::fmt::Debug for CapInitiator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapInitiator")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl CapInitiator {
    /// Starts a handshake at `now`; `ephemeral_seed` must be fresh random
    /// bytes. Fails on an unusable configuration (no or too many algorithms,
    /// a credential for another key).
    pub fn new(
        config: &InitiatorConfig,
        now: Instant,
        ephemeral_seed: [u8; 32],
    ) -> Result<Self, CapError> {
        check_algorithms(&config.algorithms)?;
        if config.credential.descriptor().noise_key != *config.static_keypair.public() {
            return Err(CapError::LocalKeyMismatch);
        }
        let mut noise = Noise::new(true, &config.static_keypair, ephemeral_seed)?;
        let msg1 = write(&mut noise, &msg::encode_offer(&config.algorithms))?;
        Ok(CapInitiator {
            state: InitState::AwaitMsg2(Box::new(noise)),
            deadline: now + config.handshake_timeout,
            transmit: Some(msg1),
            outcome: None,
            credential: config.credential.as_bytes().clone(),
            offered: config.algorithms.clone(),
            pinned: config.pinned_responder_key,
        })
    }

    /// Feeds a message from the terminal. An error fails the machine (and
    /// is also what [`CapInitiator::poll_outcome`] returns).
    pub fn handle_message(&mut self, bytes: &[u8], now: Instant) -> Result<(), CapError> {
        if matches!(self.state, InitState::Established | InitState::Failed) {
            return Err(CapError::UnexpectedMessage);
        }
        if now >= self.deadline {
            return Err(self.fail(CapError::Timeout));
        }
        let state = std::mem::replace(&mut self.state, InitState::Failed);
        let step = match state {
            InitState::AwaitMsg2(noise) => self.on_msg2(noise, bytes),
            InitState::AwaitOutcome(finished) => self.on_outcome(&finished, bytes),
            InitState::Established | InitState::Failed => Err(CapError::UnexpectedMessage),
        };
        step.map_err(|e| self.fail(e))
    }

    fn on_msg2(&mut self, mut noise: Box<Noise>, bytes: &[u8]) -> Result<(), CapError> {
        check_len(2, bytes.len(), msg::MSG2_LEN)?;
        let payload = read(&mut noise, 2, bytes)?;
        if !payload.is_empty() {
            return Err(CapError::Malformed {
                message: 2,
                reason: "payload must be empty",
                offset: 0,
            });
        }
        let remote = noise
            .hs
            .get_remote_static()
            .ok_or(CapError::Internal("no remote static"))?;
        if let Some(pin) = &self.pinned
            && remote != pin.as_slice()
        {
            return Err(CapError::PinMismatch);
        }
        self.transmit = Some(write(&mut noise, &self.credential)?);
        let finished = noise.finish()?;
        self.state = InitState::AwaitOutcome(Box::new(finished));
        Ok(())
    }

    fn on_outcome(&mut self, f: &Finished, bytes: &[u8]) -> Result<(), CapError> {
        check_len(4, bytes.len(), msg::MAX_MSG4)?;
        match msg::open_outcome(bytes, &f.hash, &f.r2i)? {
            Outcome::Accepted {
                algorithm,
                session_id,
            } => {
                if !self.offered.contains(&algorithm) {
                    return Err(CapError::Malformed {
                        message: 4,
                        reason: "terminal chose an algorithm that was not offered",
                        offset: 1,
                    });
                }
                self.outcome = Some(Ok(CapOutcome {
                    algorithm,
                    initiator_to_responder: f.i2r,
                    responder_to_initiator: f.r2i,
                    handshake_hash: f.hash,
                    session_id,
                    peer: TerminalKey(f.remote),
                }));
                self.state = InitState::Established;
                Ok(())
            }
            Outcome::Rejected { code } => Err(CapError::Rejected { code }),
        }
    }

    /// Fails the handshake if `now` is past its deadline (CAP_TIMEOUT).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state() == CapState::Handshaking && now >= self.deadline {
            self.fail(CapError::Timeout);
        }
    }

    /// The next handshake message to send, if any (opaque bytes for the
    /// driver to frame).
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.take()
    }

    /// When to call [`CapInitiator::handle_timeout`]; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.state() == CapState::Handshaking).then_some(self.deadline)
    }

    /// The result, once: `Ok` when established (FSM → SessionEstablished),
    /// `Err` when failed (FSM → Idle).
    pub fn poll_outcome(&mut self) -> Pending<TerminalKey> {
        self.outcome.take()
    }

    /// Where the machine is.
    pub fn state(&self) -> CapState {
        match self.state {
            InitState::AwaitMsg2(_) | InitState::AwaitOutcome(_) => CapState::Handshaking,
            InitState::Established => CapState::Established,
            InitState::Failed => CapState::Failed,
        }
    }

    fn fail(&mut self, e: CapError) -> CapError {
        self.state = InitState::Failed;
        self.transmit = None;
        self.outcome = Some(Err(e.clone()));
        e
    }
}

fn check_algorithms(algorithms: &[AeadAlgorithm]) -> Result<(), CapError> {
    if algorithms.is_empty() || algorithms.len() > msg::MAX_OFFER {
        return Err(CapError::Config("list 1 to 8 AEAD algorithms"));
    }
    if algorithms
        .iter()
        .enumerate()
        .any(|(i, a)| algorithms[..i].contains(a))
    {
        return Err(CapError::Config("an AEAD algorithm is listed twice"));
    }
    Ok(())
}

enum RespState {
    AwaitMsg1(Box<Noise>),
    AwaitMsg3 {
        noise: Box<Noise>,
        chosen: Option<AeadAlgorithm>,
    },
    Established,
    Failed,
}

/// SPEC SEQ-1: the terminal's (responder's) CAP machine.
///
/// Feed it the Fay's messages 1 and 3; it queues message 2, then message 4
/// (acceptance, or the authenticated rejection).
pub struct CapResponder {
    state: RespState,
    deadline: Instant,
    transmit: Option<Bytes>,
    outcome: Pending<VerifiedCredential>,
    allowed: Vec<AeadAlgorithm>,
    session_id: Uuid,
}

impl std::fmt::Debug for CapResponder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapResponder")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl CapResponder {
    /// Starts waiting for message 1 at `now`. `ephemeral_seed` and
    /// `session_id_random` must be fresh random bytes; the second becomes the
    /// Session_ID (UUID v4) if the handshake succeeds.
    pub fn new(
        config: &ResponderConfig,
        now: Instant,
        ephemeral_seed: [u8; 32],
        session_id_random: [u8; 16],
    ) -> Result<Self, CapError> {
        if config.algorithms.is_empty() {
            return Err(CapError::Config("allow at least one AEAD algorithm"));
        }
        let noise = Noise::new(false, &config.static_keypair, ephemeral_seed)?;
        Ok(CapResponder {
            state: RespState::AwaitMsg1(Box::new(noise)),
            deadline: now + config.handshake_timeout,
            transmit: None,
            outcome: None,
            allowed: config.algorithms.clone(),
            session_id: uuid::Builder::from_random_bytes(session_id_random).into_uuid(),
        })
    }

    /// Feeds a message from the Fay. `ctx` (verifier and Unix time) is used
    /// at message 3. An error fails the machine; after message 3 the
    /// rejection is still queued for [`CapResponder::poll_transmit`].
    pub fn handle_message(
        &mut self,
        bytes: &[u8],
        now: Instant,
        ctx: ResponderContext<'_>,
    ) -> Result<(), CapError> {
        if matches!(self.state, RespState::Established | RespState::Failed) {
            return Err(CapError::UnexpectedMessage);
        }
        if now >= self.deadline {
            return Err(self.fail(CapError::Timeout, false));
        }
        let state = std::mem::replace(&mut self.state, RespState::Failed);
        match state {
            RespState::AwaitMsg1(noise) => {
                self.on_msg1(noise, bytes).map_err(|e| self.fail(e, false))
            }
            RespState::AwaitMsg3 { noise, chosen } => self.on_msg3(*noise, chosen, bytes, ctx),
            RespState::Established | RespState::Failed => Err(CapError::UnexpectedMessage),
        }
    }

    fn on_msg1(&mut self, mut noise: Box<Noise>, bytes: &[u8]) -> Result<(), CapError> {
        check_len(1, bytes.len(), msg::MAX_MSG1)?;
        let payload = read(&mut noise, 1, bytes)?;
        let offered = msg::parse_offer(&payload)?;
        // The Fay's order decides among what the terminal allows.
        let chosen = offered.into_iter().find(|a| self.allowed.contains(a));
        self.transmit = Some(write(&mut noise, &[])?);
        self.state = RespState::AwaitMsg3 { noise, chosen };
        Ok(())
    }

    fn on_msg3(
        &mut self,
        mut noise: Noise,
        chosen: Option<AeadAlgorithm>,
        bytes: &[u8],
        ctx: ResponderContext<'_>,
    ) -> Result<(), CapError> {
        // Before the handshake completes nothing is authenticated: fail
        // without a reply.
        let finished = check_len(3, bytes.len(), msg::MAX_MSG3)
            .and_then(|()| read(&mut noise, 3, bytes))
            .and_then(|credential| Ok((credential, noise.finish()?)));
        let (credential, f) = match finished {
            Ok(v) => v,
            Err(e) => return Err(self.fail(e, false)),
        };
        let verdict = accept(&credential, &f, chosen, ctx);
        let reply = match &verdict {
            Ok((algorithm, _)) => Outcome::Accepted {
                algorithm: *algorithm,
                session_id: self.session_id,
            },
            Err(e) => Outcome::Rejected { code: e.code() },
        };
        match msg::seal_outcome(reply, &f.hash, &f.r2i) {
            Ok(sealed) => self.transmit = Some(Bytes::from(sealed)),
            Err(e) => return Err(self.fail(e, false)),
        }
        match verdict {
            Ok((algorithm, peer)) => {
                self.outcome = Some(Ok(CapOutcome {
                    algorithm,
                    initiator_to_responder: f.i2r,
                    responder_to_initiator: f.r2i,
                    handshake_hash: f.hash,
                    session_id: self.session_id,
                    peer,
                }));
                self.state = RespState::Established;
                Ok(())
            }
            Err(e) => Err(self.fail(e, true)),
        }
    }

    /// Fails the handshake if `now` is past its deadline (CAP_TIMEOUT).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state() == CapState::Handshaking && now >= self.deadline {
            self.fail(CapError::Timeout, false);
        }
    }

    /// The next handshake message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.transmit.take()
    }

    /// When to call [`CapResponder::handle_timeout`]; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.state() == CapState::Handshaking).then_some(self.deadline)
    }

    /// The result, once: `Ok` when established, `Err` when failed.
    pub fn poll_outcome(&mut self) -> Pending<VerifiedCredential> {
        self.outcome.take()
    }

    /// Where the machine is.
    pub fn state(&self) -> CapState {
        match self.state {
            RespState::AwaitMsg1(_) | RespState::AwaitMsg3 { .. } => CapState::Handshaking,
            RespState::Established => CapState::Established,
            RespState::Failed => CapState::Failed,
        }
    }

    fn fail(&mut self, e: CapError, keep_reply: bool) -> CapError {
        self.state = RespState::Failed;
        if !keep_reply {
            self.transmit = None;
        }
        self.outcome = Some(Err(e.clone()));
        e
    }
}

/// The terminal's decision at message 3: credential valid, issued for the
/// key the Fay proved, and a common algorithm.
fn accept(
    credential: &[u8],
    f: &Finished,
    chosen: Option<AeadAlgorithm>,
    ctx: ResponderContext<'_>,
) -> Result<(AeadAlgorithm, VerifiedCredential), CapError> {
    let credential = Credential::from_bytes(credential).map_err(crate::cred::CredError::from)?;
    let verified = ctx.verifier.verify(&credential, ctx.unix_now)?;
    if *verified.noise_key() != f.remote {
        return Err(CapError::KeyMismatch);
    }
    let algorithm = chosen.ok_or(CapError::NoCommonAlgorithm)?;
    Ok((algorithm, verified))
}
