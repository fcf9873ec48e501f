//! `dtp inspect`: binary frames in, pretty text or JSON lines out.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use bytes::BytesMut;
use dtp_codec::{DecodeError, ErrorCode, FrameDecoder, Limits, LogicalFrame};

use crate::cli_error::{CliError, out};

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
    // Input ended inside a frame: say how much was missing.
    let needed = match dtp_codec::peek_frame_len(&buf, &limits) {
        Ok(total) => total,
        Err(DecodeError::Incomplete { needed }) => needed,
        Err(e) => return Err(decode_error(e, consumed)),
    };
    Err(CliError::at(
        ErrorCode::TRUNCATED,
        format_args!(
            "input ends inside a frame ({} of {needed} bytes present)",
            buf.len()
        ),
        consumed,
    ))
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
            format_args!("{needed} bytes needed"),
            frame_start,
        ),
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, CliError> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    dtp_codec::json::hex_bytes::decode(&digits).map_err(|what| CliError::usage("INVALID_HEX", what))
}
