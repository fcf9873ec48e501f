//! The tokio-uring peer end to end over loopback, driven by a plain
//! `std::net` client: the answers and acks a user of the workload protocol
//! would see.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

mod peer_client;

use dtp_bench::peer_tokio::{PeerConfig, PeerHandle};
use dtp_bench::peer_tokio_uring;

fn start() -> PeerHandle {
    peer_tokio_uring::serve(PeerConfig::new("127.0.0.1:0".parse().unwrap(), 2)).unwrap()
}

peer_client::peer_handle_tests!();
