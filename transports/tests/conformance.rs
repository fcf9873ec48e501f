//! The transport conformance suite (SPEC TRN-1 … TRN-5): one set of tests
//! run against every transport — TCP and Unix sockets on io_uring and on
//! epoll, WebSocket and RTSP-interleaved on TCP, QUIC on UDP, the
//! simulated BLE link (Unix `SOCK_SEQPACKET`, 247-byte SDUs), the
//! in-memory transport, and each of them inside a
//! `FaultInjector` with its faults off — and fault tests proving that what
//! the injector promises is what a protocol under test sees.
//!
//! Nothing here sleeps to synchronise: tests poll until the event they wait
//! for, with a generous deadline that fails loudly (a hang is a failure, not
//! a timing assertion).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use dtp_transports::{
    Callbacks, CloseReason, ConnId, ConnectionState, Endpoint, Event, FaultInjector, FaultPlan,
    Rechunk, SendError, Transport, TransportError,
};

use support::{
    BLOCK, Base, CLIENT, Net, QUEUE, Rng, SERVER, adapters, econnrefused, econnreset, fault_net,
    net, send_some,
};

mod support;

/// Runs `$test(base, wrapped)` for every transport, one `#[test]` each.
macro_rules! for_every_transport {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[test]
            fn tcp_uring() { super::$test(super::Base::TcpUring, false) }
            #[test]
            fn tcp_epoll() { super::$test(super::Base::TcpEpoll, false) }
            #[test]
            fn unix_uring() { super::$test(super::Base::UnixUring, false) }
            #[test]
            fn unix_epoll() { super::$test(super::Base::UnixEpoll, false) }
            #[test]
            fn memory() { super::$test(super::Base::Memory, false) }
            #[test]
            fn ws_uring() { super::$test(super::Base::WsUring, false) }
            #[test]
            fn ws_epoll() { super::$test(super::Base::WsEpoll, false) }
            #[test]
            fn quic_uring() { super::$test(super::Base::QuicUring, false) }
            #[test]
            fn quic_epoll() { super::$test(super::Base::QuicEpoll, false) }
            #[test]
            fn faults_off_quic_uring() { super::$test(super::Base::QuicUring, true) }
            #[test]
            fn rtsp_uring() { super::$test(super::Base::RtspUring, false) }
            #[test]
            fn rtsp_epoll() { super::$test(super::Base::RtspEpoll, false) }
            #[test]
            fn ble_sim_uring() { super::$test(super::Base::BleSimUring, false) }
            #[test]
            fn ble_sim_epoll() { super::$test(super::Base::BleSimEpoll, false) }
            #[test]
            fn faults_off_ble_sim_uring() { super::$test(super::Base::BleSimUring, true) }
            #[test]
            fn faults_off_ble_sim_epoll() { super::$test(super::Base::BleSimEpoll, true) }
            #[test]
            fn faults_off_ws_uring() { super::$test(super::Base::WsUring, true) }
            #[test]
            fn faults_off_rtsp_uring() { super::$test(super::Base::RtspUring, true) }
            #[test]
            fn faults_off_tcp_uring() { super::$test(super::Base::TcpUring, true) }
            #[test]
            fn faults_off_tcp_epoll() { super::$test(super::Base::TcpEpoll, true) }
            #[test]
            fn faults_off_unix_uring() { super::$test(super::Base::UnixUring, true) }
            #[test]
            fn faults_off_memory() { super::$test(super::Base::Memory, true) }
        }
    )*};
}

/// Runs `$test(base)` for every base transport, one `#[test]` each.
macro_rules! for_every_base {
    ($($test:ident),* $(,)?) => {$(
        mod $test {
            #[test]
            fn tcp_uring() { super::$test(super::Base::TcpUring) }
            #[test]
            fn tcp_epoll() { super::$test(super::Base::TcpEpoll) }
            #[test]
            fn unix_uring() { super::$test(super::Base::UnixUring) }
            #[test]
            fn unix_epoll() { super::$test(super::Base::UnixEpoll) }
            #[test]
            fn memory() { super::$test(super::Base::Memory) }
            #[test]
            fn ws_uring() { super::$test(super::Base::WsUring) }
            #[test]
            fn ws_epoll() { super::$test(super::Base::WsEpoll) }
            #[test]
            fn quic_uring() { super::$test(super::Base::QuicUring) }
            #[test]
            fn quic_epoll() { super::$test(super::Base::QuicEpoll) }
            #[test]
            fn rtsp_uring() { super::$test(super::Base::RtspUring) }
            #[test]
            fn rtsp_epoll() { super::$test(super::Base::RtspEpoll) }
            #[test]
            fn ble_sim_uring() { super::$test(super::Base::BleSimUring) }
            #[test]
            fn ble_sim_epoll() { super::$test(super::Base::BleSimEpoll) }
        }
    )*};
}

for_every_transport!(
    trn5_random_payloads_round_trip_unaltered_and_in_order,
    trn5_shared_sends_interleave_with_owned_ones_unaltered,
    trn2_a_full_queue_is_buffer_full_until_room_returns,
    mem5_a_connection_limited_below_the_default_is_held_to_it,
    trn2_paused_reading_backpressures_the_sender_and_loses_nothing,
    trn3_connect_is_reported_as_connecting_then_up_and_accept_as_up,
    trn3_peer_close_is_reported_after_the_last_bytes,
    trn3_local_disconnect_is_reported_to_both_sides,
    trn3_refused_connect_is_reported_as_down,
    trn1_ids_are_generational_and_stale_ids_are_refused,
    trn1_callbacks_hand_events_to_the_spec_handlers,
    trn4_a_transport_refuses_other_transports_endpoints,
);

for_every_base!(
    fault_cut_after_received_byte_n_delivers_exactly_n_bytes_then_down,
    fault_cut_after_sent_byte_n_delivers_exactly_n_bytes_to_the_peer,
    fault_split_and_coalesce_never_change_the_byte_stream,
    fault_random_drop_cuts_a_prefix_and_reports_down,
);

/// Three connections at once, each carrying its own random messages of
/// random sizes to an echo server and back.
fn trn5_random_payloads_round_trip_unaltered_and_in_order(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let mut rng = Rng(0x5eed);
    let mut conns = Vec::new();
    for _ in 0..3 {
        let (id, _) = net.connect();
        let mut payload = Vec::new();
        while payload.len() < 300_000 {
            let large = rng.below(4) == 0;
            let size = 1 + rng.below(if large { 40_000 } else { 300 });
            payload.extend(rng.bytes(size));
        }
        conns.push((id, payload, 0usize));
    }
    let mut echoed: BTreeMap<ConnId, usize> = BTreeMap::new();
    net.until("every payload echoed", |n| {
        for (id, payload, sent) in &mut conns {
            *sent += send_some(&mut n.client, *id, &payload[*sent..], 1 + rng.below(20_000));
        }
        for (&id, got) in &n.seen[SERVER].bytes {
            let done = echoed.entry(id).or_default();
            *done += send_some(&mut n.server, id, &got[*done..], BLOCK);
        }
        conns
            .iter()
            .all(|(id, p, _)| n.seen[CLIENT].got(*id).len() >= p.len())
    });
    for (id, payload, _) in &conns {
        assert!(
            net.seen[CLIENT].got(*id) == payload.as_slice(),
            "{base:?}: bytes of {id:?} altered, reordered or mixed"
        );
    }
}

/// One `Bytes` of each size sent shared to two connections, between owned
/// sends: each connection gets exactly its sequence (however the
/// transport queues shared bytes: by reference or copied).
fn trn5_shared_sends_interleave_with_owned_ones_unaltered(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let mut rng = Rng(0x5a4e);
    let shared: Vec<bytes::Bytes> = [1, 100, 600, 9_000]
        .into_iter()
        .map(|n| bytes::Bytes::from(rng.bytes(n)))
        .collect();
    let mut wants = Vec::new();
    for round in 0..2u8 {
        let (id, at_server) = net.connect();
        let mut want = Vec::new();
        for (i, b) in shared.iter().enumerate() {
            let owned = vec![round ^ i as u8; 1 + rng.below(2_000)];
            net.client.send(id, &owned).unwrap();
            net.client.send_shared(id, b).unwrap();
            want.extend_from_slice(&owned);
            want.extend_from_slice(b);
        }
        assert_eq!(net.client.queued(id), want.len(), "{base:?}");
        wants.push((at_server, want));
    }
    net.until("every sequence arrived", |n| {
        wants
            .iter()
            .all(|(id, w)| n.seen[SERVER].got(*id).len() >= w.len())
    });
    for (id, want) in &wants {
        assert!(
            net.seen[SERVER].got(*id) == want.as_slice(),
            "{base:?}: shared bytes of {id:?} altered, reordered or mixed"
        );
    }
}

fn trn2_a_full_queue_is_buffer_full_until_room_returns(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let id = net.client_connect(&net.listen_at.clone());
    // Without polling nothing leaves: the queue takes QUEUE bytes, all or
    // nothing, and refuses the rest at once instead of blocking.
    let block = vec![0xab; BLOCK];
    for _ in 0..QUEUE / BLOCK {
        net.client.send(id, &block).unwrap();
    }
    assert_eq!(net.client.send(id, &block), Err(SendError::BufferFull));
    assert_eq!(net.client.send(id, &[1]), Err(SendError::BufferFull));
    assert_eq!(net.client.queued(id), QUEUE);
    net.until(
        "the peer read the queue and the producer heard of room",
        |n| {
            n.seen[CLIENT].writable > 0
                && n.seen[SERVER].bytes.values().map(Vec::len).sum::<usize>() == QUEUE
        },
    );
    net.client.send(id, &block).unwrap();
    assert!(
        net.seen[SERVER]
            .bytes
            .values()
            .flatten()
            .all(|b| *b == 0xab)
    );
    // More than the whole queue can never be taken.
    assert_eq!(
        net.client.send(id, &vec![0; QUEUE + 1]),
        Err(SendError::BufferFull)
    );
}

/// SPEC MEM-5: a connection given its own, lower send limit is refused at
/// that limit (others keep the transport's), hears of room at half of it,
/// and can never be raised above the transport's own limit.
fn mem5_a_connection_limited_below_the_default_is_held_to_it(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let at = net.listen_at.clone();
    let (low, other) = (net.client_connect(&at), net.client_connect(&at));
    let limit = 2 * BLOCK;
    net.client.limit_send_queue(low, limit);
    let block = vec![0xcd; BLOCK];
    net.client.send(low, &block).unwrap();
    net.client.send(low, &block).unwrap();
    assert_eq!(net.client.send(low, &[1]), Err(SendError::BufferFull));
    assert_eq!(net.client.queued(low), limit);
    // The other connection still takes the transport's whole queue.
    for _ in 0..QUEUE / BLOCK {
        net.client.send(other, &block).unwrap();
    }
    net.until("the peer read both queues", |n| {
        n.seen[CLIENT].writable > 0
            && n.seen[SERVER].bytes.values().map(Vec::len).sum::<usize>() == QUEUE + limit
    });
    net.client.send(low, &block).unwrap();
    // Asking for more than the transport's own limit keeps that limit.
    net.client.limit_send_queue(other, QUEUE * 4);
    assert_eq!(
        net.client.send(other, &vec![0; QUEUE + 1]),
        Err(SendError::BufferFull)
    );
}

fn trn2_paused_reading_backpressures_the_sender_and_loses_nothing(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let (id, server_id) = net.connect();
    net.server.pause_reading(server_id);
    let block: Vec<u8> = (0..BLOCK).map(|i| i as u8).collect();
    let mut sent = 0usize;
    net.until(
        "the sender refused while the reader is paused",
        |n| match n.client.send(id, &block) {
            Ok(()) => {
                sent += BLOCK;
                false
            }
            Err(SendError::BufferFull) => true,
            Err(e) => panic!("{e}"),
        },
    );
    assert!(sent >= QUEUE, "{base:?}: refused after only {sent} bytes");
    net.server.resume_reading(server_id);
    net.until("every byte sent before the refusal arrived", |n| {
        n.seen[SERVER].got(server_id).len() == sent
    });
    let got = net.seen[SERVER].got(server_id);
    assert!(got.chunks(BLOCK).all(|c| c == block.as_slice()));
}

fn trn3_connect_is_reported_as_connecting_then_up_and_accept_as_up(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let (id, server_id) = net.connect();
    assert_eq!(
        net.seen[CLIENT].states[&id],
        [ConnectionState::Connecting, ConnectionState::Up]
    );
    assert_eq!(net.seen[SERVER].accepted, [(net.listener, server_id)]);
    assert_eq!(net.seen[SERVER].states[&server_id], [ConnectionState::Up]);
}

fn trn3_peer_close_is_reported_after_the_last_bytes(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let (id, server_id) = net.connect();
    net.client.send(id, b"last words").unwrap();
    net.client.close(id);
    assert!(matches!(
        net.client.send(id, b"more"),
        Err(SendError::Closed | SendError::UnknownConnection)
    ));
    net.until("both sides down", |n| {
        n.seen[CLIENT].is_down(id) && n.seen[SERVER].is_down(server_id)
    });
    assert_eq!(net.seen[SERVER].got(server_id), b"last words");
    assert_eq!(
        net.seen[SERVER].state(server_id),
        Some(ConnectionState::Down(CloseReason::PeerClosed))
    );
    assert_eq!(
        net.seen[CLIENT].state(id),
        Some(ConnectionState::Down(CloseReason::Local))
    );
    assert_eq!(net.client.send(id, b"x"), Err(SendError::UnknownConnection));
    assert_eq!(
        net.server.send(server_id, b"x"),
        Err(SendError::UnknownConnection)
    );
}

fn trn3_local_disconnect_is_reported_to_both_sides(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let (id, server_id) = net.connect();
    net.server.send(server_id, b"bye").unwrap();
    net.server.close(server_id);
    net.server.close(server_id); // twice is harmless
    net.until("both sides down", |n| {
        n.seen[CLIENT].is_down(id) && n.seen[SERVER].is_down(server_id)
    });
    assert_eq!(net.seen[CLIENT].got(id), b"bye");
    assert_eq!(
        net.seen[SERVER].states[&server_id],
        [
            ConnectionState::Up,
            ConnectionState::Down(CloseReason::Local)
        ]
    );
    assert_eq!(
        net.seen[CLIENT].state(id),
        Some(ConnectionState::Down(CloseReason::PeerClosed))
    );
}

fn trn3_refused_connect_is_reported_as_down(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let id = net.client_connect(&net.nowhere.clone());
    net.until("the refusal", |n| n.seen[CLIENT].is_down(id));
    assert_eq!(
        net.seen[CLIENT].states[&id],
        [
            ConnectionState::Connecting,
            ConnectionState::Down(CloseReason::ConnectFailed(econnrefused()))
        ]
    );
    assert_eq!(net.client.send(id, b"x"), Err(SendError::UnknownConnection));
}

fn trn1_ids_are_generational_and_stale_ids_are_refused(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let (old, _) = net.connect();
    net.client.close(old);
    net.until("the old connection down", |n| n.seen[CLIENT].is_down(old));
    let (new, server_new) = net.connect();
    assert_ne!(new, old, "{base:?}: a dead id was issued again");
    assert_eq!(
        net.client.send(old, b"x"),
        Err(SendError::UnknownConnection)
    );
    net.client.close(old); // a stale id must not reach the new connection
    net.client.send(new, b"still here").unwrap();
    net.until("the new connection's bytes", |n| {
        n.seen[SERVER].got(server_new).len() == 10
    });
    assert_eq!(net.seen[CLIENT].state(new), Some(ConnectionState::Up));
}

fn trn1_callbacks_hand_events_to_the_spec_handlers(base: Base, wrapped: bool) {
    let Net {
        mut server,
        client,
        listen_at,
        ..
    } = net(base, wrapped);
    let states = RefCell::new(Vec::new());
    let received = RefCell::new(Vec::new());
    let mut client = Callbacks::new(client);
    client
        .on_connection_state_change(|id, state| states.borrow_mut().push((id, state)))
        .on_receive(|_, bytes| received.borrow_mut().extend_from_slice(bytes));
    let id = client.connect(&listen_at).unwrap();
    let mut events = Vec::new();
    let mut greeted = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while received.borrow().len() < 5 || states.borrow().len() < 3 {
        assert!(Instant::now() < deadline, "no progress within 20 s");
        client.poll(Some(Duration::from_millis(1))).unwrap();
        server
            .poll(&mut events, Some(Duration::from_millis(1)))
            .unwrap();
        for e in events.drain(..) {
            if let Event::Accepted { conn: s, .. } = e
                && !greeted
            {
                server.send(s, b"hello").unwrap();
                server.close(s);
                greeted = true;
            }
        }
    }
    assert_eq!(&*received.borrow(), b"hello");
    assert_eq!(
        *states.borrow(),
        [
            (id, ConnectionState::Connecting),
            (id, ConnectionState::Up),
            (id, ConnectionState::Down(CloseReason::PeerClosed))
        ]
    );
}

fn trn4_a_transport_refuses_other_transports_endpoints(base: Base, wrapped: bool) {
    let mut net = net(base, wrapped);
    let foreign = match base {
        Base::Memory => Endpoint::Tcp("127.0.0.1:1".parse().unwrap()),
        _ => Endpoint::Memory("server".to_owned()),
    };
    assert!(matches!(
        net.client.connect(&foreign),
        Err(TransportError::UnsupportedEndpoint { .. })
    ));
    assert!(matches!(
        net.server.listen(&foreign, false),
        Err(TransportError::UnsupportedEndpoint { .. })
    ));
    // A name, path or port taken (unless shared, SPEC TRN-4's listeners).
    assert!(matches!(
        net.server.listen(&net.listen_at.clone(), false),
        Err(TransportError::AddressInUse(_))
    ));
}

fn fault_cut_after_received_byte_n_delivers_exactly_n_bytes_then_down(base: Base) {
    const N: u64 = 40_000;
    let plan = FaultPlan {
        cut_after_received: Some(N),
        ..FaultPlan::NONE
    };
    let mut net = fault_net(base, plan, FaultPlan::NONE);
    let (id, server_id) = net.connect();
    let payload = Rng(3).bytes(100_000);
    let mut sent = 0;
    net.until("the server cut", |n| {
        if !n.seen[CLIENT].is_down(id) {
            sent += send_some(&mut n.client, id, &payload[sent..], 1000);
        }
        n.seen[SERVER].is_down(server_id) && n.seen[CLIENT].is_down(id)
    });
    assert_eq!(net.seen[SERVER].got(server_id), &payload[..N as usize]);
    assert_eq!(
        net.seen[SERVER].state(server_id),
        Some(ConnectionState::Down(CloseReason::Error(econnreset())))
    );
    let stats = net.server.stats();
    assert_eq!((stats.cuts, stats.drops), (1, 0));
}

fn fault_cut_after_sent_byte_n_delivers_exactly_n_bytes_to_the_peer(base: Base) {
    const N: u64 = 25_500;
    let plan = FaultPlan {
        cut_after_sent: Some(N),
        ..FaultPlan::NONE
    };
    let mut net = fault_net(base, FaultPlan::NONE, plan);
    let (id, server_id) = net.connect();
    let payload = Rng(4).bytes(100_000);
    let mut sent = 0;
    net.until("the client cut", |n| {
        while sent < payload.len() && !n.seen[CLIENT].is_down(id) {
            match n.client.send(id, &payload[sent..sent + 1000]) {
                Ok(()) => sent += 1000,
                Err(SendError::BufferFull) => break,
                Err(SendError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        n.seen[SERVER].is_down(server_id) && n.seen[CLIENT].is_down(id)
    });
    assert_eq!(net.client.send(id, b"x"), Err(SendError::UnknownConnection));
    assert_eq!(net.seen[SERVER].got(server_id), &payload[..N as usize]);
    assert_eq!(
        net.seen[SERVER].state(server_id),
        Some(ConnectionState::Down(CloseReason::PeerClosed))
    );
    assert_eq!(
        net.seen[CLIENT].state(id),
        Some(ConnectionState::Down(CloseReason::Error(econnreset())))
    );
    let stats = net.client.stats();
    assert_eq!(stats.cuts, 1);
    assert!(stats.bytes_discarded > 0);
}

fn fault_split_and_coalesce_never_change_the_byte_stream(base: Base) {
    let rechunks = [
        (Rechunk::Coalesce, 0, 200_000),
        (Rechunk::Coalesce, 3, 200_000),
        (
            Rechunk::Random {
                max: NonZeroUsize::MIN,
            },
            0,
            3_000,
        ),
        (
            Rechunk::Random {
                max: NonZeroUsize::new(7).unwrap(),
            },
            2,
            20_000,
        ),
        (
            Rechunk::Random {
                max: NonZeroUsize::new(5000).unwrap(),
            },
            1,
            200_000,
        ),
    ];
    for (rechunk, delay_polls, len) in rechunks {
        let plan = FaultPlan {
            rechunk: Some(rechunk),
            delay_polls,
            ..FaultPlan::NONE
        };
        let mut net = fault_net(base, plan, FaultPlan::NONE);
        let (id, server_id) = net.connect();
        let payload = Rng(len as u64).bytes(len);
        let mut sent = 0;
        let mut rng = Rng(9);
        net.until("the whole stream", |n| {
            sent += send_some(&mut n.client, id, &payload[sent..], 1 + rng.below(3000));
            n.seen[SERVER].got(server_id).len() >= len
        });
        assert!(
            net.seen[SERVER].got(server_id) == payload.as_slice(),
            "{base:?} {rechunk:?}: the stream changed"
        );
        let stats = net.server.stats();
        assert_eq!(stats.deliveries_out as usize, net.seen[SERVER].deliveries);
        if rechunk
            == (Rechunk::Random {
                max: NonZeroUsize::MIN,
            })
        {
            assert_eq!(net.seen[SERVER].deliveries, len, "one byte per delivery");
        }
        if delay_polls > 0 {
            assert!(stats.delayed > 0);
        }
    }
}

fn fault_random_drop_cuts_a_prefix_and_reports_down(base: Base) {
    let plan = FaultPlan {
        drop_within: Some(30_000),
        ..FaultPlan::NONE
    };
    let mut net = fault_net(base, FaultPlan::NONE, plan);
    let (id, server_id) = net.connect();
    let payload = Rng(5).bytes(60_000);
    let (mut sent, mut echoed) = (0, 0);
    net.until("the drop", |n| {
        if !n.seen[CLIENT].is_down(id) {
            sent += send_some(&mut n.client, id, &payload[sent..], 100);
        }
        if !n.seen[SERVER].is_down(server_id) {
            let got = n.seen[SERVER].got(server_id).to_vec();
            echoed += send_some(&mut n.server, server_id, &got[echoed..], BLOCK);
        }
        n.seen[CLIENT].is_down(id) && n.seen[SERVER].is_down(server_id)
    });
    let to_server = net.seen[SERVER].got(server_id);
    let to_client = net.seen[CLIENT].got(id);
    assert!(payload.starts_with(to_server), "{base:?}: not a prefix");
    assert!(
        payload.starts_with(to_client),
        "{base:?}: echo not a prefix"
    );
    assert!(to_server.len() <= 30_000 || to_client.len() <= 30_000);
    assert_eq!(
        net.seen[CLIENT].state(id),
        Some(ConnectionState::Down(CloseReason::Error(econnreset())))
    );
    assert_eq!(net.client.stats().drops, 1);
}

/// The drop points follow the seed: the same seed gives the same outcome;
/// different seeds give different points. Memory only, where the outcome
/// depends on nothing else.
#[test]
fn fault_random_drops_are_reproducible_from_the_seed() {
    let outcome = |seed: u64| {
        let (s, c, listen, nowhere) = adapters(Base::Memory);
        let plan = FaultPlan {
            drop_within: Some(10_000),
            ..FaultPlan::NONE
        };
        let mut net = Net::new(s, FaultInjector::with_plan(c, seed, plan), &listen, nowhere);
        let (id, server_id) = net.connect();
        let payload = Rng(6).bytes(20_000);
        let (mut sent, mut echoed) = (0, 0);
        net.until("the drop", |n| {
            if !n.seen[CLIENT].is_down(id) {
                sent += send_some(&mut n.client, id, &payload[sent..], 100);
            }
            if !n.seen[SERVER].is_down(server_id) {
                let got = n.seen[SERVER].got(server_id).to_vec();
                echoed += send_some(&mut n.server, server_id, &got[echoed..], BLOCK);
            }
            n.seen[CLIENT].is_down(id) && n.seen[SERVER].is_down(server_id)
        });
        (
            net.seen[SERVER].got(server_id).len(),
            net.seen[CLIENT].got(id).len(),
        )
    };
    assert_eq!(outcome(1), outcome(1));
    let distinct: std::collections::BTreeSet<_> = (0..8).map(outcome).collect();
    assert!(distinct.len() > 1, "every seed dropped at the same point");
}

/// A delay of K polls is K polls of the injector's clock, on every machine.
#[test]
fn fault_delay_holds_bytes_for_exactly_k_polls() {
    let (s, c, listen, nowhere) = adapters(Base::Memory);
    let plan = FaultPlan {
        delay_polls: 3,
        ..FaultPlan::NONE
    };
    let mut net = Net::new(FaultInjector::with_plan(s, 1, plan), c, &listen, nowhere);
    let (id, server_id) = net.connect();
    net.client.send(id, b"late").unwrap();
    let mut events = Vec::new();
    let arrival = net.server.polls() + 1;
    loop {
        net.server.poll(&mut events, None).unwrap();
        if !events.is_empty() {
            break;
        }
        assert!(net.server.polls() < arrival + 10, "never delivered");
    }
    assert_eq!(net.server.polls(), arrival + 3);
    assert!(
        matches!(&events[..], [Event::Received { conn, data }] if *conn == server_id && &data[..] == b"late"),
        "{events:?}"
    );
    assert_eq!(net.server.stats().delayed, 1);
}

/// Held bytes stay held, and a close waits behind them.
#[test]
fn fault_hold_keeps_bytes_and_close_until_release() {
    let (s, c, listen, nowhere) = adapters(Base::Memory);
    let mut net = Net::new(FaultInjector::new(s, 1), c, &listen, nowhere);
    let (id, server_id) = net.connect();
    net.server.hold(server_id);
    net.client.send(id, b"held").unwrap();
    net.client.close(id);
    for _ in 0..10 {
        net.step();
    }
    assert!(net.seen[CLIENT].is_down(id));
    assert_eq!(net.seen[SERVER].got(server_id), b"");
    assert_eq!(net.seen[SERVER].state(server_id), Some(ConnectionState::Up));
    net.server.release(server_id);
    net.step();
    assert_eq!(net.seen[SERVER].got(server_id), b"held");
    assert_eq!(
        net.seen[SERVER].state(server_id),
        Some(ConnectionState::Down(CloseReason::PeerClosed))
    );
}

/// The in-memory transport is deterministic: the same calls give the same
/// events, and bytes move only when the reader polls.
#[test]
fn memory_transport_moves_bytes_only_when_polled() {
    let run = || {
        let mut net = net(Base::Memory, false);
        let (id, server_id) = net.connect();
        let mut queue: VecDeque<_> = (0..5u8).map(|i| vec![i; 10_000]).collect();
        while let Some(m) = queue.pop_front() {
            net.client.send(id, &m).unwrap();
        }
        assert_eq!(net.client.queued(id), 50_000);
        net.step();
        assert_eq!(net.client.queued(id), 0);
        let got = net.seen[SERVER].got(server_id).to_vec();
        (got, net.seen[SERVER].deliveries)
    };
    let (got, deliveries) = run();
    assert_eq!(got.len(), 50_000);
    assert_eq!(deliveries, 4, "16 KiB deliveries");
    assert_eq!(run(), (got, deliveries));
}
