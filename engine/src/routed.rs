//! Two services on one shard, routed by listener name: how a gateway runs
//! several protocols (DTP and its realtime front end, say) on the same
//! cores. Nest [`Routed`] for more than two.

use std::time::Instant;

use dtp_codec::ErrorCode;
use dtp_transports::{CloseReason, ConnId, RecvBuf};

use crate::runtime::Listener;
use crate::service::{Connections, Ctl, Origin, Outbox, Service};

/// Two services by listener: connections accepted by the listeners named
/// for `B` are `B`'s (which sees its listeners numbered from 0 among its
/// own), all others `A`'s (likewise), and so are connections the shard
/// opens itself. Both speak the same messages to the control thread; a
/// decision is offered to `A` first, then to `B`.
pub struct Routed<A, B> {
    /// The first service.
    pub a: A,
    /// The second service.
    pub b: B,
    /// For each listener of the shard (in `EngineConfig::listen` order):
    /// whether it is `B`'s, and its number among its service's listeners.
    routes: Vec<(bool, usize)>,
}

impl<A, B> Routed<A, B> {
    /// `b` on the listeners of `listeners` named `b_name`, `a` on the rest.
    pub fn by_name(listeners: &[Listener], b_name: &str, a: A, b: B) -> Self {
        let (mut na, mut nb) = (0, 0);
        let routes = listeners
            .iter()
            .map(|l| {
                let is_b = l.name == b_name;
                let n = if is_b { &mut nb } else { &mut na };
                *n += 1;
                (is_b, *n - 1)
            })
            .collect();
        Self { a, b, routes }
    }

    /// Which service a connection of `origin` is for, and its origin as
    /// that service sees it.
    fn route(&self, origin: Origin) -> (bool, Origin) {
        match origin {
            Origin::Accepted { listener } => {
                let (is_b, own) = self.routes.get(listener).copied().unwrap_or((false, 0));
                (is_b, Origin::Accepted { listener: own })
            }
            Origin::Connected => (false, origin),
        }
    }
}

/// A connection of a [`Routed`] pair.
pub enum RoutedConn<A, B> {
    /// One of the first service's.
    A(A),
    /// One of the second service's.
    B(B),
}

/// One side's view of a [`Routed`] pair's connections.
struct Side<'a, CA, CB, U, const B: bool> {
    inner: &'a mut dyn Connections<RoutedConn<CA, CB>, U>,
}

impl<CA, CB, U> Connections<CA, U> for Side<'_, CA, CB, U, false> {
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut CA, &mut Outbox<'_, U>)) -> bool {
        let mut found = false;
        self.inner.visit(conn, &mut |c, out| {
            if let RoutedConn::A(a) = c {
                found = true;
                f(a, out);
            }
        });
        found
    }
}

impl<CA, CB, U> Connections<CB, U> for Side<'_, CA, CB, U, true> {
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut CB, &mut Outbox<'_, U>)) -> bool {
        let mut found = false;
        self.inner.visit(conn, &mut |c, out| {
            if let RoutedConn::B(b) = c {
                found = true;
                f(b, out);
            }
        });
        found
    }
}

/// Runs `$body` with `$s` bound to the service of `$state`'s side and
/// `$c` to its connection state.
macro_rules! either {
    ($self:ident, $state:expr, |$s:ident, $c:ident| $body:expr) => {
        match $state {
            RoutedConn::A($c) => {
                let $s = &mut $self.a;
                $body
            }
            RoutedConn::B($c) => {
                let $s = &mut $self.b;
                $body
            }
        }
    };
}

impl<A, B> Service for Routed<A, B>
where
    A: Service,
    B: Service<Up = A::Up, Down = A::Down>,
{
    type Conn = RoutedConn<A::Conn, B::Conn>;
    type Up = A::Up;
    type Down = A::Down;

    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_, Self::Up>) -> Self::Conn {
        match self.route(origin) {
            (true, origin) => RoutedConn::B(self.b.open(conn, origin, out)),
            (false, origin) => RoutedConn::A(self.a.open(conn, origin, out)),
        }
    }

    fn bytes(
        &mut self,
        state: &mut Self::Conn,
        data: RecvBuf,
        out: &mut Outbox<'_, Self::Up>,
    ) -> Result<(), ErrorCode> {
        either!(self, state, |s, c| s.bytes(c, data, out))
    }

    fn close_with(
        &mut self,
        state: &mut Self::Conn,
        code: ErrorCode,
        reason: &str,
        out: &mut Outbox<'_, Self::Up>,
    ) {
        either!(self, state, |s, c| s.close_with(c, code, reason, out))
    }

    fn decision(
        &mut self,
        decision: Self::Down,
        conns: &mut dyn Connections<Self::Conn, Self::Up>,
    ) -> Option<Self::Down> {
        let rest = self
            .a
            .decision(decision, &mut Side::<_, _, _, false> { inner: &mut *conns })?;
        self.b
            .decision(rest, &mut Side::<_, _, _, true> { inner: conns })
    }

    fn decisions_done(&mut self, conns: &mut dyn Connections<Self::Conn, Self::Up>) {
        self.a
            .decisions_done(&mut Side::<_, _, _, false> { inner: &mut *conns });
        self.b
            .decisions_done(&mut Side::<_, _, _, true> { inner: conns });
    }

    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_, Self::Up>) {
        either!(self, state, |s, c| s.timeout(c, now, out))
    }

    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        either!(self, state, |s, c| s.writable(c, out))
    }

    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        self.a.connect_failed(conn, errno);
    }

    fn stopping(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        either!(self, state, |s, c| s.stopping(c, out))
    }

    fn close(&mut self, state: Self::Conn, reason: CloseReason, now: Instant) {
        match state {
            RoutedConn::A(c) => self.a.close(c, reason, now),
            RoutedConn::B(c) => self.b.close(c, reason, now),
        }
    }

    fn attach(&mut self, notifier: crate::Notifier) {
        self.a.attach(notifier.clone());
        self.b.attach(notifier);
    }

    fn notified(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        either!(self, state, |s, c| s.notified(c, out))
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
