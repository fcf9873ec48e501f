//! What the gateway's services and its control-plane halves say to each
//! other through the runtime's rings (the runtime carries these without
//! looking inside), and the control plane that runs the terminal plane and
//! the realtime plane side by side on the control thread.

use std::sync::Arc;
use std::time::Instant;

use dtp_codec::ControlMessage;
use dtp_transports::ConnId;

use crate::realtime::{RtDecision, RtEvent, RtRequest};
use dtp_engine::{ControlPlane, ControlWaker, Decision, Request};

/// What the gateway's connections tell the control thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayUp {
    /// The connection's peer authenticated as this Fay (CAP finished or a
    /// session resumed), so its sessions can follow it (SPEC LIV-1).
    Identified {
        /// The connection.
        conn: ConnId,
        /// The authenticated `fay_id` (boxed: ring slots stay small).
        fay_id: Box<str>,
    },
    /// A connection sent a control-plane message (decrypted by its
    /// service; boxed: ring slots stay small, and these are not the hot
    /// path).
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Box<ControlMessage>,
    },
    /// A realtime request: subscribe, publish, snapshot (its connection is
    /// in it).
    Realtime(Box<RtRequest>),
}

/// What the control thread tells the gateway's services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayDown {
    /// Send this message on the connection, through its protocol (sealed
    /// on a DTP session, a plain control frame otherwise).
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Box<ControlMessage>,
    },
    /// A realtime answer, for the realtime front end.
    Realtime(Box<RtDecision>),
    /// A committed event for every subscriber of its stream on the shard
    /// (as [`RtDecision::Event`], without the box: one goes to every shard
    /// for every event published, and each box was an allocation and a
    /// free per shard).
    RtEvent(Arc<RtEvent>),
}

/// A request of the gateway's rings.
pub type GatewayRequest = Request<GatewayUp>;
/// A decision of the gateway's rings.
pub type GatewayDecision = Decision<GatewayDown>;
/// Where a gateway control plane puts its decisions.
pub type Decisions = Vec<(usize, GatewayDecision)>;

/// An event one plane publishes on a realtime stream (e.g. the terminal
/// plane's session changes, SPEC RT-6 built-in streams); the realtime
/// plane beside it on the control thread commits and fans it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneEvent {
    /// The stream.
    pub stream: &'static str,
    /// The event type.
    pub event_type: &'static str,
    /// The payload: one JSON object, with no credentials, account ids or
    /// free text (SPEC RT-3).
    pub payload: Vec<u8>,
}

/// A gateway control plane that may publish on the built-in realtime
/// streams.
pub trait GatewayPlane: ControlPlane<GatewayUp, GatewayDown> {
    /// Someone will drain this plane's realtime events
    /// ([`GatewayPlane::drain_events`]): until this is called, a plane need
    /// not build them at all. The default ignores it.
    fn enable_events(&mut self) {}

    /// Moves the events this plane published on realtime streams since the
    /// last call into `out` (called after every `handle` and `tick`). The
    /// default publishes none.
    fn drain_events(&mut self, out: &mut Vec<PlaneEvent>) {
        let _ = out;
    }
}

impl<P: GatewayPlane + ?Sized> GatewayPlane for Box<P> {
    fn enable_events(&mut self) {
        (**self).enable_events();
    }

    fn drain_events(&mut self, out: &mut Vec<PlaneEvent>) {
        (**self).drain_events(out);
    }
}

/// Two planes on one control thread: realtime requests go to the realtime
/// plane `rt`, every other request (and the waker) to `main`, whose
/// events `rt` publishes.
pub struct WithRealtime<P> {
    /// The first plane (e.g. the terminal plane).
    pub main: P,
    /// The realtime plane.
    pub rt: crate::realtime::RealtimePlane,
    /// `main`'s events on their way to `rt` (emptied at every tick).
    events: Vec<PlaneEvent>,
}

impl<P: GatewayPlane> WithRealtime<P> {
    /// `main` beside the realtime plane `rt` (`main`'s events switched on).
    pub fn new(mut main: P, rt: crate::realtime::RealtimePlane) -> Self {
        main.enable_events();
        Self {
            main,
            rt,
            events: Vec::new(),
        }
    }

    /// Hands what `main` published to `rt`, in order.
    fn forward(&mut self, now: Instant, out: &mut Decisions) {
        self.main.drain_events(&mut self.events);
        if !self.events.is_empty() {
            self.rt.publish_events(&mut self.events, now, out);
            self.events.clear();
        }
    }
}

impl<P: GatewayPlane> ControlPlane<GatewayUp, GatewayDown> for WithRealtime<P> {
    fn handle(&mut self, shard: usize, request: GatewayRequest, now: Instant, out: &mut Decisions) {
        match request {
            Request::Service(GatewayUp::Realtime(r)) => self.rt.handle_request(shard, *r, now, out),
            // The events a decision made are published at the next tick,
            // which the control loop runs right after it routed the
            // batch's decisions and before it takes another batch: a
            // decision does not wait for the publications of its batch
            // (they cost more than the decisions with the built-in streams
            // on), and a snapshot asked for after the decision still finds
            // them.
            other => self.main.handle(shard, other, now, out),
        }
    }

    fn tick(&mut self, now: Instant, out: &mut Decisions) -> Option<Instant> {
        let a = self.main.tick(now, out);
        self.forward(now, out);
        let b = self.rt.tick(now, out);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn attach(&mut self, waker: ControlWaker) {
        self.rt.attach(waker.clone());
        self.main.attach(waker);
    }
}
