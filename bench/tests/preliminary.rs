//! Preliminary figures for `perf/bench-harness.md`: the loopback limit and
//! the tokio peer under a plain `std::net` client (one blocking thread per
//! connection). Not a benchmark and not run by default — the real load
//! generator comes with the engine — only a sanity check that the pieces
//! measure something sensible:
//!
//! ```sh
//! cargo test --release -p dtp-bench --test preliminary -- --ignored --nocapture --test-threads 1
//! ```
//!
//! The peer runs in a child process (this test binary again, running only
//! `peer_child`), so its CPU time is read from the OS apart from the
//! client's, as `dtp bench` will do with its hidden subcommand.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a measuring harness run by hand: a failed step should fail loudly, and it reports on stdout"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_bench::latency::LatencyRecorder;
use dtp_bench::peer_tokio::{self, PeerConfig};
use dtp_bench::procstat;
use dtp_bench::workload::{self, ACK_EVERY, PINGPONG_FRAME_LEN, STREAM_PAYLOAD_LEN};
use dtp_bench::{loopback, report::median};
use dtp_codec::{FrameDecoder, Limits};

const CHILD_ENV: &str = "DTP_BENCH_PEER_CHILD";
const WARMUP: Duration = Duration::from_millis(500);
const MEASURE: Duration = Duration::from_secs(3);

/// Hosts the tokio peer when started by `spawn_peer` (does nothing
/// otherwise): prints `listening <addr>`, stops when stdin closes.
#[test]
#[ignore = "helper process of the preliminary measurements"]
fn peer_child() {
    let Ok(workers) = std::env::var(CHILD_ENV) else {
        return;
    };
    let workers = workers.parse().unwrap();
    peer_tokio::run_child(PeerConfig::new("127.0.0.1:0".parse().unwrap(), workers)).unwrap();
}

struct PeerProcess {
    child: Child,
    addr: SocketAddr,
}

impl PeerProcess {
    fn spawn(workers: usize) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["peer_child", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_ENV, workers.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the peer exited before listening")
                .unwrap();
            if let Some(addr) = peer_tokio::parse_listening_line(&line) {
                break addr;
            }
        };
        // Keep draining the harness's output so the child never blocks on it.
        thread::spawn(move || lines.for_each(drop));
        Self { child, addr }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "measurement, run by hand"]
fn loopback_limit_3x2s() {
    let runs: Vec<f64> = (0..3)
        .map(|i| {
            let r = loopback::measure(Duration::from_secs(2), None).unwrap();
            println!(
                "loopback run {i}: {:.3} GB/s ({} bytes in {:?})",
                r.bytes_per_s / 1e9,
                r.bytes,
                r.elapsed
            );
            r.bytes_per_s
        })
        .collect();
    println!("loopback median: {:.3} GB/s", median(runs) / 1e9);
}

/// Closed-loop pingpong over `conns` connections, one blocking thread each.
fn pingpong_run(peer: &PeerProcess, conns: usize) {
    let start = Instant::now() + Duration::from_millis(200);
    let (t0, t1) = (start + WARMUP, start + WARMUP + MEASURE);
    let clients: Vec<_> = (0..conns)
        .map(|_| {
            let addr = peer.addr;
            thread::spawn(move || {
                let mut sock = TcpStream::connect(addr).unwrap();
                sock.set_nodelay(true).unwrap();
                let decoder = FrameDecoder::default();
                let mut rec = LatencyRecorder::new();
                let (mut ops, mut seq) = (0u64, 0u64);
                let mut out = BytesMut::new();
                let mut answer = [0u8; PINGPONG_FRAME_LEN];
                while Instant::now() < start {
                    thread::sleep(Duration::from_millis(1));
                }
                loop {
                    let sent = Instant::now();
                    if sent >= t1 {
                        break;
                    }
                    seq += 1;
                    out.clear();
                    workload::encode_pingpong_request(seq, &mut out).unwrap();
                    sock.write_all(&out).unwrap();
                    sock.read_exact(&mut answer).unwrap();
                    let done = Instant::now();
                    let mut buf = BytesMut::from(&answer[..]);
                    let frame = decoder.decode(&mut buf).unwrap().unwrap();
                    workload::check_pingpong_answer(seq, &frame).unwrap();
                    if sent >= t0 {
                        ops += 1;
                        rec.record(done - sent);
                    }
                }
                (ops, rec)
            })
        })
        .collect();
    let (a, b) = sample_window(peer.pid(), t0, t1);
    let mut total = LatencyRecorder::new();
    let mut ops = 0;
    for c in clients {
        let (n, rec) = c.join().unwrap();
        ops += n;
        total.merge(&rec);
    }
    let d = procstat::delta(&a, &b).unwrap();
    let lat = total.summary();
    println!(
        "pingpong conns={conns:3}: {:>9.0} round trips/s, p50 {:>5.0} µs, p99 {:>5.0} µs, \
         peer CPU {:.3} s ({:.2} cores, {:?}) = {:.0} ns/op, peer RSS {} KiB, threads {}",
        ops as f64 / MEASURE.as_secs_f64(),
        lat.p50_us,
        lat.p99_us,
        d.cpu_s(),
        d.cpus_busy(),
        d.source,
        d.cpu_ns as f64 / ops as f64,
        d.rss_bytes / 1024,
        d.threads
    );
}

/// Samples `pid` at `t0` and at `t1`.
fn sample_window(pid: u32, t0: Instant, t1: Instant) -> (procstat::Sample, procstat::Sample) {
    thread::sleep(t0.saturating_duration_since(Instant::now()));
    let a = procstat::sample(pid).unwrap();
    thread::sleep(t1.saturating_duration_since(Instant::now()));
    let b = procstat::sample(pid).unwrap();
    (a, b)
}

#[test]
#[ignore = "measurement, run by hand"]
fn tokio_peer_pingpong() {
    let peer = PeerProcess::spawn(2);
    for conns in [1, 8, 64] {
        pingpong_run(&peer, conns);
    }
}

#[test]
#[ignore = "measurement, run by hand"]
fn tokio_peer_stream() {
    const WINDOW: u64 = 4 * ACK_EVERY; // 256 frames, 4 MiB in flight
    let peer = PeerProcess::spawn(2);
    let mut sock = TcpStream::connect(peer.addr).unwrap();
    sock.set_nodelay(true).unwrap();
    let mut reader = sock.try_clone().unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer_thread = thread::current();
    let ack_thread = {
        let acked = Arc::clone(&acked);
        thread::spawn(move || {
            let decoder = FrameDecoder::default();
            let mut buf = BytesMut::with_capacity(64 * 1024);
            let mut chunk = [0u8; 4096];
            loop {
                while let Some(f) = decoder.decode(&mut buf).unwrap() {
                    acked.store(workload::parse_ack(&f).unwrap(), Ordering::Release);
                    writer_thread.unpark();
                }
                match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
    };
    let start = Instant::now();
    let (t0, t1) = (start + WARMUP, start + WARMUP + MEASURE);
    let sampler = {
        let (acked, stop, pid) = (Arc::clone(&acked), Arc::clone(&stop), peer.pid());
        thread::spawn(move || {
            thread::sleep(t0.saturating_duration_since(Instant::now()));
            let (a, acked0) = (
                procstat::sample(pid).unwrap(),
                acked.load(Ordering::Acquire),
            );
            thread::sleep(t1.saturating_duration_since(Instant::now()));
            let (b, acked1) = (
                procstat::sample(pid).unwrap(),
                acked.load(Ordering::Acquire),
            );
            stop.store(true, Ordering::Release);
            (procstat::delta(&a, &b).unwrap(), acked1 - acked0)
        })
    };
    let payload = workload::stream_payload();
    let mut window = workload::StreamWindow::new(WINDOW).unwrap();
    let mut out = BytesMut::new();
    while !stop.load(Ordering::Acquire) {
        window.on_ack(acked.load(Ordering::Acquire)).unwrap();
        if window.in_flight() + ACK_EVERY > WINDOW {
            thread::park_timeout(Duration::from_millis(1));
            continue;
        }
        out.clear();
        for _ in 0..ACK_EVERY {
            let seq = window.next_sequence().unwrap();
            workload::stream_frame(seq, &payload, false)
                .encode(&mut out, &Limits::default())
                .unwrap();
        }
        sock.write_all(&out).unwrap();
    }
    let (d, frames) = sampler.join().unwrap();
    sock.shutdown(std::net::Shutdown::Both).unwrap();
    ack_thread.join().unwrap();
    let secs = MEASURE.as_secs_f64();
    println!(
        "stream 1 conn: {:.3} GB/s goodput ({} frames of 16 KiB acked in {secs} s), \
         peer CPU {:.3} s ({:.2} cores, {:?}) = {:.0} ns/frame, {:.3} ns/byte",
        frames as f64 * STREAM_PAYLOAD_LEN as f64 / secs / 1e9,
        frames,
        d.cpu_s(),
        d.cpus_busy(),
        d.source,
        d.cpu_ns as f64 / frames as f64,
        d.cpu_ns as f64 / (frames as f64 * STREAM_PAYLOAD_LEN as f64),
    );
}
