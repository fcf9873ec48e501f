//! The JSON guard: the first steps of the realtime decode order (SPEC RT-4),
//! run before any JSON value is built.
//!
//! byte ceiling → UTF-8 → one pass of an iterative RFC 8259 scanner that
//! enforces the depth and element ceilings as it goes. The scanner keeps its
//! nesting in a 64-bit stack (the depth ceiling is at most 16), so a 64 KiB
//! `[[[[…` costs neither stack nor heap. It also refuses what the value
//! builder after it would refuse — lone UTF-16 surrogates in `\u` escapes and
//! numbers beyond an IEEE 754 double — so a text that passes the guard
//! always builds.

use super::Refusal;

/// The realtime JSON ceilings (SPEC RT-13). A deployment may lower them,
/// never raise them: [`JsonLimits::new`] clamps to the defaults.
///
/// - bytes: the whole text (an event, a `realtime.v1` message), default
///   64 KiB;
/// - depth: objects and arrays nested in each other; the outermost object is
///   depth 1, a scalar adds none; default 16;
/// - elements: every JSON value counts one — the root, each array item, each
///   object member's value (keys do not count); default 4,096.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonLimits {
    max_bytes: usize,
    max_depth: usize,
    max_elements: usize,
}

impl JsonLimits {
    /// SPEC RT-13: a decoded foreground event or frame is at most 64 KiB.
    pub const MAX_BYTES: usize = 64 * 1024;
    /// The depth ceiling.
    pub const MAX_DEPTH: usize = 16;
    /// The element ceiling.
    pub const MAX_ELEMENTS: usize = 4096;

    /// Limits lowered from the defaults; a value above a default is clamped
    /// to it (a deployment may lower, never raise, SPEC RT-13).
    pub const fn new(max_bytes: usize, max_depth: usize, max_elements: usize) -> Self {
        Self {
            max_bytes: min(max_bytes, Self::MAX_BYTES),
            max_depth: min(max_depth, Self::MAX_DEPTH),
            max_elements: min(max_elements, Self::MAX_ELEMENTS),
        }
    }

    /// The byte ceiling.
    pub const fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The depth ceiling.
    pub const fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The element ceiling.
    pub const fn max_elements(&self) -> usize {
        self.max_elements
    }
}

impl Default for JsonLimits {
    fn default() -> Self {
        Self::new(Self::MAX_BYTES, Self::MAX_DEPTH, Self::MAX_ELEMENTS)
    }
}

const fn min(a: usize, b: usize) -> usize {
    if a < b { a } else { b }
}

/// SPEC RT-4, first steps: byte ceiling, then UTF-8, then JSON syntax with the
/// depth and element ceilings, in that order and in one pass, before anything
/// is allocated. `Ok` means the text is exactly one JSON value (with optional
/// surrounding whitespace) that `serde_json` will build.
pub fn check_json(bytes: &[u8], limits: &JsonLimits) -> Result<(), Refusal> {
    if bytes.len() > limits.max_bytes {
        return Err(Refusal::TooLarge {
            len: bytes.len(),
            max: limits.max_bytes,
        });
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(Refusal::InvalidUtf8 {
            offset: e.valid_up_to(),
        });
    }
    Scanner {
        s: bytes,
        pos: 0,
        depth: 0,
        stack: 0,
        elements: 0,
        limits,
    }
    .run()
}

/// One pass over UTF-8 text. `stack` bit `d - 1` is set when the container at
/// depth `d` is an object.
struct Scanner<'a> {
    s: &'a [u8],
    pos: usize,
    depth: usize,
    stack: u64,
    elements: usize,
    limits: &'a JsonLimits,
}

impl Scanner<'_> {
    fn run(mut self) -> Result<(), Refusal> {
        'value: loop {
            self.ws();
            self.elements += 1;
            if self.elements > self.limits.max_elements {
                return Err(Refusal::TooManyElements {
                    offset: self.pos,
                    max: self.limits.max_elements,
                });
            }
            match self.peek() {
                Some(b'{') => {
                    self.open(true)?;
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.close();
                    } else {
                        self.key()?;
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    self.open(false)?;
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.close();
                    } else {
                        continue 'value;
                    }
                }
                Some(b'"') => self.string()?,
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true")?,
                Some(b'f') => self.literal(b"false")?,
                Some(b'n') => self.literal(b"null")?,
                _ => return Err(self.syntax()),
            }
            // After a complete value: close containers until one continues.
            loop {
                self.ws();
                if self.depth == 0 {
                    return if self.pos == self.s.len() {
                        Ok(())
                    } else {
                        Err(self.syntax())
                    };
                }
                let in_object = self.stack & (1 << (self.depth - 1)) != 0;
                match (self.peek(), in_object) {
                    (Some(b','), true) => {
                        self.pos += 1;
                        self.ws();
                        self.key()?;
                        continue 'value;
                    }
                    (Some(b','), false) => {
                        self.pos += 1;
                        continue 'value;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => self.close(),
                    _ => return Err(self.syntax()),
                }
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn syntax(&self) -> Refusal {
        Refusal::Syntax { offset: self.pos }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn open(&mut self, object: bool) -> Result<(), Refusal> {
        if self.depth >= self.limits.max_depth {
            return Err(Refusal::TooDeep {
                offset: self.pos,
                max: self.limits.max_depth,
            });
        }
        // max_depth ≤ 16, so the shift stays inside the u64.
        if object {
            self.stack |= 1 << self.depth;
        } else {
            self.stack &= !(1 << self.depth);
        }
        self.depth += 1;
        self.pos += 1;
        Ok(())
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.pos += 1;
    }

    /// An object key and its colon, at the current position.
    fn key(&mut self) -> Result<(), Refusal> {
        if self.peek() != Some(b'"') {
            return Err(self.syntax());
        }
        self.string()?;
        self.ws();
        if self.peek() != Some(b':') {
            return Err(self.syntax());
        }
        self.pos += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<(), Refusal> {
        self.pos += 1; // the opening quote
        loop {
            match self.peek() {
                None => return Err(self.syntax()),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                            self.pos += 1
                        }
                        Some(b'u') => self.unicode_escape()?,
                        _ => return Err(self.syntax()),
                    }
                }
                Some(0x00..=0x1F) => return Err(self.syntax()),
                Some(_) => self.pos += 1,
            }
        }
    }

    /// `\uXXXX` (the `u` at the current position), with a high surrogate
    /// followed by its `\uDC00`–`\uDFFF` partner.
    fn unicode_escape(&mut self) -> Result<(), Refusal> {
        let start = self.pos - 1;
        let unit = self.hex4()?;
        match unit {
            0xD800..=0xDBFF => {
                if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return Err(Refusal::Syntax { offset: start });
                }
                self.pos += 1;
                match self.hex4()? {
                    0xDC00..=0xDFFF => Ok(()),
                    _ => Err(Refusal::Syntax { offset: start }),
                }
            }
            0xDC00..=0xDFFF => Err(Refusal::Syntax { offset: start }),
            _ => Ok(()),
        }
    }

    /// `u` and four hex digits at the current position.
    fn hex4(&mut self) -> Result<u16, Refusal> {
        let mut unit = 0u16;
        for i in 1..=4 {
            let digit = match self.s.get(self.pos + i) {
                Some(&b) => (b as char).to_digit(16),
                None => None,
            };
            match digit {
                Some(d) => unit = unit << 4 | d as u16,
                None => {
                    return Err(Refusal::Syntax {
                        offset: self.pos + i,
                    });
                }
            }
        }
        self.pos += 5;
        Ok(unit)
    }

    fn number(&mut self) -> Result<(), Refusal> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.syntax()),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.required_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            self.required_digits()?;
        }
        // The text is UTF-8 and this slice is ASCII, so it is a str; Rust's
        // float parser accepts every RFC 8259 number and says `inf` for the
        // ones serde_json would refuse as out of range.
        let finite = std::str::from_utf8(&self.s[start..self.pos])
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .is_some_and(f64::is_finite);
        if finite {
            Ok(())
        } else {
            Err(Refusal::NumberOutOfRange { offset: start })
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    fn required_digits(&mut self) -> Result<(), Refusal> {
        match self.peek() {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            _ => Err(self.syntax()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Refusal> {
        for (i, &b) in word.iter().enumerate() {
            if self.s.get(self.pos + i) != Some(&b) {
                return Err(Refusal::Syntax {
                    offset: self.pos + i,
                });
            }
        }
        self.pos += word.len();
        Ok(())
    }
}
