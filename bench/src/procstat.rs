//! The operating system's own accounting of a process: CPU time, RSS, peak
//! RSS and thread count, read from Linux's `/proc`.
//!
//! `dtp bench` runs each server in its own process and reads its CPU time
//! here, so the server's cost per operation is the kernel's figure (user +
//! system, every thread), never an estimate from inside the server and never
//! mixed with the load generator's. This module only reads `/proc`; it never
//! signals or changes the process it observes.
//!
//! # CPU time: two sources
//!
//! - **schedstat** (preferred): the first field of
//!   `/proc/<pid>/task/<tid>/schedstat` is the thread's time on a CPU in
//!   nanoseconds (the scheduler's `sum_exec_runtime`), user and system
//!   together, at nanosecond precision. Summed over the live threads.
//!   Its one blind spot: a thread that exits takes its time with it.
//! - **stat** (fallback): `utime + stime` of `/proc/<pid>/stat`, in clock
//!   ticks, which does include the time of exited threads but has tick
//!   resolution (10 ms at the usual 100 Hz) and is sampled, not exact.
//!
//! [`delta`] uses schedstat when both samples have it and every thread of
//! the first sample is still alive in the second (threads that *appear*
//! between the samples are fine: all their time lies inside the interval);
//! otherwise it falls back to stat and says so in [`Delta::source`].
//!
//! # Clock ticks
//!
//! Ticks are converted with `sysconf(_SC_CLK_TCK)` without `unsafe` (this
//! crate forbids it, and a libc binding for one integer is not worth a
//! dependency): [`clock_ticks_per_second`] runs `getconf CLK_TCK` once and
//! caches the answer, and assumes 100 if that fails. 100 is `USER_HZ` on
//! every Linux architecture this project targets (x86-64, aarch64): the
//! kernel scales `/proc` tick fields to `USER_HZ` whatever its internal `HZ`.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `USER_HZ` assumed when `getconf CLK_TCK` cannot be run.
pub const DEFAULT_CLOCK_TICKS: u64 = 100;

/// One reading of a process's accounting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The process read.
    pub pid: u32,
    /// When (just before the reads).
    pub at: Instant,
    /// CPU time of the live threads from schedstat, in ns, if readable.
    pub schedstat_cpu_ns: Option<u64>,
    /// The thread ids that schedstat sum covers, sorted.
    pub tids: Vec<u32>,
    /// `utime + stime` from `/proc/<pid>/stat`, converted to ns (includes
    /// exited threads; tick resolution).
    pub stat_cpu_ns: u64,
    /// Resident set size in bytes (`VmRSS`).
    pub rss_bytes: u64,
    /// Peak resident set size in bytes (`VmHWM`).
    pub peak_rss_bytes: u64,
    /// Threads (`Threads` of `/proc/<pid>/status`).
    pub threads: u32,
}

impl Sample {
    /// The best CPU figure of this one sample, in ns: schedstat if present,
    /// else stat.
    pub fn cpu_ns(&self) -> u64 {
        self.schedstat_cpu_ns.unwrap_or(self.stat_cpu_ns)
    }
}

/// Which accounting a [`Delta`]'s CPU time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSource {
    /// Summed per-thread schedstat (ns precision).
    Schedstat,
    /// `utime + stime` of `/proc/<pid>/stat` (tick precision).
    Stat,
}

/// What a process did between two samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delta {
    /// Wall-clock time between the samples.
    pub wall: Duration,
    /// CPU time (user + system, all threads) between the samples, in ns.
    pub cpu_ns: u64,
    /// Where `cpu_ns` comes from.
    pub source: CpuSource,
    /// RSS at the second sample.
    pub rss_bytes: u64,
    /// Peak RSS at the second sample (the process's lifetime peak).
    pub peak_rss_bytes: u64,
    /// Threads at the second sample.
    pub threads: u32,
}

impl Delta {
    /// CPU time in seconds.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_ns as f64 / 1e9
    }

    /// Average number of CPUs busy (CPU time / wall time).
    pub fn cpus_busy(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall > 0.0 { self.cpu_s() / wall } else { 0.0 }
    }
}

/// Why two samples cannot be compared, or a process cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    /// Reading `/proc` failed (no such process, not Linux, …).
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// A `/proc` file did not have the expected shape.
    #[error("unexpected contents in {path}: {what}")]
    Parse {
        /// The file.
        path: String,
        /// What was missing or malformed.
        what: &'static str,
    },
    /// The samples are of different processes.
    #[error("samples of different processes ({0} and {1})")]
    DifferentProcess(u32, u32),
    /// The second sample was taken before the first.
    #[error("the second sample precedes the first")]
    OutOfOrder,
}

/// Reads the accounting of process `pid`.
pub fn sample(pid: u32) -> Result<Sample, ProcError> {
    let at = Instant::now();
    let base = PathBuf::from(format!("/proc/{pid}"));
    let (schedstat_cpu_ns, tids) = match schedstat_sum(&base) {
        Some((ns, tids)) => (Some(ns), tids),
        None => (None, Vec::new()),
    };
    let stat_path = base.join("stat");
    let stat = read(&stat_path)?;
    let ticks = parse_stat_cpu_ticks(&stat).ok_or_else(|| ProcError::Parse {
        path: stat_path.display().to_string(),
        what: "utime and stime (fields 14 and 15)",
    })?;
    let status_path = base.join("status");
    let status = read(&status_path)?;
    let field = |name: &'static str| {
        parse_status_field(&status, name).ok_or_else(|| ProcError::Parse {
            path: status_path.display().to_string(),
            what: name,
        })
    };
    Ok(Sample {
        pid,
        at,
        schedstat_cpu_ns,
        tids,
        stat_cpu_ns: ticks_to_ns(ticks),
        rss_bytes: field("VmRSS")? * 1024,
        peak_rss_bytes: field("VmHWM")? * 1024,
        threads: u32::try_from(field("Threads")?).unwrap_or(u32::MAX),
    })
}

/// Reads the accounting of the calling process.
pub fn sample_self() -> Result<Sample, ProcError> {
    sample(std::process::id())
}

/// What the process did from `a` to `b` (see the module doc for which CPU
/// source is used).
pub fn delta(a: &Sample, b: &Sample) -> Result<Delta, ProcError> {
    if a.pid != b.pid {
        return Err(ProcError::DifferentProcess(a.pid, b.pid));
    }
    let wall =
        b.at.checked_duration_since(a.at)
            .ok_or(ProcError::OutOfOrder)?;
    let schedstat = match (a.schedstat_cpu_ns, b.schedstat_cpu_ns) {
        // `tids` are sorted: every thread of `a` must still be in `b`.
        (Some(x), Some(y)) if a.tids.iter().all(|t| b.tids.binary_search(t).is_ok()) => {
            y.checked_sub(x)
        }
        _ => None,
    };
    let (cpu_ns, source) = match schedstat {
        Some(ns) => (ns, CpuSource::Schedstat),
        None => (b.stat_cpu_ns.saturating_sub(a.stat_cpu_ns), CpuSource::Stat),
    };
    Ok(Delta {
        wall,
        cpu_ns,
        source,
        rss_bytes: b.rss_bytes,
        peak_rss_bytes: b.peak_rss_bytes,
        threads: b.threads,
    })
}

/// CPU time in ns (schedstat) of the threads of process `pid` named
/// `name` (their `comm`, as a thread sets it with
/// `std::thread::Builder::name`, cut to 15 bytes by the kernel), summed;
/// `None` when no such thread is alive or the kernel has no schedstat.
/// `dtp bench` reads the control thread's share this way.
pub fn thread_cpu_ns(pid: u32, name: &str) -> Option<u64> {
    threads_cpu_ns(pid, |comm| comm == name)
}

/// [`thread_cpu_ns`] for every thread whose name starts with `prefix`
/// (e.g. the Web Push sender's `dtp-push-0`, `dtp-push-1`, …).
pub fn thread_prefix_cpu_ns(pid: u32, prefix: &str) -> Option<u64> {
    threads_cpu_ns(pid, |comm| comm.starts_with(prefix))
}

/// The schedstat CPU time in ns of each thread of `pid` whose name starts
/// with `prefix`, by thread id: compare two readings with [`grown_ns`],
/// which also counts threads that started between them (a thread that
/// ended between them takes its time with it).
pub fn threads_by_prefix(pid: u32, prefix: &str) -> Vec<(u32, u64)> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let comm = fs::read_to_string(entry.path().join("comm")).ok()?;
            if !comm.trim_end_matches('\n').starts_with(prefix) {
                return None;
            }
            let s = fs::read_to_string(entry.path().join("schedstat")).ok()?;
            Some((tid, parse_schedstat_ns(&s)?))
        })
        .collect()
}

/// The CPU time the threads of reading `b` used since reading `a` (both
/// from [`threads_by_prefix`]): a thread absent from `a` counts whole.
pub fn grown_ns(a: &[(u32, u64)], b: &[(u32, u64)]) -> u64 {
    b.iter()
        .map(|&(tid, ns)| {
            let before = a.iter().find(|&&(t, _)| t == tid).map_or(0, |&(_, n)| n);
            ns.saturating_sub(before)
        })
        .sum()
}

/// The schedstat CPU time of the threads of `pid` whose name `wanted`.
fn threads_cpu_ns(pid: u32, wanted: impl Fn(&str) -> bool) -> Option<u64> {
    let mut total = None;
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if !wanted(comm.trim_end_matches('\n')) {
            continue;
        }
        let Ok(s) = fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        *total.get_or_insert(0) += parse_schedstat_ns(&s)?;
    }
    total
}

/// `sysconf(_SC_CLK_TCK)`, from `getconf CLK_TCK` once, else
/// [`DEFAULT_CLOCK_TICKS`].
pub fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .unwrap_or(DEFAULT_CLOCK_TICKS)
    })
}

fn ticks_to_ns(ticks: u64) -> u64 {
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(clock_ticks_per_second());
    u64::try_from(ns).unwrap_or(u64::MAX)
}

fn read(path: &std::path::Path) -> Result<String, ProcError> {
    fs::read_to_string(path).map_err(|source| ProcError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// Sums the first schedstat field over `/proc/<pid>/task/*`. `None` when
/// the kernel has no schedstat (or the process is gone). A thread that exits
/// between listing and reading is left out, as if listed a moment later.
fn schedstat_sum(base: &std::path::Path) -> Option<(u64, Vec<u32>)> {
    let mut total = 0u64;
    let mut tids = Vec::new();
    for entry in fs::read_dir(base.join("task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        match fs::read_to_string(entry.path().join("schedstat")) {
            Ok(s) => {
                total += parse_schedstat_ns(&s)?;
                tids.push(tid);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            // ESRCH reads as an OS error on some kernels: a thread gone.
            Err(e) if e.raw_os_error() == Some(3) => continue,
            Err(_) => return None,
        }
    }
    if tids.is_empty() {
        return None;
    }
    tids.sort_unstable();
    Some((total, tids))
}

/// The first field of a schedstat line: ns on a CPU.
fn parse_schedstat_ns(s: &str) -> Option<u64> {
    s.split_ascii_whitespace().next()?.parse().ok()
}

/// `utime + stime` (fields 14 and 15) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so fields are counted from the *last* `)`.
fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_ascii_whitespace();
    // `after` starts at field 3 (state); utime is field 14.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A `Name:   <number> [kB]` line of `/proc/<pid>/status`.
fn parse_status_field(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        rest.split_ascii_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_awkward_command_name() {
        let line = "4242 (a) b (c) R 1 2 3 4 5 6 7 8 9 10 150 25 0 0 20 0 7 0 99 1000 50";
        assert_eq!(parse_stat_cpu_ticks(line), Some(175));
        assert_eq!(parse_stat_cpu_ticks("4242 (x"), None);
        assert_eq!(parse_stat_cpu_ticks("1 (x) R 1 2"), None);
    }

    #[test]
    fn status_fields() {
        let status = "Name:\tdtp\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\n";
        assert_eq!(parse_status_field(status, "VmRSS"), Some(1024));
        assert_eq!(parse_status_field(status, "VmHWM"), Some(2048));
        assert_eq!(parse_status_field(status, "Threads"), Some(3));
        assert_eq!(parse_status_field(status, "VmSwap"), None);
        assert_eq!(parse_schedstat_ns("123456 789 10\n"), Some(123456));
    }

    fn fake(tids: Vec<u32>, sched: u64, stat: u64, at: Instant) -> Sample {
        Sample {
            pid: 1,
            at,
            schedstat_cpu_ns: Some(sched),
            tids,
            stat_cpu_ns: stat,
            rss_bytes: 10,
            peak_rss_bytes: 20,
            threads: 2,
        }
    }

    #[test]
    fn delta_prefers_schedstat_and_falls_back_when_a_thread_exited() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let a = fake(vec![1, 2], 1_000, 0, t0);
        // A new thread 3 is fine.
        let b = fake(vec![1, 2, 3], 5_000, 10_000_000, t1);
        let d = delta(&a, &b).unwrap();
        assert_eq!((d.cpu_ns, d.source), (4_000, CpuSource::Schedstat));
        assert_eq!(d.wall, Duration::from_secs(1));
        // Thread 2 exited: its time since `a` is lost to schedstat.
        let c = fake(vec![1, 3], 3_000, 10_000_000, t1);
        let d = delta(&a, &c).unwrap();
        assert_eq!((d.cpu_ns, d.source), (10_000_000, CpuSource::Stat));
        // Wrong order, wrong process.
        assert!(matches!(delta(&b, &a), Err(ProcError::OutOfOrder)));
        let mut other = b.clone();
        other.pid = 2;
        assert!(delta(&a, &other).is_err());
    }

    #[test]
    fn clock_ticks_are_positive() {
        assert!(clock_ticks_per_second() > 0);
    }

    #[test]
    fn a_named_thread_is_found_and_a_missing_one_is_not() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("procstat-probe".into())
            .spawn(move || {
                // Busy for a moment so that its CPU time is not zero.
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(20) {
                    std::hint::spin_loop();
                }
                let _ = rx.recv();
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(40));
        let ns = thread_cpu_ns(std::process::id(), "procstat-probe");
        tx.send(()).unwrap();
        t.join().unwrap();
        assert!(ns.is_some_and(|ns| ns > 0), "{ns:?}");
        assert_eq!(thread_cpu_ns(std::process::id(), "no-such-thread"), None);
    }

    #[test]
    fn missing_process_is_an_error() {
        // Above the kernel's pid_max ceiling (4 194 304): never a process.
        assert!(matches!(sample(u32::MAX), Err(ProcError::Io { .. })));
    }

    #[test]
    fn grown_counts_new_threads_whole_and_never_goes_negative() {
        let a = [(1, 100), (2, 50)];
        let b = [(1, 130), (3, 40)];
        assert_eq!(grown_ns(&a, &b), 30 + 40);
        assert_eq!(grown_ns(&b, &a), 50);
    }

    #[test]
    fn this_threads_cpu_is_found_by_its_name() {
        // A name of its own (another test names its thread procstat-probe),
        // within the kernel's 15 characters of a thread name.
        let t = std::thread::Builder::new()
            .name("prefix-probe".into())
            .spawn(|| {
                let mut x = 0u64;
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                let pid = std::process::id();
                (threads_by_prefix(pid, "prefix-pro").len(), x)
            })
            .expect("a thread");
        assert_eq!(t.join().expect("joined").0, 1);
    }
}
