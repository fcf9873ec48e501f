//! Two services on one shard, and two planes on one control thread: how
//! `dtp serve` runs DTP and the realtime front end on the same cores.

use std::time::Instant;

use dtp_codec::{ControlMessage, ErrorCode, LogicalFrame};
use dtp_transports::{CloseReason, ConnId, RecvBuf};

use crate::control::{ControlPlane, ControlWaker, Decision, PlaneEvent, Request};
use crate::realtime::RtDecision;
use crate::service::{Connections, Ctl, InputMode, Origin, Outbox, Service};

/// Two services by listener: connections accepted by the first `split`
/// listeners (in `EngineConfig::listen` order) are `A`'s, the others
/// `B`'s (which sees its listeners numbered from 0); connections the shard
/// opens itself are `A`'s. Realtime decisions go to `B`.
pub struct Pair<A, B> {
    /// The first service.
    pub a: A,
    /// The second service.
    pub b: B,
    split: usize,
}

impl<A, B> Pair<A, B> {
    /// `a` on listeners `0..split`, `b` on the rest.
    pub fn new(a: A, b: B, split: usize) -> Self {
        Self { a, b, split }
    }
}

/// A connection of a [`Pair`].
pub enum PairConn<A, B> {
    /// One of the first service's.
    A(A),
    /// One of the second service's.
    B(B),
}

/// `B`'s view of a [`Pair`]'s connections.
struct Seconds<'a, CA, CB> {
    inner: &'a mut dyn Connections<PairConn<CA, CB>>,
}

impl<CA, CB> Connections<CB> for Seconds<'_, CA, CB> {
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut CB, &mut Outbox<'_>)) -> bool {
        let mut found = false;
        self.inner.visit(conn, &mut |c, out| {
            if let PairConn::B(b) = c {
                found = true;
                f(b, out);
            }
        });
        found
    }
}

impl<A: Service, B: Service> Service for Pair<A, B> {
    type Conn = PairConn<A::Conn, B::Conn>;

    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_>) -> Self::Conn {
        match origin {
            Origin::Accepted { listener } if listener >= self.split => {
                let origin = Origin::Accepted {
                    listener: listener - self.split,
                };
                PairConn::B(self.b.open(conn, origin, out))
            }
            _ => PairConn::A(self.a.open(conn, origin, out)),
        }
    }

    fn input_mode(&self, state: &Self::Conn) -> InputMode {
        match state {
            PairConn::A(s) => self.a.input_mode(s),
            PairConn::B(s) => self.b.input_mode(s),
        }
    }

    fn frame(
        &mut self,
        state: &mut Self::Conn,
        frame: LogicalFrame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        match state {
            PairConn::A(s) => self.a.frame(s, frame, out),
            PairConn::B(s) => self.b.frame(s, frame, out),
        }
    }

    fn frame_wire(
        &mut self,
        state: &mut Self::Conn,
        wire: RecvBuf,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        match state {
            PairConn::A(s) => self.a.frame_wire(s, wire, out),
            PairConn::B(s) => self.b.frame_wire(s, wire, out),
        }
    }

    fn bytes(
        &mut self,
        state: &mut Self::Conn,
        data: RecvBuf,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        match state {
            PairConn::A(s) => self.a.bytes(s, data, out),
            PairConn::B(s) => self.b.bytes(s, data, out),
        }
    }

    fn control(&mut self, state: &mut Self::Conn, msg: ControlMessage, out: &mut Outbox<'_>) {
        match state {
            PairConn::A(s) => self.a.control(s, msg, out),
            PairConn::B(s) => self.b.control(s, msg, out),
        }
    }

    fn realtime(&mut self, decision: RtDecision, conns: &mut dyn Connections<Self::Conn>) {
        self.b.realtime(decision, &mut Seconds { inner: conns });
    }

    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_>) {
        match state {
            PairConn::A(s) => self.a.timeout(s, now, out),
            PairConn::B(s) => self.b.timeout(s, now, out),
        }
    }

    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_>) {
        match state {
            PairConn::A(s) => self.a.writable(s, out),
            PairConn::B(s) => self.b.writable(s, out),
        }
    }

    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        self.a.connect_failed(conn, errno);
    }

    fn stopping(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_>) {
        match state {
            PairConn::A(s) => self.a.stopping(s, out),
            PairConn::B(s) => self.b.stopping(s, out),
        }
    }

    fn close(&mut self, state: Self::Conn, reason: CloseReason) {
        match state {
            PairConn::A(s) => self.a.close(s, reason),
            PairConn::B(s) => self.b.close(s, reason),
        }
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        let a = self.a.tick(now, ctl);
        let b = self.b.tick(now, ctl);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Two planes on one control thread: realtime requests go to `B`, every
/// other request (and the waker) to `A`.
pub struct PairPlane<A, B> {
    /// The first plane (e.g. the terminal plane).
    pub a: A,
    /// The realtime plane.
    pub b: B,
    /// `A`'s events on their way to `B` (emptied at once).
    pub events: Vec<PlaneEvent>,
}

impl<A: ControlPlane, B: ControlPlane> PairPlane<A, B> {
    /// `a` beside the realtime plane `b` (`a`'s events switched on).
    pub fn new(mut a: A, b: B) -> Self {
        a.enable_events();
        Self {
            a,
            b,
            events: Vec::new(),
        }
    }

    /// Hands what `A` published to `B`, in order.
    fn forward(&mut self, now: Instant, out: &mut Vec<(usize, Decision)>) {
        self.a.drain_events(&mut self.events);
        if !self.events.is_empty() {
            self.b.publish_events(&mut self.events, now, out);
            self.events.clear();
        }
    }
}

impl<A: ControlPlane, B: ControlPlane> ControlPlane for PairPlane<A, B> {
    fn handle(
        &mut self,
        shard: usize,
        request: Request,
        now: Instant,
        out: &mut Vec<(usize, Decision)>,
    ) {
        match request {
            Request::Realtime(_) => self.b.handle(shard, request, now, out),
            _ => {
                self.a.handle(shard, request, now, out);
                self.forward(now, out);
            }
        }
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<(usize, Decision)>) -> Option<Instant> {
        let a = self.a.tick(now, out);
        self.forward(now, out);
        let b = self.b.tick(now, out);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn attach(&mut self, waker: ControlWaker) {
        self.a.attach(waker);
    }
}
