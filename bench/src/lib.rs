//! Shared helpers for DTP's benchmarks. The criterion benchmarks are in
//! `benches/`; the side-by-side workload harness (`dtp bench`) arrives with
//! the engine.
#![forbid(unsafe_code)]
