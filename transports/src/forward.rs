//! The [`Transport`](crate::Transport) impl of a socket backend: each
//! method forwards to the backend's own method of that name (the backends
//! differ in how they do the work, not in what the trait asks).

/// Implements `Transport` for `$backend`: sends through the shared
/// bookkeeping ([`SendBook`](crate::ops::SendBook)) on its `book`, `conns`,
/// `bufs`, `pending` and `config` fields (sends, what is queued, who waits
/// for room), everything else by forwarding to its inherent methods
/// (`listen`, `connect`, `set_paused`, `close`, `poll`, `waker`); its
/// counters from its `stats`.
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
                let max = self.config.max_send_queue;
                let payload = crate::sendq::Payload::Copied(bytes);
                self.book
                    .queue(&mut self.conns, &mut self.bufs, conn, payload, max)
            }
            /// Queues `bytes` by reference: the send that reads them points
            /// into the caller's `Bytes`, whose clone the queue holds until
            /// the kernel is done with it (on io_uring, the send's final
            /// completion, or SEND_ZC's notification).
            fn send_shared(&mut self, conn: ConnId, bytes: &bytes::Bytes) -> Result<(), SendError> {
                let max = self.config.max_send_queue;
                let payload = crate::sendq::Payload::Shared(bytes);
                self.book
                    .queue(&mut self.conns, &mut self.bufs, conn, payload, max)
            }
            fn queued(&self, conn: ConnId) -> usize {
                self.conns.get(conn.0).map_or(0, |c| c.out.sendq.queued())
            }
            fn want_writable(&mut self, conn: ConnId) {
                let max = self.config.max_send_queue;
                crate::ops::SendBook::want_writable(&mut self.conns, conn, max, &mut self.pending);
            }
            fn limit_send_queue(&mut self, conn: ConnId, limit: usize) {
                let max = self.config.max_send_queue;
                crate::ops::SendBook::limit(&mut self.conns, conn, limit, max);
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
                let (shared_bytes, shared_sends) = self.bufs.shared();
                DriverStats {
                    connections: self.conns.len(),
                    shared_bytes_queued: shared_bytes as u64,
                    shared_sends,
                    send_reserve_refusals: self.bufs.reserve_refusals(),
                    ..self.stats
                }
            }
            fn region(&self) -> Option<&dtp_pool::Region> {
                Some(self.bufs.region())
            }
            fn receive_pressure(&self, untaken: usize) -> bool {
                self.bufs
                    .under_pressure(self.returns.lent().saturating_sub(untaken))
            }
        }
    };
}

pub(crate) use socket_transport;
