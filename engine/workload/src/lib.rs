//! The benchmark workloads, sans-IO, shared by the servers that answer them
//! (`dtp serve` on the runtime, the tokio peers of `dtp bench`) and the
//! clients that drive them (`dtp load`, `dtp bench`), so that every server
//! runs literally the same code per frame and a comparison measures IO
//! paths, not implementations.
//!
//! - [`plain`]: the application protocol over the DTP codec, unencrypted
//!   (`pingpong`, `stream`, `idle`), and [`plain::Responder`], the server
//!   logic of every plaintext server.
//! - [`dtp`]: the same workloads over the full DTP protocol, and
//!   [`dtp::DtpResponder`], the server application of every DTP server.
//!
//! **Never touches**: sockets, clocks, threads (inputs and time are passed
//! in; `clippy.toml` denies the rest), the runtime.

#![forbid(unsafe_code)]

pub mod dtp;
pub mod plain;
