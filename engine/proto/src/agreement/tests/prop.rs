//! Property test of the Agreement Manager over random exchanges.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use dtp_codec::{Body, Terms};
use proptest::prelude::*;

use super::pair;
use crate::agreement::*;

#[derive(Clone, Debug)]
enum Op {
    Request(bool),
    Adjust(bool, usize),
    Terminate(bool, usize),
    Decide(bool, u8),
    Deliver(bool),
    Advance(u64),
    Lose,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<bool>().prop_map(Op::Request),
        (any::<bool>(), 0usize..4).prop_map(|(m, i)| Op::Adjust(m, i)),
        (any::<bool>(), 0usize..4).prop_map(|(m, i)| Op::Terminate(m, i)),
        (any::<bool>(), any::<u8>()).prop_map(|(m, d)| Op::Decide(m, d)),
        any::<bool>().prop_map(Op::Deliver),
        (0u64..6).prop_map(Op::Advance),
        Just(Op::Lose),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// SPEC AGR-2, AGR-4: on random exchanges, agreements stay within their
    /// ceiling, queues stay bounded, both sides agree on the agreement set
    /// once quiet, and every request is answered or times out.
    #[test]
    fn agreement_random_exchanges_keep_invariants(ops in prop::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}

/// A break: the connection goes, the side is restored from its snapshot
/// (the real endpoint does this after a close, then resumes).
fn restore_after_break(
    side: &mut AgreementManager,
    config: AgreementConfig,
    now: Instant,
    open: &mut HashMap<u64, ()>,
) {
    side.on_connection_lost();
    while let Some(e) = side.poll_event() {
        if let AgreementEvent::Accepted { request_id, .. }
        | AgreementEvent::Rejected { request_id, .. }
        | AgreementEvent::CounterProposed { request_id, .. }
        | AgreementEvent::RequestFailed { request_id, .. } = e
        {
            open.remove(&request_id);
        }
    }
    let role = side.role();
    *side = AgreementManager::restore(role, config, side.snapshot(), now).unwrap();
}

/// Moves the manager's queued frames onto the wire.
fn flush(side: &mut AgreementManager, wire: &mut VecDeque<Body>) {
    wire.extend(std::iter::from_fn(|| side.poll_transmit()));
}

/// One frame from the wire into `to`.
fn handle(to: &mut AgreementManager, body: Body, now: Instant) -> Result<(), AgreementError> {
    match body {
        Body::Request(r) => to.handle_request(r, now),
        Body::Response(r) => to.handle_response(r, now),
        _ => Ok(()),
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let config = AgreementConfig {
            max_active_agreements: 3,
            max_outstanding_requests: 3,
            max_pending_incoming: 2,
            max_queued_transmits: 8,
            max_queued_events: 8,
            request_timeout: Duration::from_secs(4),
            ..AgreementConfig::default()
        };
        let t0 = Instant::now();
        let mut now = t0;
        let (mut m, mut s) = pair(config);
        // Request ids of each side with no final outcome yet.
        let mut open: [HashMap<u64, ()>; 2] = [HashMap::new(), HashMap::new()];
        let mut decisions: [Vec<u64>; 2] = [vec![], vec![]];
        let mut rnd_n = 0u8;
        let mut broken = false;
        // Frames on the wire, Master → Slave and Slave → Master.
        let mut wire: [VecDeque<Body>; 2] = [VecDeque::new(), VecDeque::new()];
        for op in ops {
            match op {
                Op::Request(master) => {
                    let side = if master { &mut m } else { &mut s };
                    if let Ok(id) = side.request(Terms::new(), now) {
                        open[usize::from(!master)].insert(id, ());
                    }
                }
                Op::Adjust(master, i) | Op::Terminate(master, i) => {
                    let side = if master { &mut m } else { &mut s };
                    let ids: Vec<_> = side.agreements().map(|a| a.id).collect();
                    if let Some(id) = ids.get(i % ids.len().max(1)) {
                        let r = if matches!(op, Op::Adjust(..)) {
                            side.request_adjustment(*id, Terms::new(), now)
                        } else {
                            side.terminate(*id, "", now)
                        };
                        if let (Ok(r), true) = (r, matches!(op, Op::Adjust(..))) {
                            open[usize::from(!master)].insert(r, ());
                        }
                    }
                }
                Op::Decide(master, d) => {
                    let k = usize::from(!master);
                    let side = if master { &mut m } else { &mut s };
                    if let Some(r) = decisions[k].pop() {
                        rnd_n = rnd_n.wrapping_add(1);
                        let mut bytes = [rnd_n; 16];
                        bytes[0] = d;
                        let _ = match d % 3 {
                            0 => side.accept(r, bytes, now).map(|_| ()),
                            1 => side.reject(r, "no"),
                            _ => side.counter_propose(r, Terms::new()),
                        };
                    }
                }
                Op::Deliver(from_master) => {
                    let (from, to) = if from_master {
                        (&mut m, &mut s)
                    } else {
                        (&mut s, &mut m)
                    };
                    let (f, t) = (usize::from(!from_master), usize::from(from_master));
                    flush(from, &mut wire[f]);
                    while let Some(body) = wire[f].pop_front() {
                        // Only the queue ceiling may refuse a well-behaved peer's
                        // frame, breaks included. The endpoint then closes
                        // the connection: a break.
                        if let Err(e) = handle(to, body, now) {
                            prop_assert!(
                                matches!(e, AgreementError::TransmitQueueFull { .. }),
                                "{e}"
                            );
                            broken = true;
                            break;
                        }
                        // The endpoint drains the manager after every input.
                        flush(to, &mut wire[t]);
                    }
                }
                Op::Advance(secs) => {
                    now += Duration::from_secs(secs);
                    m.handle_timeout(now);
                    s.handle_timeout(now);
                }
                Op::Lose => broken = true,
            }
            if std::mem::take(&mut broken) {
                for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
                    decisions[k].clear();
                    wire[k].clear();
                    restore_after_break(side, config, now, &mut open[k]);
                }
            }
            for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
                prop_assert!(side.agreements().count() <= config.max_active_agreements);
                // Orphan terminations bypass the ceiling, at most one per
                // entry of the expired ring.
                let ring = ANSWERS_FACTOR * config.max_outstanding_requests;
                prop_assert!(side.outstanding_count() <= config.max_outstanding_requests + ring);
                prop_assert!(side.pending_incoming_count() <= config.max_pending_incoming);
                let (tx, ev) = side.queued();
                // Answers replayed after a break and orphan terminations come
                // on top of the ceiling, each bounded by the ring.
                prop_assert!(
                    tx <= config.max_queued_transmits
                        + config.max_pending_incoming
                        + config.max_active_agreements
                        + 2 * ring
                );
                prop_assert!(
                    ev <= config.max_queued_events
                        + config.max_pending_incoming
                        + config.max_outstanding_requests
                        + config.max_active_agreements
                );
                while let Some(e) = side.poll_event() {
                    match e {
                        AgreementEvent::RequestReceived { request_id, .. } => {
                            decisions[k].push(request_id)
                        }
                        AgreementEvent::Accepted { request_id, .. }
                        | AgreementEvent::Rejected { request_id, .. }
                        | AgreementEvent::CounterProposed { request_id, .. }
                        | AgreementEvent::RequestFailed { request_id, .. } => {
                            open[k].remove(&request_id);
                        }
                        AgreementEvent::RequestWithdrawn { .. }
                        | AgreementEvent::Terminated { .. } => {}
                    }
                }
            }
        }
        // Quiesce: deliver everything, one frame at a time each way, then
        // let every timer run out.
        for _ in 0..4 {
            for _ in 0..64 {
                flush(&mut m, &mut wire[0]);
                flush(&mut s, &mut wire[1]);
                if wire[0].is_empty() && wire[1].is_empty() {
                    break;
                }
                let mut failed = false;
                if let Some(body) = wire[0].pop_front() {
                    failed |= handle(&mut s, body, now).is_err();
                }
                if let Some(body) = wire[1].pop_front() {
                    failed |= handle(&mut m, body, now).is_err();
                }
                if failed {
                    for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
                        wire[k].clear();
                        restore_after_break(side, config, now, &mut open[k]);
                    }
                }
            }
            now += Duration::from_secs(5);
            m.handle_timeout(now);
            s.handle_timeout(now);
        }
        for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
            while let Some(e) = side.poll_event() {
                if let AgreementEvent::Accepted { request_id, .. }
                | AgreementEvent::Rejected { request_id, .. }
                | AgreementEvent::CounterProposed { request_id, .. }
                | AgreementEvent::RequestFailed { request_id, .. } = e
                {
                    open[k].remove(&request_id);
                }
            }
            prop_assert_eq!(side.outstanding_count(), 0);
            prop_assert_eq!(side.pending_incoming_count(), 0);
        }
        {
            // Breaks included (SPEC SEQ-5: answers lost with a connection are
            // replayed), both sides end up with the same agreements and terms.
            let am: Vec<_> = m.agreements().map(|a| (a.id, a.terms.clone())).collect();
            let as_: Vec<_> = s.agreements().map(|a| (a.id, a.terms.clone())).collect();
            prop_assert_eq!(am, as_);
        }
        prop_assert!(
            open[0].is_empty(),
            "master requests never answered: {:?}",
            open[0]
        );
        prop_assert!(
            open[1].is_empty(),
            "slave requests never answered: {:?}",
            open[1]
        );
    }
    Ok(())
}
