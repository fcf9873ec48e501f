//! How the tool fails: one line on stderr and a documented exit status.
//!
//! Exit status 2 is for what the user can fix in what they typed: malformed
//! input, bad usage, a file named that does not exist. Exit status 1 is for
//! what fails outside the input: a file that exists but cannot be read or
//! written, a socket, a port another process holds.

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

    /// An IO error while reading or writing `what`. A path that does not
    /// exist was named by the user, so it is bad input (`NOT_FOUND`, exit
    /// status 2), whichever command names it.
    pub(crate) fn io(what: impl Display, e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::BrokenPipe => Self::BrokenPipe,
            io::ErrorKind::NotFound => Self::usage("NOT_FOUND", format_args!("{what}: {e}")),
            _ => Self::Io(format!("{what}: {e}")),
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

/// What a command-line parse error becomes: `--help` and `--version` print
/// as clap prints them (exit 0), a bare `dtp` or `dtp cred` prints its help
/// (exit 2), and every other mistake is the one line `error: BAD_ARGUMENT
/// <what>` plus a `try '<command> --help'` hint (exit 2).
pub(crate) fn parse_failure(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            let (what, hint) = one_line(&e.render().to_string());
            eprintln!("error: BAD_ARGUMENT {what}");
            if let Some(command) = hint {
                eprintln!("try '{command} --help'");
            }
            ExitCode::from(2)
        }
    }
}

/// Folds clap's rendered error (the message, `tip:` lines, a usage line,
/// a closing hint) into one line, and finds the command it is about in its
/// usage line (`Usage: dtp serve [OPTIONS]` → `dtp serve`).
fn one_line(rendered: &str) -> (String, Option<String>) {
    let mut lines = rendered.lines().map(str::trim);
    let first = lines.next().unwrap_or_default();
    let mut what = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let mut command = None;
    for line in lines {
        if let Some(tip) = line.strip_prefix("tip: ") {
            what.push_str(&format!(" ({tip})"));
        } else if let Some(usage) = line.strip_prefix("Usage: ") {
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            if !words.is_empty() {
                command = Some(words.join(" "));
            }
        }
    }
    (what, command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fold_into_one_line_with_the_command_for_help() {
        let rendered = "error: unexpected argument '--lisen' found\n\n  tip: a similar argument exists: '--listen'\n\nUsage: dtp serve --listen <ADDR>\n\nFor more information, try '--help'.\n";
        let (what, command) = one_line(rendered);
        assert_eq!(
            what,
            "unexpected argument '--lisen' found (a similar argument exists: '--listen')"
        );
        assert_eq!(command.as_deref(), Some("dtp serve"));
        let (what, command) =
            one_line("error: unrecognized subcommand 'x'\n\nUsage: dtp <COMMAND>\n");
        assert_eq!(what, "unrecognized subcommand 'x'");
        assert_eq!(command.as_deref(), Some("dtp"));
    }

    #[test]
    fn a_missing_file_is_bad_input_and_a_failing_one_is_not() {
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert!(
            matches!(CliError::io("f", missing), CliError::Input(l) if l.starts_with("NOT_FOUND f: "))
        );
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(matches!(CliError::io("f", denied), CliError::Io(_)));
    }
}
