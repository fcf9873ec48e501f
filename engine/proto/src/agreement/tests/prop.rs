//! Property test of the Agreement Manager over random exchanges.

use std::collections::HashMap;
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
        let mut lost = false;
        for op in ops {
            match op {
                Op::Request(master) => {
                    let side = if master { &mut m } else { &mut s };
                    if let Ok(id) = side.request(Terms::new(), now) { open[usize::from(!master)].insert(id, ()); }
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
                        if let (Ok(r), true) = (r, matches!(op, Op::Adjust(..))) { open[usize::from(!master)].insert(r, ()); }
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
                    let (from, to) = if from_master { (&mut m, &mut s) } else { (&mut s, &mut m) };
                    while let Some(body) = from.poll_transmit() {
                        let r = match body {
                            Body::Request(r) => to.handle_request(r, now),
                            Body::Response(r) => to.handle_response(r, now),
                            _ => Ok(()),
                        };
                        // Only the queue ceiling may refuse a well-behaved peer's frame.
                        // (after a break, an orphaned agreement may also be unknown: module docs).
                        if let Err(e) = r {
                            prop_assert!(
                                matches!(e, AgreementError::TransmitQueueFull { .. })
                                    || (lost && matches!(e, AgreementError::UnknownAgreement { .. })),
                                "{e}"
                            );
                        }
                    }
                }
                Op::Advance(secs) => {
                    now += Duration::from_secs(secs);
                    m.handle_timeout(now);
                    s.handle_timeout(now);
                }
                Op::Lose => {
                    m.on_connection_lost();
                    s.on_connection_lost();
                    lost = true;
                    for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
                        decisions[k].clear();
                        while let Some(e) = side.poll_event() {
                            if let AgreementEvent::RequestFailed { request_id, .. } = e { open[k].remove(&request_id); }
                        }
                        let role = side.role();
                        *side = AgreementManager::restore(role, config, side.snapshot(), now).unwrap();
                    }
                }
            }
            for (k, side) in [&mut m, &mut s].into_iter().enumerate() {
                prop_assert!(side.agreements().count() <= config.max_active_agreements);
                prop_assert!(side.outstanding_count() <= config.max_outstanding_requests);
                prop_assert!(side.pending_incoming_count() <= config.max_pending_incoming);
                let (tx, ev) = side.queued();
                prop_assert!(tx <= config.max_queued_transmits + config.max_pending_incoming + config.max_active_agreements);
                prop_assert!(ev <= config.max_queued_events + config.max_pending_incoming + config.max_outstanding_requests + config.max_active_agreements);
                while let Some(e) = side.poll_event() {
                    match e {
                        AgreementEvent::RequestReceived { request_id, .. } => decisions[k].push(request_id),
                        AgreementEvent::Accepted { request_id, .. }
                        | AgreementEvent::Rejected { request_id, .. }
                        | AgreementEvent::CounterProposed { request_id, .. }
                        | AgreementEvent::RequestFailed { request_id, .. } => { open[k].remove(&request_id); }
                        AgreementEvent::RequestWithdrawn { .. } | AgreementEvent::Terminated { .. } => {}
                    }
                }
            }
        }
        // Quiesce: deliver everything, then let every timer run out.
        for _ in 0..4 {
            for from_master in [true, false] {
                let (from, to) = if from_master { (&mut m, &mut s) } else { (&mut s, &mut m) };
                while let Some(body) = from.poll_transmit() {
                    let _ = match body {
                        Body::Request(r) => to.handle_request(r, now),
                        Body::Response(r) => to.handle_response(r, now),
                        _ => Ok(()),
                    };
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
                | AgreementEvent::RequestFailed { request_id, .. } = e { open[k].remove(&request_id); }
            }
            prop_assert_eq!(side.outstanding_count(), 0);
            prop_assert_eq!(side.pending_incoming_count(), 0);
        }
        if !lost {
            // Without a break (see the module docs' known gap), both sides
            // end up with the same agreements and the same terms.
            let am: Vec<_> = m.agreements().map(|a| (a.id, a.terms.clone())).collect();
            let as_: Vec<_> = s.agreements().map(|a| (a.id, a.terms.clone())).collect();
            prop_assert_eq!(am, as_);
        }
        prop_assert!(open[0].is_empty(), "master requests never answered: {:?}", open[0]);
        prop_assert!(open[1].is_empty(), "slave requests never answered: {:?}", open[1]);
    }
}
