//! SPEC SES-2, SES-3, SEQ-5: a [`SuspendedSession`] as bytes, so that a
//! gateway can keep suspended sessions where a restart does not lose them
//! (e.g. a gateway's directory store).
//!
//! # Format (version 1)
//!
//! Big-endian; counts and lengths are `u32` and bounded by the restoring
//! endpoint's [`EndpointConfig`] (each part's module documents its own
//! layout and ceilings).
//!
//! | field | encoding | bound |
//! |---|---|---|
//! | magic | `DTPS` (4 bytes) | |
//! | format version | u16 = 1 | |
//! | Session_ID | 16 bytes | a UUID v4 (SEQ-2) |
//! | role | u8: 1 Master, 2 Slave | |
//! | peer identity | length + bytes | [`MAX_PEER_IDENTITY_LEN`] |
//! | engine state | u8: 6 = Suspended | only Suspended |
//! | key version | u16 | |
//! | expiry | flag + remaining time in ns (u64) | clamped to `suspend_timeout` (flag 0: `suspend_timeout`) |
//! | agreements | `dtp_proto` agreement snapshot | `agreements` ceilings, `limits.max_string_len` |
//! | resume sender | `dtp_proto` sender; each item: length + the plaintext data frame | `resume_cache`; each a data frame of `limits` carrying its own sequence |
//! | resume receiver | highest received, highest acknowledged | |
//! | DAGs | count; each: agreement id (16) + `dtp_proto` DAG; each held fragment: sequence (u64), relation count + (kind u8, target u64)…, payload length + bytes | count ≤ `max_active_agreements` + `recently_ended`; `dag`, `limits.max_relations`, `limits.max_frame_len` |
//! | recently ended | count; each agreement id (16) | `recently_ended` |
//! | checksum | SHA-256 of every byte before it (32 bytes) | |
//!
//! Decoding reads the structure first (every bound checked, nothing
//! allocated that the input does not pay for), then the checksum, then
//! restores the agreements as a resume would (`AgreementManager::restore`)
//! to check what they mean. Any failure is a [`PersistError`]; nothing
//! panics.
//!
//! # What is and is not persisted
//!
//! Persisted: everything [`SuspendedSession`] holds — the plaintext of the
//! unacknowledged fragments (RES-2) and of fragments waiting in a DAG
//! (DAG-2) included, so a store must be as private as the data.
//!
//! Not persisted: **key material**. A suspended session holds none — only
//! the key version it reached — and a resume always runs a new CAP
//! handshake (`DtpEndpoint::fay_resume` starts one; the terminal's
//! `resume_with` is only reachable after CAP) that derives fresh keys at a
//! key version above the stored one (checked in `resume_with`). Nor the
//! configurations of the machines (the restoring endpoint's apply), nor
//! instants: the expiry is stored as the time left at `to_bytes`, and a
//! receiver's pending delayed ack restarts at the restore.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::{Body, HEADER_LEN, Relation, RelationType, decode_frame};
use dtp_proto::agreement::{AgreementManager, AgreementSnapshot, Role};
use dtp_proto::dag::DagManager;
use dtp_proto::fsm::EngineFsm;
use dtp_proto::persist::{PersistError, Reader, Writer};
use dtp_proto::resume::{ResumeReceiver, ResumeSender};
use dtp_proto::session::{MAX_PEER_IDENTITY_LEN, PeerIdentity};
use ring::digest;

use super::endpoint::Held;
use super::{EndpointConfig, SuspendedSession};

/// SPEC SES-2: the first four bytes of a persisted [`SuspendedSession`].
pub const SESSION_MAGIC: [u8; 4] = *b"DTPS";
/// SPEC SES-2: the format version [`SuspendedSession::to_bytes`] writes and
/// [`SuspendedSession::from_bytes`] reads.
pub const SESSION_FORMAT_VERSION: u16 = 1;

const CHECKSUM_LEN: usize = 32;

impl SuspendedSession {
    /// SPEC SES-2: the session as bytes (format in the module docs). The
    /// expiry is written as the time left at `now`. Deterministic: the
    /// same session at the same `now` gives the same bytes.
    pub fn to_bytes(&self, now: Instant) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(&SESSION_MAGIC);
        w.u16(SESSION_FORMAT_VERSION);
        w.uuid(self.session_id);
        self.role.persist(&mut w);
        w.bytes(self.peer.as_bytes());
        self.fsm.persist(&mut w);
        w.u16(self.key_version);
        w.flag(self.expires_at.is_some());
        if let Some(at) = self.expires_at {
            let left = at.saturating_duration_since(now).as_nanos();
            w.u64(u64::try_from(left).unwrap_or(u64::MAX));
        }
        self.agreements.persist(&mut w);
        self.sender.persist(&mut w, |frame, w| w.bytes(frame));
        self.receiver.persist(&mut w);
        let mut dags: Vec<_> = self.dags.iter().collect();
        dags.sort_unstable_by_key(|(id, _)| **id);
        w.count(dags.len());
        for (id, dag) in dags {
            w.uuid(*id);
            dag.persist(&mut w, write_held);
        }
        w.count(self.recently_ended.len());
        for id in &self.recently_ended {
            w.uuid(*id);
        }
        let sum = digest::digest(&digest::SHA256, w.as_slice());
        w.raw(sum.as_ref());
        w.into_bytes()
    }

    /// SPEC SES-3: reads a session written by [`SuspendedSession::to_bytes`]
    /// from untrusted bytes, every count and length within `config`'s
    /// ceilings (the endpoint that will resume it); it expires the time it
    /// had left after `now` (at most `config.suspend_timeout`).
    pub fn from_bytes(
        bytes: &[u8],
        config: &EndpointConfig,
        now: Instant,
    ) -> Result<SuspendedSession, PersistError> {
        Self::decode(bytes, config, now, Duration::ZERO)
    }

    /// [`SuspendedSession::from_bytes`] for bytes written `elapsed` ago
    /// (a store's wall-clock age of the record): that much less time left.
    pub fn decode(
        bytes: &[u8],
        config: &EndpointConfig,
        now: Instant,
        elapsed: Duration,
    ) -> Result<SuspendedSession, PersistError> {
        let mut r = Reader::new(bytes);
        let magic = r.array::<4>("magic")?;
        if magic != SESSION_MAGIC {
            return Err(PersistError::BadMagic { found: magic });
        }
        let version = r.u16("format version")?;
        if version != SESSION_FORMAT_VERSION {
            return Err(PersistError::UnsupportedVersion {
                found: version,
                supported: SESSION_FORMAT_VERSION,
            });
        }
        let body_len = bytes
            .len()
            .checked_sub(CHECKSUM_LEN)
            .filter(|n| *n >= r.offset())
            .ok_or(PersistError::Truncated {
                what: "checksum",
                offset: r.offset(),
                needed: CHECKSUM_LEN,
            })?;
        let mut body = Reader::new(&bytes[..body_len]);
        body.take(r.offset(), "magic and version")?;
        let session = read_session(&mut body, config, now, elapsed)?;
        body.finish()?;
        let sum = digest::digest(&digest::SHA256, &bytes[..body_len]);
        if sum.as_ref() != &bytes[body_len..] {
            return Err(PersistError::ChecksumMismatch);
        }
        AgreementManager::restore(
            session.role,
            config.agreements,
            session.agreements.clone(),
            now,
        )
        .map_err(|_| {
            PersistError::Inconsistent(
                "the agreements do not restore under this endpoint's ceilings",
            )
        })?;
        Ok(session)
    }
}

/// Everything between the version and the checksum.
fn read_session(
    r: &mut Reader<'_>,
    config: &EndpointConfig,
    now: Instant,
    elapsed: Duration,
) -> Result<SuspendedSession, PersistError> {
    let session_id = r.uuid("session id")?;
    if session_id.get_version_num() != 4 {
        return Err(PersistError::Inconsistent(
            "the Session_ID is not a UUID v4",
        ));
    }
    let role = Role::restore_persisted(r)?;
    let peer = r.bytes("peer identity", MAX_PEER_IDENTITY_LEN)?;
    let peer = PeerIdentity::new(Bytes::copy_from_slice(peer))
        .map_err(|_| PersistError::Inconsistent("the peer identity is refused"))?;
    let fsm = EngineFsm::restore_persisted(r)?;
    let key_version = r.u16("key version")?;
    let left = match r.flag("expiry present")? {
        true => Duration::from_nanos(r.u64("time left")?).min(config.suspend_timeout),
        false => config.suspend_timeout,
    };
    let expires_at = now.checked_add(left.saturating_sub(elapsed));
    let limits = config.limits;
    let max_string = usize::from(limits.max_string_len);
    let agreements = AgreementSnapshot::restore_persisted(r, &config.agreements, max_string)?;
    let max_frame = HEADER_LEN + limits.max_frame_len as usize;
    let sender = ResumeSender::restore_persisted(r, config.resume_cache, |r, sequence, len| {
        let offset = r.offset();
        let frame = Bytes::copy_from_slice(r.bytes("cached data frame", max_frame)?);
        if frame.len() != len {
            return Err(PersistError::Inconsistent(
                "a cached frame's length is not the length it was cached with",
            ));
        }
        match decode_frame(&frame, &limits) {
            Ok((f, used)) if used == len => match f.body {
                Body::Data(d) if d.sequence == sequence && d.agreement_id.is_some() => Ok(frame),
                _ => Err(PersistError::Inconsistent(
                    "a cached frame is not the data frame of its sequence",
                )),
            },
            _ => Err(PersistError::InvalidValue {
                what: "cached data frame",
                offset,
            }),
        }
    })?;
    let receiver = ResumeReceiver::restore_persisted(r, config.ack, now)?;
    let highest = receiver.highest_received();
    let max_dags = config
        .agreements
        .max_active_agreements
        .saturating_add(config.recently_ended);
    let n = r.count("DAGs", max_dags, 16 + 8 + 1 + 4 + 4 + 4)?;
    let mut dags = HashMap::with_capacity(n);
    for _ in 0..n {
        let id = r.uuid("DAG agreement id")?;
        let dag = DagManager::restore_persisted(r, config.dag, |r, _, size| {
            read_held(r, config, size, highest)
        })?;
        if dags.insert(id, dag).is_some() {
            return Err(PersistError::Inconsistent("two DAGs for one agreement"));
        }
    }
    let n = r.count("recently ended agreements", config.recently_ended, 16)?;
    let mut recently_ended = std::collections::VecDeque::with_capacity(n);
    for _ in 0..n {
        recently_ended.push_back(r.uuid("recently ended agreement id")?);
    }
    Ok(SuspendedSession {
        session_id,
        role,
        peer,
        fsm,
        agreements,
        sender,
        receiver,
        dags,
        recently_ended,
        key_version,
        expires_at,
    })
}

/// A fragment held by a DAG: sequence, relations, payload.
fn write_held(held: &Held, w: &mut Writer) {
    w.u64(held.sequence);
    w.count(held.relations.len());
    for relation in &held.relations {
        w.u8(relation.kind as u8);
        w.u64(relation.target);
    }
    w.bytes(&held.payload);
}

fn read_held(
    r: &mut Reader<'_>,
    config: &EndpointConfig,
    size: usize,
    highest_received: u64,
) -> Result<Held, PersistError> {
    let sequence = r.u64("held fragment sequence")?;
    if sequence == 0 || sequence > highest_received {
        return Err(PersistError::Inconsistent(
            "a held fragment's sequence was never received",
        ));
    }
    let max_relations = usize::from(config.limits.max_relations);
    let n = r.count("held fragment relations", max_relations, 9)?;
    let mut relations = Vec::with_capacity(n);
    for _ in 0..n {
        let offset = r.offset();
        let kind =
            RelationType::from_u8(r.u8("relation type")?).ok_or(PersistError::InvalidValue {
                what: "relation type",
                offset,
            })?;
        let target = r.u64("relation target")?;
        relations.push(Relation { kind, target });
    }
    let max_payload = config.limits.max_frame_len as usize;
    let payload = Bytes::copy_from_slice(r.bytes("held fragment payload", max_payload)?);
    if payload.len() != size {
        return Err(PersistError::Inconsistent(
            "a held fragment's payload is not the size its DAG counts",
        ));
    }
    Ok(Held {
        sequence,
        relations,
        payload,
    })
}
