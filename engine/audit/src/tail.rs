//! Finding the end of a log file without reading all of it: the last
//! complete line and the torn bytes after it (SPEC TS-12, HO-10).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

/// How much the backward scan reads at a time.
const BLOCK: u64 = 8 * 1024;

/// The end of a file, as found by [`scan_tail`].
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tail {
    /// The last newline-terminated line, newline removed.
    pub(crate) last_line: Option<Vec<u8>>,
    /// Where that line starts in the file.
    pub(crate) last_line_start: u64,
    /// Length of the file up to and including its last newline.
    pub(crate) complete_len: u64,
    /// Bytes after the last newline: a record whose write never finished.
    pub(crate) torn: Vec<u8>,
}

/// Reads `file` backwards from `len` until it has seen the last two newlines
/// (or the start), so reopening a large log costs one or two blocks.
pub(crate) fn scan_tail(file: &File, len: u64) -> io::Result<Tail> {
    let mut start = len;
    let mut buf = Vec::new();
    loop {
        let last_nl = buf.iter().rposition(|&b| b == b'\n');
        let prev_nl = last_nl.and_then(|i| buf[..i].iter().rposition(|&b| b == b'\n'));
        if prev_nl.is_some() || start == 0 {
            let Some(i) = last_nl else {
                return Ok(Tail {
                    torn: buf,
                    ..Tail::default()
                });
            };
            let line_from = prev_nl.map_or(0, |p| p + 1);
            return Ok(Tail {
                last_line: Some(buf[line_from..i].to_vec()),
                last_line_start: start + line_from as u64,
                complete_len: start + i as u64 + 1,
                torn: buf[i + 1..].to_vec(),
            });
        }
        let block_start = start.saturating_sub(BLOCK);
        let mut block = vec![0; (start - block_start) as usize];
        let mut reader = file;
        reader.seek(SeekFrom::Start(block_start))?;
        reader.read_exact(&mut block)?;
        block.extend_from_slice(&buf);
        buf = block;
        start = block_start;
    }
}

/// The 1-based line number of the line starting at `offset`: only needed to
/// name a corrupt line in an error, so a full read is fine.
pub(crate) fn line_number_at(file: &File, offset: u64) -> io::Result<u64> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(0))?;
    let lines_before = BufReader::new(reader).take(offset).split(b'\n').count();
    Ok(lines_before as u64 + 1)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Runs `f` on a scratch file holding `content`; `tag` keeps parallel tests apart.
    fn with_file<R>(tag: &str, content: &[u8], f: impl FnOnce(&File) -> R) -> R {
        let path =
            std::env::temp_dir().join(format!("dtp-audit-tail-{}-{tag}", std::process::id()));
        File::create(&path).unwrap().write_all(content).unwrap();
        let result = f(&File::open(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
        result
    }

    fn scan(tag: &str, content: &[u8]) -> Tail {
        with_file(tag, content, |file| {
            scan_tail(file, content.len() as u64).unwrap()
        })
    }

    #[test]
    fn finds_last_line_and_torn_bytes_across_blocks() {
        let long = vec![b'x'; 3 * BLOCK as usize];
        let mut content = b"first\n".to_vec();
        content.extend_from_slice(&long);
        content.extend_from_slice(b"\nhalf");
        let tail = scan("blocks", &content);
        assert_eq!(tail.last_line.as_deref(), Some(&long[..]));
        assert_eq!(tail.last_line_start, 6);
        assert_eq!(tail.complete_len, content.len() as u64 - 4);
        assert_eq!(tail.torn, b"half");
    }

    #[test]
    fn empty_single_and_unterminated_files() {
        assert_eq!(scan("empty", b""), Tail::default());
        let one = scan("single", b"only\n");
        assert_eq!(
            (one.last_line.as_deref(), one.complete_len),
            (Some(&b"only"[..]), 5)
        );
        let none = scan("unterminated", b"no newline at all");
        assert_eq!(
            (none.last_line, none.torn),
            (None, b"no newline at all".to_vec())
        );
    }

    #[test]
    fn line_numbers_count_from_one() {
        let content = b"a\nbb\nccc\n";
        with_file("lines", content, |file| {
            assert_eq!(line_number_at(file, 0).unwrap(), 1);
            assert_eq!(line_number_at(file, 2).unwrap(), 2);
            assert_eq!(line_number_at(file, 5).unwrap(), 3);
        });
    }
}
