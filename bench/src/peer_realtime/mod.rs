//! The realtime benchmark peer (issue 6).
