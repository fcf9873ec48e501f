//! What `dtp bench` is doing and how long is left: a progress bar on a
//! terminal, one line per step on a pipe (both on stderr, so stdout keeps
//! only the report).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The bench's progress over a known number of steps.
pub(crate) struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    /// The plan's guess of one step's time, until steps have been timed.
    guess: Duration,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    /// Progress over `total` steps, each guessed to take `guess`.
    pub(crate) fn new(total: usize, guess: Duration) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Self {
            total: total.max(1),
            done: 0,
            started: Instant::now(),
            guess,
            bar,
        }
    }

    /// A step starts: `what` names the run, workload and side.
    pub(crate) fn step(&mut self, what: &str) {
        let left = self.left();
        let line = format!("{what} · about {} left", clock(left));
        match &self.bar {
            Some(b) => {
                b.set_position(self.done as u64);
                b.set_message(line);
            }
            None => eprintln!("[{}/{}] {line}", self.done + 1, self.total),
        }
        self.done += 1;
    }

    /// Prints a line without breaking the bar.
    pub(crate) fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Every step is done.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        eprintln!(
            "done: {} {} in {}",
            self.done,
            if self.done == 1 { "step" } else { "steps" },
            clock(self.started.elapsed())
        );
    }

    /// Time left: the steps to go at the mean time of those done (the
    /// plan's guess before any).
    fn left(&self) -> Duration {
        let per_step = match self.done {
            0 => self.guess,
            n => self.started.elapsed() / n as u32,
        };
        per_step * self.total.saturating_sub(self.done) as u32
    }
}

/// 185 s → "3m05s".
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_follows_the_steps_done() {
        let mut p = Progress::new(4, Duration::from_secs(10));
        assert_eq!(p.left(), Duration::from_secs(40));
        p.done = 4;
        assert_eq!(p.left(), Duration::ZERO);
        assert_eq!(clock(Duration::from_secs(185)), "3m05s");
        assert_eq!(clock(Duration::from_secs(7)), "7s");
    }
}
