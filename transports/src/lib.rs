//! DTP transports: the IO driver (io_uring with an epoll fallback) and one
//! Transport_Adapter per transport (SPEC TRN-1 … TRN-5).
//!
//! This crate is the only place of DTP that touches the operating system's
//! IO interfaces. It is not built yet: the thread-per-core engine and its
//! adapters arrive with the engine issue.
