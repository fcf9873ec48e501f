//! Property tests of the handle, range, lease and request invariants
//! (SPEC MEM-4 … MEM-8): random operation sequences against a small region,
//! with a model of what must hold after every step.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(not(loom))]

use std::collections::{HashMap, HashSet};

use dtp_pool::{
    BufferHandle, BufferInfo, BufferSpec, Class, Completion, LeaseHandle, LeaseInfo, LeaseMode,
    MemoryReport, ModuleSpec, PoolError, Principal, Range, Region, RegionConfig, RequestInfo,
    RequestSpec, Status, Ticket, check_range,
};
use proptest::prelude::*;

const CHUNK: u32 = 64;
const MAX_GENERATION: u32 = 4;

#[derive(Clone, Debug)]
enum Op {
    Acquire {
        who: Option<u8>,
        cap: u32,
    },
    Write {
        who: Option<u8>,
        b: usize,
        off: u32,
        len: u8,
    },
    Commit {
        who: Option<u8>,
        b: usize,
        valid: u32,
    },
    Truncate {
        who: Option<u8>,
        b: usize,
        valid: u32,
    },
    Read {
        who: Option<u8>,
        b: usize,
        off: u32,
        len: u32,
    },
    Transfer {
        who: Option<u8>,
        b: usize,
        to: u8,
    },
    Release {
        who: Option<u8>,
        b: usize,
    },
    Lease {
        who: Option<u8>,
        b: usize,
        to: u8,
        write: bool,
    },
    LeaseRead {
        l: usize,
        who: Option<u8>,
        off: u32,
        len: u32,
    },
    LeaseWrite {
        l: usize,
        who: Option<u8>,
        off: u32,
        len: u8,
    },
    LeaseCommit {
        l: usize,
        who: Option<u8>,
        valid: u32,
    },
    EndLease {
        l: usize,
        who: Option<u8>,
    },
    Admit {
        who: Option<u8>,
        input: Option<(usize, u32, u32)>,
        output: Option<(usize, u32, u32)>,
    },
    Submit {
        t: usize,
    },
    Post {
        t: usize,
        status: u8,
        produced: u32,
    },
    Cancel {
        who: Option<u8>,
        t: usize,
    },
    Reclaim,
}

fn edge() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => Just(0u32),
        6 => 0..=16u32,
        3 => 0..=(CHUNK + 8),
        1 => Just(u32::MAX),
        1 => (u32::MAX - 70)..=u32::MAX,
    ]
}

/// `None` = the rightful principal (the buffer's owner, the lease's holder,
/// the ticket's requester); sometimes a random one, who may hold no right.
fn len() -> impl Strategy<Value = u8> {
    prop_oneof![4 => 0..=16u8, 1 => 0..=70u8]
}

fn who() -> impl Strategy<Value = Option<u8>> {
    prop_oneof![4 => Just(None), 1 => (1..=3u8).prop_map(Some)]
}

fn op() -> impl Strategy<Value = Op> {
    let idx = any::<usize>;
    prop_oneof![
        3 => (who(), prop_oneof![3 => Just(CHUNK), 1 => 0..=(CHUNK + 4)]).prop_map(|(who, cap)| Op::Acquire { who, cap }),
        3 => (who(), idx(), edge(), len()).prop_map(|(who, b, off, len)| Op::Write { who, b, off, len }),
        2 => (who(), idx(), edge()).prop_map(|(who, b, valid)| Op::Commit { who, b, valid }),
        1 => (who(), idx(), edge()).prop_map(|(who, b, valid)| Op::Truncate { who, b, valid }),
        2 => (who(), idx(), edge(), edge()).prop_map(|(who, b, off, len)| Op::Read { who, b, off, len }),
        1 => (who(), idx(), 1..=3u8).prop_map(|(who, b, to)| Op::Transfer { who, b, to }),
        3 => (who(), idx()).prop_map(|(who, b)| Op::Release { who, b }),
        2 => (who(), idx(), 1..=3u8, any::<bool>()).prop_map(|(who, b, to, write)| Op::Lease { who, b, to, write }),
        1 => (idx(), who(), edge(), edge()).prop_map(|(l, who, off, len)| Op::LeaseRead { l, who, off, len }),
        1 => (idx(), who(), edge(), len()).prop_map(|(l, who, off, len)| Op::LeaseWrite { l, who, off, len }),
        1 => (idx(), who(), edge()).prop_map(|(l, who, valid)| Op::LeaseCommit { l, who, valid }),
        2 => (idx(), who()).prop_map(|(l, who)| Op::EndLease { l, who }),
        3 => (who(), proptest::option::of((idx(), edge(), edge())), proptest::option::of((idx(), prop_oneof![5 => Just(0u32), 1 => edge()], edge())))
            .prop_map(|(who, input, output)| Op::Admit { who, input, output }),
        2 => idx().prop_map(|t| Op::Submit { t }),
        3 => (idx(), 0..4u8, edge()).prop_map(|(t, status, produced)| Op::Post { t, status, produced }),
        1 => (who(), idx()).prop_map(|(who, t)| Op::Cancel { who, t }),
        3 => Just(Op::Reclaim),
    ]
}

fn pick<T: Copy>(v: &[T], i: usize) -> Option<T> {
    (!v.is_empty()).then(|| v[i % v.len()])
}

fn p(id: u8) -> Principal {
    Principal::new(u64::from(id))
}

/// What the harness remembers of everything the region handed out.
#[derive(Default)]
struct Model {
    buffers: Vec<BufferHandle>,
    dead: HashSet<BufferHandle>,
    last_generation: HashMap<u32, u32>,
    leases: Vec<(LeaseHandle, u8)>,
    tickets: Vec<Ticket>,
    output_len: HashMap<Ticket, Option<u32>>,
    requester: HashMap<Ticket, Principal>,
    posted: HashSet<Ticket>,
    reclaimed: HashSet<Ticket>,
}

type Snapshot = (
    MemoryReport,
    Vec<Result<BufferInfo, PoolError>>,
    Vec<Result<LeaseInfo, PoolError>>,
    Vec<Result<RequestInfo, PoolError>>,
);

fn snapshot(r: &Region, m: &Model) -> Snapshot {
    let mut rep = r.report();
    // Refused posts are counted on purpose; everything else must stand still.
    rep.diagnostics = Default::default();
    (
        rep,
        m.buffers.iter().map(|&h| r.buffer_info(h)).collect(),
        m.leases.iter().map(|&(l, _)| r.lease_info(l)).collect(),
        m.tickets.iter().map(|&t| r.request_info(t)).collect(),
    )
}

fn new_region() -> (Region, dtp_pool::ModuleHandle) {
    let config = RegionConfig {
        request_slots: 3,
        completion_slots: 3,
        lease_slots: 6,
        max_generation: MAX_GENERATION,
        ..RegionConfig::new(CHUNK, 6)
    };
    let mut r = Region::new(config).unwrap();
    let m = r.register_module(ModuleSpec::new(0)).unwrap();
    (r, m)
}

/// The principal an operation runs as: the rightful one unless the op names
/// another.
fn as_owner(r: &Region, h: BufferHandle, who: Option<u8>) -> Principal {
    who.map(p)
        .unwrap_or_else(|| r.buffer_info(h).map_or(p(1), |i| i.owner))
}

/// Applies `op`; returns whether it succeeded. Checks the op-specific
/// properties on the way.
fn apply(
    r: &mut Region,
    module: dtp_pool::ModuleHandle,
    m: &mut Model,
    op: &Op,
) -> Result<bool, TestCaseError> {
    let data = [0x5Au8; 80];
    let ok = match *op {
        Op::Acquire { who, cap } => {
            let who = who.map_or(p(1), p);
            match r.acquire(who, BufferSpec::new(Class::Scratch, cap)) {
                Ok(h) => {
                    prop_assert!(h.generation() >= 1 && h.generation() <= MAX_GENERATION);
                    let last = m
                        .last_generation
                        .insert(h.slot(), h.generation())
                        .unwrap_or(0);
                    prop_assert!(
                        h.generation() > last,
                        "a slot's generation never repeats or wraps"
                    );
                    let info = r.buffer_info(h).unwrap();
                    prop_assert_eq!((info.valid, info.owner, info.capacity), (0, who, cap));
                    m.buffers.push(h);
                    true
                }
                Err(_) => false,
            }
        }
        Op::Write { who, b, off, len } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            r.write(who, h, off, &data[..usize::from(len)]).is_ok()
        }
        Op::Commit { who, b, valid } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            let before = r.buffer_info(h);
            let ok = r.commit(who, h, valid).is_ok();
            if ok {
                let info = before.unwrap();
                prop_assert!(
                    valid >= info.valid && valid <= info.written,
                    "no unverified tail"
                );
                prop_assert_eq!(r.buffer_info(h).unwrap().valid, valid);
            }
            ok
        }
        Op::Truncate { who, b, valid } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            r.truncate(who, h, valid).is_ok()
        }
        Op::Read { who, b, off, len } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            let before = r.buffer_info(h);
            match r.read(who, Range::new(h, off, len)) {
                Ok(bytes) => {
                    let info = before.unwrap();
                    prop_assert_eq!(bytes.len(), len as usize);
                    prop_assert!(u64::from(off) + u64::from(len) <= u64::from(info.valid));
                    prop_assert!(!info.write_leased && info.owner == who);
                    true
                }
                Err(_) => false,
            }
        }
        Op::Transfer { who, b, to } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            r.transfer(who, h, p(to)).is_ok()
        }
        Op::Release { who, b } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            let before = r.buffer_info(h);
            let ok = r.release(who, h).is_ok();
            if ok {
                let info = before.unwrap();
                prop_assert!(info.read_leases == 0 && !info.write_leased && info.in_flight == 0);
                m.dead.insert(h);
            } else if let Ok(info) = before
                && info.owner == who
                && (info.read_leases > 0 || info.write_leased)
            {
                prop_assert_eq!(r.buffer_info(h).unwrap().owner, who, "ownership kept");
            }
            ok
        }
        Op::Lease { who, b, to, write } => {
            let Some(h) = pick(&m.buffers, b) else {
                return Ok(false);
            };
            let who = as_owner(r, h, who);
            let before = r.buffer_info(h);
            let mode = if write {
                LeaseMode::Write
            } else {
                LeaseMode::Read
            };
            match r.grant_lease(who, h, p(to), mode) {
                Ok(l) => {
                    let info = before.unwrap();
                    prop_assert!(!info.write_leased);
                    if write {
                        prop_assert_eq!(info.read_leases, 0);
                    }
                    m.leases.push((l, to));
                    true
                }
                Err(_) => false,
            }
        }
        Op::LeaseRead { l, who, off, len } => {
            let Some((l, holder)) = pick(&m.leases, l) else {
                return Ok(false);
            };
            match r.read_leased(l, who.map_or(p(holder), p), off, len) {
                Ok(bytes) => {
                    prop_assert_eq!(bytes.len(), len as usize);
                    true
                }
                Err(_) => false,
            }
        }
        Op::LeaseWrite { l, who, off, len } => {
            let Some((l, holder)) = pick(&m.leases, l) else {
                return Ok(false);
            };
            let ok = r
                .write_leased(l, who.map_or(p(holder), p), off, &data[..usize::from(len)])
                .is_ok();
            if ok {
                prop_assert_eq!(r.lease_info(l).unwrap().mode, LeaseMode::Write);
            }
            ok
        }
        Op::LeaseCommit { l, who, valid } => {
            let Some((l, holder)) = pick(&m.leases, l) else {
                return Ok(false);
            };
            r.commit_leased(l, who.map_or(p(holder), p), valid).is_ok()
        }
        Op::EndLease { l, who } => {
            let Some((l, holder)) = pick(&m.leases, l) else {
                return Ok(false);
            };
            r.end_lease(l, who.map_or(p(holder), p)).is_ok()
        }
        Op::Admit { who, input, output } => {
            let mut spec = RequestSpec::new(module);
            let mut rightful = p(1);
            if let Some((b, off, len)) = input {
                let Some(h) = pick(&m.buffers, b) else {
                    return Ok(false);
                };
                rightful = as_owner(r, h, None);
                spec = spec.input(Range::new(h, off, len));
            }
            if let Some((b, off, len)) = output {
                let Some(h) = pick(&m.buffers, b) else {
                    return Ok(false);
                };
                rightful = as_owner(r, h, None);
                spec = spec.output(Range::new(h, off, len));
            }
            let who = who.map_or(rightful, p);
            match r.admit(who, spec) {
                Ok(t) => {
                    prop_assert!(!m.tickets.contains(&t), "tickets are never reissued");
                    if let Some(o) = spec.output {
                        let info = r.buffer_info(o.handle).unwrap();
                        prop_assert!(info.write_leased && info.valid == 0 && info.owner == who);
                    }
                    if let Some(i) = spec.input {
                        let info = r.buffer_info(i.handle).unwrap();
                        prop_assert!(info.read_leases > 0 && info.owner == who);
                    }
                    m.output_len.insert(t, spec.output.map(|o| o.length));
                    m.requester.insert(t, who);
                    m.tickets.push(t);
                    true
                }
                Err(_) => false,
            }
        }
        Op::Submit { t } => {
            let Some(t) = pick(&m.tickets, t) else {
                return Ok(false);
            };
            r.submit(t).is_ok()
        }
        Op::Post {
            t,
            status,
            produced,
        } => {
            let Some(t) = pick(&m.tickets, t) else {
                return Ok(false);
            };
            let status = match status {
                0 => Status::Success,
                1 => Status::Failed { code: 1 },
                2 => Status::Cancelled,
                _ => Status::AuthenticationFailed,
            };
            let ok = r
                .poster()
                .post(Completion {
                    ticket: t,
                    status,
                    produced,
                })
                .is_ok();
            if ok {
                prop_assert!(m.posted.insert(t), "at most one accepted post per ticket");
            }
            ok
        }
        Op::Cancel { who, t } => {
            let Some(t) = pick(&m.tickets, t) else {
                return Ok(false);
            };
            match r.cancel(who.map_or(m.requester[&t], p), t) {
                Ok(dtp_pool::CancelOutcome::CancelledBeforeSubmit) => {
                    prop_assert!(m.posted.insert(t));
                    true
                }
                Ok(_) => true,
                Err(_) => false,
            }
        }
        Op::Reclaim => match r.reclaim() {
            Some(done) => {
                prop_assert!(m.posted.contains(&done.ticket));
                prop_assert!(m.reclaimed.insert(done.ticket), "reclaimed twice");
                let limit = m.output_len[&done.ticket];
                prop_assert!(done.published <= limit.unwrap_or(0));
                if let Some(out) = done.output {
                    prop_assert_eq!(r.buffer_info(out).unwrap().valid, done.published);
                }
                true
            }
            None => {
                prop_assert!(
                    m.posted.len() == m.reclaimed.len(),
                    "a posted completion got lost"
                );
                false
            }
        },
    };
    Ok(ok)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// SPEC MEM-5: the check accepts exactly the ranges that fit, computed in
    /// wider arithmetic, and exactly the aligned offsets.
    #[test]
    fn range_check_matches_wide_arithmetic(offset in edge(), length in edge(), bound in edge(), align_pow in 0..13u32) {
        let align = 1u32 << align_pow;
        let fits = u64::from(offset) + u64::from(length) <= u64::from(bound);
        let aligned = offset % align == 0;
        prop_assert_eq!(check_range(offset, length, bound, align).is_ok(), fits && aligned);
    }

    /// SPEC MEM-4 … MEM-8: after every operation of a random sequence the
    /// bookkeeping is consistent; a refused operation changes nothing; a
    /// released handle stays dead; and at the end every slot and budget comes
    /// back.
    #[test]
    fn random_operations_keep_handle_lease_and_request_invariants(ops in proptest::collection::vec(op(), 1..80)) {
        let (mut r, module) = new_region();
        let baseline = r.report();
        let mut m = Model::default();
        for op in &ops {
            let before = snapshot(&r, &m);
            let ok = apply(&mut r, module, &mut m, op)?;
            if !ok && !matches!(op, Op::Reclaim) {
                prop_assert_eq!(&snapshot(&r, &m), &before, "refused {:?} changed state", op);
            }
            prop_assert_eq!(r.audit(), Ok(()), "after {:?}", op);
            for &h in &m.dead {
                let stale = matches!(r.buffer_info(h), Err(PoolError::StaleHandle { .. }));
                prop_assert!(stale, "a released handle came back");
            }
            let rep = r.report();
            prop_assert!(rep.class_bytes.total() <= u64::from(CHUNK) * 6);
            prop_assert!(rep.held <= rep.chunks_used && rep.pending_bytes <= rep.chunks_used);
        }

        // Drain: complete what is in flight, end leases, release everything.
        for &t in &m.tickets {
            if r.request_info(t).is_ok() {
                let _ = r.post(Completion::success(t, 0));
            }
        }
        while r.reclaim().is_some() {}
        for &(l, holder) in &m.leases {
            let _ = r.end_lease(l, p(holder));
        }
        for &h in &m.buffers {
            if let Ok(info) = r.buffer_info(h) {
                r.release(info.owner, h).unwrap();
            }
        }
        let end = r.report();
        prop_assert_eq!((end.chunks_used, end.held, end.pending_bytes, end.live_data), (0, 0, 0, 0));
        prop_assert_eq!(end.pending_requests, 0);
        prop_assert_eq!(end.chunks_free, baseline.chunks_free);
        prop_assert_eq!(r.audit(), Ok(()));
    }
}
