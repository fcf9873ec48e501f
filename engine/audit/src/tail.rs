//! Finding the end of a log file without reading all of it: the last
//! complete line and the torn bytes after it (SPEC TS-12, HO-10). Generic
//! over any `Read + Seek` (the writer passes its open file): this crate
//! opens none.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

/// How much the backward scan reads at a time.
const BLOCK: u64 = 8 * 1024;

/// SPEC TS-14: the end of a log file, as found by [`scan_tail`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tail {
    /// The last newline-terminated line, newline removed.
    pub last_line: Option<Vec<u8>>,
    /// Where that line starts in the file.
    pub last_line_start: u64,
    /// Length of the file up to and including its last newline.
    pub complete_len: u64,
    /// Bytes after the last newline: a record whose write never finished.
    pub torn: Vec<u8>,
}

/// SPEC TS-14: reads `file` backwards from `len` until it has seen the last
/// two newlines (or the start), so reopening a large log costs one or two
/// blocks.
pub fn scan_tail<F>(mut file: F, len: u64) -> io::Result<Tail>
where
    F: Read + Seek,
{
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
        file.seek(SeekFrom::Start(block_start))?;
        file.read_exact(&mut block)?;
        block.extend_from_slice(&buf);
        buf = block;
        start = block_start;
    }
}

/// The 1-based line number of the line starting at `offset`: only needed to
/// name a corrupt line in an error, so a full read is fine.
pub fn line_number_at<F>(mut file: F, offset: u64) -> io::Result<u64>
where
    F: Read + Seek,
{
    file.seek(SeekFrom::Start(0))?;
    let lines_before = BufReader::new(file).take(offset).split(b'\n').count();
    Ok(lines_before as u64 + 1)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn scan(content: &[u8]) -> Tail {
        scan_tail(Cursor::new(content), content.len() as u64).unwrap()
    }

    #[test]
    fn finds_last_line_and_torn_bytes_across_blocks() {
        let long = vec![b'x'; 3 * BLOCK as usize];
        let mut content = b"first\n".to_vec();
        content.extend_from_slice(&long);
        content.extend_from_slice(b"\nhalf");
        let tail = scan(&content);
        assert_eq!(tail.last_line.as_deref(), Some(&long[..]));
        assert_eq!(tail.last_line_start, 6);
        assert_eq!(tail.complete_len, content.len() as u64 - 4);
        assert_eq!(tail.torn, b"half");
    }

    #[test]
    fn empty_single_and_unterminated_files() {
        assert_eq!(scan(b""), Tail::default());
        let one = scan(b"only\n");
        assert_eq!(
            (one.last_line.as_deref(), one.complete_len),
            (Some(&b"only"[..]), 5)
        );
        let none = scan(b"no newline at all");
        assert_eq!(
            (none.last_line, none.torn),
            (None, b"no newline at all".to_vec())
        );
    }

    #[test]
    fn line_numbers_count_from_one() {
        let content = b"a\nbb\nccc\n";
        let mut file = Cursor::new(&content[..]);
        assert_eq!(line_number_at(&mut file, 0).unwrap(), 1);
        assert_eq!(line_number_at(&mut file, 2).unwrap(), 2);
        assert_eq!(line_number_at(&mut file, 5).unwrap(), 3);
    }
}
