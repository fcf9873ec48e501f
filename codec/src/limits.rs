//! Ceilings on every length and count the decoder accepts (SPEC FRM-5).

/// SPEC FRM-5: every length is bounded. A receiver refuses frames over these
/// ceilings; an encoder refuses to write them, so what one side writes the
/// other (with the same limits) reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame length after the 16-byte header (default 1 MiB, at most
    /// [`Limits::MAX_FRAME_LEN_CEILING`]).
    pub max_frame_len: u32,
    /// Longest string in bytes (default 4096, at most 65535).
    pub max_string_len: u16,
    /// Most entries in one map (terms, details, metadata; default 64).
    pub max_map_entries: u16,
    /// Most relations on one fragment (default 32, at most 255).
    pub max_relations: u8,
    /// Most beats in one (aggregated) heartbeat (default 1024).
    pub max_beats: u16,
    /// Longest credential in bytes (default 16 KiB, at most 65535).
    pub max_credential_len: u16,
}

impl Limits {
    /// The hard ceiling on `max_frame_len`: no configuration may go above it.
    pub const MAX_FRAME_LEN_CEILING: u32 = 16 * 1024 * 1024;

    /// Checks the limits against the format's hard ceilings.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_frame_len > Self::MAX_FRAME_LEN_CEILING {
            return Err(format!(
                "max_frame_len {} exceeds the ceiling {}",
                self.max_frame_len,
                Self::MAX_FRAME_LEN_CEILING
            ));
        }
        if self.max_frame_len < 64 {
            return Err(format!(
                "max_frame_len {} is below the minimum 64",
                self.max_frame_len
            ));
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_len: 1024 * 1024,
            max_string_len: 4096,
            max_map_entries: 64,
            max_relations: 32,
            max_beats: 1024,
            max_credential_len: 16 * 1024,
        }
    }
}
