//! The TCP Transport_Adapter (SPEC TRN-4): the [`Driver`] (io_uring or
//! epoll) behind the uniform [`TransportAdapter`] interface.
//!
//! It adds no queue of its own: sends go straight into the driver's bounded
//! send queue (SPEC TRN-2) and received chunks are copied out and given back
//! to the driver's buffer ring at once, so a slow consumer never holds the
//! core's receive memory. The copy is the price of a uniform, owned-bytes
//! interface; the engine's hot path may keep using the driver's chunks.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use crate::adapter::{AdapterEvent, ConnectionState, Endpoint, TransportAdapter, TransportError};
use crate::driver::{ConnId, Driver, DriverConfig, Event, ListenerId};
use crate::sendq::SendError;

/// SPEC TRN-1 … TRN-5 over TCP: a [`TransportAdapter`] on one core's
/// [`Driver`], either backend.
pub struct TcpAdapter {
    driver: Driver,
    reuse_port: bool,
    /// Driver events, reused across polls.
    raw: Vec<Event>,
    /// Events owed before the next driver events (`Connecting`).
    pending: VecDeque<AdapterEvent>,
}

impl TcpAdapter {
    /// An adapter on a new driver set up from `config` (the backend choice
    /// is logged by [`Driver::new`]).
    pub fn new(config: DriverConfig) -> io::Result<Self> {
        Driver::new(config).map(Self::from_driver)
    }

    /// An adapter on an existing driver, which it then owns.
    pub fn from_driver(driver: Driver) -> Self {
        Self {
            driver,
            reuse_port: false,
            raw: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    /// Listens with SO_REUSEPORT from now on, so that every core's adapter
    /// can listen on the same port.
    pub fn set_reuse_port(&mut self, on: bool) {
        self.reuse_port = on;
    }

    /// The driver: its backend choice, counters and memory report.
    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    /// Gives the driver back.
    pub fn into_driver(self) -> Driver {
        self.driver
    }

    fn tcp_addr(endpoint: &Endpoint) -> Result<std::net::SocketAddr, TransportError> {
        match endpoint {
            Endpoint::Tcp(addr) => Ok(*addr),
            other => Err(TransportError::UnsupportedEndpoint {
                adapter: "tcp",
                endpoint: other.clone(),
            }),
        }
    }
}

impl TransportAdapter for TcpAdapter {
    fn listen(&mut self, endpoint: &Endpoint) -> Result<(ListenerId, Endpoint), TransportError> {
        let addr = Self::tcp_addr(endpoint)?;
        let (listener, bound) = self.driver.listen(addr, self.reuse_port)?;
        Ok((listener, Endpoint::Tcp(bound)))
    }

    fn connect(&mut self, endpoint: &Endpoint) -> Result<ConnId, TransportError> {
        let addr = Self::tcp_addr(endpoint)?;
        let id = self.driver.connect(addr)?;
        self.pending.push_back(AdapterEvent::StateChanged {
            id,
            state: ConnectionState::Connecting,
        });
        Ok(id)
    }

    fn disconnect(&mut self, id: ConnId) {
        self.driver.close(id);
    }

    fn send(&mut self, id: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        self.driver.send(id, bytes)
    }

    fn queued(&self, id: ConnId) -> usize {
        self.driver.queued(id)
    }

    fn want_writable(&mut self, id: ConnId) {
        self.driver.want_writable(id);
    }

    fn pause_reading(&mut self, id: ConnId) {
        self.driver.pause_reading(id);
    }

    fn resume_reading(&mut self, id: ConnId) {
        self.driver.resume_reading(id);
    }

    fn poll(
        &mut self,
        events: &mut Vec<AdapterEvent>,
        timeout: Option<Duration>,
    ) -> Result<(), TransportError> {
        // Owed events go first, and mean the driver must not wait.
        let timeout = if self.pending.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        events.extend(self.pending.drain(..));
        let Self { driver, raw, .. } = self;
        driver.poll(raw, timeout)?;
        for event in raw.drain(..) {
            match event {
                Event::Accepted { listener, conn } => {
                    events.push(AdapterEvent::Accepted { listener, id: conn });
                    events.push(AdapterEvent::StateChanged {
                        id: conn,
                        state: ConnectionState::Up,
                    });
                }
                Event::Connected { conn } => events.push(AdapterEvent::StateChanged {
                    id: conn,
                    state: ConnectionState::Up,
                }),
                Event::Received { conn, chunk } => {
                    // SPEC TRN-5: a verbatim copy; the chunk goes back at once.
                    let bytes = driver.recv_data(&chunk).to_vec();
                    driver.recycle(chunk);
                    events.push(AdapterEvent::Received { id: conn, bytes });
                }
                Event::Writable { conn } => events.push(AdapterEvent::Writable { id: conn }),
                Event::Closed { conn, reason } => events.push(AdapterEvent::StateChanged {
                    id: conn,
                    state: ConnectionState::Down(reason),
                }),
                // The wake-up has done its job: poll returned.
                Event::Woken => {}
            }
        }
        Ok(())
    }
}
