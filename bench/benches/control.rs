//! The control thread's own cost per decision, without the shards, the
//! rings or the load generator: the terminal plane alone and beside the
//! realtime plane (`WithRealtime`, the built-in streams published), driven
//! through the `ControlPlane` trait as the control loop drives it (one
//! request, then the tick that publishes its events). One decision is what
//! `dtp bench`'s control workload counts: AuthRequest → AuthResult (a new
//! session granted) → SessionRelease, each of 64 Fays on its own resource,
//! their credentials verified once and then found in the signature cache.
//!
//! Two figures per case: the time per decision (criterion), and the heap
//! allocations per decision, counted on this thread by the bench's global
//! allocator over 10,000 decisions after a warm-up and printed before the
//! timing runs. The allocations are the figure to drive towards zero
//! (DESIGN.md §4: no allocation per decision on the control thread).
//!
//! Run: `cargo bench -p dtp-bench --bench control` (about 20 s).
#![allow(
    missing_docs,
    reason = "criterion_group!/criterion_main! generate undocumented items"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark setup: a refused decision must abort it"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dtp_codec::{AccessMode, AuthOutcome, AuthRequest, ControlMessage, SessionRelease};
use dtp_crypto::cred::{Credential, IssuerKeyPair};
use dtp_engine::{ControlPlane, Decision, Request};
use dtp_gateway::TerminalPlane;
use dtp_gateway::app::{GatewayDown, GatewayUp, WithRealtime};
use dtp_gateway::plane::{OffsetClock, PlaneConfig, built_in_specs};
use dtp_gateway::realtime::RealtimePlane;
use dtp_terminal::{ResourceConfig, ScriptedAccess, SeededRandom, TerminalConfig, UnixMs};
use dtp_test_kit::keys;
use dtp_transports::ConnId;

/// The system allocator, counting this thread's allocations.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is passed to the system allocator unchanged; the count
// is a const thread-local without a destructor, so it allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static HEAP: Counting = Counting;

/// Fays (each with its own resource), as in `dtp bench`'s control workload.
const FAYS: usize = 64;
/// Shards the realtime plane sends each event to.
const SHARDS: usize = 2;
/// The virtual start (Unix ms).
const T0: u64 = 1_700_000_000_000;

/// The planes, the Fays' credentials and the decisions' outputs.
struct Rig<P> {
    plane: P,
    credentials: Vec<Credential>,
    now: Instant,
    next: u64,
    out: Vec<(usize, Decision<GatewayDown>)>,
    /// Allocations made inside the planes' calls (not the rig's own, such
    /// as the requests, which a shard makes).
    counted: u64,
    /// Built-in stream events published (one per shard's copy).
    events: u64,
}

fn terminal() -> (TerminalPlane<ScriptedAccess>, IssuerKeyPair, Instant) {
    let mut c = TerminalConfig::new("bench");
    c.limits.per_terminal = 2 * FAYS + 64;
    for i in 0..FAYS {
        c.resources.push(ResourceConfig::new(format!("dec-{i}")));
    }
    let issuer = IssuerKeyPair::from_seed(&[7; 32]).unwrap();
    let origin = Instant::now();
    let (plane, _handle) = TerminalPlane::with_parts(
        PlaneConfig::new(c),
        keys::verifier(&issuer),
        ScriptedAccess::new(),
        Box::new(OffsetClock::new(origin, UnixMs(T0))),
        Box::new(SeededRandom::new(42)),
    )
    .unwrap();
    (plane, issuer, origin)
}

impl<P: ControlPlane<GatewayUp, GatewayDown>> Rig<P> {
    fn new(plane: P, issuer: &IssuerKeyPair, now: Instant) -> Self {
        let secs = T0 / 1000;
        let credentials = (0..FAYS)
            .map(|i| {
                let resource = format!("dec-{i}");
                let modes: &[AccessMode] = &[AccessMode::Write];
                keys::issue(
                    issuer,
                    &format!("fay-{i}"),
                    [1; 32],
                    &[(resource.as_str(), modes)],
                    [i as u8; 16],
                    secs - 10..secs + 3_600,
                )
            })
            .collect();
        let mut rig = Rig {
            plane,
            credentials,
            now,
            next: 0,
            out: Vec::with_capacity(64),
            counted: 0,
            events: 0,
        };
        for i in 0..FAYS {
            rig.request(Request::Up {
                conn: ConnId::from_u64(i as u64),
            });
        }
        rig
    }

    /// Hands `r` to the plane, then ticks as the control loop does after
    /// every batch; the decisions are dropped as the rings would take them.
    fn request(&mut self, r: Request<GatewayUp>) {
        self.out.clear();
        let before = allocations();
        self.plane.handle(0, r, self.now, &mut self.out);
        self.plane.tick(self.now, &mut self.out);
        self.counted += allocations() - before;
        let published = self
            .out
            .iter()
            .filter(|(_, d)| matches!(d, Decision::Service(GatewayDown::RtEvent(_))));
        self.events += published.count() as u64;
    }

    /// One decision of Fay `i`: granted, then released.
    fn decide(&mut self, i: usize) {
        self.next += 1;
        let conn = ConnId::from_u64(i as u64);
        let req = AuthRequest {
            request_id: self.next,
            fay_id: format!("fay-{i}"),
            resource_id: format!("dec-{i}"),
            access_mode: AccessMode::Write,
            credential: self.credentials[i].as_bytes().clone(),
        };
        let msg = Box::new(ControlMessage::AuthRequest(req));
        self.request(Request::Service(GatewayUp::Message { conn, msg }));
        let session_id = self
            .out
            .iter()
            .find_map(|(_, d)| match d {
                Decision::Service(GatewayDown::Send { msg, .. }) => match &**msg {
                    ControlMessage::AuthResult(r) => match r.outcome {
                        AuthOutcome::Granted { session_id } => Some(session_id),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_else(|| panic!("fay-{i}: not granted: {:?}", self.out));
        let msg = Box::new(ControlMessage::SessionRelease(SessionRelease {
            session_id,
        }));
        self.request(Request::Service(GatewayUp::Message { conn, msg }));
        // A microsecond a decision, so that time moves as it does under load.
        self.now += Duration::from_micros(1);
    }

    /// Allocations and events per decision, over `n` decisions.
    fn per_decision(&mut self, n: usize) -> (f64, f64) {
        let (allocations, events) = (self.counted, self.events);
        for k in 0..n {
            self.decide(k % FAYS);
        }
        let per = |v: u64| v as f64 / n as f64;
        (
            per(self.counted - allocations),
            per(self.events - events) / SHARDS as f64,
        )
    }
}

fn plain() -> Rig<TerminalPlane<ScriptedAccess>> {
    let (plane, issuer, now) = terminal();
    Rig::new(plane, &issuer, now)
}

fn with_streams() -> Rig<WithRealtime<TerminalPlane<ScriptedAccess>>> {
    let (plane, issuer, now) = terminal();
    let mut seed = 9u64;
    let mut random = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        seed
    };
    let realtime = RealtimePlane::new(built_in_specs("terminal"), SHARDS, &mut random).unwrap();
    Rig::new(WithRealtime::new(plane, realtime), &issuer, now)
}

/// Warms the rig up (every Fay's credential in the cache, the ledgers
/// full, so that evictions are counted), then counts.
fn count<P: ControlPlane<GatewayUp, GatewayDown>>(name: &str, rig: &mut Rig<P>) {
    rig.per_decision(20_000);
    let (allocations, events) = rig.per_decision(10_000);
    println!(
        "control/{name}: {allocations:.1} heap allocations and {events:.1} stream events per decision"
    );
}

fn decisions(c: &mut Criterion) {
    let mut a = plain();
    let mut b = with_streams();
    count("decisions", &mut a);
    count("decisions+streams", &mut b);
    let mut g = c.benchmark_group("control");
    g.throughput(Throughput::Elements(1));
    let mut k = 0;
    g.bench_function("decisions", |bench| {
        bench.iter(|| {
            a.decide(k % FAYS);
            k += 1;
        })
    });
    g.bench_function("decisions+streams", |bench| {
        bench.iter(|| {
            b.decide(k % FAYS);
            k += 1;
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(2));
    targets = decisions
}
criterion_main!(benches);
