//! SPEC FRM-4: the human-readable form of a frame.
//!
//! The first line shows every header field (magic and version, kind, flags,
//! AEAD algorithm, key version, stream, body length); the lines below show
//! the body's fields, one per line.

use std::fmt::{self, Display, Formatter, Write as _};

use crate::control::{AuthOutcome, Beat, ControlMessage};
use crate::frame::{Body, Decision, HEADER_LEN, LogicalFrame, Terms, VERSION};
use crate::limits::Limits;

/// Limits so wide that only a frame no limits could allow fails to size.
const PERMISSIVE: Limits = Limits {
    max_frame_len: u32::MAX,
    max_string_len: u16::MAX,
    max_map_entries: u16::MAX,
    max_relations: u8::MAX,
    max_beats: u16::MAX,
    max_credential_len: u16::MAX,
};

/// The most payload bytes shown before the preview is cut.
const PREVIEW: usize = 32;

/// SPEC FRM-4: renders the frame for people (`dtp inspect`).
impl Display for LogicalFrame {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (aead, key_version) = match &self.body {
            Body::Sealed(s) => (s.aead.name(), s.key_version),
            _ => ("none", 0),
        };
        let length = match self.encoded_len(&PERMISSIVE) {
            Ok(total) => (total - HEADER_LEN).to_string(),
            Err(_) => "unencodable".to_owned(),
        };
        writeln!(
            f,
            "DTP v{VERSION} {} stream={} flags=0x00 aead={aead} key_version={key_version} length={length}",
            self.kind().name(),
            self.stream_id,
        )?;
        match &self.body {
            Body::Request(q) => {
                field(f, "request_id", q.request_id)?;
                field(f, "request_type", q.request_type.name())?;
                if let Some(id) = q.agreement_id {
                    field(f, "agreement_id", id)?;
                }
                field(f, "terms", Map(&q.terms))
            }
            Body::Response(p) => {
                field(f, "request_id", p.request_id)?;
                match &p.decision {
                    Decision::Accepted { agreement_id } => {
                        field(f, "decision", "accepted")?;
                        field(f, "agreement_id", agreement_id)
                    }
                    Decision::Rejected { reason } => {
                        field(f, "decision", "rejected")?;
                        field(f, "reason", format_args!("{reason:?}"))
                    }
                    Decision::CounterProposal { terms } => {
                        field(f, "decision", "counter_proposal")?;
                        field(f, "terms", Map(terms))
                    }
                }
            }
            Body::Data(d) => {
                match d.agreement_id {
                    Some(id) => field(f, "agreement_id", id)?,
                    None => field(
                        f,
                        "agreement_id",
                        "inherited (previous data frame on this stream)",
                    )?,
                }
                field(f, "fragment_id", d.fragment_id)?;
                field(f, "sequence", d.sequence)?;
                let mut rels = String::new();
                for (i, r) in d.relations.iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    let _ = write!(rels, "{sep}{} -> {}", r.kind.name(), r.target);
                }
                field(f, "relations", if rels.is_empty() { "none" } else { &rels })?;
                field(f, "payload", Preview(&d.payload))
            }
            Body::Ack(a) => field(f, "cumulative", a.cumulative),
            Body::Resume(r) => {
                field(f, "session_id", r.session_id)?;
                field(f, "highest_received", r.highest_received)
            }
            Body::Control(c) => control(f, c),
            Body::Close(c) => {
                field(f, "code", c.code)?;
                field(f, "reason", format_args!("{:?}", c.reason))
            }
            Body::Handshake(h) => {
                field(f, "stage", h.stage)?;
                field(f, "message", Preview(&h.message))
            }
            Body::Sealed(s) => {
                field(f, "sealed_kind", s.kind.name())?;
                field(f, "seal_counter", s.seal_counter)?;
                field(f, "ciphertext", Preview(&s.ciphertext))
            }
        }
    }
}

fn field(f: &mut Formatter<'_>, name: &str, value: impl Display) -> fmt::Result {
    writeln!(f, "  {name:<18} {value}")
}

fn beats(f: &mut Formatter<'_>, beats: &[Beat]) -> fmt::Result {
    field(f, "beats", beats.len())?;
    for b in beats {
        field(
            f,
            "  session_id",
            format_args!("{} sequence_number={}", b.session_id, b.sequence_number),
        )?;
    }
    Ok(())
}

fn control(f: &mut Formatter<'_>, c: &ControlMessage) -> fmt::Result {
    field(f, "type", c.name())?;
    match c {
        ControlMessage::AuthRequest(a) => {
            field(f, "request_id", a.request_id)?;
            field(f, "fay_id", format_args!("{:?}", a.fay_id))?;
            field(f, "resource_id", format_args!("{:?}", a.resource_id))?;
            field(f, "access_mode", a.access_mode.name())?;
            // Never print credential contents (SPEC HO-3c spirit: no secrets on screen).
            field(
                f,
                "credential",
                format_args!("{} bytes (not shown)", a.credential.len()),
            )
        }
        ControlMessage::AuthResult(a) => {
            field(f, "request_id", a.request_id)?;
            match &a.outcome {
                AuthOutcome::Granted { session_id } => field(f, "granted", session_id),
                AuthOutcome::Refused { code, message } => {
                    field(f, "refused", code)?;
                    field(f, "message", format_args!("{message:?}"))
                }
            }
        }
        ControlMessage::Heartbeat(h) => beats(f, &h.beats),
        ControlMessage::HeartbeatAck(h) => beats(f, &h.beats),
        ControlMessage::SessionRelease(s) => field(f, "session_id", s.session_id),
        ControlMessage::SessionStateChanged(s) => {
            field(f, "session_id", s.session_id)?;
            field(f, "new_state", s.new_state.name())?;
            field(
                f,
                "reason",
                format_args!("{:?}", s.reason.as_deref().unwrap_or("")),
            )?;
            field(f, "details", Map(&s.details))
        }
        ControlMessage::SessionTransferRequest(t) => {
            field(f, "source_session_id", t.source_session_id)?;
            field(f, "target_fay_id", format_args!("{:?}", t.target_fay_id))?;
            field(
                f,
                "target_credential",
                format_args!("{} bytes (not shown)", t.target_credential.len()),
            )?;
            field(
                f,
                "handover_reason",
                format_args!("{:?}", t.handover_reason),
            )?;
            field(f, "handover_metadata", Map(&t.handover_metadata))
        }
        ControlMessage::HandoverFailedNotification(h) => {
            field(f, "handover_id", h.handover_id)?;
            field(f, "source_session_id", h.source_session_id)?;
            field(f, "target_fay_id", format_args!("{:?}", h.target_fay_id))?;
            field(f, "reason", h.reason.name())?;
            field(f, "details", Map(&h.details))
        }
    }
}

struct Map<'a>(&'a Terms);

impl Display for Map<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("{}");
        }
        f.write_str("{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{k:?}: {v:?}")?;
        }
        f.write_str("}")
    }
}

/// A byte count and the first bytes: as text when printable, else as hex.
struct Preview<'a>(&'a [u8]);

impl Display for Preview<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        let shown = &bytes[..bytes.len().min(PREVIEW)];
        let more = if bytes.len() > PREVIEW { "…" } else { "" };
        write!(f, "{} bytes", bytes.len())?;
        if shown.is_empty() {
            return Ok(());
        }
        if shown.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            // Printable ASCII is valid UTF-8.
            write!(f, " \"{}\"{more}", String::from_utf8_lossy(shown))
        } else {
            f.write_str(" hex ")?;
            for b in shown {
                write!(f, "{b:02x}")?;
            }
            f.write_str(more)
        }
    }
}
