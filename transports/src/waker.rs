//! An eventfd: the cross-thread wake-up of an io_uring driver.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking, close-on-exec eventfd.
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; the flags are valid constants.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Adds 1 to the counter, which makes the fd readable.
    pub(crate) fn wake(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local u64 to our own open fd.
        let n = unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
        if n == 8 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        // EAGAIN: the counter is saturated, so the fd is readable anyway.
        if e.kind() == io::ErrorKind::WouldBlock {
            Ok(())
        } else {
            Err(e)
        }
    }
}
