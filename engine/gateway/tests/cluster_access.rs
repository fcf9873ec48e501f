//! SPEC TS-9, HO-4 across gateways, on a real etcd: the terminal's OS
//! access control wrapped by [`ClusterAccess`] on two nodes. A session one
//! node granted excludes a conflicting one on the other (E_RESOURCE_BUSY),
//! a failed OS grant leaves nothing behind, a revoke frees the resource for
//! the other node, and a node that leaves frees its occupants at once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "../../cluster/tests/servers/mod.rs"]
mod servers;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dtp_cluster::HttpConfig;
use dtp_codec::{AccessMode, SessionId};
use dtp_gateway::plane::{ClusterNode, ClusterSettings};
use dtp_terminal::{AccessGrant, OsAccess, OsError, ScriptedAccess};
use servers::EtcdServer;

fn node(server: &EtcdServer, id: &str) -> ClusterNode {
    node_with_ttl(server, id, Duration::from_secs(5))
}

fn node_with_ttl(server: &EtcdServer, id: &str, lease_ttl: Duration) -> ClusterNode {
    ClusterNode::start(ClusterSettings {
        node_id: id.into(),
        etcd: vec![format!("http://{}", server.addr)],
        prefix: "dtp/test".into(),
        lease_ttl,
        http: HttpConfig {
            connect_timeout: Duration::from_millis(300),
            io_timeout: Duration::from_millis(500),
            ..HttpConfig::default()
        },
    })
    .unwrap()
}

fn grant(resource: &str, mode: AccessMode, holder: &str) -> AccessGrant {
    AccessGrant {
        session_id: SessionId::new_v4(),
        resource_id: Arc::from(resource),
        access_mode: mode,
        holder: Arc::from(holder),
    }
}

#[test]
fn a_session_on_one_node_excludes_a_conflicting_one_on_another() {
    let server = EtcdServer::start();
    let (a, b) = (node(&server, "node-a"), node(&server, "node-b"));
    let (mut on_a, mut on_b) = (
        a.access(ScriptedAccess::new()),
        b.access(ScriptedAccess::new()),
    );
    assert!(on_a.deferred(), "etcd round trips run on the OS workers");

    let held = grant("term", AccessMode::Write, "fay-a");
    on_a.grant(&held).unwrap();
    let wanted = grant("term", AccessMode::Write, "fay-b");
    assert!(matches!(on_b.grant(&wanted), Err(OsError::Busy(m)) if m.contains("node-a")));
    let read = grant("term", AccessMode::Read, "fay-c");
    assert!(matches!(on_b.grant(&read), Err(OsError::Busy(_))));
    // Another resource is free; the refused grants never reached the OS.
    on_b.grant(&grant("other", AccessMode::Write, "fay-b"))
        .unwrap();

    // HO-4 across nodes: the source's revoke on A, then the target's grant
    // on B.
    let first = on_a.fencing().expect("a grant's fencing token");
    on_a.revoke(&held).unwrap();
    on_b.grant(&wanted).unwrap();
    assert!(on_b.fencing().unwrap() > first, "tokens rise across nodes");
    assert!(matches!(on_a.grant(&held), Err(OsError::Busy(m)) if m.contains("node-b")));
}

#[test]
fn a_failed_os_grant_leaves_nothing_behind() {
    let server = EtcdServer::start();
    let (a, b) = (node(&server, "node-a"), node(&server, "node-b"));
    let mut failing = ScriptedAccess::new();
    failing.fail_next_grant();
    let mut on_a = a.access(failing);
    let first = grant("term", AccessMode::Write, "fay-a");
    assert!(matches!(on_a.grant(&first), Err(OsError::Failed(_))));
    b.access(ScriptedAccess::new())
        .grant(&grant("term", AccessMode::Write, "fay-b"))
        .unwrap();
}

#[test]
fn a_node_that_leaves_frees_its_occupants_at_once() {
    let server = EtcdServer::start();
    let b = node(&server, "node-b");
    {
        let a = node(&server, "node-a");
        assert!(a.lease().is_some());
        a.access(ScriptedAccess::new())
            .grant(&grant("term", AccessMode::Write, "fay-a"))
            .unwrap();
        let mut on_b = b.access(ScriptedAccess::new());
        assert!(
            on_b.grant(&grant("term", AccessMode::Write, "fay-b"))
                .is_err()
        );
    }
    // Node A stopped: its lease was revoked, its session key deleted.
    b.access(ScriptedAccess::new())
        .grant(&grant("term", AccessMode::Write, "fay-b"))
        .unwrap();
    assert!(!b.lost_a_lease());
}

#[test]
fn an_unreachable_etcd_at_start_is_a_one_line_error() {
    let port = servers::free_port();
    let err = ClusterNode::start(ClusterSettings {
        node_id: "n".into(),
        etcd: vec![format!("http://127.0.0.1:{port}")],
        prefix: "dtp/test".into(),
        lease_ttl: Duration::from_secs(5),
        http: HttpConfig {
            connect_timeout: Duration::from_millis(300),
            io_timeout: Duration::from_millis(300),
            ..HttpConfig::default()
        },
    })
    .unwrap_err();
    assert!(
        err.starts_with("cluster.etcd: ") && !err.contains('\n'),
        "{err}"
    );
}

/// A node cut off from etcd gives its grants up by itself, within two
/// thirds of its lease (before etcd could free its resources for another
/// gateway): it may hold nothing, its plane is woken to end its sessions,
/// and its grants fail; once etcd is back, it takes a new lease.
#[test]
fn a_node_cut_off_from_etcd_fences_itself_before_its_lease_can_expire() {
    let mut server = EtcdServer::start();
    let ttl = Duration::from_secs(3);
    let a = node_with_ttl(&server, "node-a", ttl);
    let mut on_a = a.access(ScriptedAccess::new());
    let woken = Arc::new(AtomicUsize::new(0));
    let w = woken.clone();
    on_a.attach_wake(Arc::new(move || {
        w.fetch_add(1, Ordering::Relaxed);
    }));
    on_a.grant(&grant("term", AccessMode::Write, "fay-a"))
        .unwrap();
    assert!(on_a.may_hold());
    let cut = Instant::now();
    server.kill();
    while on_a.may_hold() {
        assert!(cut.elapsed() < ttl, "not fenced within the lease");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(woken.load(Ordering::Relaxed) >= 1, "the plane was woken");
    assert!(a.lost_a_lease());
    assert!(matches!(
        on_a.grant(&grant("other", AccessMode::Write, "fay-a")),
        Err(OsError::Failed(_))
    ));
    server.restart();
    let back = Instant::now();
    while !on_a.may_hold() {
        assert!(back.elapsed() < Duration::from_secs(20), "no new lease");
        std::thread::sleep(Duration::from_millis(20));
    }
    on_a.grant(&grant("other", AccessMode::Write, "fay-a"))
        .unwrap();
}

#[test]
fn a_handover_on_one_node_keeps_the_resource_from_the_others_between_t2_and_t4() {
    let server = EtcdServer::start();
    let (a, b) = (node(&server, "node-a"), node(&server, "node-b"));
    let (mut on_a, mut on_b) = (
        a.access(ScriptedAccess::new()),
        b.access(ScriptedAccess::new()),
    );
    let source = grant("term", AccessMode::Write, "fay-a");
    on_a.grant(&source).unwrap();
    let first = on_a.fencing().unwrap();
    // T1 on A: the source's access is gone, the resource kept for A.
    on_a.release(&source, Some("fay-t")).unwrap();
    let intruder = grant("term", AccessMode::Write, "fay-b");
    assert!(matches!(on_b.grant(&intruder), Err(OsError::Busy(m)) if m.contains("node-a")));
    // T4 on A: the target takes the reservation over.
    let target = grant("term", AccessMode::Write, "fay-t");
    on_a.grant(&target).unwrap();
    assert!(on_a.fencing().unwrap() > first);
    assert!(matches!(on_b.grant(&intruder), Err(OsError::Busy(_))));
    // Once the target is gone, B gets in at once: nothing was left behind.
    on_a.revoke(&target).unwrap();
    on_b.grant(&intruder).unwrap();
}
