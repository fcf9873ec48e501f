//! `procstat` on real processes: this one, after burning CPU, and a child.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dtp_bench::procstat::{self, CpuSource};

/// Spins on this thread for `d` of wall time.
fn burn(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        for i in 0..10_000u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

#[test]
fn cpu_time_of_this_process_after_burning() {
    // The machine is shared: 200 ms of wall time is not 200 ms on a CPU.
    // So burn until the OS says 100 ms more were used; a CPU figure that
    // does not grow fails at the deadline.
    let a = procstat::sample_self().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (b, d) = loop {
        burn(Duration::from_millis(10));
        let b = procstat::sample_self().unwrap();
        let d = procstat::delta(&a, &b).unwrap();
        if d.cpu_ns >= 100_000_000 {
            break (b, d);
        }
        assert!(Instant::now() < deadline, "CPU time did not grow: {d:?}");
    };
    // Other test threads may add to it, but never more than every CPU for
    // the whole interval.
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    assert!(d.cpu_s() <= d.wall.as_secs_f64() * cpus + 0.05, "{d:?}");
    assert!(d.cpus_busy() > 0.0);
    assert!(d.rss_bytes > 0 && d.peak_rss_bytes >= d.rss_bytes, "{d:?}");
    assert!(d.threads >= 1);
    if a.schedstat_cpu_ns.is_some() {
        assert!(a.tids.contains(&a.pid), "the main thread is listed");
    }
    if d.source == CpuSource::Stat {
        // A test-harness thread exited in between: correct, but say so.
        eprintln!("note: fell back to /proc/<pid>/stat ({d:?})");
    }
    // The two sources describe the same interval; stat is tick-grained.
    let stat = b.stat_cpu_ns.saturating_sub(a.stat_cpu_ns);
    assert!(stat >= 50_000_000, "stat says {stat} ns, {d:?}");
}

#[test]
fn another_process_is_read_from_outside() {
    // `cat` blocks on its stdin: alive, idle, single-threaded.
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let a = procstat::sample(child.id()).unwrap();
    let b = procstat::sample(child.id()).unwrap();
    assert_eq!(a.pid, child.id());
    assert_eq!(b.threads, 1);
    assert!(b.rss_bytes > 0);
    let d = procstat::delta(&a, &b).unwrap();
    assert!(d.cpu_ns < 50_000_000, "an idle process barely runs: {d:?}");
    drop(child.stdin.take());
    child.wait().unwrap();
}
