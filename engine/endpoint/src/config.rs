//! The endpoint's configuration: the CAP side, the DTP role, and every
//! ceiling and timer.

use std::sync::Arc;
use std::time::Duration;

use dtp_codec::Limits;
use dtp_crypto::aead::KeyLimits;
use dtp_crypto::cap::{InitiatorConfig, ResponderConfig};
use dtp_crypto::cred::Verifier;
use dtp_proto::agreement::{AgreementConfig, Role};
use dtp_proto::dag::DagConfig;
use dtp_proto::resume::{AckPolicy, SenderConfig};

/// SPEC LIV-2, LIV-6: the longest interval a runtime may heartbeat at (the
/// low-frequency option for idle sessions). A connection that carries only
/// terminal control messages — no agreement, so SessionEstablished — sees
/// traffic no more often than this.
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);

/// SPEC SES-4: the default idle timeout, twice [`MAX_HEARTBEAT_INTERVAL`].
/// Equal to the interval, a control-only connection beating at the longest
/// interval would race its own close on every beat (the beat and the
/// timer fall due at the same instant; whichever the driver handles first
/// wins). Twice the interval lets one beat arrive a whole interval late —
/// a runtime's timer slip, a retransmission, a paused process — before an
/// otherwise live connection is closed; LIV's own judgment (2×–6× the
/// interval, LIV-4) is what ends a silent runtime's sessions, not this.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The ceilings and timers of one connection endpoint, whichever its side.
///
/// Every queue a peer (or a slow application) can grow has a ceiling here
/// or in the machine configs it embeds; past it the endpoint returns or
/// reports a typed error and never grows further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    /// SPEC SEQ-3a/3b: this side's DTP role. The Fay is the Master and the
    /// terminal the Slave by default ([`EndpointConfig::fay`],
    /// [`EndpointConfig::terminal`]).
    pub role: Role,
    /// SPEC FRM-5: the codec's ceilings, for frames sent and received.
    pub limits: Limits,
    /// SPEC AGR-4: the Agreement Manager's ceilings and request timeout.
    pub agreements: AgreementConfig,
    /// SPEC DAG-2: each agreement's DAG Manager's ceilings (its bound
    /// applies to fragments waiting for a dependency: released ones move at
    /// once to the delivery queue, bounded below).
    pub dag: DagConfig,
    /// SPEC RES-4: the resume cache's ceilings.
    pub resume_cache: SenderConfig,
    /// SPEC RES-2: when the receiving side acknowledges.
    pub ack: AckPolicy,
    /// SPEC ENC-1: lower usage limits for the session keys than the
    /// algorithm's (`None`: the algorithm's, see `KeyLimits::for_algorithm`);
    /// past the soft limit a direction rekeys (HKDF, next key version).
    pub key_limits: Option<KeyLimits>,
    /// SPEC SES-4: a session in SessionEstablished (no agreement) without
    /// traffic for this long is closed with SESSION_TIMEOUT. Must be above
    /// [`MAX_HEARTBEAT_INTERVAL`] ([`EndpointConfig::validate`]); the
    /// default is [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// SPEC SEQ-5: how long the Fay waits for the terminal's RESUME after
    /// sending its own.
    pub resume_timeout: Duration,
    /// SPEC SES-2: how long a suspended session may wait to be resumed
    /// (stamped into [`SuspendedSession`](super::SuspendedSession)).
    pub suspend_timeout: Duration,
    /// SPEC SEQ-4: most streams the receiver tracks for agreement
    /// inheritance.
    pub max_streams: usize,
    /// The stream data frames are sent on (control frames use stream 0).
    pub data_stream: u32,
    /// Most fragments released by the DAG but not yet taken by
    /// `poll_event`; a data frame arriving past it closes the connection
    /// (LIMIT_EXCEEDED: the application does not keep up).
    pub max_undelivered_fragments: usize,
    /// Most payload bytes held like `max_undelivered_fragments`.
    pub max_undelivered_bytes: usize,
    /// Most other events (agreement news, errors) queued for `poll_event`.
    pub max_queued_events: usize,
    /// Most frames other than data queued for `poll_transmit`.
    pub max_queued_frames: usize,
    /// How many recently ended agreements are remembered, so that data the
    /// peer sent before it learnt of the end is dropped rather than treated
    /// as a protocol error.
    pub recently_ended: usize,
}

impl EndpointConfig {
    /// Defaults for the Fay side: DTP Master.
    pub fn fay() -> Self {
        Self {
            role: Role::Master,
            ..Self::terminal()
        }
    }

    /// Defaults for the terminal side: DTP Slave.
    pub fn terminal() -> Self {
        Self {
            role: Role::Slave,
            limits: Limits::default(),
            agreements: AgreementConfig::default(),
            dag: DagConfig::default(),
            resume_cache: SenderConfig::default(),
            ack: AckPolicy::default(),
            key_limits: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            resume_timeout: Duration::from_secs(10),
            suspend_timeout: Duration::from_secs(300),
            max_streams: 64,
            data_stream: 1,
            max_undelivered_fragments: 1024,
            max_undelivered_bytes: 16 * 1024 * 1024,
            max_queued_events: 1024,
            max_queued_frames: 1024,
            recently_ended: 16,
        }
    }

    /// Checks what the endpoint cannot run with.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.limits.validate().is_err() {
            return Err("limits exceed the codec's hard ceilings");
        }
        if self.data_stream == 0 {
            return Err("data_stream 0 is reserved for handshake and control frames");
        }
        if self.max_streams == 0
            || self.max_undelivered_fragments == 0
            || self.max_queued_events == 0
            || self.max_queued_frames == 0
        {
            return Err("a queue ceiling is 0");
        }
        if self.idle_timeout <= MAX_HEARTBEAT_INTERVAL {
            return Err(
                "idle_timeout must be above the longest heartbeat interval, 60 s (SPEC LIV-2)",
            );
        }
        Ok(())
    }
}

/// The Fay's side of a connection: CAP initiator.
#[derive(Clone, Debug)]
pub struct FayConfig {
    /// SPEC SEQ-1: the Fay's Noise keys, credential and AEAD preferences.
    pub cap: InitiatorConfig,
    /// Ceilings and timers (role: Master by default).
    pub endpoint: EndpointConfig,
}

/// The terminal's side of a connection: CAP responder.
#[derive(Clone, Debug)]
pub struct TerminalConfig {
    /// SPEC SEQ-1: the terminal's Noise keys and allowed AEADs.
    pub cap: ResponderConfig,
    /// The trusted issuers and revocations credentials are checked against.
    /// Shared read-only by every connection of a shard; to update it, build
    /// a new verifier and swap the `Arc` for new connections.
    pub verifier: Arc<Verifier>,
    /// Ceilings and timers (role: Slave by default).
    pub endpoint: EndpointConfig,
}
