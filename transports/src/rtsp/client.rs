//! The client's side of the control exchange, sans-IO: OPTIONS, SETUP
//! (TCP interleaved on channels 0-1), RECORD, each request built here and
//! its answer checked here; the keep-alive and the TEARDOWN; the answer
//! to a request a server sends the client.

use dtp_codec::rtsp::{Method, Request, Response, Session, TransportSpec};

/// The request path a client asks for: `rtsp://HOST:PORT/dtp`.
pub(crate) const PATH: &str = "/dtp";

/// Which request's answer a connecting client waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// OPTIONS (CSeq 1).
    Options,
    /// SETUP (CSeq 2).
    Setup,
    /// RECORD (CSeq 3).
    Record,
}

impl Step {
    /// The CSeq of this step's request.
    pub(crate) fn cseq(self) -> u32 {
        match self {
            Self::Options => 1,
            Self::Setup => 2,
            Self::Record => 3,
        }
    }

    /// This step's request to `uri`, in `session` once there is one.
    pub(crate) fn request(self, uri: &str, session: Option<&str>) -> Request {
        let cseq = self.cseq();
        match self {
            Self::Options => Request::new(Method::Options, uri, cseq),
            Self::Setup => {
                let mut spec = TransportSpec::tcp_interleaved(0, 1);
                spec.mode = Some("record".into());
                Request::new(Method::Setup, uri, cseq).with("Transport", spec.to_string())
            }
            Self::Record => {
                let r = Request::new(Method::Record, uri, cseq).with("Range", "npt=0.000-");
                with_session(r, session)
            }
        }
    }

    /// Checks this step's answer: the next step (`None` after RECORD: the
    /// connection is up) and, after SETUP, the session. The error says
    /// what was wrong.
    pub(crate) fn accept(self, resp: &Response) -> Result<Accepted, &'static str> {
        if resp.cseq != Some(self.cseq()) {
            return Err("the answer's CSeq is not the request's");
        }
        if !resp.is_success() {
            return Err("the server refused the request");
        }
        match self {
            Self::Options => Ok(Accepted::Next(Self::Setup, None)),
            Self::Setup => {
                let spec = match resp.headers.transport() {
                    Ok(Some(specs)) => specs.into_iter().next(),
                    _ => None,
                };
                let interleaved_0 = spec.as_ref().is_some_and(|t| {
                    t.is_rtp_avp_tcp() && t.interleaved.is_some_and(|c| c.first == 0)
                });
                if !interleaved_0 {
                    return Err("the server did not set up TCP interleaved on channel 0");
                }
                match resp.headers.session() {
                    Ok(Some(s)) => Ok(Accepted::Next(Self::Record, Some(s))),
                    _ => Err("the SETUP answer has no valid Session"),
                }
            }
            Self::Record => Ok(Accepted::Up),
        }
    }
}

/// What an accepted answer leads to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Accepted {
    /// Send this step's request next (with the session SETUP gave).
    Next(Step, Option<Session>),
    /// RECORD was answered: the connection is up.
    Up,
}

/// A keep-alive (RFC 2326 §10.8's GET_PARAMETER with no body).
pub(crate) fn keep_alive(uri: &str, session: Option<&str>, cseq: u32) -> Request {
    with_session(Request::new(Method::GetParameter, uri, cseq), session)
}

/// TEARDOWN of the session.
pub(crate) fn teardown(uri: &str, session: Option<&str>, cseq: u32) -> Request {
    with_session(Request::new(Method::Teardown, uri, cseq), session)
}

/// The answer to a request from the server (RFC 2326 lets a server send
/// OPTIONS, GET_PARAMETER and others to the client): 200 for the first
/// two, 501 for the rest.
pub(crate) fn answer(req: &Request) -> Response {
    let status = match req.method {
        Method::Options | Method::GetParameter => 200,
        _ => 501,
    };
    Response::new(status, req.cseq)
}

fn with_session(r: Request, session: Option<&str>) -> Request {
    match session {
        Some(id) => r.with("Session", id),
        None => r,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::super::server::{After, ServerSession, answer as serve};
    use super::*;

    /// The client's three requests, answered by our own server, lead to
    /// an open connection on both sides.
    #[test]
    fn the_client_exchange_against_our_server_opens_the_session() {
        let uri = "rtsp://127.0.0.1:1/dtp";
        let mut step = Step::Options;
        let mut session: Option<Session> = None;
        let mut set_up = false;
        loop {
            let req = step.request(uri, session.as_ref().map(|s| s.id.as_str()));
            let wire = req.to_bytes().unwrap();
            let s = ServerSession {
                id: "s1",
                timeout_secs: 30,
                set_up,
                open: false,
            };
            let (resp, after) = serve(&req, &s);
            assert!(!wire.is_empty() && resp.is_success(), "{step:?}: {resp:?}");
            set_up |= after == After::SetUp;
            match step.accept(&resp).unwrap() {
                Accepted::Next(next, s) => {
                    session = s.or(session);
                    step = next;
                }
                Accepted::Up => {
                    assert_eq!(after, After::Open);
                    break;
                }
            }
        }
        let s = session.unwrap();
        assert_eq!((s.id.as_str(), s.timeout), ("s1", Some(30)));
    }

    #[test]
    fn refusals_and_wrong_answers_fail_the_step() {
        let refused = Response::new(461, Some(2));
        assert!(Step::Setup.accept(&refused).is_err());
        let other_cseq = Response::new(200, Some(7));
        assert!(Step::Options.accept(&other_cseq).is_err());
        let udp = Response::new(200, Some(2))
            .with("Transport", "RTP/AVP;unicast;server_port=1-2")
            .with("Session", "x");
        assert!(Step::Setup.accept(&udp).is_err());
        let no_session =
            Response::new(200, Some(2)).with("Transport", "RTP/AVP/TCP;interleaved=0-1");
        assert!(Step::Setup.accept(&no_session).is_err());
        let req = Request::new(Method::Announce, "rtsp://c/", 5);
        assert_eq!(answer(&req).status, 501);
    }
}
