//! How the tool fails: one line on stderr and a documented exit status.

use std::fmt::Display;
use std::io;
use std::process::ExitCode;

/// A failure of a command, already worded for the user.
pub(crate) enum CliError {
    /// Malformed input or bad usage: exit status 2.
    Input(String),
    /// A file or stream could not be read or written: exit status 1.
    Io(String),
    /// The reader of our output went away (`dtp inspect | head`): not an error.
    BrokenPipe,
}

impl CliError {
    /// `error: <code> <what> at byte <offset>`.
    pub(crate) fn at(code: impl Display, what: impl Display, offset: u64) -> Self {
        Self::Input(format!("{code} {what} at byte {offset}"))
    }

    /// A usage error with no input offset.
    pub(crate) fn usage(code: &str, what: impl Display) -> Self {
        Self::Input(format!("{code} {what}"))
    }

    /// An IO error while reading or writing `what`.
    pub(crate) fn io(what: impl Display, e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Self::BrokenPipe
        } else {
            Self::Io(format!("{what}: {e}"))
        }
    }

    pub(crate) fn report(self) -> ExitCode {
        match self {
            Self::Input(line) => {
                eprintln!("error: {line}");
                ExitCode::from(2)
            }
            Self::Io(line) => {
                eprintln!("error: {line}");
                ExitCode::from(1)
            }
            Self::BrokenPipe => ExitCode::SUCCESS,
        }
    }
}

/// Wraps a write to standard output.
pub(crate) fn out(e: io::Error) -> CliError {
    CliError::io("standard output", e)
}
