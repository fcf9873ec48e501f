//! The JetStream client against a real nats-server: acknowledged
//! publishes, dedupe, optimistic concurrency, reads by sequence, retention,
//! replay and a server restart (SPEC RT-6).

#![allow(clippy::unwrap_used, reason = "tests")]

mod servers;

use dtp_cluster::Error;
use dtp_cluster::nats::{JetStream, Publish, Replayed, Storage, StreamConfig};
use servers::NatsServer;

fn stream(js: &mut JetStream, name: &str, subjects: &[&str]) -> StreamConfig {
    let config = StreamConfig::new(name, subjects);
    let info = js.ensure_stream(&config).unwrap();
    assert_eq!((info.name.as_str(), info.state.messages), (name, 0));
    config
}

fn publish(js: &mut JetStream, subject: &str, payload: &[u8]) -> u64 {
    let ack = js.publish(subject, payload, &Publish::default()).unwrap();
    assert!(!ack.duplicate);
    ack.seq
}

#[test]
fn acks_are_contiguous_and_read_back_by_sequence() {
    let server = NatsServer::start();
    let mut js = server.jetstream();
    let config = stream(&mut js, "EV", &["ev.>"]);
    let seqs: Vec<u64> = (0..10)
        .map(|i| {
            publish(
                &mut js,
                &format!("ev.{}", i % 3),
                format!("m{i}").as_bytes(),
            )
        })
        .collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    let info = js.stream_info("EV").unwrap();
    assert_eq!(
        (
            info.state.first_seq,
            info.state.last_seq,
            info.state.messages
        ),
        (1, 10, 10)
    );
    let m = js.get("EV", 5).unwrap().unwrap();
    assert_eq!(
        (m.seq, m.subject.as_str(), m.payload.as_slice()),
        (5, "ev.1", &b"m4"[..])
    );
    assert!(!m.time.is_empty());
    assert_eq!(js.get("EV", 11).unwrap(), None);
    // Ensuring the same stream again is a no-op; another config updates it.
    assert_eq!(js.ensure_stream(&config).unwrap().state.last_seq, 10);
    let mut wider = config.clone();
    wider.max_msgs = Some(1000);
    assert_eq!(js.ensure_stream(&wider).unwrap().state.last_seq, 10);
    // Nobody captures this subject: no responders, not a hang.
    assert!(matches!(
        js.publish("nowhere", b"x", &Publish::default()),
        Err(Error::NoResponders { .. })
    ));
    assert!(matches!(
        js.stream_info("NOPE"),
        Err(Error::JetStream { code: 404, .. })
    ));
    js.delete_stream("EV").unwrap();
    let gone = js.stream_info("EV").unwrap_err();
    assert!(
        matches!(gone, Error::JetStream { code: 404, .. }),
        "{gone:?}"
    );
    js.into_nats().close().unwrap();
}

#[test]
fn the_api_get_serves_streams_without_direct_gets() {
    let server = NatsServer::start();
    let mut js = server.jetstream();
    let mut config = StreamConfig::new("API", &["api.>"]);
    config.allow_direct = false;
    config.storage = Storage::Memory;
    js.ensure_stream(&config).unwrap();
    publish(&mut js, "api.a", b"one");
    let with_headers = Publish {
        msg_id: Some("id-2"),
        ..Publish::default()
    };
    js.publish("api.b", b"two", &with_headers).unwrap();
    let m = js.get("API", 2).unwrap().unwrap();
    assert_eq!(
        (m.subject.as_str(), m.payload.as_slice()),
        ("api.b", &b"two"[..])
    );
    assert_eq!(m.headers.unwrap().get("Nats-Msg-Id"), Some("id-2"));
    assert_eq!(js.get("API", 3).unwrap(), None);
    let replayed: Vec<_> = js.replay("API", 1).map(Result::unwrap).collect();
    assert_eq!(replayed.len(), 2);
}

#[test]
fn dedupe_by_message_id() {
    let server = NatsServer::start();
    let mut js = server.jetstream();
    stream(&mut js, "DD", &["dd"]);
    let opts = Publish {
        msg_id: Some("order-7"),
        ..Publish::default()
    };
    let first = js.publish("dd", b"once", &opts).unwrap();
    let again = js.publish("dd", b"once", &opts).unwrap();
    assert!(!first.duplicate && again.duplicate);
    assert_eq!(again.seq, first.seq);
    let other = js
        .publish(
            "dd",
            b"next",
            &Publish {
                msg_id: Some("order-8"),
                ..opts
            },
        )
        .unwrap();
    assert_eq!(other.seq, first.seq + 1);
    assert_eq!(js.stream_info("DD").unwrap().state.messages, 2);
    // The stored message keeps its id header.
    let m = js.get("DD", first.seq).unwrap().unwrap();
    assert_eq!(m.headers.unwrap().get("nats-msg-id"), Some("order-7"));
}

#[test]
fn expected_last_sequence_conflicts() {
    let server = NatsServer::start();
    let mut js = server.jetstream();
    stream(&mut js, "OC", &["oc.>"]);
    let last = |n| Publish {
        expected_last_sequence: Some(n),
        ..Publish::default()
    };
    assert_eq!(js.publish("oc.a", b"1", &last(0)).unwrap().seq, 1);
    assert_eq!(js.publish("oc.b", b"2", &last(1)).unwrap().seq, 2);
    // A writer that saw sequence 1 lost the race.
    let lost = js.publish("oc.a", b"3", &last(1)).unwrap_err();
    assert!(lost.is_wrong_last_sequence(), "{lost:?}");
    // Per subject: oc.a's last is 1, whatever oc.b did since.
    let subj = |n| Publish {
        expected_last_subject_sequence: Some(n),
        ..Publish::default()
    };
    assert_eq!(js.publish("oc.a", b"4", &subj(1)).unwrap().seq, 3);
    assert!(
        js.publish("oc.a", b"5", &subj(1))
            .unwrap_err()
            .is_wrong_last_sequence()
    );
    let wrong_stream = Publish {
        expected_stream: Some("OTHER"),
        ..Publish::default()
    };
    assert!(matches!(
        js.publish("oc.a", b"6", &wrong_stream),
        Err(Error::JetStream { .. })
    ));
    assert_eq!(js.stream_info("OC").unwrap().state.last_seq, 3);
}

#[test]
fn retention_moves_first_seq_and_replay_reports_the_gap() {
    let server = NatsServer::start();
    let mut js = server.jetstream();
    let mut config = StreamConfig::new("RT", &["rt"]);
    config.max_msgs = Some(5);
    js.ensure_stream(&config).unwrap();
    for i in 1..=8u8 {
        publish(&mut js, "rt", &[i]);
    }
    let state = js.stream_info("RT").unwrap().state;
    assert_eq!((state.first_seq, state.last_seq, state.messages), (4, 8, 5));
    assert_eq!(js.get("RT", 2).unwrap(), None);

    // A reader whose cursor is 2 is told what it missed, then gets the rest.
    let steps: Vec<Replayed> = js.replay("RT", 2).map(Result::unwrap).collect();
    assert_eq!(steps[0], Replayed::Gap { from: 2, to: 3 });
    let seqs: Vec<u64> = steps[1..]
        .iter()
        .map(|s| match s {
            Replayed::Message(m) => m.seq,
            Replayed::Gap { .. } => panic!("a second gap: {steps:?}"),
        })
        .collect();
    assert_eq!(seqs, [4, 5, 6, 7, 8]);

    // From inside the retained range: no gap, in order, payloads intact.
    let mut replay = js.replay("RT", 6);
    for want in 6..=8u8 {
        let Replayed::Message(m) = replay.next().unwrap().unwrap() else {
            panic!("gap")
        };
        assert_eq!((m.seq, m.payload), (u64::from(want), vec![want]));
    }
    assert!(replay.next().is_none());
    // Past the end: nothing, not an error.
    assert!(js.replay("RT", 9).next().is_none());
}

#[test]
fn acknowledged_messages_survive_a_server_kill() {
    let mut server = NatsServer::start();
    let mut js = server.jetstream();
    stream(&mut js, "DUR", &["dur.>"]);
    for i in 1..=20u64 {
        assert_eq!(publish(&mut js, "dur.x", &i.to_be_bytes()), i);
    }
    server.kill_and_restart();
    // The old connection is dead: the client reconnects on its next call.
    let _ = js.stream_info("DUR");
    let state = js.stream_info("DUR").unwrap().state;
    assert_eq!(
        (state.first_seq, state.last_seq, state.messages),
        (1, 20, 20)
    );
    let payloads: Vec<Vec<u8>> = js
        .replay("DUR", 1)
        .map(|s| match s.unwrap() {
            Replayed::Message(m) => m.payload,
            gap => panic!("{gap:?}"),
        })
        .collect();
    assert_eq!(
        payloads,
        (1..=20u64)
            .map(|i| i.to_be_bytes().to_vec())
            .collect::<Vec<_>>()
    );
    // Sequences continue after the restart.
    assert_eq!(publish(&mut js, "dur.x", b"after"), 21);
}

/// A publication on a watched subject ends a wait at once, also one that
/// came while a request was answered; another subject does not; with
/// nothing published the wait ends at its timeout; the watch is made
/// again on the next connection after the server restarts.
#[test]
fn a_watched_subject_ends_the_wait() {
    use std::time::Duration;
    let mut server = NatsServer::start();
    let mut publisher = server.jetstream();
    stream(&mut publisher, "W", &["w.>"]);
    let mut watcher = server.jetstream();
    watcher.nats().watch(&["w.a"]).unwrap();
    let short = Duration::from_millis(100);
    assert!(!watcher.nats().wait_watched(short).unwrap());
    publish(&mut publisher, "w.a", b"1");
    assert!(watcher.nats().wait_watched(Duration::from_secs(5)).unwrap());
    publish(&mut publisher, "w.b", b"2");
    assert!(!watcher.nats().wait_watched(short).unwrap());
    // Delivered before the request is sent, so read while its answer is.
    publish(&mut publisher, "w.a", b"3");
    std::thread::sleep(short);
    assert_eq!(watcher.stream_info("W").unwrap().state.last_seq, 3);
    assert!(watcher.nats().wait_watched(Duration::ZERO).unwrap());
    assert!(!watcher.nats().wait_watched(short).unwrap());
    server.kill_and_restart();
    // The broken connection fails once; the next wait connects again.
    let _ = watcher.nats().wait_watched(short);
    assert!(!watcher.nats().wait_watched(short).unwrap());
    let mut publisher = server.jetstream();
    publish(&mut publisher, "w.a", b"4");
    assert!(watcher.nats().wait_watched(Duration::from_secs(5)).unwrap());
}
