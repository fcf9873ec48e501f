//! Writes the seed inputs of the codec's fuzz targets from `dtp_codec::samples()`,
//! one frame of every kind, so the fuzzer starts from valid frames instead of
//! having to discover the magic, the header and every body layout.
//!
//! `cargo run --manifest-path codec/fuzz/Cargo.toml -p dtp-codec-seedgen [DIR]`
//! (DIR defaults to codec/fuzz/seeds). The output is deterministic: rerun it
//! whenever `samples()` changes and commit the result.

#![forbid(unsafe_code)]

use std::fs;
use std::path::{Path, PathBuf};

use dtp_codec::{Body, Limits, LogicalFrame, json, samples};

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../seeds"));
    let limits = Limits::default();
    let frames = samples();

    let mut wires = Vec::new();
    let decode_dir = fresh(&dir.join("decode_frame"))?;
    let json_dir = fresh(&dir.join("json"))?;
    for (i, frame) in frames.iter().enumerate() {
        let name = format!("{i:02}-{}", name(frame));
        let wire = frame
            .to_bytes(&limits)
            .map_err(|e| std::io::Error::other(format!("sample {name} does not encode: {e}")))?;
        fs::write(decode_dir.join(format!("{name}.bin")), &wire)?;
        fs::write(
            json_dir.join(format!("{name}.json")),
            json::to_json(frame).to_string(),
        )?;
        wires.push(wire);
    }

    // stream_decode: byte 0 = limits bit (7) and cut count (0..4), then the
    // cut lengths, then the stream (see fuzz_targets/stream_decode.rs).
    let stream_dir = fresh(&dir.join("stream_decode"))?;
    let all: Vec<u8> = wires.concat();
    let data_only: Vec<u8> = frames
        .iter()
        .zip(&wires)
        .filter(|(f, _)| matches!(f.body, Body::Data(_)))
        .flat_map(|(_, w)| w.to_vec())
        .collect();
    let seeds: [(&str, &[u8], &[u8]); 4] = [
        ("all-one-chunk", &[0], &all),
        ("all-cut-1-7-16-3", &[4, 1, 7, 16, 3], &all),
        ("data-cut-5", &[1, 5], &data_only),
        ("data-tiny-limits-cut-2-30", &[0x80 | 2, 2, 30], &data_only),
    ];
    for (name, head, stream) in seeds {
        fs::write(
            stream_dir.join(format!("{name}.bin")),
            [head, stream].concat(),
        )?;
    }
    println!(
        "wrote {} frames' seeds under {}",
        frames.len(),
        dir.display()
    );
    Ok(())
}

/// Creates `dir`, emptied of earlier seeds.
fn fresh(dir: &Path) -> std::io::Result<PathBuf> {
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    fs::create_dir_all(dir)?;
    Ok(dir.to_owned())
}

/// A file name for the frame: its kind, and its message type for control frames.
fn name(frame: &LogicalFrame) -> String {
    match &frame.body {
        Body::Control(m) => format!("control-{}", m.name()),
        Body::Sealed(s) => format!("sealed-{}", s.kind.name()),
        b => b.kind().name().to_owned(),
    }
}
