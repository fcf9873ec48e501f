//! End-to-end and conformance tests of DTP. The tests themselves are in
//! `tests/`; this library holds what they share.
#![forbid(unsafe_code)]
