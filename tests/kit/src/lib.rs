//! The workspace's test kit: what the end-to-end tests of several crates
//! share instead of each writing its own copy.
//!
//! - [`keys`]: issuer keys, Ed25519-signed Fay credentials, Noise keys for
//!   both sides, and the Fay's and terminal's DTP configurations made from
//!   them (also written to files, for tests of the `dtp` binary).
//! - [`frames`]: reading whole `LogicalFrame`s from a blocking
//!   [`TcpStream`](std::net::TcpStream), with a timeout.
//! - [`fay`]: a Fay — a [`DtpEndpoint`](dtp_endpoint::DtpEndpoint)
//!   driven over a blocking `TcpStream`: CAP, agreements, sealed
//!   fragments, control messages, a cut connection and its resume.
//! - [`model`]: a model endpoint for the AI-model policy (SPEC HO-3b), a
//!   real HTTP/1.1 server on loopback that keeps what it was sent.
//!
//! **Never** part of a shipped binary: it is a dev-dependency only, and a
//! panic is how it reports a failure.
#![forbid(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test kit: a panic is the failure report"
)]

pub mod fay;
pub mod frames;
pub mod keys;
pub mod model;

pub use fay::{Fay, feed, fill};
pub use frames::{FrameReader, read_frame, read_frames};
pub use keys::{KeyFiles, Keys, unix_now};
