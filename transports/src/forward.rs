//! The [`Transport`](crate::Transport) impl of a socket backend: each
//! method forwards to the backend's own method of that name (the backends
//! differ in how they do the work, not in what the trait asks).

/// Implements `Transport` for `$backend` by forwarding to its inherent
/// methods (`listen`, `connect`, `send`, `send_shared`, `queued`,
/// `want_writable`, `set_paused`, `close`, `poll`, `waker`, `stats`) and
/// its `choice` and `bufs` fields.
macro_rules! socket_transport {
    ($backend:ident, $doc:literal) => {
        #[doc = $doc]
        impl Transport for $backend {
            fn backend(&self) -> &BackendChoice {
                &self.choice
            }
            fn listen(
                &mut self,
                at: &Endpoint,
                shared: bool,
            ) -> Result<(ListenerId, Endpoint), TransportError> {
                $backend::listen(self, at, shared)
            }
            fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
                $backend::connect(self, to)
            }
            fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
                $backend::send(self, conn, bytes)
            }
            fn send_shared(&mut self, conn: ConnId, bytes: &bytes::Bytes) -> Result<(), SendError> {
                $backend::send_shared(self, conn, bytes)
            }
            fn queued(&self, conn: ConnId) -> usize {
                $backend::queued(self, conn)
            }
            fn want_writable(&mut self, conn: ConnId) {
                $backend::want_writable(self, conn);
            }
            fn pause_reading(&mut self, conn: ConnId) {
                self.set_paused(conn, true);
            }
            fn resume_reading(&mut self, conn: ConnId) {
                self.set_paused(conn, false);
            }
            fn close(&mut self, conn: ConnId) {
                $backend::close(self, conn);
            }
            fn poll(
                &mut self,
                events: &mut Vec<Event>,
                timeout: Option<Duration>,
            ) -> io::Result<()> {
                $backend::poll(self, events, timeout)
            }
            fn waker(&self) -> Waker {
                $backend::waker(self)
            }
            fn stats(&self) -> DriverStats {
                $backend::stats(self)
            }
            fn region(&self) -> Option<&dtp_pool::Region> {
                Some(self.bufs.region())
            }
        }
    };
}

pub(crate) use socket_transport;
