//! SPEC TS-9, HO-4 across gateways: terminal occupancy shared through etcd
//! (DESIGN §3, "State behind seams, for scale-out").
//!
//! [`ClusterAccess`] wraps the terminal's OS access control: every grant
//! first enters the session into the cluster's occupancy table
//! ([`dtp_cluster::Occupancy`]: one key per session on this node's lease,
//! admissions serialised by a compare-and-swap on the resource's guard
//! key), then runs the OS grant; every revoke runs the OS revoke, then
//! leaves the table. A session another gateway's occupant excludes is
//! refused with [`OsError::Busy`] (E_RESOURCE_BUSY), so a resource never has
//! two exclusive controllers on any node; between a handover's T1 revoke on
//! one node and its T4 grant on another, every node sees none. The
//! admitting transaction's revision is the grant's fencing token, logged
//! with the session and resource.
//!
//! It is a deferred access control: it runs on the OS workers (each
//! worker's copy has its own etcd connection), never on the control
//! thread. [`ClusterNode`] keeps this node's lease alive from its own
//! thread; while it has none (etcd unreachable past the lease's life, or
//! the lease expired) every grant fails closed — nothing is granted on a
//! node whose occupants the others may no longer see.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dtp_cluster::etcd::Etcd;
use dtp_cluster::{Error, HttpConfig, Occupancy, Occupant};
use dtp_terminal::{AccessGrant, OsAccess, OsError};

/// Where and how this node joins the cluster (`[cluster]`).
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// This node's id (in the occupancy table and the logs).
    pub node_id: String,
    /// etcd endpoints (`http://HOST:PORT`).
    pub etcd: Vec<String>,
    /// The deployment's key prefix (every node of it uses the same).
    pub prefix: String,
    /// This node's lease's time to live: a node that dies loses its
    /// occupants after it.
    pub lease_ttl: Duration,
    /// Connect and I/O timeouts of each etcd request.
    pub http: HttpConfig,
}

/// What the lease keeper and the workers share.
pub(super) struct Shared {
    pub(super) settings: ClusterSettings,
    /// The live lease's id; 0 while there is none.
    pub(super) lease: AtomicI64,
    stop: Mutex<bool>,
    wake: Condvar,
    /// Set once a lease was lost (its occupants freed by etcd).
    lost: AtomicBool,
    /// Wakes the plane (set by [`OsAccess::attach_wake`]).
    plane: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("settings", &self.settings)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Gives the lease up locally: no grant until a new one, and the plane
    /// is woken to end every session.
    fn fence(&self) {
        self.lost.store(true, Ordering::Release);
        self.lease.store(0, Ordering::Release);
        let wake = self.plane.lock().ok().and_then(|w| w.clone());
        if let Some(wake) = wake {
            wake();
        }
    }

    pub(super) fn client(&self) -> Result<Etcd, Error> {
        let endpoints: Vec<&str> = self.settings.etcd.iter().map(String::as_str).collect();
        Etcd::new(&endpoints, self.settings.http.clone())
    }
}

/// This node's membership: its lease, kept alive by a thread of its own
/// (a keepalive every third of the TTL); dropping it stops the thread and
/// revokes the lease, freeing this node's occupants at once.
#[derive(Debug)]
pub struct ClusterNode {
    pub(super) shared: Arc<Shared>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

impl ClusterNode {
    /// Joins: takes a lease (an unreachable etcd is an error: a node starts
    /// only when it can take part) and starts its keeper.
    pub fn start(settings: ClusterSettings) -> Result<Self, String> {
        let ttl = i64::try_from(settings.lease_ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let shared = Arc::new(Shared {
            settings,
            lease: AtomicI64::new(0),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            lost: AtomicBool::new(false),
            plane: Mutex::new(None),
        });
        let mut etcd = shared.client().map_err(|e| format!("cluster.etcd: {e}"))?;
        let lease = etcd.lease_grant(ttl).map_err(|e| match e {
            Error::AuthRefused { .. } => format!("cluster.etcd: {e}"),
            e => format!("cluster.etcd: no lease: {e}"),
        })?;
        shared.lease.store(lease.id, Ordering::Release);
        let s = shared.clone();
        let keeper = std::thread::Builder::new()
            .name("dtp-cluster-lease".into())
            .spawn(move || keep(&s, etcd, ttl))
            .map_err(|e| format!("cluster lease keeper: {e}"))?;
        Ok(Self {
            shared,
            keeper: Some(keeper),
        })
    }

    /// The access control `inner`, wrapped to take part in the cluster's
    /// occupancy table.
    pub fn access<A: OsAccess>(&self, inner: A) -> ClusterAccess<A> {
        ClusterAccess {
            inner,
            shared: self.shared.clone(),
            etcd: None,
            fencing: None,
        }
    }

    /// The live lease, if any.
    pub fn lease(&self) -> Option<i64> {
        Some(self.shared.lease.load(Ordering::Acquire)).filter(|&l| l != 0)
    }

    /// Whether a lease of this node was ever lost.
    pub fn lost_a_lease(&self) -> bool {
        self.shared.lost.load(Ordering::Acquire)
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        if let Ok(mut stop) = self.shared.stop.lock() {
            *stop = true;
        }
        self.shared.wake.notify_all();
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
    }
}

/// The keeper: refreshes the lease every third of its TTL (retrying every
/// sixth after a failure). With no successful refresh for two thirds of
/// the TTL — before etcd can have expired the lease, as etcd counts from a
/// refresh it answered — the node gives up its lease itself: grants fail
/// closed and the plane is woken to end every session (self-fencing), so
/// that when another gateway takes a resource, this one holds it no more.
/// A lease etcd no longer knows is treated the same, and replaced. On
/// stop, revokes it.
fn keep(shared: &Shared, mut etcd: Etcd, ttl: i64) {
    let ttl_time = Duration::from_secs(u64::try_from(ttl).unwrap_or(1).max(1));
    let (period, fence_after) = (ttl_time / 3, ttl_time * 2 / 3);
    let mut last_ok = Instant::now();
    let mut next = last_ok + period;
    loop {
        {
            let Ok(stop) = shared.stop.lock() else { return };
            let Ok((stop, _)) = shared.wake.wait_timeout_while(stop, period / 2, |s| !*s) else {
                return;
            };
            if *stop {
                break;
            }
        }
        let lease = shared.lease.load(Ordering::Acquire);
        if Instant::now() >= next {
            let refreshed = if lease == 0 {
                etcd.lease_grant(ttl).map(|l| l.id)
            } else {
                etcd.lease_keepalive_once(lease).map(|_| lease)
            };
            match refreshed {
                Ok(id) => {
                    last_ok = Instant::now();
                    next = last_ok + period;
                    shared.lease.store(id, Ordering::Release);
                    continue;
                }
                Err(Error::LeaseNotFound(_)) => {
                    tracing::error!(node = %shared.settings.node_id, "the cluster lease expired");
                    shared.fence();
                    continue;
                }
                Err(_) => next = Instant::now() + period / 2,
            }
        }
        if lease != 0 && last_ok.elapsed() >= fence_after {
            tracing::error!(
                node = %shared.settings.node_id,
                "etcd unreachable for two thirds of the lease: this gateway gives its grants up"
            );
            shared.fence();
        }
    }
    let lease = shared.lease.swap(0, Ordering::AcqRel);
    if lease != 0 {
        let _ = etcd.lease_revoke(lease);
    }
}

/// An [`OsAccess`] that takes part in the cluster's occupancy table (see
/// the module doc). Each clone (one per OS worker) opens its own etcd
/// connection on first use.
#[derive(Debug)]
pub struct ClusterAccess<A> {
    inner: A,
    shared: Arc<Shared>,
    etcd: Option<Etcd>,
    /// The last successful grant's fencing token.
    fencing: Option<u64>,
}

impl<A: Clone> Clone for ClusterAccess<A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
            etcd: None,
            fencing: None,
        }
    }
}

impl<A> ClusterAccess<A> {
    fn etcd(&mut self) -> Result<&mut Etcd, OsError> {
        if self.etcd.is_none() {
            let etcd = self
                .shared
                .client()
                .map_err(|e| OsError::Failed(format!("etcd: {e}")))?;
            self.etcd = Some(etcd);
        }
        self.etcd
            .as_mut()
            .ok_or_else(|| OsError::Failed("etcd: no client".into()))
    }
}

impl<A> ClusterAccess<A> {
    /// Takes a revoked session out of the table — gone, or turned into a
    /// reservation — trying again while the outcome
    /// is unknown. If it stays unknown the node fences itself: the entry
    /// may be gone while the terminal, told the revoke failed, restores the
    /// session (HO-5), and another gateway could then admit a second
    /// controller.
    fn out_of_table(
        &mut self,
        grant: &AccessGrant,
        reservation: Option<Reservation<'_>>,
    ) -> Result<(), OsError> {
        let session = grant.session_id.to_string();
        let shared = self.shared.clone();
        let (prefix, node) = (&shared.settings.prefix, &shared.settings.node_id);
        let mut unknown = false;
        let mut last = None;
        for attempt in 0..LEAVE_ATTEMPTS {
            if attempt > 0 {
                // A fresh connection: the last one may be the slow part.
                self.etcd = None;
                std::thread::sleep(LEAVE_RETRY_AFTER);
            }
            let done = self.etcd().map_err(|e| e.to_string()).and_then(|etcd| {
                let mut table = Occupancy::new(etcd, prefix);
                let r = match &reservation {
                    Some(r) => table.reserve(
                        &grant.resource_id,
                        &session,
                        (node, r.to),
                        r.until,
                        Some(r.lease),
                    ),
                    None => table.leave(&grant.resource_id, &session),
                };
                r.map_err(|e| {
                    unknown |= matches!(e, Error::OutcomeUnknown { .. } | Error::Timeout { .. });
                    e.to_string()
                })
            });
            match done {
                Ok(revision) => {
                    let reserved = reservation.is_some();
                    tracing::info!(session = %session, resource = %grant.resource_id, fencing = revision, reserved, "cluster revoke");
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_default();
        if unknown {
            tracing::error!(session = %session, resource = %grant.resource_id, error = %e, "a cluster revoke's outcome stays unknown: this gateway gives its grants up");
            shared.fence();
        }
        // The OS side is revoked; the entry stays until a later revoke or
        // the lease's end: reconcile (TS-4).
        Err(OsError::Indeterminate(format!("etcd: {e}")))
    }
}

/// A handover source's entry kept as a reservation (see
/// [`Occupancy::reserve`]).
struct Reservation<'a> {
    lease: i64,
    /// Unix ms.
    until: u64,
    /// The target holder.
    to: Option<&'a str>,
}

/// Now, Unix ms (reservations' times; the cluster's clocks are assumed
/// comparable, as its audit check assumes).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Tries of a revoke's leave: it is idempotent, so one whose outcome is
/// unknown (etcd slow, or cut off after the request was sent) is tried
/// again until it is known to have happened.
const LEAVE_ATTEMPTS: usize = 3;
/// Pause between two tries of a leave.
const LEAVE_RETRY_AFTER: Duration = Duration::from_millis(20);

/// An etcd failure as the terminal's OS error: a write that may have been
/// applied is indeterminate (TS-4), anything else changed nothing.
fn os_error(e: Error) -> OsError {
    match e {
        Error::OutcomeUnknown { .. } | Error::Timeout { .. } => {
            OsError::Indeterminate(format!("etcd: {e}"))
        }
        e => OsError::Failed(format!("etcd: {e}")),
    }
}

impl<A: OsAccess> OsAccess for ClusterAccess<A> {
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.fencing = None;
        let lease = self.shared.lease.load(Ordering::Acquire);
        if lease == 0 {
            return Err(OsError::Failed(
                "this gateway holds no cluster lease (etcd unreachable)".into(),
            ));
        }
        let who = Occupant {
            node: self.shared.settings.node_id.clone(),
            holder: grant.holder.to_string(),
            exclusive: dtp_terminal::occupancy::is_exclusive(grant.access_mode),
            reserved_until: None,
            reserved_for: None,
        };
        let session = grant.session_id.to_string();
        let shared = self.shared.clone();
        let prefix = &shared.settings.prefix;
        let etcd = self.etcd()?;
        let entered = Occupancy::new(etcd, prefix)
            .enter(&grant.resource_id, &session, &who, Some(lease), unix_ms())
            .map_err(os_error)?;
        let entered = entered.map_err(|busy| {
            let nodes: Vec<&str> = busy
                .occupants
                .iter()
                .map(|(_, o)| o.node.as_str())
                .collect();
            OsError::Busy(format!("held on {}", nodes.join(", ")))
        })?;
        tracing::info!(
            session = %session,
            resource = %grant.resource_id,
            fencing = entered.revision,
            "cluster grant"
        );
        if let Err(e) = self.inner.grant(grant) {
            if let Ok(etcd) = self.etcd() {
                let _ = Occupancy::new(etcd, prefix).leave(&grant.resource_id, &session);
            }
            return Err(e);
        }
        self.fencing = u64::try_from(entered.revision).ok();
        Ok(())
    }

    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.inner.revoke(grant)?;
        self.out_of_table(grant, None)
    }

    /// A handover source's revoke: its entry becomes a reservation for
    /// this node and the target `to` for one lease's life, which the
    /// target's grant takes over, here or on another gateway (see
    /// [`Occupancy::reserve`]); without a lease, a plain leave.
    fn release(&mut self, grant: &AccessGrant, to: Option<&str>) -> Result<(), OsError> {
        self.inner.release(grant, to)?;
        let lease = self.shared.lease.load(Ordering::Acquire);
        let until = unix_ms().saturating_add(
            u64::try_from(self.shared.settings.lease_ttl.as_millis()).unwrap_or(u64::MAX),
        );
        self.out_of_table(
            grant,
            (lease != 0).then_some(Reservation { lease, until, to }),
        )
    }

    fn deferred(&self) -> bool {
        true
    }

    fn fencing(&self) -> Option<u64> {
        self.fencing
    }

    /// Every gateway of the cluster admits against the same table.
    fn shared(&self) -> bool {
        true
    }

    fn may_hold(&self) -> bool {
        self.shared.lease.load(Ordering::Acquire) != 0
    }

    fn attach_wake(&mut self, wake: Arc<dyn Fn() + Send + Sync>) {
        if let Ok(mut slot) = self.shared.plane.lock() {
            *slot = Some(wake);
        }
    }
}
