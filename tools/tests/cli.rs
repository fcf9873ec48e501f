//! The `dtp` command as a user runs it: round trips through the pipes, and
//! one clear line with exit status 2 for every malformed input — short
//! inputs and the edges of `--max-frame-len` included.

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
    // Write from another thread so a child that stops reading cannot deadlock us.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Exactly one line, `error: <code> <what> at byte <offset>`, and exit 2.
fn assert_input_error(o: &Output, code: &str, offset: u64) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    assert!(err.starts_with(&format!("error: {code} ")), "stderr: {err}");
    assert!(
        err.trim_end().ends_with(&format!("at byte {offset}")),
        "stderr: {err}"
    );
}

#[test]
fn sample_encode_inspect_json_round_trips() {
    let sample = dtp(&["frame", "sample"], b"");
    assert!(sample.status.success());
    let lines = String::from_utf8(sample.stdout.clone()).unwrap();
    assert!(lines.lines().count() >= 8);
    let wire = dtp(&["frame", "encode"], &sample.stdout);
    assert!(wire.status.success(), "{}", stderr(&wire));
    let back = dtp(&["inspect", "--json"], &wire.stdout);
    assert!(back.status.success(), "{}", stderr(&back));
    assert_eq!(String::from_utf8(back.stdout).unwrap(), lines);
}

#[test]
fn inspect_prints_every_frame_kind_in_pretty_form() {
    let wire = dtp(&["frame", "encode"], &dtp(&["frame", "sample"], b"").stdout).stdout;
    let text = String::from_utf8(dtp(&["inspect"], &wire).stdout).unwrap();
    for kind in [
        "request", "response", "data", "ack", "resume", "control", "close",
    ] {
        assert!(
            text.contains(&format!("DTP v1 {kind} stream=")),
            "no {kind} frame in:\n{text}"
        );
    }
    assert!(text.contains("4001 DAG_CYCLE_DETECTED"));
    assert!(text.contains("aead=aes-256-gcm key_version=1"));
}

#[test]
fn inspect_reads_hex_and_files() {
    let wire = dtp(
        &["frame", "encode"],
        br#"{"stream_id":3,"kind":"ack","body":{"cumulative":9}}"#,
    )
    .stdout;
    let hex: String = wire.iter().map(|b| format!("{b:02x} ")).collect();
    let o = dtp(&["inspect", "--hex", &hex], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8(o.stdout)
            .unwrap()
            .contains("cumulative         9")
    );

    let path = std::env::temp_dir().join(format!("dtp-cli-test-{}.bin", std::process::id()));
    std::fs::write(&path, &wire).unwrap();
    let o = dtp(&["inspect", "--json", path.to_str().unwrap()], b"");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        String::from_utf8(o.stdout).unwrap().trim(),
        r#"{"version":1,"stream_id":3,"kind":"ack","body":{"cumulative":9}}"#
    );
}

#[test]
fn malformed_frames_exit_2_with_code_and_offset() {
    let ack = dtp(
        &["frame", "encode"],
        br#"{"stream_id":0,"kind":"ack","body":{"cumulative":1}}"#,
    )
    .stdout;
    assert_eq!(ack.len(), 24);

    // An unknown kind in the second frame: the offset counts from the input's start.
    let mut two = ack.clone();
    two.extend_from_slice(&ack);
    two[24 + 3] = 0x2a;
    let o = dtp(&["inspect"], &two);
    assert_input_error(&o, "1003 UNKNOWN_KIND", 27);
    // The first frame was still printed.
    assert!(String::from_utf8(o.stdout).unwrap().contains("cumulative"));

    assert_input_error(
        &dtp(&["inspect"], b"GET / HTTP/1.1\r\n"),
        "1001 BAD_MAGIC",
        0,
    );
    assert_input_error(&dtp(&["inspect"], &ack[..20]), "1007 TRUNCATED", 0);

    let mut big = ack.clone();
    big[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_input_error(&dtp(&["inspect"], &big), "1006 FRAME_TOO_LARGE", 12);
}

#[test]
fn random_bytes_never_crash_the_tool() {
    // A deterministic pseudo-random stream (xorshift), some of it starting
    // with a valid header so the decoder goes past the magic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..64 {
        let mut input = Vec::new();
        if round % 2 == 0 {
            input.extend_from_slice(&[0xd7, 0x50, 0x01, (round % 9) as u8, 0, 0, 0, 0]);
        }
        for _ in 0..(round * 7 % 200) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            input.push(x as u8);
        }
        let o = dtp(&["inspect"], &input);
        let code = o.status.code();
        assert!(
            code == Some(0) || code == Some(2),
            "exit {code:?} on {input:02x?}: {}",
            stderr(&o)
        );
        if code == Some(2) {
            assert_eq!(stderr(&o).lines().count(), 1);
        }
    }
}

#[test]
fn bad_json_exits_2_naming_the_line_and_offset() {
    let good = r#"{"stream_id":0,"kind":"ack","body":{"cumulative":1}}"#;
    let input = format!(
        "{good}\n\n{{\"stream_id\":0,\"kind\":\"ack\",\"body\":{{\"cumulative\":1,\"x\":2}}}}\n"
    );
    let o = dtp(&["frame", "encode"], input.as_bytes());
    assert_input_error(&o, "INVALID_JSON line 3:", good.len() as u64 + 2);
    assert!(stderr(&o).contains("unknown field `x`"));

    let o = dtp(&["frame", "encode"], b"not json\n");
    assert_input_error(&o, "INVALID_JSON line 1:", 0);

    // Valid JSON that breaks an encoding rule: an adjustment without agreement id.
    let o = dtp(
        &["frame", "encode"],
        br#"{"stream_id":0,"kind":"request","body":{"request_id":1,"request_type":"adjustment"}}"#,
    );
    assert_input_error(&o, "1013 INCONSISTENT", 0);
}

#[test]
fn limits_are_checked_and_enforced() {
    let o = dtp(&["inspect", "--max-frame-len", "99999999"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("error: BAD_LIMIT "));

    let frame = r#"{"stream_id":0,"kind":"data","body":{"fragment_id":1,"sequence":1,"payload_hex":"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}}"#;
    let o = dtp(
        &["frame", "encode", "--max-frame-len", "64"],
        frame.as_bytes(),
    );
    assert_input_error(&o, "1011 LIMIT_EXCEEDED", 0);
    let wire = dtp(&["frame", "encode"], frame.as_bytes()).stdout;
    assert_input_error(
        &dtp(&["inspect", "--max-frame-len", "64"], &wire),
        "1006 FRAME_TOO_LARGE",
        12,
    );
}

#[test]
fn a_closed_pipe_is_not_a_crash() {
    // Far more output than a pipe buffers, into a reader that has gone away
    // (`dtp inspect big.bin | head`): the tool stops quietly, exit 0.
    let ack = dtp(
        &["frame", "encode"],
        br#"{"stream_id":0,"kind":"ack","body":{"cumulative":1}}"#,
    )
    .stdout;
    let input: Vec<u8> = ack
        .iter()
        .copied()
        .cycle()
        .take(ack.len() * 20_000)
        .collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .arg("inspect")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn help_explains_every_command() {
    let o = dtp(&["--help"], b"");
    let text = String::from_utf8(o.stdout).unwrap();
    for word in ["inspect", "frame", "Exit status"] {
        assert!(text.contains(word), "{text}");
    }
    let o = dtp(&["frame", "--help"], b"");
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("encode") && text.contains("sample"), "{text}");
}

/// The one line on stderr of a run that must exit 2.
fn error_line(o: &Output) -> String {
    let err = stderr(o);
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
