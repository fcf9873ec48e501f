//! The loop that drives one connection's [`DtpEndpoint`] after an input,
//! once for both sides: the terminal's [`DtpGateway`](super::DtpGateway)
//! and the Fay's [`DtpClient`](super::DtpClient) run it after every frame,
//! timeout and writable turn.
//!
//! **Owns**: the order — drain the endpoint's events into a handler, let
//! the handler transmit (sealed bytes into the outbox), look again until
//! no event is left, re-arm the connection's timer, close the connection
//! once the endpoint has closed. **Never touches**: what an event means
//! (the handler's) or the protocol's rules (the endpoint's).

use std::time::Instant;

use super::{DtpEndpoint, DtpEvent};
use dtp_engine::Outbox;

/// What one side does with its endpoint's output, called by
/// [`drive_endpoint`]. `U` is the service's message to its control-plane
/// half ([`Outbox::to_control`]).
pub trait EndpointHandler<U> {
    /// One event of the endpoint, at `now`.
    fn event(
        &mut self,
        ep: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
        out: &mut Outbox<'_, U>,
    );

    /// Every event drained (called after each batch, an empty one too).
    fn events_done(&mut self, ep: &mut DtpEndpoint, now: Instant) {
        let _ = (ep, now);
    }

    /// Appends what the connection sends now; by default the endpoint's
    /// sealed frames. A handler may also ask to close
    /// ([`Outbox::close`]) or to be told when there is room
    /// ([`Outbox::want_writable`]).
    fn transmit(&mut self, ep: &mut DtpEndpoint, now: Instant, out: &mut Outbox<'_, U>) {
        let _ = now;
        ep.poll_transmit(out.wire());
    }

    /// When the connection is next to time out; by default the endpoint's
    /// deadline.
    fn timer(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        let _ = now;
        ep.poll_timeout()
    }
}

/// Drains `ep` after an input at `now`: its events to `handler`, what it sends into
/// `out` after every batch of events (a handler may queue frames while
/// handling one), until no event is left or the handler closes; then the
/// timer from [`EndpointHandler::timer`], and a close once the endpoint
/// has closed. True when the connection is closing.
pub fn drive_endpoint<U, H: EndpointHandler<U> + ?Sized>(
    ep: &mut DtpEndpoint,
    out: &mut Outbox<'_, U>,
    now: Instant,
    handler: &mut H,
) -> bool {
    let mut closed = false;
    loop {
        let mut any = false;
        while let Some(event) = ep.poll_event() {
            any = true;
            closed |= matches!(event, DtpEvent::Closed { .. });
            handler.event(ep, event, now, out);
        }
        handler.events_done(ep, now);
        handler.transmit(ep, now, out);
        if !any || out.closing() {
            break;
        }
    }
    out.set_timer(handler.timer(ep, now));
    if closed || ep.is_closed() {
        out.close();
    }
    out.closing()
}
