//! SPEC HO-4 across gateways, checked after the fact: from the session
//! records of every gateway's audit log, no two controlling sessions of
//! one resource overlap — in time, or in fencing token.
//!
//! A session's controlling span is from its creation (`created_at`, when
//! its grant succeeded) to when it last stopped being active
//! (`active_until`); a session never active has none. Two spans of one
//! resource conflict when they overlap and either is exclusive (reads
//! share, SPEC TS-9). Fencing tokens (the cluster's admission revisions)
//! must rise with creation time across the exclusive sessions of a
//! resource: a later controller with a smaller token is a stale grant.
//! The gateways' clocks are assumed comparable (one machine, or synced
//! well within a handover's duration).

use std::collections::BTreeMap;

/// One session's controlling span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Where it was read (a file name, a node).
    pub source: String,
    /// The session id.
    pub session: String,
    /// The resource.
    pub resource: String,
    /// Whether its mode excludes every other session.
    pub exclusive: bool,
    /// When it became active, Unix ms.
    pub from: u64,
    /// When it stopped being active, Unix ms.
    pub until: u64,
    /// Its grant's fencing token, if the gateway issued one.
    pub fencing: Option<u64>,
}

/// A breach of SPEC HO-4 found in the spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Two sessions controlled the resource at once.
    Overlap {
        /// The resource.
        resource: String,
        /// The session that began first (source, session).
        first: (String, String),
        /// The one that began while it was still active.
        second: (String, String),
    },
    /// A session that began later holds a token not above an earlier
    /// exclusive session's.
    StaleToken {
        /// The resource.
        resource: String,
        /// The earlier session and its token.
        earlier: (String, u64),
        /// The later session and its token.
        later: (String, u64),
    },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Overlap {
                resource,
                first,
                second,
            } => write!(
                f,
                "resource {resource}: session {} ({}) and session {} ({}) were active at once",
                first.1, first.0, second.1, second.0
            ),
            Self::StaleToken {
                resource,
                earlier,
                later,
            } => write!(
                f,
                "resource {resource}: session {} began later with fencing token {} ≤ {} of session {}",
                later.0, later.1, earlier.1, earlier.0
            ),
        }
    }
}

/// Every violation among `spans` (see the module doc), per resource in
/// name order, each in time order.
pub fn check(spans: &[Span]) -> Vec<Violation> {
    let mut by_resource: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        by_resource.entry(&s.resource).or_default().push(s);
    }
    let mut found = Vec::new();
    for (resource, mut spans) in by_resource {
        spans.sort_by_key(|s| (s.from, s.until));
        // Sweep: the spans still active when the next one begins.
        let mut open: Vec<&Span> = Vec::new();
        for s in &spans {
            open.retain(|o| o.until > s.from);
            for o in &open {
                if o.exclusive || s.exclusive {
                    found.push(Violation::Overlap {
                        resource: resource.to_owned(),
                        first: (o.source.clone(), o.session.clone()),
                        second: (s.source.clone(), s.session.clone()),
                    });
                }
            }
            open.push(s);
        }
        let mut last: Option<(&str, u64)> = None;
        for s in spans.iter().filter(|s| s.exclusive) {
            let Some(token) = s.fencing else { continue };
            if let Some((earlier, max)) = last
                && token <= max
            {
                found.push(Violation::StaleToken {
                    resource: resource.to_owned(),
                    earlier: (earlier.to_owned(), max),
                    later: (s.session.clone(), token),
                });
            }
            if last.is_none_or(|(_, max)| token > max) {
                last = Some((&s.session, token));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(session: &str, exclusive: bool, (from, until): (u64, u64), fencing: u64) -> Span {
        Span {
            source: "node".into(),
            session: session.into(),
            resource: "r".into(),
            exclusive,
            from,
            until,
            fencing: Some(fencing),
        }
    }

    #[test]
    fn back_to_back_controllers_and_shared_reads_are_fine() {
        let spans = [
            span("a", true, (0, 10), 1),
            span("b", true, (10, 20), 2),
            span("r1", false, (20, 30), 3),
            span("r2", false, (25, 35), 4),
            span("c", true, (35, 40), 5),
        ];
        assert_eq!(check(&spans), []);
    }

    #[test]
    fn an_overlap_and_a_stale_token_are_found() {
        let spans = [
            span("a", true, (0, 10), 5),
            span("b", true, (9, 20), 6),
            span("c", true, (20, 30), 4),
            span("r", false, (25, 26), 7),
        ];
        let found = check(&spans);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(matches!(&found[0], Violation::Overlap { first, second, .. }
            if first.1 == "a" && second.1 == "b"));
        assert!(matches!(&found[1], Violation::Overlap { first, second, .. }
            if first.1 == "c" && second.1 == "r"));
        assert!(
            matches!(&found[2], Violation::StaleToken { earlier, later, .. }
            if earlier == &("b".to_owned(), 6) && later == &("c".to_owned(), 4))
        );
        assert!(found[2].to_string().contains("fencing token 4"));
    }
}
