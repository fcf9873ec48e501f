//! `dtp cred`: issuer keys, Fay credentials, revocation lists and the Web
//! Push VAPID key from the command line — the operator's side of CAP's identity check (DESIGN.md §3
//! "CAP", SPEC SEQ-1).
//!
//! This module owns the command-line surface only: argument parsing
//! ([`parse`]), files ([`files`]), the clock and the random source. Every
//! cryptographic and format decision belongs to `dtp_crypto::cred` (and
//! `dtp_crypto::cap::NoiseKeypair`); this module never builds or reads
//! credential bytes itself and never touches the codec, the engine or the
//! other commands.
//!
//! Choices, and why:
//! - **Files.** Private keys (issuer: PEM PKCS#8 `PRIVATE KEY`; Noise: `DTP
//!   NOISE PRIVATE KEY`) are created with mode 0600 from the first byte (no
//!   chmod afterwards, so never readable by others even briefly). No output
//!   file is overwritten unless `--force`; with `--force` the new file is
//!   written beside the old one and renamed over it. The public half goes
//!   to `FILE.pub`: the issuer's as `DTP ISSUER PUBLIC KEY` armour, the
//!   Noise key as 64 hex digits (the form `--noise-key` and a credential's
//!   `noise_key` show).
//! - **Standard output carries one value** for the key and issue commands
//!   (the key id, the public key, the descriptor id), so scripts can
//!   capture it: `ID=$(dtp cred issue …)`.
//! - **Times** are Unix seconds, `now`, a date (`2026-12-01`, midnight UTC)
//!   or RFC 3339 (`2026-12-01T00:00:00Z`, offsets allowed); parsed here, no
//!   date crate. `--valid-for` takes `30d`, `12h`, `1d12h` (s, m, h, d, w)
//!   and counts from `--not-before` (which defaults to now). A credential
//!   must expire: `--not-after` or `--valid-for` is required.
//! - **Errors** follow the tool (cli_error.rs): exit 2 and one line
//!   `error: <CODE> <what>` for bad input or usage, exit 1 when a file
//!   cannot be read or written. Verification failures carry the CAP wire
//!   code as the codec prints it — `error: 2005 CREDENTIAL_REVOKED …` —
//!   like `dtp inspect` prints `1003 UNKNOWN_KIND`. Usage codes:
//!   BAD_ARGUMENT, BAD_GRANT, BAD_TIME, BAD_KEY, BAD_REVOCATION_LIST,
//!   FILE_EXISTS.
//! - **Revocation lists** are rewritten whole (sorted, comments dropped)
//!   and replaced atomically; two concurrent `revoke`s of the same file are
//!   not serialised (the last one wins), so run them from one place.

mod files;
pub(crate) mod parse;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use dtp_codec::ErrorCode;
use dtp_crypto::cap::{NOISE_PRIVATE_KEY_LABEL, NoiseKeypair};
use dtp_crypto::cred::{
    Credential, CredentialRequest, Descriptor, IssueError, IssuerKeyPair, IssuerPublicKey, KeyId,
    RevocationList, Verifier, text::MAX_ARMOR_LEN,
};
use dtp_realtime::push::{VapidKey, base64url_encode, private_key_pem};
use ring::rand::{SecureRandom, SystemRandom};
use uuid::Uuid;

use crate::cli_error::{CliError, out};
use files::Access;
use parse::{hex, modes_text, show_time};

/// Largest revocation list file read: room for the library's default
/// ceiling of ids (37 bytes a line) and comments.
const MAX_REVOCATION_FILE: usize = 8 * 1024 * 1024;

/// The `dtp cred` subcommands.
#[derive(Subcommand)]
pub(crate) enum CredCommand {
    /// Make a new Ed25519 issuer key pair.
    ///
    /// Writes the private key to FILE (PEM PKCS#8, mode 0600) and the public
    /// key to FILE.pub (give that to terminals: `dtp cred verify --trust`).
    /// Prints the key id, which every credential it signs names.
    IssuerKey(KeyOut),
    /// Make a new Noise static key pair (X25519) for a Fay or a terminal.
    ///
    /// Writes the private key to FILE (mode 0600) and the public key, 64 hex
    /// digits, to FILE.pub. Prints the public key: a credential binds it
    /// (`dtp cred issue --noise-key`).
    NoiseKey(KeyOut),
    /// Make a new VAPID key pair (P-256) for Web Push (SPEC RT-12).
    ///
    /// Writes the private key to FILE (PEM PKCS#8, mode 0600: give it to
    /// `[realtime.push] vapid_key`) and the public key to FILE.pub as
    /// base64url: the `applicationServerKey` a page passes to
    /// `PushManager.subscribe`. Prints the public key.
    VapidKey(KeyOut),
    /// Sign a credential for a Fay.
    ///
    /// Times (--not-before, --not-after) are Unix seconds, `now`, a date
    /// (`2026-12-01`: midnight UTC) or RFC 3339 (`2026-12-01T00:00:00Z`,
    /// `2026-12-01T09:00:00+02:00`). A credential must expire: give
    /// --not-after or --valid-for. Writes the credential text to --out and
    /// prints its descriptor id (what `dtp cred revoke` takes).
    Issue(IssueArgs),
    /// Show what a credential says, without verifying it.
    ///
    /// The signature is shown only as a short fingerprint.
    Inspect(InspectArgs),
    /// Verify a credential: trusted issuer, signature, revocation, validity.
    ///
    /// Prints `valid` and the Fay id and grants, exit 0; otherwise exit 2 and
    /// one line `error: <code> <name> <why>`, the name one of
    /// CREDENTIAL_INVALID, CREDENTIAL_EXPIRED, CREDENTIAL_REVOKED,
    /// UNKNOWN_ISSUER — the codes a terminal's CAP check answers with.
    Verify(VerifyArgs),
    /// Add a credential's descriptor id to a revocation list file.
    ///
    /// Creates the file if absent; the file is one id per line, sorted.
    /// Revoking an id twice is not an error.
    Revoke(RevokeArgs),
}

/// Where a new key pair goes.
#[derive(Args)]
pub(crate) struct KeyOut {
    /// The private key file (mode 0600); the public key goes to FILE.pub.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace FILE and FILE.pub if they exist.
    #[arg(long)]
    force: bool,
}

/// `dtp cred issue`.
#[derive(Args)]
pub(crate) struct IssueArgs {
    /// The issuer's private key file (from `dtp cred issuer-key`).
    #[arg(long, value_name = "FILE")]
    issuer_key: PathBuf,
    /// The Fay's id (1–255 bytes of printable UTF-8).
    #[arg(long, value_name = "ID")]
    fay_id: String,
    /// The Fay's Noise public key: 64 hex digits, or a FILE.pub from
    /// `dtp cred noise-key`.
    #[arg(long, value_name = "PUBFILE_OR_HEX")]
    noise_key: String,
    /// A grant, repeatable: a resource id and its modes, comma-separated,
    /// from read, write, execute, configure (`camera-1=read,write`). At most
    /// 64; with none the credential only proves who the Fay is.
    #[arg(long = "grant", value_name = "RESOURCE=MODES")]
    grants: Vec<String>,
    /// First valid second (default: now).
    #[arg(long, value_name = "TIME")]
    not_before: Option<String>,
    /// End of validity, exclusive (or use --valid-for).
    #[arg(long, value_name = "TIME")]
    not_after: Option<String>,
    /// Validity from --not-before: `30d`, `12h`, `1d12h`, `3600` (units s,
    /// m, h, d, w; a bare number is seconds).
    #[arg(long, value_name = "DURATION")]
    valid_for: Option<String>,
    /// Where to write the credential (text form).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace --out if it exists.
    #[arg(long)]
    force: bool,
}

/// `dtp cred inspect`.
#[derive(Args)]
pub(crate) struct InspectArgs {
    /// The credential file.
    file: PathBuf,
    /// Print a JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// `dtp cred verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The credential file.
    file: PathBuf,
    /// Trusted issuer public key files (FILE.pub from `dtp cred
    /// issuer-key`); at least one. Several may follow one --trust, or repeat
    /// --trust; put the credential FILE first.
    #[arg(long, value_name = "PUBFILE", num_args = 1..)]
    trust: Vec<PathBuf>,
    /// A revocation list file (from `dtp cred revoke`).
    #[arg(long, value_name = "FILE")]
    revocations: Option<PathBuf>,
    /// Check at this time instead of now (same forms as `issue`'s times).
    #[arg(long, value_name = "TIME")]
    at: Option<String>,
}

/// `dtp cred revoke`.
#[derive(Args)]
pub(crate) struct RevokeArgs {
    /// The revocation list file (created if absent).
    #[arg(long, value_name = "FILE")]
    list: PathBuf,
    /// The descriptor id to revoke (as `dtp cred issue` printed it), or a
    /// credential file whose id to revoke.
    #[arg(value_name = "DESCRIPTOR_ID")]
    descriptor_id: String,
}

/// Runs one `dtp cred` subcommand.
pub(crate) fn run(cmd: CredCommand) -> Result<(), CliError> {
    match cmd {
        CredCommand::IssuerKey(a) => issuer_key(&a),
        CredCommand::NoiseKey(a) => noise_key(&a),
        CredCommand::VapidKey(a) => vapid_key(&a),
        CredCommand::Issue(a) => issue(&a),
        CredCommand::Inspect(a) => inspect(&a),
        CredCommand::Verify(a) => verify(&a),
        CredCommand::Revoke(a) => revoke(&a),
    }
}

fn issuer_key(a: &KeyOut) -> Result<(), CliError> {
    let public_path = files::pub_path(&a.out);
    files::check_absent(&[&a.out, &public_path], a.force)?;
    let pair = IssuerKeyPair::generate(&SystemRandom::new())
        .map_err(|e| CliError::Io(format!("issuer key: {e}")))?;
    files::write_file(&a.out, &pair.to_text(), Access::Private, a.force)?;
    files::write_file(
        &public_path,
        &pair.public_key().to_text(),
        Access::Public,
        a.force,
    )?;
    emit(&format!("{}\n", pair.public_key().key_id()))
}

fn noise_key(a: &KeyOut) -> Result<(), CliError> {
    let public_path = files::pub_path(&a.out);
    files::check_absent(&[&a.out, &public_path], a.force)?;
    let mut private = [0u8; 32];
    random(&mut private)?;
    let pair =
        NoiseKeypair::from_private(private).map_err(|e| CliError::Io(format!("Noise key: {e}")))?;
    private = [0; 32];
    std::hint::black_box(&private);
    write_key_pair(a, &public_path, &pair.to_text(), &hex(pair.public()))
}

fn vapid_key(a: &KeyOut) -> Result<(), CliError> {
    let public_path = files::pub_path(&a.out);
    files::check_absent(&[&a.out, &public_path], a.force)?;
    // A uniform draw is outside 1..n with probability ~2^-32: draw again.
    let mut private = [0u8; 32];
    let (key, pem) = loop {
        random(&mut private)?;
        if let (Ok(key), Ok(pem)) = (VapidKey::from_bytes(&private), private_key_pem(&private)) {
            break (key, pem);
        }
    };
    private = [0; 32];
    std::hint::black_box(&private);
    write_key_pair(a, &public_path, &pem, &base64url_encode(key.public_key()))
}

/// Writes a key's private text (0600) and its public text beside it, then
/// prints the public text.
fn write_key_pair(
    a: &KeyOut,
    public_path: &std::path::Path,
    private: &str,
    public: &str,
) -> Result<(), CliError> {
    files::write_file(&a.out, private, Access::Private, a.force)?;
    files::write_file(public_path, &format!("{public}\n"), Access::Public, a.force)?;
    emit(&format!("{public}\n"))
}

fn issue(a: &IssueArgs) -> Result<(), CliError> {
    let now = now_unix()?;
    let time = |flag: &str, t: &str| {
        parse::parse_time(t, now)
            .map_err(|e| CliError::usage("BAD_TIME", format_args!("{flag}: {e}")))
    };
    let not_before = match &a.not_before {
        Some(t) => time("--not-before", t)?,
        None => now,
    };
    let not_after = match (&a.not_after, &a.valid_for) {
        (Some(t), None) => time("--not-after", t)?,
        (None, Some(d)) => {
            let secs = parse::parse_duration(d)
                .map_err(|e| CliError::usage("BAD_TIME", format_args!("--valid-for: {e}")))?;
            not_before.checked_add(secs).ok_or_else(|| {
                CliError::usage(
                    "BAD_TIME",
                    "--valid-for: the end is past the year 584942417355",
                )
            })?
        }
        (Some(_), Some(_)) => {
            return Err(CliError::usage(
                "BAD_ARGUMENT",
                "give --not-after or --valid-for, not both",
            ));
        }
        (None, None) => {
            return Err(CliError::usage(
                "BAD_ARGUMENT",
                "a credential must expire: give --not-after TIME or --valid-for DURATION",
            ));
        }
    };
    if not_after <= not_before {
        return Err(CliError::usage(
            "BAD_TIME",
            format_args!(
                "--not-after {} is not after --not-before {}",
                show_time(not_after),
                show_time(not_before)
            ),
        ));
    }
    let grants = parse::parse_grants(&a.grants).map_err(|e| CliError::usage("BAD_GRANT", e))?;
    let noise_key = read_noise_public(&a.noise_key)?;
    let text = files::read_text(&a.issuer_key, MAX_ARMOR_LEN, "BAD_KEY")?;
    let issuer = IssuerKeyPair::from_text(&text).map_err(|e| {
        CliError::usage(
            "BAD_KEY",
            format_args!(
                "{}: {e} (want an issuer private key)",
                a.issuer_key.display()
            ),
        )
    })?;
    files::check_absent(&[&a.out], a.force)?;
    let mut id = [0u8; 16];
    random(&mut id)?;
    let request = CredentialRequest {
        fay_id: a.fay_id.clone(),
        noise_key,
        grants,
        not_before,
        not_after,
    };
    let cred = issuer.issue(request, id).map_err(|IssueError(e)| {
        CliError::usage(
            "BAD_ARGUMENT",
            format_args!("cannot issue: {} in `{}`", e.kind, e.field),
        )
    })?;
    files::write_file(&a.out, &cred.to_text(), Access::Public, a.force)?;
    emit(&format!("{}\n", cred.descriptor().descriptor_id))
}

/// `--noise-key`: 64 hex digits, or a file holding them (`#` comment lines
/// allowed). A Noise *private* key file is refused by name, so a private
/// key is never mistaken for something to hand around.
fn read_noise_public(arg: &str) -> Result<[u8; 32], CliError> {
    if let Some(key) = parse::parse_hex32(arg) {
        return Ok(key);
    }
    let path = Path::new(arg);
    if std::fs::symlink_metadata(path).is_err() && arg.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CliError::usage(
            "BAD_KEY",
            format_args!("--noise-key `{arg}` is neither 64 hex digits nor a file"),
        ));
    }
    let text = files::read_text(path, MAX_ARMOR_LEN, "BAD_KEY")?;
    if text.contains(&format!("-----BEGIN {NOISE_PRIVATE_KEY_LABEL}-----")) {
        return Err(CliError::usage(
            "BAD_KEY",
            format_args!(
                "{arg} is a Noise private key; pass its .pub file or the public key in hex"
            ),
        ));
    }
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    parse::parse_hex32(&body).ok_or_else(|| {
        CliError::usage(
            "BAD_KEY",
            format_args!("{arg}: not a Noise public key (64 hex digits)"),
        )
    })
}

fn inspect(a: &InspectArgs) -> Result<(), CliError> {
    let cred = read_credential(&a.file)?;
    let d = cred.descriptor();
    let fingerprint = signature_fingerprint(&cred);
    if a.json {
        let grants: Vec<serde_json::Value> = d
            .grants
            .iter()
            .map(|g| {
                serde_json::json!({
                    "resource_id": g.resource_id,
                    "modes": g.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "descriptor_id": d.descriptor_id.to_string(),
            "fay_id": d.fay_id,
            "noise_key": hex(&d.noise_key),
            "issuer_key_id": d.issuer_key_id.to_string(),
            "not_before": d.not_before,
            "not_after": d.not_after,
            "not_before_utc": parse::format_rfc3339(d.not_before),
            "not_after_utc": parse::format_rfc3339(d.not_after),
            "grants": grants,
            "signature_sha256": fingerprint,
            "verified": false,
        });
        return emit(&format!("{v:#}\n"));
    }
    emit(&format!(
        "credential (not verified: see `dtp cred verify`)\n{}signature     sha256:{fingerprint} (fingerprint)\n",
        describe(d)
    ))
}

fn verify(a: &VerifyArgs) -> Result<(), CliError> {
    if a.trust.is_empty() {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "give at least one --trust PUBFILE (an issuer public key)",
        ));
    }
    let cred = read_credential(&a.file)?;
    let mut verifier = Verifier::new();
    let mut trusted: Vec<KeyId> = Vec::with_capacity(a.trust.len());
    for path in &a.trust {
        let text = files::read_text(path, MAX_ARMOR_LEN, "BAD_KEY")?;
        let key = IssuerPublicKey::from_text(&text).map_err(|e| {
            CliError::usage(
                "BAD_KEY",
                format_args!(
                    "{}: {e} (want an issuer public key, FILE.pub)",
                    path.display()
                ),
            )
        })?;
        verifier
            .trust(key)
            .map_err(|e| CliError::usage("BAD_ARGUMENT", e))?;
        trusted.push(key.key_id());
    }
    if let Some(path) = &a.revocations {
        let text = files::read_text(path, MAX_REVOCATION_FILE, "BAD_REVOCATION_LIST")?;
        verifier.set_revocations(read_revocations(path, &text)?);
    }
    let now = now_unix()?;
    let at = match &a.at {
        Some(t) => parse::parse_time(t, now)
            .map_err(|e| CliError::usage("BAD_TIME", format_args!("--at: {e}")))?,
        None => now,
    };
    let ok = verifier
        .verify(&cred, at)
        .map_err(|e| verify_error(&e, &trusted, at))?;
    emit(&format!(
        "valid\n{}checked_at    {}\n",
        describe(ok.credential().descriptor()),
        show_time(at)
    ))
}

/// A verification failure as one line: the wire code, then why, with times
/// in both forms and what the user can do.
fn verify_error(e: &dtp_crypto::cred::CredError, trusted: &[KeyId], at: u64) -> CliError {
    use dtp_crypto::cred::CredError as E;
    let why = match e {
        E::Malformed(p) => p.to_string(),
        E::BadSignature(id) => format!(
            "signature does not verify against issuer key {id}: the credential was altered or signed by another key"
        ),
        E::UnknownIssuer(id) => format!(
            "issued by key {id}, which is not among the trusted keys ({}); pass the issuer's public key with --trust",
            trusted
                .iter()
                .map(KeyId::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        E::Expired { not_after, .. } => format!(
            "expired at {}, checked at {}; issue a new one",
            show_time(*not_after),
            show_time(at)
        ),
        E::NotYetValid { not_before, .. } => format!(
            "not valid before {}, checked at {}; check the clocks or --not-before",
            show_time(*not_before),
            show_time(at)
        ),
        E::Revoked(id) => format!("credential {id} is on the revocation list"),
    };
    CliError::Input(format!("{} {why}", e.code()))
}

fn revoke(a: &RevokeArgs) -> Result<(), CliError> {
    let id = match Uuid::try_parse(a.descriptor_id.trim()) {
        Ok(id) => id,
        Err(_) if Path::new(&a.descriptor_id).is_file() => {
            read_credential(Path::new(&a.descriptor_id))?
                .descriptor()
                .descriptor_id
        }
        Err(_) => {
            return Err(CliError::usage(
                "BAD_ARGUMENT",
                format_args!(
                    "`{}` is neither a descriptor id (a UUID, as `dtp cred issue` prints) nor a credential file",
                    a.descriptor_id
                ),
            ));
        }
    };
    let text = files::read_text_or_empty(&a.list, MAX_REVOCATION_FILE, "BAD_REVOCATION_LIST")?;
    let mut list = read_revocations(&a.list, &text)?;
    let added = list.add(id).map_err(|e| {
        CliError::usage(
            "BAD_REVOCATION_LIST",
            format_args!("{}: {e}", a.list.display()),
        )
    })?;
    if !added {
        return emit(&format!("already revoked {id}\n"));
    }
    files::replace_file(&a.list, &list.to_text(), Access::Public)?;
    emit(&format!("revoked {id}\n"))
}

fn read_revocations(path: &Path, text: &str) -> Result<RevocationList, CliError> {
    RevocationList::from_text(text, RevocationList::DEFAULT_MAX).map_err(|e| {
        CliError::usage(
            "BAD_REVOCATION_LIST",
            format_args!("{}: {e}", path.display()),
        )
    })
}

/// Reads a credential file; a file that is not a credential is
/// CREDENTIAL_INVALID (exit 2), one that cannot be read an IO error (exit 1).
fn read_credential(path: &Path) -> Result<Credential, CliError> {
    let code = ErrorCode::CREDENTIAL_INVALID.to_string();
    let text = files::read_text(path, MAX_ARMOR_LEN, &code)?;
    Credential::from_text(&text)
        .map_err(|e| CliError::usage(&code, format_args!("{}: {e}", path.display())))
}

/// The descriptor, one field a line (grants indented, one a line).
fn describe(d: &Descriptor) -> String {
    let mut s = format!(
        "descriptor_id {}\nfay_id        {}\nnoise_key     {}\nissuer_key_id {}\nnot_before    {}\nnot_after     {}\ngrants        {}\n",
        d.descriptor_id,
        d.fay_id,
        hex(&d.noise_key),
        d.issuer_key_id,
        show_time(d.not_before),
        show_time(d.not_after),
        d.grants.len()
    );
    for g in &d.grants {
        s.push_str(&format!("  {} {}\n", g.resource_id, modes_text(g.modes)));
    }
    s
}

/// The first 8 bytes of SHA-256 of the signature, in hex: enough to tell
/// two credentials apart, without printing the signature.
fn signature_fingerprint(cred: &Credential) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cred.signature());
    hex(digest.as_ref().get(..8).unwrap_or_default())
}

fn random(buf: &mut [u8]) -> Result<(), CliError> {
    SystemRandom::new()
        .fill(buf)
        .map_err(|_| CliError::Io("the system random source failed".into()))
}

fn now_unix() -> Result<u64, CliError> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .map_err(|_| CliError::Io("the system clock is before 1970".into()))
}

fn emit(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(out)
}
