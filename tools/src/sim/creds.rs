//! The credentials the simulation issues: good ones and every kind the
//! terminal must refuse (SPEC SEQ-1, TS-16, HO-2 (2)).

use bytes::Bytes;
use dtp_codec::AccessMode;
use dtp_crypto::cred::{AccessModes, CredentialRequest, Grant};
use dtp_terminal::UnixMs;
use uuid::Uuid;

use super::world::{RESOURCES, World};

/// Resources a `Partial` credential grants.
pub(super) const PARTIAL: [&str; 3] = ["arm", "cam", "screen"];

/// What a credential is, as the simulation made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CredKind {
    /// Every resource, every mode.
    Full,
    /// Every resource, read only.
    ReadOnly,
    /// Every mode on [`PARTIAL`] only.
    Partial,
    /// Signed by an issuer the terminal does not trust.
    UnknownIssuer,
    /// Not a credential at all.
    Garbage,
}

/// One credential the simulation issued.
#[derive(Clone, Debug)]
pub(super) struct Cred {
    pub(super) bytes: Bytes,
    /// The Fay it names (index into the world's Fays).
    pub(super) fay: usize,
    pub(super) descriptor: Uuid,
    pub(super) not_before_s: u64,
    pub(super) not_after_s: u64,
    pub(super) kind: CredKind,
    pub(super) revoked: bool,
}

impl Cred {
    /// Whether it grants `mode` on `resource`.
    pub(super) fn permits(&self, resource: &str, mode: AccessMode) -> bool {
        match self.kind {
            CredKind::Full => true,
            CredKind::ReadOnly => mode == AccessMode::Read,
            CredKind::Partial => PARTIAL.contains(&resource),
            CredKind::UnknownIssuer | CredKind::Garbage => false,
        }
    }

    /// SPEC TS-16, SEQ-1: the code a terminal must refuse it with at `now`
    /// when `fay` presents it for `mode` on `resource`; `None` when valid.
    pub(super) fn refusal(
        &self,
        fay: usize,
        resource: &str,
        mode: AccessMode,
        now: UnixMs,
    ) -> Option<dtp_codec::ErrorCode> {
        use dtp_codec::ErrorCode as E;
        let code = match self.kind {
            CredKind::Garbage => E::CREDENTIAL_INVALID,
            CredKind::UnknownIssuer => E::UNKNOWN_ISSUER,
            _ if self.revoked => E::CREDENTIAL_REVOKED,
            _ if now.secs() < self.not_before_s => E::CREDENTIAL_INVALID,
            _ if now.secs() >= self.not_after_s => E::CREDENTIAL_EXPIRED,
            _ if self.fay != fay || !self.permits(resource, mode) => E::E_UNAUTHORIZED,
            _ => return None,
        };
        Some(code)
    }

    /// Whether it is a fully valid credential at `now` (any grant).
    pub(super) fn valid_at(&self, now: UnixMs) -> bool {
        !matches!(self.kind, CredKind::Garbage | CredKind::UnknownIssuer)
            && !self.revoked
            && now.secs() >= self.not_before_s
            && now.secs() < self.not_after_s
    }
}

impl World {
    /// Issues a credential of `kind` for Fay `fay`, valid for `life_s`
    /// seconds from now (`life_s` 0: already expired; the kinds that are no
    /// credential ignore it).
    pub(super) fn issue(&mut self, fay: usize, kind: CredKind, life_s: u64) -> usize {
        let now_s = self.now.secs();
        match life_s {
            0 => self.issue_window(fay, kind, now_s - 3_600, now_s - 1),
            n => self.issue_window(fay, kind, now_s - 10, now_s + n),
        }
    }

    /// Issues a credential of `kind` for Fay `fay`, valid from
    /// `not_before_s` to `not_after_s` (Unix seconds, end excluded).
    pub(super) fn issue_window(
        &mut self,
        fay: usize,
        kind: CredKind,
        not_before_s: u64,
        not_after_s: u64,
    ) -> usize {
        let all = [
            AccessMode::Read,
            AccessMode::Write,
            AccessMode::Execute,
            AccessMode::Configure,
        ];
        let modes: AccessModes = match kind {
            CredKind::ReadOnly => [AccessMode::Read].into_iter().collect(),
            _ => all.into_iter().collect(),
        };
        let grants = RESOURCES
            .iter()
            .map(|(r, _)| *r)
            .filter(|r| kind != CredKind::Partial || PARTIAL.contains(r))
            .map(|r| Grant {
                resource_id: r.into(),
                modes,
            })
            .collect();
        let fay_id = self.fays.get(fay).map(|f| f.id.clone()).unwrap_or_default();
        let request = CredentialRequest {
            fay_id,
            noise_key: [fay as u8; 32],
            grants,
            not_before: not_before_s,
            not_after: not_after_s,
        };
        let random = self.rng.bytes16();
        let signer = match kind {
            CredKind::UnknownIssuer => &self.rogue,
            _ => &self.issuer,
        };
        let (bytes, descriptor) = match (kind, signer.issue(request, random)) {
            (CredKind::Garbage, _) | (_, Err(_)) => {
                let mut b = b"not a credential ".to_vec();
                b.extend_from_slice(&random);
                (Bytes::from(b), Uuid::nil())
            }
            (_, Ok(c)) => (c.as_bytes().clone(), c.descriptor().descriptor_id),
        };
        self.creds.push(Cred {
            bytes,
            fay,
            descriptor,
            not_before_s,
            not_after_s,
            kind,
            revoked: false,
        });
        let idx = self.creds.len() - 1;
        if let Some(f) = self.fays.get_mut(fay) {
            f.creds.push(idx);
        }
        idx
    }

    /// A credential of `fay` that is valid now and grants everything,
    /// issuing one (six hours, or a short one now and then) if none is.
    pub(super) fn valid_cred(&mut self, fay: usize) -> usize {
        let now = self.now;
        let found = self.fays.get(fay).and_then(|f| {
            f.creds.iter().rev().copied().find(|c| {
                self.creds
                    .get(*c)
                    .is_some_and(|c| c.kind == CredKind::Full && c.valid_at(now))
            })
        });
        match found {
            Some(c) => c,
            None => {
                let life = if self.rng.chance(30) {
                    self.rng.range(20, 180)
                } else {
                    6 * 3600
                };
                self.issue(fay, CredKind::Full, life)
            }
        }
    }
}
