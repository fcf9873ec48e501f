//! Short inputs and the edges of `--max-frame-len`, as a user meets them:
//! one clear line and exit status 2, never something confusing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn dtp(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// The one line on stderr of a run that must exit 2.
fn error_line(o: &Output) -> String {
    let err = String::from_utf8(o.stderr.clone()).unwrap();
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    err.trim_end().to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One small valid frame (24 bytes: a 16-byte header and an 8-byte body).
fn ack() -> Vec<u8> {
    let o = dtp(
        &["frame", "encode"],
        br#"{"stream_id":0,"kind":"ack","body":{"cumulative":1}}"#,
    );
    assert!(o.status.success());
    assert_eq!(o.stdout.len(), 24);
    o.stdout
}

#[test]
fn the_first_bytes_of_a_frame_say_that_a_header_needs_16() {
    let o = dtp(&["inspect", "--hex", "d750"], b"");
    assert_eq!(
        error_line(&o),
        "error: 1007 TRUNCATED a frame header needs 16 bytes, only 2 were given at byte 0"
    );
    let ack = ack();
    for n in 1..16 {
        let o = dtp(&["inspect", "--hex", &hex(&ack[..n])], b"");
        let given = if n == 1 {
            "only 1 was given".to_owned()
        } else {
            format!("only {n} were given")
        };
        assert_eq!(
            error_line(&o),
            format!("error: 1007 TRUNCATED a frame header needs 16 bytes, {given} at byte 0")
        );
    }
    for n in 16..24 {
        let o = dtp(&["inspect"], &ack[..n]);
        assert_eq!(
            error_line(&o),
            format!(
                "error: 1007 TRUNCATED input ends inside a frame ({n} of 24 bytes present) at byte 0"
            )
        );
    }
    // After a whole frame: the offset is the second frame's.
    let mut two = ack.clone();
    two.extend_from_slice(&ack[..2]);
    assert_eq!(
        error_line(&dtp(&["inspect"], &two)),
        "error: 1007 TRUNCATED a frame header needs 16 bytes, only 2 were given at byte 24"
    );
    // Bytes already wrong are reported as such, short or not.
    let line = error_line(&dtp(&["inspect", "--hex", "d751"], b""));
    assert!(line.starts_with("error: 1001 BAD_MAGIC "), "{line}");
    assert!(line.ends_with("at byte 1"), "{line}");
    let line = error_line(&dtp(&["inspect", "--hex", "d75"], b""));
    assert!(line.starts_with("error: INVALID_HEX "), "{line}");
    // Nothing at all is no frame, and no error.
    let o = dtp(&["inspect", "--hex", ""], b"");
    assert!(o.status.success() && o.stdout.is_empty() && o.stderr.is_empty());
}

#[test]
fn max_frame_len_takes_64_to_16777216_as_its_help_says() {
    let help = dtp(&["inspect", "--help"], b"");
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(text.contains("(64 to 16777216)"), "{text}");
    for ok in ["64", "16777216"] {
        for cmd in [&["inspect"][..], &["frame", "encode"]] {
            let mut args = cmd.to_vec();
            args.extend(["--max-frame-len", ok]);
            let o = dtp(&args, b"");
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    for bad in ["63", "16777217"] {
        let line = error_line(&dtp(&["inspect", "--max-frame-len", bad], b""));
        assert!(
            line.starts_with("error: BAD_LIMIT max_frame_len "),
            "{line}"
        );
    }
}
