//! DTP's security layer, sans-IO: the CAP handshake (mutual authentication
//! and key exchange with the Noise Protocol Framework), Fay credentials
//! (Ed25519-signed descriptors, issuer keys, revocation) and the Encryption
//! Module (AEAD sealing and opening of frame bodies, SPEC ENC-1 … ENC-4).
//!
//! Nothing here does IO or reads a clock: handshake messages go in and out
//! as bytes, time (`now`, seconds since the Unix epoch for credentials) and
//! random bytes are passed in.
#![forbid(unsafe_code)]

pub mod aead;
pub mod cap;
pub mod cred;
