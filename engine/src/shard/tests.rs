//! The timer heap stays bounded when a connection moves its deadline on
//! every frame, and the live deadline still fires.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use dtp_codec::{ErrorCode, Limits};
use dtp_transports::{ConnId, Endpoint, MemoryHub, RecvBuf, Transport};

use super::Shard;
use crate::clock::{Clock, ManualClock};
use crate::runtime::ShardMetrics;
use crate::service::{Origin, Outbox, Service};

#[derive(Default)]
struct Timed {
    conn: Option<ConnId>,
    fired: Vec<Instant>,
}

impl Service for Timed {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_>) {
        self.conn = Some(conn);
    }

    fn bytes(&mut self, _: &mut (), _: RecvBuf, _: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        Ok(())
    }

    fn timeout(&mut self, _: &mut (), now: Instant, _: &mut Outbox<'_>) {
        self.fired.push(now);
    }
}

#[test]
fn a_deadline_moved_on_every_frame_leaves_no_pile_of_stale_entries() {
    let hub = MemoryHub::new();
    let at = Endpoint::Memory("timers".into());
    let clock = ManualClock::new(Instant::now());
    let mut shard = Shard::on_clock(
        hub.transport(),
        Timed::default(),
        Limits::default(),
        1 << 20,
        Arc::new(ShardMetrics::default()),
        clock.clone(),
    );
    shard.listen(&at).unwrap();
    let mut client = hub.transport();
    client.connect(&at).unwrap();
    for _ in 0..3 {
        shard.turn(Some(Duration::ZERO)).unwrap();
    }
    let conn = shard.service().conn.unwrap();
    let base = clock.now() + Duration::from_secs(60);
    for i in 0..50_000u64 {
        let deadline = base + Duration::from_micros(i);
        shard.core.set_timer(conn, Some(Some(deadline)));
        assert!(shard.core.timers.len() <= 2 + super::state::TIMERS_SLACK + 1);
    }
    let last = base + Duration::from_micros(49_999);
    clock.advance(last - clock.now() - Duration::from_micros(1));
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert!(shard.service().fired.is_empty(), "not due yet");
    clock.advance(Duration::from_micros(1));
    shard.turn(Some(Duration::ZERO)).unwrap();
    assert_eq!(
        shard.service().fired,
        vec![last],
        "fired once, at the live deadline"
    );
}
