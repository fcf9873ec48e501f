//! End-to-end tests of DTP across its crates. The tests themselves are in
//! `tests/` (today: frames through the in-memory transport and the fault
//! injector into the codec's stream decoder); tests of one crate live
//! beside it. What the tests share (keys, frame readers, the Fay over
//! TCP) is the test kit, `tests/kit` (`dtp-test-kit`), which the other
//! crates' tests use too.
#![forbid(unsafe_code)]
