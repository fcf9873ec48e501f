//! `dtp inspect`: binary frames in, pretty text or JSON lines out.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use bytes::BytesMut;
use dtp_codec::{DecodeError, ErrorCode, FrameDecoder, HEADER_LEN, Limits, LogicalFrame};

use crate::cli_error::{CliError, out};
use crate::text::plural;

/// How much is read from the input at a time.
const READ_CHUNK: usize = 64 * 1024;

pub(crate) fn run(
    file: Option<&Path>,
    hex: Option<&str>,
    json: bool,
    limits: Limits,
) -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut w = BufWriter::new(stdout.lock());
    let mut print = |frame: &LogicalFrame, index: usize| -> Result<(), CliError> {
        if json {
            writeln!(w, "{}", dtp_codec::json::to_json(frame)).map_err(out)
        } else {
            let sep = if index == 0 { "" } else { "\n" };
            write!(w, "{sep}{frame}").map_err(out)
        }
    };
    match (file, hex) {
        (_, Some(hex)) => {
            let bytes = parse_hex(hex)?;
            decode_stream(&mut &bytes[..], &"--hex", limits, &mut print)?;
        }
        (Some(path), None) => {
            let name = path.display();
            let mut f = File::open(path).map_err(|e| CliError::io(&name, e))?;
            decode_stream(&mut f, &name, limits, &mut print)?;
        }
        (None, None) => decode_stream(
            &mut io::stdin().lock(),
            &"standard input",
            limits,
            &mut print,
        )?,
    }
    w.flush().map_err(out)
}

/// Decodes frames from `input` as they arrive; memory stays bounded by one
/// read chunk plus one frame.
fn decode_stream(
    input: &mut dyn Read,
    name: &dyn std::fmt::Display,
    limits: Limits,
    emit: &mut dyn FnMut(&LogicalFrame, usize) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let decoder = FrameDecoder::new(limits);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut consumed: u64 = 0; // input offset of buf[0]
    let mut count = 0;
    loop {
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    emit(&frame, count)?;
                    count += 1;
                    consumed += (before - buf.len()) as u64;
                }
                Ok(None) => break,
                Err(e) => return Err(decode_error(e, consumed)),
            }
        }
        buf.reserve(READ_CHUNK);
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = loop {
            match input.read(&mut buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CliError::io(name, e)),
            }
        };
        buf.truncate(start + n);
        if n == 0 {
            break;
        }
    }
    if buf.is_empty() {
        return Ok(());
    }
    Err(truncated(&buf, &limits, consumed))
}

/// The input ended inside the frame starting at `frame_start` (`buf` holds
/// what is left of it): says how much is missing — of the 16-byte header
/// (SPEC FRM-5: codec/FORMAT.md) if even that is not whole, else of the whole frame. Bytes
/// that are already wrong are reported as such (bad magic, unknown kind…).
fn truncated(buf: &[u8], limits: &Limits, frame_start: u64) -> CliError {
    let needed = match dtp_codec::peek_frame_len(buf, limits) {
        Ok(total) => total,
        Err(DecodeError::Incomplete { needed }) => needed,
        Err(e) => return decode_error(e, frame_start),
    };
    let what = if buf.len() < HEADER_LEN {
        let verb = if buf.len() == 1 { "was" } else { "were" };
        format!(
            "a frame header needs {HEADER_LEN} bytes, only {} {verb} given",
            buf.len()
        )
    } else {
        format!(
            "input ends inside a frame ({} of {} present)",
            buf.len(),
            plural(needed, "byte")
        )
    };
    CliError::at(ErrorCode::TRUNCATED, what, frame_start)
}

fn decode_error(e: DecodeError, frame_start: u64) -> CliError {
    match e {
        DecodeError::Malformed {
            kind,
            field,
            offset,
        } => CliError::at(
            kind.code(),
            format_args!("{field}: {kind}"),
            frame_start + offset as u64,
        ),
        DecodeError::Incomplete { needed } => CliError::at(
            ErrorCode::TRUNCATED,
            format_args!("{} needed", plural(needed, "byte")),
            frame_start,
        ),
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, CliError> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    dtp_codec::json::hex_bytes::decode(&digits).map_err(|what| CliError::usage("INVALID_HEX", what))
}
