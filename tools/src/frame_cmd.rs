//! `dtp frame encode` and `dtp frame sample`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use dtp_codec::{EncodeError, ErrorCode, Limits};

use crate::cli_error::{CliError, out};
use crate::text::plural;

/// The longest JSON line accepted: a maximal frame in hex plus its framing.
fn max_line(limits: &Limits) -> u64 {
    u64::from(limits.max_frame_len) * 2 + 64 * 1024
}

pub(crate) fn encode(file: Option<&Path>, limits: Limits) -> Result<(), CliError> {
    match file {
        Some(path) => {
            let f = File::open(path).map_err(|e| CliError::io(path.display(), e))?;
            encode_lines(BufReader::new(f), &path.display(), limits)
        }
        None => encode_lines(io::stdin().lock(), &"standard input", limits),
    }
}

fn encode_lines(
    mut input: impl BufRead,
    name: &dyn std::fmt::Display,
    limits: Limits,
) -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let mut wire = Vec::new();
    let mut line = Vec::new();
    let mut offset: u64 = 0;
    for number in 1.. {
        line.clear();
        let n = io::Read::take(input.by_ref(), max_line(&limits) + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::io(name, e))?;
        if n == 0 {
            break;
        }
        let at = offset;
        offset += n as u64;
        if n as u64 > max_line(&limits) {
            return Err(CliError::at(
                "INVALID_JSON",
                format_args!(
                    "line {number}: longer than {}",
                    plural(max_line(&limits), "byte")
                ),
                at,
            ));
        }
        let text = std::str::from_utf8(&line).map_err(|e| {
            CliError::at(
                "INVALID_JSON",
                format_args!("line {number}: not UTF-8"),
                at + e.valid_up_to() as u64,
            )
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let frame = dtp_codec::json::from_json_str(text)
            .map_err(|e| CliError::at("INVALID_JSON", format_args!("line {number}: {e}"), at))?;
        wire.clear();
        frame.encode(&mut wire, &limits).map_err(|e| {
            let code = match e {
                EncodeError::LimitExceeded { .. } | EncodeError::BufferTooSmall { .. } => {
                    ErrorCode::LIMIT_EXCEEDED
                }
                EncodeError::Inconsistent(_) => ErrorCode::INCONSISTENT,
            };
            CliError::at(code, format_args!("line {number}: {e}"), at)
        })?;
        w.write_all(&wire).map_err(out)?;
    }
    w.flush().map_err(out)
}

pub(crate) fn sample() -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    for frame in dtp_codec::samples() {
        writeln!(w, "{}", dtp_codec::json::to_json(&frame)).map_err(out)?;
    }
    w.flush().map_err(out)
}
