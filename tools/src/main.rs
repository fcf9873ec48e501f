//! `dtp`: the DTP data plane's command-line tool.
//!
//! Today it inspects and builds frames (`dtp inspect`, `dtp frame`); the
//! gateway (`serve`), the load generator (`load`) and the side-by-side
//! benchmark (`bench`) arrive with the engine.
#![forbid(unsafe_code)]

mod cli_error;
mod frame_cmd;
mod inspect;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use dtp_codec::Limits;

use crate::cli_error::CliError;

/// DTP data plane tool: decode, inspect and build DTP frames.
///
/// Exit status: 0 on success, 2 on malformed input or bad usage (one line
/// `error: <code> <what> at byte <offset>` on stderr), 1 when a file cannot be
/// read or written.
#[derive(Parser)]
#[command(name = "dtp", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode one or more concatenated binary frames and print them.
    ///
    /// Reads FILE, or the bytes given with --hex, or standard input when
    /// neither is given. Frames are decoded as a stream: input may be any
    /// size, memory stays bounded by the maximum frame length.
    Inspect(InspectArgs),
    /// Build binary frames from their JSON form, or print sample frames.
    #[command(subcommand)]
    Frame(FrameCommand),
}

#[derive(Args)]
struct InspectArgs {
    /// File of concatenated binary frames (default: standard input).
    #[arg(conflicts_with = "hex")]
    file: Option<PathBuf>,
    /// The frames as hexadecimal text instead of a file (white space allowed).
    #[arg(long, value_name = "HEX")]
    hex: Option<String>,
    /// Print one JSON object per frame (the form `dtp frame encode` reads)
    /// instead of the human-readable form.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Subcommand)]
enum FrameCommand {
    /// Read frames as JSON objects, one per line, and write their binary
    /// encoding to standard output.
    ///
    /// Blank lines are skipped. The JSON form is documented in
    /// codec/FORMAT.md §8; `dtp frame sample` prints an example of every kind.
    Encode {
        /// File of JSON lines (default: standard input).
        file: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print one example frame of every kind as JSON lines.
    ///
    /// `dtp frame sample | dtp frame encode | dtp inspect` round-trips.
    Sample,
}

#[derive(Args)]
struct LimitArgs {
    /// Largest frame body accepted or written, in bytes (at most 16777216).
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_frame_len)]
    max_frame_len: u32,
}

impl LimitArgs {
    fn limits(&self) -> Result<Limits, CliError> {
        let limits = Limits {
            max_frame_len: self.max_frame_len,
            ..Limits::default()
        };
        limits
            .validate()
            .map_err(|what| CliError::usage("BAD_LIMIT", what))?;
        Ok(limits)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(args) => args.limits.limits().and_then(|limits| {
            inspect::run(args.file.as_deref(), args.hex.as_deref(), args.json, limits)
        }),
        Command::Frame(FrameCommand::Encode { file, limits }) => limits
            .limits()
            .and_then(|limits| frame_cmd::encode(file.as_deref(), limits)),
        Command::Frame(FrameCommand::Sample) => frame_cmd::sample(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}
