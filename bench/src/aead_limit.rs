//! The machine's single-core AEAD limit (DESIGN.md §4): how fast one core
//! seals fragment-sized buffers with `ring`, nothing else done — the bound
//! an encrypted `stream` cannot beat on one core, measured in the same run
//! as the workload it is compared with.

use std::time::{Duration, Instant};

use ring::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};

use dtp_codec::AeadAlgorithm;

/// Seals a `len`-byte buffer in place in a loop on the calling thread for
/// about `duration`, with a 24-byte associated data as a sealed frame has;
/// returns plaintext bytes sealed per second.
pub fn measure(algorithm: AeadAlgorithm, len: usize, duration: Duration) -> f64 {
    let alg = match algorithm {
        AeadAlgorithm::Aes256Gcm => &AES_256_GCM,
        AeadAlgorithm::ChaCha20Poly1305 => &CHACHA20_POLY1305,
    };
    let Ok(unbound) = UnboundKey::new(alg, &[7; 32]) else {
        return 0.0;
    };
    let key = LessSafeKey::new(unbound);
    let mut buf = vec![0x5au8; len];
    let aad = [0u8; 24];
    let start = Instant::now();
    let mut sealed = 0u64;
    let mut counter = 0u64;
    while start.elapsed() < duration {
        for _ in 0..64 {
            counter += 1;
            let mut n = [0u8; 12];
            n[4..].copy_from_slice(&counter.to_be_bytes());
            let nonce = Nonce::assume_unique_for_key(n);
            if key
                .seal_in_place_separate_tag(nonce, Aad::from(aad), &mut buf)
                .is_err()
            {
                return 0.0;
            }
            sealed += len as u64;
        }
    }
    sealed as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealing_moves_bytes() {
        let r = measure(
            AeadAlgorithm::Aes256Gcm,
            16 * 1024,
            Duration::from_millis(20),
        );
        assert!(r > 0.0);
        let r = measure(
            AeadAlgorithm::ChaCha20Poly1305,
            100,
            Duration::from_millis(20),
        );
        assert!(r > 0.0);
    }
}
