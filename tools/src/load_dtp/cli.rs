//! `dtp load --dtp` as a command: reads the Fay's key and credential files,
//! runs [`super::run`], prints the text report and writes the JSON.
//!
//! **Owns**: the key and credential file reading of DTP mode and the report
//! format (the plaintext load's keys plus a `dtp` object). **Never
//! touches**: the run itself (`super`), the `dtp cred` files' writing.

use std::path::{Path, PathBuf};

use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair};
use dtp_crypto::cred::Credential;
use dtp_gateway::dtp::{EndpointConfig, FayConfig};

use super::{DtpLoadResult, DtpSpec};
use crate::cli_error::CliError;
use crate::load::{LoadSpec, Progress};
use crate::text::plural;

/// Largest key or credential file read (they are a few hundred bytes).
const MAX_KEY_FILE: usize = 64 * 1024;

/// The options DTP mode adds to `dtp load`.
pub(crate) struct DtpCliArgs {
    /// The Fay's Noise private key file (`dtp cred noise-key`).
    pub(crate) fay_key: Option<PathBuf>,
    /// The Fay's credential file (`dtp cred issue`).
    pub(crate) credential: Option<PathBuf>,
    /// The terminal's Noise public key: 64 hex digits or a `.pub` file.
    pub(crate) pin_terminal: Option<String>,
    /// Cut every connection at its N-th fragment.
    pub(crate) disconnect_every: Option<u64>,
    /// Write the result as JSON here.
    pub(crate) json: Option<PathBuf>,
    /// The least share that must succeed (`--min-success`).
    pub(crate) min_success: f64,
    /// `--duration` as given (`--control hold`: `None` holds until Ctrl-C).
    pub(crate) hold_for: Option<std::time::Duration>,
    /// `--control MODE` and its options, when given.
    pub(crate) control: Option<super::ControlCli>,
}

/// `dtp load --dtp`: checks the options, reads the keys, runs, reports;
/// with `--control`, the control mode's run instead.
pub(crate) fn run_cli(spec: &LoadSpec, a: DtpCliArgs) -> Result<(), CliError> {
    if let Some(control) = a.control {
        let o = super::control::cli::ControlArgs {
            pin_terminal: a.pin_terminal,
            json: a.json,
            min_success: a.min_success,
            fay_key: a.fay_key,
            credential: a.credential,
            hold_for: a.hold_for,
        };
        return super::control::run_cli(spec, control, o);
    }
    let Some(workload) = super::dtp_workload(spec.workload) else {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--dtp runs the pingpong and stream workloads only",
        ));
    };
    if spec.rate.is_some() {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--rate is not supported with --dtp: DTP pingpong keeps one fragment in flight per connection (closed loop)",
        ));
    }
    if a.disconnect_every == Some(0) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--disconnect-every must be at least 1",
        ));
    }
    let fay = fay_config_of_args(&a)?;
    if fay.cap.pinned_responder_key.is_none() {
        eprintln!("warning: no --pin-terminal: any terminal key is accepted");
    }
    let dtp = DtpSpec {
        fay,
        disconnect_every: a.disconnect_every,
    };
    let total = (spec.warmup + spec.duration).as_secs_f64();
    let bar = Progress::new(total);
    let result =
        super::run(spec, &dtp, |secs, ops| bar.update(secs, ops), |_| {}).map_err(CliError::Io)?;
    bar.finish();
    print!("{}", text_report(workload.name(), &dtp, &result));
    if let Some(path) = a.json {
        let v = json_report(workload.name(), &dtp, &result);
        std::fs::write(&path, format!("{v:#}\n")).map_err(|e| CliError::io(path.display(), e))?;
    }
    result.verdict(spec, a.min_success).map_err(CliError::Io)
}

/// The Fay's configuration from the files named on the command line.
fn fay_config_of_args(a: &DtpCliArgs) -> Result<FayConfig, CliError> {
    let (Some(key_path), Some(cred_path)) = (&a.fay_key, &a.credential) else {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--dtp needs --fay-key FILE (dtp cred noise-key) and --credential FILE (dtp cred issue)",
        ));
    };
    let pinned = match &a.pin_terminal {
        Some(arg) => Some(read_public_key(arg)?),
        None => None,
    };
    fay_config_from(key_path, cred_path, pinned)
}

/// A Fay's configuration from its key and credential files; `pinned`: the
/// terminal's Noise public key.
pub(crate) fn fay_config_from(
    key_path: &Path,
    cred_path: &Path,
    pinned: Option<[u8; 32]>,
) -> Result<FayConfig, CliError> {
    let key = NoiseKeypair::from_text(&read_text(key_path)?).map_err(|e| {
        CliError::usage(
            "BAD_KEY",
            format_args!(
                "{}: not a Noise private key ({e}); make one with `dtp cred noise-key`",
                key_path.display()
            ),
        )
    })?;
    let credential = Credential::from_text(&read_text(cred_path)?).map_err(|e| {
        CliError::usage(
            "BAD_CREDENTIAL",
            format_args!(
                "{}: not a credential ({e}); make one with `dtp cred issue`",
                cred_path.display()
            ),
        )
    })?;
    Ok(fay_config(key, credential, pinned))
}

/// A Fay's configuration: its keys and credential, AES-256-GCM first.
pub(crate) fn fay_config(
    key: NoiseKeypair,
    credential: Credential,
    pinned: Option<[u8; 32]>,
) -> FayConfig {
    FayConfig {
        cap: InitiatorConfig {
            static_keypair: key,
            credential,
            algorithms: vec![
                dtp_codec::AeadAlgorithm::Aes256Gcm,
                dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
            ],
            pinned_responder_key: pinned,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        endpoint: EndpointConfig::fay(),
    }
}

/// A small text file (a key, a credential), at most `MAX_KEY_FILE` bytes.
pub(crate) fn read_text(path: &Path) -> Result<String, CliError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| CliError::io(path.display(), e))?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(path.display(), e))?;
    if bytes.len() > MAX_KEY_FILE {
        return Err(CliError::usage(
            "BAD_KEY",
            format_args!("{}: longer than {MAX_KEY_FILE} bytes", path.display()),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        CliError::usage(
            "BAD_KEY",
            format_args!("{}: not UTF-8 text", path.display()),
        )
    })
}

/// `--pin-terminal`: 64 hex digits, or a file holding them (`#` comment
/// lines allowed: the `.pub` file of `dtp cred noise-key`).
pub(crate) fn read_public_key(arg: &str) -> Result<[u8; 32], CliError> {
    if let Some(key) = parse_hex32(arg) {
        return Ok(key);
    }
    let path = Path::new(arg);
    if std::fs::symlink_metadata(path).is_err() {
        return Err(CliError::usage(
            "BAD_KEY",
            format_args!("--pin-terminal `{arg}` is neither 64 hex digits nor a file"),
        ));
    }
    let text = read_text(path)?;
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    parse_hex32(&body).ok_or_else(|| {
        CliError::usage(
            "BAD_KEY",
            format_args!(
                "{arg}: not a Noise public key (64 hex digits, the .pub file of `dtp cred noise-key`)"
            ),
        )
    })
}

/// A 32-byte key as 64 hex digits (either case, surrounding space allowed).
pub(crate) fn parse_hex32(text: &str) -> Option<[u8; 32]> {
    let t = text.trim().as_bytes();
    if t.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(t.chunks_exact(2)) {
        let hi = char::from(pair[0]).to_digit(16)?;
        let lo = char::from(pair[1]).to_digit(16)?;
        *o = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

/// The human-readable report: the plaintext load's lines, then DTP's.
pub(crate) fn text_report(workload: &str, dtp: &DtpSpec, r: &DtpLoadResult) -> String {
    let (t, l, d) = (&r.load.tally, &r.load.latency, &r.dtp);
    let (p50, p99) = d.resume_p50_p99_us();
    let mut s = format!(
        "{workload} over DTP · {} · {:.1} s · backend {}\n",
        plural(t.connected, "connection"),
        r.load.elapsed.as_secs_f64(),
        r.load.backend
    );
    s += &format!(
        "throughput  {:.0} ops/s  {:.1} MB/s\n",
        r.load.ops_per_s(),
        r.load.bytes_per_s() / 1e6
    );
    s += &format!(
        "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}\n",
        l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
    );
    s += &format!(
        "fragments   {} sent  {} delivered  {} lost  {} duplicated\n",
        d.sent, d.delivered, d.lost, d.duplicated
    );
    if let Some(n) = dtp.disconnect_every {
        s += &format!(
            "resumes     {} (a cut every {}: {})  latency µs p50 {p50}  p99 {p99}\n",
            d.resumes,
            plural(n, "fragment"),
            plural(d.cuts, "cut")
        );
    }
    if let Some(cpus) = r.load.client_cpus() {
        s += &format!("client cpu  {cpus:.2} cores (this load generator, over the window)\n");
    }
    if t.errors + t.failed + d.failed_flows > 0 {
        s += &format!(
            "problems    {}, {}, {} given up\n",
            plural(t.errors, "error"),
            plural(t.failed, "failed connection"),
            plural(d.failed_flows, "connection")
        );
    }
    for line in t.failures.lines() {
        s += &format!("closed      {line}\n");
    }
    s
}

/// The JSON report: the plaintext load's keys and a `dtp` object.
pub(crate) fn json_report(workload: &str, dtp: &DtpSpec, r: &DtpLoadResult) -> serde_json::Value {
    let (t, l, d) = (&r.load.tally, &r.load.latency, &r.dtp);
    let (p50, p99) = d.resume_p50_p99_us();
    serde_json::json!({
        "workload": workload,
        "connections": t.connected,
        "duration_s": r.load.elapsed.as_secs_f64(),
        "backend": r.load.backend,
        "ops": t.ops,
        "ops_per_s": r.load.ops_per_s(),
        "bytes_per_s": r.load.bytes_per_s(),
        "latency_us": {"p50": l.p50_us, "p90": l.p90_us, "p99": l.p99_us, "p999": l.p999_us, "max": l.max_us},
        "errors": t.errors,
        "failed_connections": t.failed,
        "backlogged": t.backlogged,
        "client_cpu_ns": r.load.client_cpu_ns,
        "failures": t.failures.to_json(),
        "dtp": {
            "sent": d.sent,
            "delivered": d.delivered,
            "lost": d.lost,
            "duplicated": d.duplicated,
            "resumes": d.resumes,
            "cuts": d.cuts,
            "disconnect_every": dtp.disconnect_every,
            "failed_flows": d.failed_flows,
            "established_flows": d.established_flows,
            "resume_latency_us": {"p50": p50, "p99": p99},
        },
    })
}
