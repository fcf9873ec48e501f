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
/// <what>` plus a `try '<command> --help'` hint naming the (sub)command of
/// `args` (exit 2).
pub(crate) fn parse_failure(
    e: &clap::Error,
    cli: &clap::Command,
    args: impl IntoIterator<Item = String>,
) -> ExitCode {
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
            eprintln!("error: BAD_ARGUMENT {}", one_line(&e.render().to_string()));
            eprintln!("try '{} --help'", command_path(cli, args));
            ExitCode::from(2)
        }
    }
}

/// Folds clap's rendered error (the message, the list a message ending in
/// `:` introduces, `tip:` lines, the possible values; not the usage and the
/// closing hint) into one line.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim);
    let first = lines.next().unwrap_or_default();
    let mut what = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    let mut listing = what.ends_with(':');
    let mut items = 0;
    for line in lines {
        if line.is_empty() {
            listing = false;
        } else if listing {
            what.push_str(if items == 0 { " " } else { ", " });
            what.push_str(line);
            items += 1;
        } else if let Some(tip) = line.strip_prefix("tip: ") {
            what.push_str(&format!(" ({tip})"));
        } else if line.starts_with('[') {
            what.push(' ');
            what.push_str(line);
        }
    }
    what
}

/// The (sub)command `args` (program name first) name: `dtp serve`, or
/// `dtp` when the first word is no subcommand.
fn command_path(cli: &clap::Command, args: impl IntoIterator<Item = String>) -> String {
    let mut path = vec![cli.get_name().to_owned()];
    let mut cmd = cli;
    for arg in args.into_iter().skip(1) {
        match cmd.find_subcommand(&arg) {
            Some(sub) => {
                path.push(sub.get_name().to_owned());
                cmd = sub;
            }
            None => break,
        }
    }
    path.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_fold_into_one_line_with_the_command_for_help() {
        let rendered = "error: unexpected argument '--lisen' found\n\n  tip: a similar argument exists: '--listen'\n\nUsage: dtp serve --listen <ADDR>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "unexpected argument '--lisen' found (a similar argument exists: '--listen')"
        );
        let rendered = "error: invalid value 'xml' for '--log-format <FORMAT>'\n  [possible values: text, json]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            one_line(rendered),
            "invalid value 'xml' for '--log-format <FORMAT>' [possible values: text, json]"
        );
        let rendered = "error: the following required arguments were not provided:\n  --trust <PUBFILE>...\n  <FILE>\n\nUsage: dtp cred verify --trust <PUBFILE>... <FILE>\n";
        assert_eq!(
            one_line(rendered),
            "the following required arguments were not provided: --trust <PUBFILE>..., <FILE>"
        );
        let cli = clap::Command::new("dtp")
            .subcommand(clap::Command::new("cred").subcommand(clap::Command::new("verify")));
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let path = |a: &[&str]| command_path(&cli, args(a));
        assert_eq!(path(&["dtp", "cred", "verify", "--x"]), "dtp cred verify");
        assert_eq!(path(&["dtp", "cred", "--x", "verify"]), "dtp cred");
        assert_eq!(path(&["dtp", "nosuch"]), "dtp");
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
