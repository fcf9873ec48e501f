//! The `control` workload (issue 5): AuthRequest → AuthResult round trips
//! through a terminal's control plane, and handovers under a priority
//! script where the requester always wins.
//!
//! This module owns the workload's rules and nothing that runs: which Fay
//! asks for which resource ([`ControlPlan`]), the credentials the load
//! generator mints for its Fays from one issuer key ([`mint_fay`]), and the
//! `[terminal]` section a `dtp serve` needs to serve it
//! ([`terminal_section`]). The load generator (`dtp load --dtp --control`)
//! and `dtp bench` (its `control` workload) both follow it.
//!
//! # The two modes
//!
//! - **`decisions`**: every Fay loops AuthRequest(resource, mode) →
//!   AuthResult(granted) → SessionRelease → SessionStateChanged(terminated).
//!   A *decision* is one AuthRequest and its AuthResult. By default each
//!   Fay has a resource of its own, so no request waits for another.
//! - **`handovers`**: Fays come in pairs (Fay 2p and 2p+1); a pair shares a
//!   resource whose handover policy is the priority script [`SCRIPT`]
//!   (the requester always wins, SPEC HO-3a). The Fay without the resource
//!   asks for it at once, which starts a handover (SPEC HO-1, AuthRequest
//!   trigger); the holder learns it lost the resource from
//!   SessionStateChanged(terminated, `handed_over`) and asks back. A
//!   *handover* is a grant that follows such a loss; its latency runs from
//!   the winner's AuthRequest to its AuthResult.
//! - **`idle`**: every Fay takes a resource of its own and holds the
//!   session to the end of the run, beating (SPEC LIV-2) at a fixed
//!   interval: the many-sessions case of a soak. What it measures is
//!   heartbeats answered and sessions kept, not decisions.

use dtp_codec::AccessMode;
use dtp_crypto::cap::NoiseKeypair;
use dtp_crypto::cred::{Credential, CredentialRequest, Grant, IssuerKeyPair};
use ring::rand::{SecureRandom, SystemRandom};

/// The `script_id` of the priority script of the handover resources.
pub const SCRIPT_ID: &str = "requester-wins";

/// SPEC HO-3a: the priority script: the target's priority (2) is above the
/// source's (1), so every handover request is allowed.
pub const SCRIPT: &str = "#{ source: 1, target: 2 }";

/// The name of the handover policy that runs [`SCRIPT`].
pub const POLICY: &str = "requester-wins";

/// How long minted credentials are valid.
const VALIDITY_S: u64 = 86_400;

/// What the Fays of a control run do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlMode {
    /// Request, grant, release, terminated; again.
    Decisions,
    /// Pairs take a shared resource from each other.
    Handovers,
    /// Each Fay holds one session with heartbeats until the end.
    Idle,
}

impl ControlMode {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Decisions => "decisions",
            Self::Handovers => "handovers",
            Self::Idle => "idle",
        }
    }

    /// The mode of a name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "decisions" => Some(Self::Decisions),
            "handovers" => Some(Self::Handovers),
            "idle" => Some(Self::Idle),
            _ => None,
        }
    }
}

/// The access mode of a name (`read`, `write`, `execute`, `configure`).
pub fn access_mode(name: &str) -> Option<AccessMode> {
    [
        AccessMode::Read,
        AccessMode::Write,
        AccessMode::Execute,
        AccessMode::Configure,
    ]
    .into_iter()
    .find(|m| m.name() == name)
}

/// Which Fay asks for which resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlan {
    /// Decisions or handovers.
    pub mode: ControlMode,
    /// Fays (runtimes), one connection each; even for handovers.
    pub fays: usize,
    /// Distinct resources, shared round-robin: Fay `i` (decisions, idle) or pair
    /// `i / 2` (handovers) uses resource `i % resources`.
    pub resources: usize,
    /// Resource `k` is `{resource_prefix}{k}`.
    pub resource_prefix: String,
    /// Fay `i` is `{fay_prefix}{i}`.
    pub fay_prefix: String,
}

impl ControlPlan {
    /// One resource per Fay (decisions, idle) or per pair (handovers).
    pub fn new(mode: ControlMode, fays: usize, resource_prefix: &str) -> Self {
        Self {
            mode,
            fays,
            resources: Self::default_resources(mode, fays),
            resource_prefix: resource_prefix.to_owned(),
            fay_prefix: format!("{}-fay-", mode.name()),
        }
    }

    /// One resource per Fay (decisions, idle) or per pair (handovers), at
    /// least 1.
    pub fn default_resources(mode: ControlMode, fays: usize) -> usize {
        match mode {
            ControlMode::Decisions | ControlMode::Idle => fays,
            ControlMode::Handovers => fays / 2,
        }
        .max(1)
    }

    /// Why the plan cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.fays == 0 {
            return Err("a control run needs at least one Fay".to_owned());
        }
        if self.resources == 0 {
            return Err("a control run needs at least one resource".to_owned());
        }
        if self.mode == ControlMode::Handovers && (self.fays < 2 || !self.fays.is_multiple_of(2)) {
            return Err(format!(
                "handovers run Fays in pairs: {} connections is not an even number ≥ 2",
                self.fays
            ));
        }
        Ok(())
    }

    /// Fay `i`'s id.
    pub fn fay_id(&self, i: usize) -> String {
        format!("{}{i}", self.fay_prefix)
    }

    /// The resource Fay `i` asks for.
    pub fn resource_of(&self, i: usize) -> String {
        let slot = match self.mode {
            ControlMode::Decisions | ControlMode::Idle => i,
            ControlMode::Handovers => i / 2,
        };
        self.resource_id(slot % self.resources.max(1))
    }

    /// Resource `k`'s id.
    pub fn resource_id(&self, k: usize) -> String {
        format!("{}{k}", self.resource_prefix)
    }

    /// Every resource the plan uses.
    pub fn resource_ids(&self) -> Vec<String> {
        (0..self.resources).map(|k| self.resource_id(k)).collect()
    }
}

/// A Fay of a control run: its Noise keys and a credential granting
/// `mode` on its one resource.
pub struct MintedFay {
    /// The Fay's id (the credential's).
    pub fay_id: String,
    /// The resource it asks for.
    pub resource_id: String,
    /// Its Noise static key pair (the credential binds the public half).
    pub noise: NoiseKeypair,
    /// Its credential, valid for a day from a minute ago.
    pub credential: Credential,
}

/// Mints Fay `fay_id`'s keys and a credential from `issuer` granting
/// `mode` on `resource_id` (fresh keys and descriptor id from the system
/// generator; fails only if it or the clock does, or the ids are invalid).
pub fn mint_fay(
    issuer: &IssuerKeyPair,
    fay_id: &str,
    resource_id: &str,
    mode: AccessMode,
) -> Result<MintedFay, String> {
    let rng = SystemRandom::new();
    let mut private = [0u8; 32];
    let mut id = [0u8; 16];
    rng.fill(&mut private)
        .and_then(|()| rng.fill(&mut id))
        .map_err(|_| "no system randomness".to_owned())?;
    let noise = NoiseKeypair::from_private(private).map_err(|e| e.to_string())?;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let credential = issuer
        .issue(
            CredentialRequest {
                fay_id: fay_id.to_owned(),
                noise_key: *noise.public(),
                grants: vec![Grant {
                    resource_id: resource_id.to_owned(),
                    modes: [mode].into_iter().collect(),
                }],
                not_before: unix.saturating_sub(60),
                not_after: unix + VALIDITY_S,
            },
            id,
        )
        .map_err(|e| format!("credential for {fay_id}: {e}"))?;
    Ok(MintedFay {
        fay_id: fay_id.to_owned(),
        resource_id: resource_id.to_owned(),
        noise,
        credential,
    })
}

/// A `[terminal]` section for `dtp serve` (append it to a config with
/// `[dtp]` on) that serves both modes: `plain` resources without a
/// handover policy (a request for a held one is refused, E_RESOURCE_BUSY)
/// and `handover` resources under [`POLICY`] ([`SCRIPT`], requests start
/// handovers). `max_sessions` bounds live sessions on the terminal (TS-17;
/// at least the Fays of a run). Retries of a (source, target) pair are not
/// spaced (`min_retry_interval_ms = 0`): each handover has a new source
/// session anyway. No audit log: records are dropped.
pub fn terminal_section(plain: &[String], handover: &[String], max_sessions: usize) -> String {
    let mut s = format!(
        "[terminal.control]\nterminal_id = \"bench\"\n\n\
         [terminal.control.limits]\nper_terminal = {}\nper_fay = 4\n\n\
         [terminal.control.handover]\nmin_retry_interval_ms = 0\n\n",
        max_sessions.max(1)
    );
    for r in plain {
        s += &format!(
            "[[terminal.control.resources]]\nresource_id = {}\n\n",
            quote(r)
        );
    }
    for r in handover {
        s += &format!(
            "[[terminal.control.resources]]\nresource_id = {}\nhandover_policy = {}\n\n",
            quote(r),
            quote(POLICY)
        );
    }
    s += &format!(
        "[terminal.control.policies.{POLICY}]\npolicy = {{ policy_type = \"priority_script\", script_id = {} }}\n\n\
         [terminal.policy.scripts]\n{} = {}\n",
        quote(SCRIPT_ID),
        quote(SCRIPT_ID),
        quote(SCRIPT)
    );
    s
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_share_resources_round_robin() {
        let mut p = ControlPlan::new(ControlMode::Decisions, 4, "r-");
        assert_eq!(p.resources, 4);
        assert_eq!(p.resource_of(3), "r-3");
        p.resources = 3;
        assert_eq!(p.resource_of(3), "r-0");
        assert_eq!(p.fay_id(2), "decisions-fay-2");
        let h = ControlPlan::new(ControlMode::Handovers, 6, "h-");
        assert_eq!(h.resources, 3);
        let pairs: Vec<String> = (0..6).map(|i| h.resource_of(i)).collect();
        assert_eq!(pairs, ["h-0", "h-0", "h-1", "h-1", "h-2", "h-2"]);
        assert!(h.check().is_ok());
        assert!(
            ControlPlan::new(ControlMode::Handovers, 3, "h-")
                .check()
                .is_err()
        );
        assert!(
            ControlPlan::new(ControlMode::Decisions, 0, "h-")
                .check()
                .is_err()
        );
        assert_eq!(access_mode("write"), Some(AccessMode::Write));
        assert_eq!(access_mode("fly"), None);
        assert_eq!(
            ControlMode::from_name("handovers"),
            Some(ControlMode::Handovers)
        );
    }

    #[test]
    fn the_terminal_section_names_every_resource_once() {
        let text = terminal_section(&["a\"b".into()], &["h-0".into(), "h-1".into()], 10);
        let ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("resource_id = "))
            .collect();
        assert_eq!(ids, ["\"a\\\"b\"", "\"h-0\"", "\"h-1\""]);
        assert_eq!(text.matches("handover_policy").count(), 2);
        assert!(text.contains("per_terminal = 10"));
        assert!(text.contains(&quote(SCRIPT)));
    }

    #[test]
    fn minted_credentials_grant_the_resource_and_bind_the_key() {
        let rng = SystemRandom::new();
        let issuer = IssuerKeyPair::generate(&rng).unwrap();
        let fay = mint_fay(&issuer, "f-1", "r-9", AccessMode::Write).unwrap();
        let d = fay.credential.descriptor();
        assert_eq!(d.fay_id, "f-1");
        assert_eq!(&d.noise_key, fay.noise.public());
        assert_eq!(d.grants[0].resource_id, "r-9");
        let mut verifier = dtp_crypto::cred::Verifier::new();
        verifier.trust(*issuer.public_key()).unwrap();
        let now = d.not_before + 120;
        let v = verifier.verify(&fay.credential, now).unwrap();
        assert!(v.permits("r-9", AccessMode::Write));
        assert!(!v.permits("r-9", AccessMode::Read));
    }
}
