//! The server's side of the control exchange, sans-IO: the answer to each
//! request and what it does to the connection. RFC 2326 §10; DTP needs
//! one stream, carried interleaved on channel 0 of the RTSP connection.

use dtp_codec::rtsp::{Method, Request, Response, TransportSpec, Version};

/// The methods a DTP server answers (the `Public` header).
pub(crate) const PUBLIC: &str =
    "OPTIONS, DESCRIBE, ANNOUNCE, SETUP, RECORD, PLAY, TEARDOWN, GET_PARAMETER";

/// What the server knows of its session.
pub(crate) struct ServerSession<'a> {
    /// The session id (handed out at SETUP).
    pub(crate) id: &'a str,
    /// The timeout announced with it, in seconds.
    pub(crate) timeout_secs: u64,
    /// SETUP was answered.
    pub(crate) set_up: bool,
    /// RECORD or PLAY was answered: the connection carries packets.
    pub(crate) open: bool,
}

/// What answering a request does to the connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Nothing.
    Stay,
    /// SETUP was accepted.
    SetUp,
    /// RECORD or PLAY was accepted: the connection is up.
    Open,
    /// TEARDOWN: close once the answer is out.
    Close,
}

/// The answer to `req` and what it does.
pub(crate) fn answer(req: &Request, s: &ServerSession<'_>) -> (Response, After) {
    let reply = |status| Response::new(status, req.cseq);
    if req.version != Version::RTSP_1_0 {
        return (reply(505), After::Stay);
    }
    if req.cseq.is_none() {
        return (reply(400), After::Stay);
    }
    let session = format!("{};timeout={}", s.id, s.timeout_secs);
    let with_session = |r: Response| {
        if s.set_up {
            r.with("Session", session.clone())
        } else {
            r
        }
    };
    // A request naming a session must name ours (§12.37).
    let named = req.headers.session();
    let ours = match &named {
        Ok(Some(n)) => s.set_up && n.id == s.id,
        Ok(None) => true,
        Err(_) => return (reply(400), After::Stay),
    };
    if !ours {
        return (reply(454), After::Stay);
    }
    let has_session = matches!(named, Ok(Some(_)));
    match &req.method {
        Method::Options => (with_session(reply(200).with("Public", PUBLIC)), After::Stay),
        Method::GetParameter => (with_session(reply(200)), After::Stay),
        Method::Describe if !s.open => {
            let mut r = reply(200).with("Content-Type", "application/sdp").with(
                "Content-Base",
                format!("{}/", req.uri.trim_end_matches('/')),
            );
            r.body = sdp(s.id).into_bytes();
            (r, After::Stay)
        }
        // A publisher describes what it will send; DTP takes any bytes.
        Method::Announce if !s.open => (reply(200), After::Stay),
        Method::Setup if !s.open => setup(req, reply(200), &session),
        Method::Record | Method::Play if s.open => (reply(455), After::Stay),
        Method::Record | Method::Play if !s.set_up || !has_session => (reply(455), After::Stay),
        Method::Record => (with_session(reply(200)), After::Open),
        Method::Play => (
            with_session(reply(200).with("Range", "npt=0.000-")),
            After::Open,
        ),
        Method::Teardown => (reply(200), After::Close),
        Method::Describe | Method::Announce | Method::Setup => (reply(455), After::Stay),
        Method::Pause | Method::SetParameter | Method::Redirect => {
            (reply(405).with("Allow", PUBLIC), After::Stay)
        }
        Method::Other(_) => (reply(501), After::Stay),
    }
}

/// SETUP: only RTP/AVP/TCP, unicast, interleaved on channels 0-1 (or
/// interleaved left to the server) is taken; anything else is 461.
fn setup(req: &Request, ok: Response, session: &str) -> (Response, After) {
    let specs = match req.headers.transport() {
        Ok(Some(specs)) => specs,
        Ok(None) => return (ok_status(ok, 461), After::Stay),
        Err(_) => return (ok_status(ok, 400), After::Stay),
    };
    let fits = |t: &TransportSpec| {
        t.is_rtp_avp_tcp()
            && t.delivery != Some(dtp_codec::rtsp::Delivery::Multicast)
            && t.interleaved
                .is_none_or(|c| c.first == 0 && c.last.is_none_or(|l| l == 1))
    };
    let Some(chosen) = specs.iter().find(|t| fits(t)) else {
        return (ok_status(ok, 461), After::Stay);
    };
    let mut spec = TransportSpec::tcp_interleaved(0, 1);
    spec.mode.clone_from(&chosen.mode);
    let r = ok
        .with("Transport", spec.to_string())
        .with("Session", session);
    (r, After::SetUp)
}

fn ok_status(r: Response, status: u16) -> Response {
    Response::new(status, r.cseq)
}

/// A minimal SDP (RFC 8866) for one `application` stream, for clients
/// that DESCRIBE before SETUP.
fn sdp(id: &str) -> String {
    format!(
        "v=0\r\no=- {id} 1 IN IP4 0.0.0.0\r\ns=DTP\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\n\
         a=control:*\r\nm=application 0 RTP/AVP 96\r\na=rtpmap:96 x-dtp/90000\r\n\
         a=control:stream=0\r\n"
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    fn session(set_up: bool, open: bool) -> ServerSession<'static> {
        ServerSession {
            id: "abc",
            timeout_secs: 60,
            set_up,
            open,
        }
    }

    fn setup_with(transport: &str) -> (u16, After) {
        let req = Request::new(Method::Setup, "rtsp://h/dtp", 2).with("Transport", transport);
        let (r, after) = answer(&req, &session(false, false));
        (r.status, after)
    }

    #[test]
    fn setup_takes_tcp_interleaved_0_1_only_and_refuses_the_rest_with_461() {
        assert_eq!(
            setup_with("RTP/AVP/TCP;unicast;interleaved=0-1"),
            (200, After::SetUp)
        );
        assert_eq!(setup_with("RTP/AVP/TCP;unicast"), (200, After::SetUp));
        assert_eq!(
            setup_with("RTP/AVP;unicast;client_port=4588-4589, RTP/AVP/TCP;interleaved=0-1"),
            (200, After::SetUp)
        );
        assert_eq!(
            setup_with("RTP/AVP;unicast;client_port=4588-4589"),
            (461, After::Stay)
        );
        assert_eq!(
            setup_with("RTP/AVP/TCP;interleaved=2-3"),
            (461, After::Stay)
        );
        assert_eq!(setup_with("RTP/AVP/TCP;multicast"), (461, After::Stay));
        assert_eq!(setup_with("RTP/AVP/TCP;interleaved=x"), (400, After::Stay));
        let req = Request::new(Method::Setup, "rtsp://h/dtp", 2).with(
            "Transport",
            "RTP/AVP/TCP;unicast;interleaved=0-1;mode=record",
        );
        let (r, _) = answer(&req, &session(false, false));
        assert_eq!(
            r.headers.get("Transport"),
            Some("RTP/AVP/TCP;unicast;interleaved=0-1;mode=\"record\"")
        );
        assert_eq!(r.headers.get("Session"), Some("abc;timeout=60"));
    }

    #[test]
    fn record_and_play_open_only_after_setup_and_with_our_session() {
        let record = Request::new(Method::Record, "rtsp://h/dtp", 3);
        assert_eq!(answer(&record, &session(false, false)).0.status, 455);
        assert_eq!(answer(&record, &session(true, false)).0.status, 455);
        let ours = record.clone().with("Session", "abc");
        assert_eq!(answer(&ours, &session(true, false)).1, After::Open);
        let theirs = record.with("Session", "xyz");
        assert_eq!(answer(&theirs, &session(true, false)).0.status, 454);
        let play = Request::new(Method::Play, "rtsp://h/dtp", 4).with("Session", "abc");
        assert_eq!(answer(&play, &session(true, false)).1, After::Open);
        assert_eq!(answer(&play, &session(true, true)).0.status, 455);
    }

    #[test]
    fn keep_alives_teardown_and_the_rest() {
        let ka = Request::new(Method::GetParameter, "rtsp://h/dtp", 9).with("Session", "abc");
        let (r, after) = answer(&ka, &session(true, true));
        assert_eq!((r.status, r.cseq, after), (200, Some(9), After::Stay));
        let options = Request::new(Method::Options, "*", 1);
        let (r, _) = answer(&options, &session(false, false));
        assert_eq!(r.headers.get("Public"), Some(PUBLIC));
        let down = Request::new(Method::Teardown, "rtsp://h/dtp", 10).with("Session", "abc");
        assert_eq!(answer(&down, &session(true, true)).1, After::Close);
        let describe = Request::new(Method::Describe, "rtsp://h:1/dtp", 2);
        let (r, _) = answer(&describe, &session(false, false));
        assert!(
            String::from_utf8(r.body)
                .unwrap()
                .contains("m=application 0 RTP/AVP 96")
        );
        assert_eq!(r.headers.get("Content-Base"), Some("rtsp://h:1/dtp/"));
        let pause = Request::new(Method::Pause, "rtsp://h/dtp", 5);
        assert_eq!(answer(&pause, &session(true, true)).0.status, 405);
        let odd = Request::new(Method::from_token("FLY"), "rtsp://h/dtp", 5);
        assert_eq!(answer(&odd, &session(true, true)).0.status, 501);
        let mut v2 = Request::new(Method::Options, "*", 1);
        v2.version = Version { major: 2, minor: 0 };
        assert_eq!(answer(&v2, &session(false, false)).0.status, 505);
        let mut no_cseq = Request::new(Method::Options, "*", 1);
        no_cseq.cseq = None;
        assert_eq!(answer(&no_cseq, &session(false, false)).0.status, 400);
    }
}
