//! Comparing secrets without telling an attacker how much of a guess was
//! right.

/// Whether `given` equals `want`, in time that depends only on their
/// lengths (a bearer token, a cookie), never on where they first differ.
pub fn same_secret(given: &[u8], want: &[u8]) -> bool {
    given.len() == want.len()
        && given
            .iter()
            .zip(want)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn equal_secrets_only() {
        assert!(same_secret(b"s3cret-token", b"s3cret-token"));
        assert!(!same_secret(b"s3cret-tokem", b"s3cret-token"));
        assert!(!same_secret(b"s3cret", b"s3cret-token"));
        assert!(!same_secret(b"", b"x"));
    }
}
