//! DTP transports: the IO driver and the Transport_Adapters (SPEC TRN-1 … TRN-5).
//!
//! This crate is the only part of DTP that touches the operating system's
//! IO interfaces. It owns:
//!
//! * the [`Driver`]: one per core thread, with two backends behind one
//!   buffer-owning API — **io_uring** (multishot accept and receive into a
//!   provided buffer ring made of the core's pool chunks, batched
//!   submission, cancellation that waits for the cancelled operation's own
//!   completion) and **epoll** through mio, chosen automatically when
//!   io_uring cannot be set up or forced with `DTP_IO_BACKEND=epoll`;
//! * bounded per-connection send queues in pool chunks: a full queue is
//!   [`SendError::BufferFull`], never growth (SPEC TRN-2, MEM-8);
//! * the uniform [`TransportAdapter`] interface (SPEC TRN-1 … TRN-5) with a
//!   TCP adapter over the driver, an in-memory transport for deterministic
//!   tests, and a [`FaultInjector`] that cuts, drops, delays and re-chunks.
//!
//! It never interprets the bytes it moves (SPEC TRN-5).

mod adapter;
mod buffers;
mod driver;
mod epoll;
mod fault;
pub mod floor;
mod lent;
mod mem;
mod sendq;
mod slots;
mod tcp;
mod uring;
mod waker;

pub use adapter::{
    AdapterEvent, Callbacks, ConnectionState, Endpoint, ParseEndpointError, TransportAdapter,
    TransportError,
};
pub use buffers::RecvChunk;
pub use driver::{
    BackendChoice, BackendKind, BackendPreference, CloseReason, ConnId, Driver, DriverConfig,
    DriverStats, Event, ListenerId, Waker, foreign_listeners, probe_listen,
};
pub use fault::{FaultInjector, FaultPlan, FaultStats, Rechunk};
pub use lent::RecvBuf;
pub use mem::{MemoryConfig, MemoryHub, MemoryTransport};
pub use sendq::SendError;
pub use slots::SlotId;
pub use tcp::TcpAdapter;

/// Pins the calling thread to CPU `cpu` (thread-per-core shards).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above; `set` is a live local.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks the kernel to kill this process when the thread that started it
/// exits (Linux `PR_SET_PDEATHSIG`), so a server started by `dtp bench`
/// never outlives a bench that was killed. Returns `false` (and changes
/// nothing) if the parent is already gone, so the caller can stop at once.
pub fn die_with_parent() -> std::io::Result<bool> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The parent may have exited before the call: then we were re-parented
    // and no signal will come.
    // SAFETY: getppid has no preconditions.
    Ok(unsafe { libc::getppid() } != 1)
}

/// Raises this process's open-file limit (RLIMIT_NOFILE) to its hard limit
/// and returns the new soft limit: a gateway or load generator with many
/// connections needs one descriptor each.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit the call fills in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok(lim.rlim_cur)
}
