//! SPEC SES-2, SES-3 across gateways: [`EtcdSessionStore`], suspended
//! sessions kept in etcd, so that a Fay whose connection ends on one
//! gateway resumes its session on another (DESIGN §3).
//!
//! Each session is one key, `<prefix>/sessions/<id>`, holding the record a
//! [`DirSessionStore`](super::DirSessionStore) file holds (wall-clock
//! write time and deadline, then [`SuspendedSession::to_bytes`]), on a
//! lease of its own whose TTL is the session's time left: etcd deletes it
//! when it expires, whichever gateway parked it and whether or not that
//! gateway still runs. A take is one transaction — read and delete, if the
//! key exists — so two gateways asked to resume one session at once give
//! it to exactly one.
//!
//! **Bounded**: a record is at most [`MAX_RECORD`] bytes (etcd's request
//! ceiling is 1.5 MiB; past it, [`ParkError::TooLarge`]), and the store's
//! total is etcd's own quota. **Untrusted on read**: a record that does not
//! decode under the endpoint's ceilings is dropped and logged, never a
//! panic. Park and take are etcd round trips on the thread that calls them
//! (a connection's end, a resume), as the directory store's fsyncs are;
//! never per frame. The records hold the plaintext of unacknowledged
//! fragments, as the files do: keep etcd's access to the gateways.

use std::sync::{Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use dtp_cluster::etcd::{Compare, CompareOp, CompareTarget, Etcd, Txn, TxnOp};
use dtp_cluster::{Error, HttpConfig};
use dtp_codec::SessionId;

use super::store_dir::file::{HEADER_LEN, encode, unix_ms};
use super::store_dir::{decode_record, wall_deadline};
use super::{ParkError, ParkRefused, StoreLimits, SuspendedSession, SuspendedSessions};

/// The largest record kept (bytes, before etcd's base64).
pub const MAX_RECORD: usize = 1 << 20;

/// Idle etcd connections kept for the next park or take.
const IDLE_CLIENTS: usize = 4;

/// Suspended sessions in etcd (see the module doc).
#[derive(Debug)]
pub struct EtcdSessionStore {
    endpoints: Vec<String>,
    http: HttpConfig,
    prefix: String,
    limits: StoreLimits,
    idle: Mutex<Vec<Etcd>>,
}

impl EtcdSessionStore {
    /// A store under `prefix` on the etcd cluster at `endpoints`, for
    /// sessions within `limits`. Fails when etcd cannot be reached.
    pub fn open(
        endpoints: &[String],
        prefix: &str,
        limits: StoreLimits,
        http: HttpConfig,
    ) -> Result<Self, String> {
        let store = Self {
            endpoints: endpoints.to_vec(),
            http,
            prefix: prefix.to_owned(),
            limits,
            idle: Mutex::new(Vec::new()),
        };
        let mut probe = store.client().map_err(|e| format!("cluster.etcd: {e}"))?;
        probe
            .get(store.key(SessionId::nil()).as_bytes())
            .map_err(|e| format!("cluster.etcd: {e}"))?;
        store.put_back(probe);
        Ok(store)
    }

    fn key(&self, id: SessionId) -> String {
        format!("{}/sessions/{id}", self.prefix)
    }

    fn client(&self) -> Result<Etcd, Error> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(c) => Ok(c),
            None => {
                let endpoints: Vec<&str> = self.endpoints.iter().map(String::as_str).collect();
                Etcd::new(&endpoints, self.http.clone())
            }
        }
    }

    fn put_back(&self, c: Etcd) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < IDLE_CLIENTS {
            idle.push(c);
        }
    }

    /// SPEC SES-2: keeps `session` until taken or expired; hands it back
    /// when it is too large or etcd fails.
    pub fn try_park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused> {
        let refuse = |error, session| ParkRefused {
            error,
            session: Box::new(session),
        };
        let bytes = session.to_bytes(now);
        let len = HEADER_LEN + bytes.len();
        let max = self.limits.max_session_bytes.min(MAX_RECORD);
        if len > max {
            return Err(refuse(ParkError::TooLarge { len, max }, session));
        }
        let written = unix_ms(SystemTime::now());
        let deadline = wall_deadline(&session, now, written);
        // The lease outlives the deadline by a second at most: a take in
        // between finds the deadline passed and treats it as gone.
        let ttl = deadline
            .saturating_sub(written)
            .div_ceil(1000)
            .clamp(1, i64::MAX as u64);
        let record = encode(written, deadline, &bytes);
        let key = self.key(session.session_id());
        let parked = self.client().and_then(|mut etcd| {
            let lease = etcd.lease_grant(i64::try_from(ttl).unwrap_or(i64::MAX))?;
            etcd.put(key.as_bytes(), &record, Some(lease.id))?;
            self.put_back(etcd);
            Ok(())
        });
        parked.map_err(|e| refuse(ParkError::Store(format!("etcd: {e}")), session))
    }

    /// SPEC SES-3: takes the session with this id, on whichever gateway it
    /// was parked: `Ok(None)` when unknown or expired.
    pub fn try_take(
        &self,
        session_id: SessionId,
        now: Instant,
    ) -> Result<Option<SuspendedSession>, String> {
        let key = self.key(session_id).into_bytes();
        let mut etcd = self.client().map_err(|e| format!("etcd: {e}"))?;
        let taken = etcd
            .txn(&Txn {
                compare: vec![Compare::new(
                    key.clone(),
                    CompareOp::Greater,
                    CompareTarget::Version(0),
                )],
                then: vec![TxnOp::Get { key: key.clone() }, TxnOp::Delete { key }],
                otherwise: Vec::new(),
            })
            .map_err(|e| format!("etcd: {e}"))?;
        self.put_back(etcd);
        let Some(kv) = taken.responses.iter().flat_map(|r| r.kvs()).next() else {
            return Ok(None);
        };
        let wall = unix_ms(SystemTime::now());
        decode_record(&kv.value, (session_id, &self.limits), now, wall)
            .map_err(|e| format!("a stored session that does not decode: {e}"))
    }
}

impl SuspendedSessions for EtcdSessionStore {
    fn park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused> {
        self.try_park(session, now)
    }

    fn take(&self, session_id: SessionId, now: Instant) -> Option<SuspendedSession> {
        self.try_take(session_id, now).unwrap_or_else(|e| {
            tracing::warn!("resume of session {session_id}: {e}");
            None
        })
    }

    /// etcd expires the records itself (each on its own lease).
    fn expire(&self, _now: Instant) -> usize {
        0
    }
}
