//! The tokio-uring peer of `dtp bench`: the workload protocol on
//! tokio-uring, written the way a tokio-uring user would write it.
//!
//! tokio-uring runs one current-thread runtime per thread, so the peer runs
//! one OS thread per core (`workers`), each with its own `tokio_uring`
//! runtime and its own `SO_REUSEPORT` listener on the shared port (the
//! first bound to the requested port, the others to the port it got), one
//! task per connection (`tokio_uring::spawn`), `TCP_NODELAY` on, owned
//! buffers handed to the kernel for each read and write and given back, the
//! shared [`Responder`] for every frame, and replies written with one
//! `write_all` per read batch. Nothing is tuned beyond that: the runtime's
//! default ring, no registered buffers, no pinning.
//!
//! The per-frame work is [`Responder::serve`], the call the tokio peer and
//! our engine make, so a CPU-per-operation ratio against this peer compares
//! IO paths. Like the tokio peer it runs in a process of its own under
//! `dtp bench` (the hidden `dtp __peer-tokio-uring`), or on background
//! threads of the calling process for tests ([`serve`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;

use bytes::BytesMut;
use dtp_codec::{Limits, peek_frame_len};
use socket2::{Domain, Socket, Type};
use tokio::sync::watch;
use tokio_uring::buf::BoundedBuf;
use tokio_uring::net::{TcpListener, TcpStream};

use crate::peer_tokio::{
    ConnError, PeerConfig, PeerHandle, PeerStats, READ_RESERVE, accept_failed,
};
use crate::workload::Responder;

/// The peer's name in the report.
pub const NAME: &str = "tokio-uring";

/// Runs the peer until `shutdown` completes. The calling thread waits for
/// it; the workers are threads of their own. `on_bound` is called once
/// with the address, after every listener is bound.
pub fn run<F>(config: PeerConfig, on_bound: impl FnOnce(SocketAddr), shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    run_with_stats(config, Arc::default(), on_bound, shutdown)
}

fn reuseport_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

fn run_with_stats<F>(
    config: PeerConfig,
    stats: Arc<PeerStats>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    let first = reuseport_listener(config.listen)?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..config.worker_threads() {
        listeners.push(reuseport_listener(addr)?);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut workers = Vec::with_capacity(listeners.len());
    for (i, listener) in listeners.into_iter().enumerate() {
        let stats = Arc::clone(&stats);
        let stop = stop_rx.clone();
        let limits = config.limits;
        let spawned = thread::Builder::new()
            .name(format!("tokio-uring-peer-{i}"))
            .spawn(move || worker(listener, limits, stats, stop));
        match spawned {
            Ok(w) => workers.push(w),
            Err(e) => {
                let _ = stop_tx.send(true);
                return Err(e);
            }
        }
    }
    on_bound(addr);
    // The calling thread only waits; a current-thread tokio runtime polls
    // the shutdown future (a tokio channel or `pending`).
    let waited = tokio::runtime::Builder::new_current_thread()
        .build()
        .map(|rt| rt.block_on(shutdown));
    let _ = stop_tx.send(true);
    let mut result = waited;
    for w in workers {
        let r = w
            .join()
            .map_err(|_| io::Error::other("a tokio-uring peer worker panicked"))
            .and_then(|r| r);
        if result.is_ok() {
            result = r;
        }
    }
    result
}

/// One worker thread: its own tokio-uring runtime, its listener's accept
/// loop, one task per connection.
fn worker(
    listener: std::net::TcpListener,
    limits: Limits,
    stats: Arc<PeerStats>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let runtime = tokio_uring::Runtime::new(&tokio_uring::builder())?;
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener);
        loop {
            tokio::select! {
                // A send or a dropped sender: stop either way.
                _ = stop.changed() => return Ok(()),
                accepted = listener.accept() => {
                    let stream = match accepted {
                        Ok((stream, _)) => stream,
                        Err(e) => {
                            accept_failed(&e).await;
                            continue;
                        }
                    };
                    stats.accepted.fetch_add(1, Ordering::Relaxed);
                    let stats = Arc::clone(&stats);
                    tokio_uring::spawn(async move {
                        let outcome = connection(stream, limits).await;
                        stats.ended(&outcome);
                    });
                }
            }
        }
    })
}

/// One connection: read into the owned input buffer, answer the whole
/// batch, write the answers once, repeat. Returns the frames handled when
/// the client closes.
async fn connection(stream: TcpStream, limits: Limits) -> Result<u64, ConnError> {
    stream.set_nodelay(true)?;
    let mut responder = Responder::new(limits);
    let mut input = BytesMut::with_capacity(READ_RESERVE);
    let mut output = BytesMut::new();
    loop {
        // Room for the rest of a partial frame whose length is known, and
        // at least READ_RESERVE (as the tokio peer does).
        let want = match peek_frame_len(&input, &limits) {
            Ok(total) => total.saturating_sub(input.len()).max(READ_RESERVE),
            Err(_) => READ_RESERVE,
        };
        input.reserve(want);
        // The kernel fills the spare capacity after what is buffered; the
        // buffer comes back with its length advanced.
        let filled = input.len();
        let (read, slice) = stream.read(input.slice(filled..)).await;
        input = slice.into_inner();
        if read? == 0 {
            return Ok(responder.frames());
        }
        responder.serve(&mut input, &mut output)?;
        if !output.is_empty() {
            let (written, buf) = stream.write_all(output).await;
            written?;
            output = buf;
            output.clear();
        }
    }
}

/// Starts the peer on background threads; returns once it listens.
pub fn serve(config: PeerConfig) -> io::Result<PeerHandle> {
    crate::peer_tokio::spawn(
        "tokio-uring peer",
        Box::new(move |stats, on_bound, shutdown| {
            run_with_stats(config, stats, on_bound, shutdown)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_binds_every_worker_and_shuts_down() {
        let peer = serve(PeerConfig::new("127.0.0.1:0".parse().unwrap(), 2)).unwrap();
        assert_ne!(peer.local_addr().port(), 0);
        peer.shutdown().unwrap();
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = PeerConfig::new(held.local_addr().unwrap(), 1);
        assert!(serve(config).is_err());
    }
}
