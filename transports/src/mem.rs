//! The in-memory Transport_Adapter (SPEC TRN-4's "in-memory" transport of
//! DESIGN.md §2): connections between [`MemoryTransport`]s of one
//! [`MemoryHub`], for tests of protocol state machines that want real
//! backpressure, real connection life cycles and no sockets.
//!
//! It is deterministic: no threads, no clock, no randomness. Bytes move only
//! when the receiving transport polls, and every event comes out in an order
//! fixed by the calls made. Each direction of a connection is one bounded
//! byte queue sized by the writer's [`MemoryConfig::queue_capacity`], so a
//! reader that does not poll (or pauses) fills it and its peer gets
//! [`SendError::BufferFull`] (SPEC TRN-2), exactly as over TCP.
//!
//! A hub and its transports belong to one thread (`Rc`, not `Arc`); the
//! module never touches the OS.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::BytesMut;

use crate::driver::{
    BackendChoice, BackendKind, CloseReason, ConnId, DriverStats, ListenerId, Waker, WakerInner,
};
use crate::endpoint::Endpoint;
use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::slots::Slots;
use crate::transport::{Event, Transport, TransportError};

/// Settings of one [`MemoryTransport`]; every count is a hard ceiling.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    /// Most bytes this side may have sent and the peer not yet received
    /// (backpressure beyond that: [`SendError::BufferFull`], SPEC TRN-2).
    pub queue_capacity: usize,
    /// Largest [`Event::Received`] (a stream is delivered in pieces
    /// of at most this many bytes, as a driver delivers chunks).
    pub max_delivery: usize,
    /// Most connections (outgoing and accepted) at once.
    pub max_connections: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 256 * 1024,
            max_delivery: 64 * 1024,
            max_connections: 1024,
        }
    }
}

/// A registry of named listeners and the connections between the
/// [`MemoryTransport`]s made from it: an in-process network. Clones share
/// the same network.
#[derive(Clone, Default)]
pub struct MemoryHub {
    hub: Rc<RefCell<Hub>>,
}

impl MemoryHub {
    /// An empty network.
    pub fn new() -> Self {
        Self::default()
    }

    /// A transport on this network with the default [`MemoryConfig`].
    pub fn transport(&self) -> MemoryTransport {
        self.transport_with(MemoryConfig::default())
    }

    /// A transport on this network. Dropping it closes its connections
    /// (their peers see `Down(PeerClosed)`) and its listeners.
    pub fn transport_with(&self, config: MemoryConfig) -> MemoryTransport {
        let mut hub = self.hub.borrow_mut();
        hub.nodes.push(Some(Node {
            conns: Slots::with_capacity(config.max_connections),
            listeners: Slots::with_capacity(usize::MAX),
            inbox: VecDeque::new(),
            stats: DriverStats::default(),
            config,
        }));
        MemoryTransport {
            hub: Rc::clone(&self.hub),
            node: hub.nodes.len() - 1,
            woken: Arc::new(AtomicBool::new(false)),
            choice: BackendChoice {
                kind: BackendKind::Memory,
                reason: "in-memory transport".to_owned(),
            },
        }
    }
}

/// SPEC TRN-1 … TRN-5 in memory: a [`Transport`] whose connections are
/// byte queues to other transports of the same [`MemoryHub`].
///
/// [`Transport::poll`] never waits: with no other thread, nothing could
/// arrive while it did. Refused connections report
/// `Closed(ConnectFailed(ECONNREFUSED))`, as TCP does. A name has one
/// listener (`shared` listens are not joined).
pub struct MemoryTransport {
    hub: Rc<RefCell<Hub>>,
    node: usize,
    /// Set by the waker; the next poll reports [`Event::Woken`].
    woken: Arc<AtomicBool>,
    choice: BackendChoice,
}

#[derive(Default)]
struct Hub {
    /// Transports by index; `None` once dropped (indices are never reused).
    nodes: Vec<Option<Node>>,
    listeners: BTreeMap<String, (usize, ListenerId)>,
    /// Ordered, so that delivery order never depends on hashing.
    pipes: BTreeMap<u64, Pipe>,
    next_pipe: u64,
}

struct Node {
    config: MemoryConfig,
    conns: Slots<End>,
    /// Listener names, by listener id.
    listeners: Slots<String>,
    /// Events owed to this transport, delivered by its next poll.
    inbox: VecDeque<Event>,
    stats: DriverStats,
}

/// One side of a connection.
struct End {
    pipe: u64,
    /// 0 for the side that connected, 1 for the side that accepted.
    side: usize,
    paused: bool,
}

/// A connection: `dirs[s]` carries the bytes side `s` writes.
struct Pipe {
    /// The live ends: (transport, its id for this connection).
    ends: [Option<(usize, ConnId)>; 2],
    dirs: [Direction; 2],
}

struct Direction {
    bytes: VecDeque<u8>,
    capacity: usize,
    /// The writer closed: the reader gets the rest, then `Down(PeerClosed)`.
    fin: bool,
    /// The writer was refused and waits for an [`Event::Writable`].
    wants_writable: bool,
}

impl Direction {
    fn new(capacity: usize) -> Self {
        Self {
            bytes: VecDeque::new(),
            capacity,
            fin: false,
            wants_writable: false,
        }
    }
}

fn down(conn: ConnId, reason: CloseReason) -> Event {
    Event::Closed { conn, reason }
}

impl Hub {
    fn node(&mut self, node: usize) -> Option<&mut Node> {
        self.nodes.get_mut(node).and_then(Option::as_mut)
    }

    fn listen(&mut self, node: usize, name: &str) -> Result<ListenerId, TransportError> {
        let endpoint = || Endpoint::Memory(name.to_owned());
        if self.listeners.contains_key(name) {
            return Err(TransportError::AddressInUse(endpoint()));
        }
        let n = self.node(node).ok_or(TransportError::TooManyConnections)?;
        let listener = ListenerId(
            n.listeners
                .insert(name.to_owned())
                .map_err(|_| TransportError::AddressInUse(endpoint()))?,
        );
        self.listeners.insert(name.to_owned(), (node, listener));
        Ok(listener)
    }

    fn connect(&mut self, node: usize, name: &str) -> Result<ConnId, TransportError> {
        let key = self.next_pipe;
        let n = self.node(node).ok_or(TransportError::TooManyConnections)?;
        let capacity = n.config.queue_capacity;
        let id = ConnId(
            n.conns
                .insert(End {
                    pipe: key,
                    side: 0,
                    paused: false,
                })
                .map_err(|_| TransportError::TooManyConnections)?,
        );
        let accepted = self.listeners.get(name).copied().and_then(|(lnode, lid)| {
            let l = self.nodes.get_mut(lnode)?.as_mut()?;
            let end = End {
                pipe: key,
                side: 1,
                paused: false,
            };
            let aid = ConnId(l.conns.insert(end).ok()?);
            l.inbox.push_back(Event::Accepted {
                listener: lid,
                conn: aid,
            });
            Some((lnode, aid, l.config.queue_capacity))
        });
        let Some(n) = self.node(node) else {
            return Err(TransportError::TooManyConnections);
        };
        match accepted {
            Some((lnode, aid, lcapacity)) => {
                n.inbox.push_back(Event::Connected { conn: id });
                self.next_pipe += 1;
                self.pipes.insert(
                    key,
                    Pipe {
                        ends: [Some((node, id)), Some((lnode, aid))],
                        dirs: [Direction::new(capacity), Direction::new(lcapacity)],
                    },
                );
            }
            None => {
                // Nobody listens (or the listener's table is full): refused,
                // and the id dies at once.
                n.conns.remove(id.0);
                n.inbox
                    .push_back(down(id, CloseReason::ConnectFailed(libc::ECONNREFUSED)));
            }
        }
        Ok(id)
    }

    /// Closes `id` of `node`: the peer gets what was sent, then
    /// `Down(PeerClosed)`; what the peer sent and `node` did not read is
    /// discarded. `report` says whether `node` hears `Down(Local)`.
    fn close(&mut self, node: usize, id: ConnId, report: bool) {
        let Some(n) = self.node(node) else { return };
        let Some(end) = n.conns.remove(id.0) else {
            return;
        };
        if report {
            n.inbox.push_back(down(id, CloseReason::Local));
        }
        self.detach(end);
    }

    /// Takes a closed end out of its pipe, and the pipe away once both are gone.
    fn detach(&mut self, end: End) {
        let Some(pipe) = self.pipes.get_mut(&end.pipe) else {
            return;
        };
        pipe.ends[end.side] = None;
        pipe.dirs[end.side].fin = true;
        pipe.dirs[1 - end.side].bytes = VecDeque::new();
        if pipe.ends.iter().all(Option::is_none) {
            self.pipes.remove(&end.pipe);
        }
    }

    fn send(&mut self, node: usize, id: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        let n = self.node(node).ok_or(SendError::UnknownConnection)?;
        let end = n.conns.get(id.0).ok_or(SendError::UnknownConnection)?;
        let (key, side) = (end.pipe, end.side);
        let pipe = self
            .pipes
            .get_mut(&key)
            .ok_or(SendError::UnknownConnection)?;
        if pipe.ends[1 - side].is_none() {
            // The reader is gone; our `Down(PeerClosed)` is on its way.
            return Err(SendError::Closed);
        }
        let dir = &mut pipe.dirs[side];
        if dir.bytes.len().saturating_add(bytes.len()) > dir.capacity {
            dir.wants_writable = true;
            return Err(SendError::BufferFull);
        }
        dir.bytes.extend(bytes);
        n_stats_out(&mut self.nodes, node, bytes.len());
        Ok(())
    }

    fn outgoing(&mut self, node: usize, id: ConnId) -> Option<&mut Direction> {
        let end = self.node(node)?.conns.get(id.0)?;
        let (key, side) = (end.pipe, end.side);
        Some(&mut self.pipes.get_mut(&key)?.dirs[side])
    }

    fn want_writable(&mut self, node: usize, id: ConnId) {
        let Some(dir) = self.outgoing(node, id) else {
            return;
        };
        if dir.bytes.len() <= dir.capacity / 2 {
            if let Some(n) = self.node(node) {
                n.inbox.push_back(Event::Writable { conn: id });
            }
        } else {
            dir.wants_writable = true;
        }
    }

    fn limit(&mut self, node: usize, id: ConnId, max: usize) {
        if let Some(dir) = self.outgoing(node, id) {
            dir.capacity = dir.capacity.min(max);
        }
    }

    fn set_paused(&mut self, node: usize, id: ConnId, paused: bool) {
        if let Some(end) = self.node(node).and_then(|n| n.conns.get_mut(id.0)) {
            end.paused = paused;
        }
    }

    /// Delivers to `node`: owed events first, then, connection by connection
    /// in id order, the bytes waiting for it and the peer's close.
    fn poll(&mut self, node: usize, events: &mut Vec<Event>) {
        let Self { nodes, pipes, .. } = self;
        let Some(Some(n)) = nodes.get_mut(node) else {
            return;
        };
        events.extend(n.inbox.drain(..));
        let max = n.config.max_delivery.max(1);
        let ids: Vec<ConnId> = n.conns.ids().map(ConnId).collect();
        let mut writable = Vec::new();
        for id in ids {
            let Some(end) = n.conns.get(id.0) else {
                continue;
            };
            let (key, side) = (end.pipe, end.side);
            if end.paused {
                continue;
            }
            let Some(pipe) = pipes.get_mut(&key) else {
                continue;
            };
            let dir = &mut pipe.dirs[1 - side];
            while !dir.bytes.is_empty() {
                let take = dir.bytes.len().min(max);
                let mut data = BytesMut::with_capacity(take);
                let (a, b) = dir.bytes.as_slices();
                let from_a = take.min(a.len());
                data.extend_from_slice(&a[..from_a]);
                data.extend_from_slice(&b[..take - from_a]);
                dir.bytes.drain(..take);
                n.stats.bytes_in += take as u64;
                events.push(Event::Received {
                    conn: id,
                    data: RecvBuf::from(data),
                });
            }
            if dir.wants_writable {
                dir.wants_writable = false;
                if let Some(writer) = pipe.ends[1 - side] {
                    writable.push(writer);
                }
            }
            if dir.fin {
                events.push(down(id, CloseReason::PeerClosed));
                if let Some(end) = n.conns.remove(id.0) {
                    pipe.ends[end.side] = None;
                    pipe.dirs[end.side].fin = true;
                    if pipe.ends.iter().all(Option::is_none) {
                        pipes.remove(&key);
                    }
                }
            }
        }
        // The queues just drained are empty: every refused writer has room.
        for (wnode, wid) in writable {
            if let Some(Some(w)) = nodes.get_mut(wnode) {
                w.inbox.push_back(Event::Writable { conn: wid });
            }
        }
    }

    /// A transport went away: its listeners close and its connections drop.
    fn remove_node(&mut self, node: usize) {
        let Some(n) = self.nodes.get_mut(node).and_then(Option::take) else {
            return;
        };
        self.listeners.retain(|_, (owner, _)| *owner != node);
        let mut conns = n.conns;
        let ids: Vec<_> = conns.ids().collect();
        for id in ids {
            if let Some(end) = conns.remove(id) {
                self.detach(end);
            }
        }
    }
}

/// Adds `n` bytes sent to `node`'s counters.
fn n_stats_out(nodes: &mut [Option<Node>], node: usize, n: usize) {
    if let Some(Some(node)) = nodes.get_mut(node) {
        node.stats.bytes_out += n as u64;
    }
}

impl MemoryTransport {
    fn name(endpoint: &Endpoint) -> Result<&str, TransportError> {
        match endpoint {
            Endpoint::Memory(name) => Ok(name),
            other => Err(TransportError::UnsupportedEndpoint {
                transport: "memory",
                endpoint: other.clone(),
            }),
        }
    }
}

impl Transport for MemoryTransport {
    fn backend(&self) -> &BackendChoice {
        &self.choice
    }

    fn listen(
        &mut self,
        at: &Endpoint,
        _shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let name = Self::name(at)?;
        let listener = self.hub.borrow_mut().listen(self.node, name)?;
        Ok((listener, at.clone()))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let name = Self::name(to)?;
        self.hub.borrow_mut().connect(self.node, name)
    }

    fn close(&mut self, id: ConnId) {
        self.hub.borrow_mut().close(self.node, id, true);
    }

    fn send(&mut self, id: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        self.hub.borrow_mut().send(self.node, id, bytes)
    }

    fn queued(&self, id: ConnId) -> usize {
        self.hub
            .borrow_mut()
            .outgoing(self.node, id)
            .map_or(0, |d| d.bytes.len())
    }

    fn want_writable(&mut self, id: ConnId) {
        self.hub.borrow_mut().want_writable(self.node, id);
    }

    fn limit_send_queue(&mut self, id: ConnId, max: usize) {
        self.hub.borrow_mut().limit(self.node, id, max);
    }

    fn pause_reading(&mut self, id: ConnId) {
        self.hub.borrow_mut().set_paused(self.node, id, true);
    }

    fn resume_reading(&mut self, id: ConnId) {
        self.hub.borrow_mut().set_paused(self.node, id, false);
    }

    fn poll(&mut self, events: &mut Vec<Event>, _timeout: Option<Duration>) -> io::Result<()> {
        if self.woken.swap(false, Ordering::Acquire) {
            events.push(Event::Woken);
        }
        self.hub.borrow_mut().poll(self.node, events);
        Ok(())
    }

    fn waker(&self) -> Waker {
        Waker(WakerInner::Flag(self.woken.clone()))
    }

    fn stats(&self) -> DriverStats {
        let mut hub = self.hub.borrow_mut();
        hub.node(self.node)
            .map_or_else(DriverStats::default, |n| DriverStats {
                connections: n.conns.len(),
                ..n.stats
            })
    }
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        self.hub.borrow_mut().remove_node(self.node);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn mem(name: &str) -> Endpoint {
        Endpoint::Memory(name.to_owned())
    }

    /// The events, with received bytes as plain vectors.
    fn seen(events: &mut Vec<Event>) -> Vec<String> {
        events
            .drain(..)
            .map(|e| match e {
                Event::Received { conn, data } => {
                    format!("{} got {:?}", conn.as_u64(), String::from_utf8_lossy(&data))
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_connection_carries_bytes_both_ways_in_order() {
        let hub = MemoryHub::new();
        let (mut a, mut b) = (hub.transport(), hub.transport());
        b.listen(&mem("b"), false).unwrap();
        let id = a.connect(&mem("b")).unwrap();
        a.send(id, b"hello").unwrap();
        let mut events = Vec::new();
        b.poll(&mut events, None).unwrap();
        let Event::Accepted { conn: bid, .. } = events[0] else {
            panic!("{events:?}")
        };
        assert_eq!(
            seen(&mut events)[1..],
            [format!("{} got \"hello\"", bid.as_u64())]
        );
        b.send(bid, b"world").unwrap();
        a.poll(&mut events, None).unwrap();
        assert_eq!(
            seen(&mut events),
            [
                format!("{:?}", Event::Connected { conn: id }),
                format!("{} got \"world\"", id.as_u64())
            ]
        );
        assert_eq!(a.stats().bytes_out, 5);
        assert_eq!(a.stats().bytes_in, 5);
    }

    #[test]
    fn dropping_a_transport_closes_its_connections_and_listeners() {
        let hub = MemoryHub::new();
        let mut a = hub.transport();
        let mut b = hub.transport();
        b.listen(&mem("b"), false).unwrap();
        let id = a.connect(&mem("b")).unwrap();
        drop(b);
        let mut events = Vec::new();
        a.poll(&mut events, None).unwrap();
        assert!(
            matches!(events.last(), Some(Event::Closed { conn, reason: CloseReason::PeerClosed }) if *conn == id),
            "{events:?}"
        );
        let mut c = hub.transport();
        c.listen(&mem("b"), false).unwrap();
    }

    #[test]
    fn a_wake_makes_the_next_poll_report_woken() {
        let hub = MemoryHub::new();
        let mut a = hub.transport();
        let waker = a.waker();
        std::thread::spawn(move || waker.wake().unwrap())
            .join()
            .unwrap();
        let mut events = Vec::new();
        a.poll(&mut events, None).unwrap();
        assert!(matches!(events[..], [Event::Woken]), "{events:?}");
        a.poll(&mut events, None).unwrap();
        assert_eq!(events.len(), 1);
    }
}
