//! The load generator's progress bar, drawn only when stderr is a terminal.

use std::io::IsTerminal;

/// A bar over a run's warm-up and measurement, in tenths of a second.
pub(crate) struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A bar over `total_secs`; nothing is drawn unless stderr is a terminal.
    pub(crate) fn new(total_secs: f64) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let b = indicatif::ProgressBar::new((total_secs * 10.0) as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Self(Some(b))
    }

    /// The run is `secs` in, with `ops` operations done.
    pub(crate) fn update(&self, secs: f64, ops: u64) {
        if let Some(b) = &self.0 {
            b.set_position((secs * 10.0) as u64);
            b.set_message(format!("{ops} ops"));
        }
    }

    /// Clears the bar before the report is printed.
    pub(crate) fn finish(self) {
        if let Some(b) = self.0 {
            b.finish_and_clear();
        }
    }
}
