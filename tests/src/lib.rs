//! End-to-end tests of DTP across its crates. The tests themselves are in
//! `tests/` (today: frames through the in-memory transport and the fault
//! injector into the codec's stream decoder); tests of one crate live
//! beside it. This library holds what the tests share.
#![forbid(unsafe_code)]
