//! Entity tags and `If-None-Match` (RFC 9110 §8.8.3, §13.1.2) for the
//! conditional snapshot polls of SPEC RT-11.

use std::fmt;

/// An entity tag: `"xyzzy"` (strong) or `W/"xyzzy"` (weak).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EntityTag {
    /// `W/` was present.
    pub weak: bool,
    /// The opaque tag without its quotes: visible ASCII but `"`, or
    /// non-ASCII UTF-8.
    pub tag: String,
}

impl EntityTag {
    /// A strong tag. `None` if `tag` holds a byte `etagc` does not allow
    /// (a `"`, a space, a control character).
    pub fn strong(tag: &str) -> Option<Self> {
        tag.bytes().all(is_etagc).then(|| Self {
            weak: false,
            tag: tag.to_owned(),
        })
    }

    /// Parses one `entity-tag`; `None` if malformed.
    pub fn parse(s: &str) -> Option<Self> {
        let (weak, quoted) = match s.strip_prefix("W/") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let tag = quoted.strip_prefix('"')?.strip_suffix('"')?;
        tag.bytes().all(is_etagc).then(|| Self {
            weak,
            tag: tag.to_owned(),
        })
    }

    /// RFC 9110 §8.8.3.2 weak comparison: the opaque tags are equal, weak or not.
    pub fn weak_eq(&self, other: &EntityTag) -> bool {
        self.tag == other.tag
    }
}

/// Renders as the header value: `"tag"` or `W/"tag"`.
impl fmt::Display for EntityTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = if self.weak { "W/" } else { "" };
        write!(f, "{w}\"{}\"", self.tag)
    }
}

/// An `If-None-Match` precondition (RFC 9110 §13.1.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IfNoneMatch {
    /// `*`: matches any current representation.
    Any,
    /// A non-empty list of tags, in the order sent (all fields joined).
    Tags(Vec<EntityTag>),
}

impl IfNoneMatch {
    /// Does the precondition fail for a resource whose current tag is
    /// `current`, i.e. should a GET answer 304 (SPEC RT-11)? Weak
    /// comparison, as §13.1.2 requires.
    pub fn matches(&self, current: &EntityTag) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => tags.iter().any(|t| t.weak_eq(current)),
        }
    }

    /// Parses the values of every `If-None-Match` field. `None` if there is
    /// none or any is malformed (an empty list, a `*` among tags, an
    /// unquoted tag): the request is then served as unconditional, which is
    /// always safe.
    pub(crate) fn parse<'a>(values: impl Iterator<Item = &'a str>) -> Option<Self> {
        let mut tags = Vec::new();
        let mut any = false;
        let mut seen = false;
        for value in values {
            seen = true;
            if value.trim_matches([' ', '\t']) == "*" {
                any = true;
                continue;
            }
            parse_tag_list(value, &mut tags)?;
        }
        match (seen, any, tags.is_empty()) {
            (false, _, _) => None,
            (true, true, true) => Some(Self::Any),
            (true, false, false) => Some(Self::Tags(tags)),
            _ => None,
        }
    }
}

/// `#entity-tag`, appended to `tags`. Tags may hold commas, so this scans
/// quoted strings rather than splitting.
fn parse_tag_list(value: &str, tags: &mut Vec<EntityTag>) -> Option<()> {
    let mut rest = value;
    loop {
        // RFC 9110 §5.6.1: empty list elements and OWS around them are ignored.
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Some(());
        }
        let (weak, quoted) = match rest.strip_prefix("W/") {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let body = quoted.strip_prefix('"')?;
        let end = body.find('"')?;
        let tag = body.get(..end)?;
        if !tag.bytes().all(is_etagc) {
            return None;
        }
        tags.push(EntityTag {
            weak,
            tag: tag.to_owned(),
        });
        rest = body.get(end + 1..)?.trim_start_matches([' ', '\t']);
        if !(rest.is_empty() || rest.starts_with(',')) {
            return None;
        }
    }
}

/// `etagc = %x21 / %x23-7E / obs-text`.
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}
