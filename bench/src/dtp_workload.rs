//! The benchmark workloads over the full DTP protocol (SPEC §1): their
//! rules and server application live in `dtp-workload` (re-exported here,
//! so the bench and its peers name them as before); this module adds the
//! ephemeral keys a run or a test uses.

use ring::rand::{SecureRandom, SystemRandom};

pub use dtp_workload::dtp::{DtpResponder, DtpWorkload, ResponderSession, WORKLOAD_TERM};

/// Ephemeral keys and a credential for a benchmark or a test run: an issuer,
/// the Fay's and the terminal's Noise keys, and the Fay's credential (valid
/// for a day), all fresh from the system generator. Real deployments make
/// theirs with `dtp cred`.
pub struct BenchKeys {
    /// The issuer that signed the credential.
    pub issuer: dtp_crypto::cred::IssuerKeyPair,
    /// The Fay's Noise static key pair (the credential names its public half).
    pub fay_noise: dtp_crypto::cap::NoiseKeypair,
    /// The terminal's Noise static key pair.
    pub terminal_noise: dtp_crypto::cap::NoiseKeypair,
    /// The Fay's credential.
    pub credential: dtp_crypto::cred::Credential,
}

impl BenchKeys {
    /// Fresh keys; fails only if the system generator or the clock does.
    pub fn generate() -> Result<Self, String> {
        use dtp_crypto::cap::NoiseKeypair;
        use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair};
        let rng = SystemRandom::new();
        let random32 = || -> Result<[u8; 32], String> {
            let mut b = [0u8; 32];
            rng.fill(&mut b)
                .map_err(|_| "no system randomness".to_owned())?;
            Ok(b)
        };
        let issuer = IssuerKeyPair::from_seed(&random32()?).map_err(|e| e.to_string())?;
        let fay_noise = NoiseKeypair::from_private(random32()?).map_err(|e| e.to_string())?;
        let terminal_noise = NoiseKeypair::from_private(random32()?).map_err(|e| e.to_string())?;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| e.to_string())?
            .as_secs();
        let mut id = [0u8; 16];
        rng.fill(&mut id)
            .map_err(|_| "no system randomness".to_owned())?;
        let credential = issuer
            .issue(
                CredentialRequest {
                    fay_id: "bench-fay".into(),
                    noise_key: *fay_noise.public(),
                    grants: vec![Grant {
                        resource_id: "bench".into(),
                        modes: [dtp_codec::AccessMode::Read].into_iter().collect(),
                    }],
                    not_before: unix.saturating_sub(60),
                    not_after: unix + 86_400,
                },
                id,
            )
            .map_err(|e| e.to_string())?;
        Ok(Self {
            issuer,
            fay_noise,
            terminal_noise,
            credential,
        })
    }

    /// The Fay's configuration: these keys, AES-256-GCM preferred, the
    /// terminal's key pinned.
    pub fn fay_config(&self) -> dtp_endpoint::FayConfig {
        dtp_endpoint::FayConfig {
            cap: dtp_crypto::cap::InitiatorConfig {
                static_keypair: self.fay_noise.clone(),
                credential: self.credential.clone(),
                algorithms: vec![
                    dtp_codec::AeadAlgorithm::Aes256Gcm,
                    dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
                ],
                pinned_responder_key: Some(*self.terminal_noise.public()),
                handshake_timeout: dtp_crypto::cap::DEFAULT_HANDSHAKE_TIMEOUT,
            },
            endpoint: dtp_endpoint::EndpointConfig::fay(),
        }
    }

    /// The terminal's configuration: these keys, trusting this issuer.
    pub fn terminal_config(&self) -> Result<dtp_endpoint::TerminalConfig, String> {
        let mut verifier = dtp_crypto::cred::Verifier::new();
        verifier
            .trust(*self.issuer.public_key())
            .map_err(|e| e.to_string())?;
        Ok(dtp_endpoint::TerminalConfig {
            cap: dtp_crypto::cap::ResponderConfig {
                static_keypair: self.terminal_noise.clone(),
                algorithms: vec![
                    dtp_codec::AeadAlgorithm::Aes256Gcm,
                    dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
                ],
                handshake_timeout: dtp_crypto::cap::DEFAULT_HANDSHAKE_TIMEOUT,
            },
            verifier: std::sync::Arc::new(verifier),
            endpoint: dtp_endpoint::EndpointConfig::terminal(),
        })
    }
}
