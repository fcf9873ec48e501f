//! The transmit path: what waits to be sent, and `poll_transmit`, which
//! encodes and seals it straight into the caller's buffer.

use bytes::BytesMut;
use dtp_codec::{Body, CloseFrame, LogicalFrame};
use dtp_crypto::aead::AeadError;

use super::DtpError;
use super::endpoint::DtpEndpoint;

/// One thing to send, in order.
#[derive(Debug)]
pub(super) enum Outgoing {
    /// SPEC SEQ-1: a CAP message, plaintext.
    Handshake(LogicalFrame),
    /// A frame other than data, sealed at transmit time.
    Frame(LogicalFrame),
    /// SPEC RES-2: the data frame with this sequence, sealed from the
    /// resume cache's plaintext (first send and resends alike).
    Data(u64),
    /// The close frame: sealed when keys exist, plaintext otherwise. Last.
    Close(CloseFrame),
}

impl DtpEndpoint {
    /// Appends to `dst` the wire bytes of everything ready to send —
    /// handshake frames in plaintext; after CAP every frame sealed (ENC-1,
    /// ENC-3), data frames from the resume cache, the pending cumulative
    /// ack — and returns how many bytes were appended.
    ///
    /// Frames are sealed in place in `dst` (see the module docs for the one
    /// copy that remains). A sealing failure closes the connection; the
    /// close frame follows in the same call.
    pub fn poll_transmit(&mut self, dst: &mut BytesMut) -> usize {
        let start = dst.len();
        loop {
            self.drain_transmit(dst);
            if self.ended.is_none()
                && let Some(ack) = self.pending_ack.take()
                && let Err(e) = self.seal(&LogicalFrame::plain(0, Body::Ack(ack)), dst)
            {
                // Queues the close frame: go round once more to send it.
                self.fail(e);
                continue;
            }
            break;
        }
        dst.len() - start
    }

    fn drain_transmit(&mut self, dst: &mut BytesMut) {
        while let Some(item) = self.transmit.pop_front() {
            let result = match item {
                Outgoing::Handshake(frame) => frame
                    .encode(dst, &self.config.limits)
                    .map(|_| ())
                    .map_err(DtpError::Encode),
                Outgoing::Frame(frame) => {
                    self.queued_frames = self.queued_frames.saturating_sub(1);
                    self.seal(&frame, dst)
                }
                Outgoing::Data(sequence) => self.seal_cached(sequence, dst),
                Outgoing::Close(close) => {
                    let frame = LogicalFrame::plain(0, Body::Close(close));
                    if !(self.crypto.is_ready() && self.seal(&frame, dst).is_ok()) {
                        // No keys (CAP failed, or the terminal never got the
                        // Fay's first frame): the close goes in plaintext.
                        let _ = frame.encode(dst, &self.config.limits);
                    }
                    self.transmit.clear();
                    self.queued_frames = 0;
                    return;
                }
            };
            if let Err(e) = result {
                self.fail(e);
            }
        }
    }

    /// Seals a frame into `dst`, rekeying first when the key is worn.
    fn seal(&mut self, frame: &LogicalFrame, dst: &mut BytesMut) -> Result<(), DtpError> {
        let sealer = self.crypto.sealer()?;
        if sealer.needs_rekey() {
            sealer.rekey()?;
            self.key_version = self.key_version.max(sealer.key_version());
        }
        sealer.seal_frame(frame, &self.config.limits, dst)?;
        Ok(())
    }

    /// SPEC RES-2, SEQ-5: seals the cached plaintext of `sequence` into
    /// `dst` (a fragment acknowledged meanwhile is skipped).
    fn seal_cached(&mut self, sequence: u64, dst: &mut BytesMut) -> Result<(), DtpError> {
        let Some(session) = &self.session else {
            return Ok(());
        };
        let Some(plaintext) = session.sender.cached(sequence) else {
            return Ok(());
        };
        let sealer = self.crypto.sealer()?;
        if sealer.needs_rekey() {
            sealer.rekey()?;
            self.key_version = self.key_version.max(sealer.key_version());
        }
        sealer
            .seal_encoded(plaintext, &self.config.limits, dst)
            .map_err(|e: AeadError| DtpError::Aead(e))?;
        Ok(())
    }
}
