//! SPEC TRN-4/TRN-5 against RTSP clients we did not write: FFmpeg's
//! ffprobe and ffmpeg (installed by tests/ffmpeg/install.sh) on our
//! [`Rtsp`] listener over TCP interleaving. ffprobe must get through the
//! whole control exchange — OPTIONS, DESCRIBE (our SDP), SETUP
//! (`RTP/AVP/TCP;unicast;interleaved=0-1`), PLAY — with a 200 for each,
//! and our side must report the connection up after PLAY; ffmpeg must
//! publish RTP through ANNOUNCE, SETUP, RECORD and TEARDOWN, and we must
//! deliver its channel-0 payloads unaltered. A tap under the RTSP layer
//! records the bytes both ways, which our own codec reads back. The tests
//! are skipped (loudly) only when FFmpeg cannot be installed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::rtsp::{Channels, InterleavedDecoder, Item, Message, Method, Request, RtspLimits};
use dtp_transports::{
    BackendChoice, BackendPreference, ConnId, Driver, DriverConfig, DriverStats, Endpoint, Event,
    ListenerId, Rtsp, RtspConfig, SendError, Transport, TransportError, Waker,
};

type Log = Rc<RefCell<BTreeMap<ConnId, (Vec<u8>, Vec<u8>)>>>;

/// The inner transport, recording what each connection received and sent.
struct Tap<T> {
    inner: T,
    log: Log,
}

impl<T: Transport> Transport for Tap<T> {
    fn backend(&self) -> &BackendChoice {
        self.inner.backend()
    }
    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        self.inner.listen(at, shared)
    }
    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        self.inner.connect(to)
    }
    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        self.inner.send(conn, bytes)?;
        self.log
            .borrow_mut()
            .entry(conn)
            .or_default()
            .1
            .extend_from_slice(bytes);
        Ok(())
    }
    fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        self.send(conn, bytes)
    }
    fn queued(&self, conn: ConnId) -> usize {
        self.inner.queued(conn)
    }
    fn want_writable(&mut self, conn: ConnId) {
        self.inner.want_writable(conn);
    }
    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        self.inner.limit_send_queue(conn, max);
    }
    fn pause_reading(&mut self, conn: ConnId) {
        self.inner.pause_reading(conn);
    }
    fn resume_reading(&mut self, conn: ConnId) {
        self.inner.resume_reading(conn);
    }
    fn close(&mut self, conn: ConnId) {
        self.inner.close(conn);
    }
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        let from = events.len();
        self.inner.poll(events, timeout)?;
        for e in &events[from..] {
            if let Event::Received { conn, data } = e {
                self.log
                    .borrow_mut()
                    .entry(*conn)
                    .or_default()
                    .0
                    .extend_from_slice(data);
            }
        }
        Ok(())
    }
    fn waker(&self) -> Waker {
        self.inner.waker()
    }
    fn stats(&self) -> DriverStats {
        self.inner.stats()
    }
}

/// The RTSP messages in a recorded stream, in order (packets skipped).
fn messages(stream: &[u8]) -> Vec<Message> {
    let mut dec = InterleavedDecoder::new(RtspLimits::default());
    let (mut at, mut out) = (0, Vec::new());
    while let Ok((item, used)) = dec.decode(&stream[at..]) {
        if let Item::Message(m) = item {
            out.push(m);
        }
        at += used;
    }
    out
}

/// FFmpeg's ffprobe, installed (with ffmpeg) if need be; `None` (after a
/// loud message) when it cannot be.
fn ffmpeg() -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/ffmpeg/install.sh");
    let ok = Command::new("bash")
        .arg(script)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "\n*** SKIPPED: FFmpeg could not be installed (tests/ffmpeg/install.sh failed) ***\n"
        );
        return None;
    }
    Some(PathBuf::from("ffprobe"))
}

/// Kills ffprobe when the test ends, however it ends.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An RTSP listener over a tapped driver: the transport, the tap's log
/// and the address.
fn tapped(backend: BackendPreference) -> (Rtsp<Tap<Driver>>, Log, std::net::SocketAddr) {
    let log: Log = Rc::default();
    let driver = Driver::new(DriverConfig {
        backend,
        ..DriverConfig::default()
    })
    .unwrap();
    let tap = Tap {
        inner: driver,
        log: log.clone(),
    };
    let mut rtsp = Rtsp::new(tap, RtspConfig::default());
    let any: Endpoint = "rtsp:127.0.0.1:0".parse().unwrap();
    let (_, bound) = rtsp.listen(&any, false).unwrap();
    let Endpoint::Rtsp(addr) = bound else {
        panic!("{bound}")
    };
    (rtsp, log, addr)
}

/// The payloads of the `$` packets in a recorded stream, by channel.
fn packets(stream: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut dec = InterleavedDecoder::new(RtspLimits::default());
    let (mut at, mut out): (usize, Vec<(u8, Vec<u8>)>) = (0, Vec::new());
    let mut open = false;
    while let Ok((item, used)) = dec.decode(&stream[at..]) {
        if let Item::Data {
            channel,
            skip,
            len,
            last,
        } = item
        {
            let payload = &stream[at + skip..at + skip + len];
            match out.last_mut() {
                Some((_, p)) if open => p.extend_from_slice(payload),
                _ => out.push((channel, payload.to_vec())),
            }
            open = !last;
        }
        at += used;
    }
    out
}

#[test]
fn ffprobe_gets_through_options_describe_setup_and_play_on_our_listener() {
    let Some(ffprobe) = ffmpeg() else { return };
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let (mut rtsp, log, addr) = tapped(backend);
        let child = Command::new(&ffprobe)
            .args(["-hide_banner", "-v", "debug", "-rtsp_transport", "tcp"])
            .arg(format!("rtsp://{addr}/dtp"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Peer(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = Vec::new();
        let mut up = None;
        while up.is_none() {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: ffprobe never reached PLAY"
            );
            if let Some(status) = child.0.try_wait().unwrap() {
                let mut err = String::new();
                io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err).unwrap();
                panic!("{backend:?}: ffprobe ended ({status}) before PLAY:\n{err}");
            }
            rtsp.poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            for e in events.drain(..) {
                if let Event::Accepted { conn, .. } = e {
                    up = Some(conn);
                }
            }
        }
        let conn = up.unwrap();
        // Some bytes on channel 0, as DTP would send them; then we close.
        rtsp.send(conn, b"DTP bytes on channel 0").unwrap();
        rtsp.close(conn);
        let mut closed = false;
        while !closed {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the close never completed"
            );
            rtsp.poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            closed = events
                .drain(..)
                .any(|e| matches!(e, Event::Closed { conn: c, .. } if c == conn));
        }
        let mut err = String::new();
        io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err).unwrap();
        let _ = child.0.wait();
        let (received, sent) = log.borrow().get(&conn).cloned().unwrap();
        let requests: Vec<Request> = messages(&received)
            .into_iter()
            .map(|m| match m {
                Message::Request(r) => r,
                Message::Response(r) => panic!("a response from the client: {r:?}"),
            })
            .collect();
        let setup = requests.iter().find(|r| r.method == Method::Setup);
        let transport = setup.and_then(|r| r.headers.transport().ok().flatten());
        let spec = transport.as_deref().and_then(<[_]>::first);
        assert!(
            spec.is_some_and(|t| t.is_rtp_avp_tcp()
                && t.interleaved
                    == Some(Channels {
                        first: 0,
                        last: Some(1)
                    })),
            "{backend:?}: ffprobe's SETUP asked for {spec:?}"
        );
        let requests: Vec<Method> = requests.into_iter().map(|r| r.method).collect();
        assert_eq!(
            requests,
            [
                Method::Options,
                Method::Describe,
                Method::Setup,
                Method::Play
            ],
            "{backend:?}"
        );
        let answers: Vec<u16> = messages(&sent)
            .into_iter()
            .map(|m| match m {
                Message::Response(r) => r.status,
                Message::Request(r) => panic!("a request from the server: {r:?}"),
            })
            .collect();
        assert_eq!(answers, [200, 200, 200, 200], "{backend:?}");
        // It read our SDP: one stream, of the `application` type.
        assert!(
            err.contains("m=application 0 RTP/AVP 96"),
            "{backend:?}: {err}"
        );
        // The packet went out behind PLAY's answer.
        assert!(
            sent.ends_with(b"$\x00\x00\x16DTP bytes on channel 0"),
            "{backend:?}"
        );
    }
}

/// SPEC TRN-5 against a real peer's data: ffmpeg publishes one second of
/// audio to our listener (ANNOUNCE, SETUP with TCP interleaving, RECORD,
/// RTP packets, TEARDOWN). Our side must report the connection up, then
/// closed by the peer, and deliver exactly the concatenated payloads of
/// the channel-0 packets ffmpeg sent — RTP packets, each starting with
/// version 2 — while the RTCP of channel 1 stays out of the stream.
#[test]
fn ffmpeg_publishes_over_tcp_interleaving_and_we_deliver_its_rtp_unaltered() {
    if ffmpeg().is_none() {
        return;
    }
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let (mut rtsp, log, addr) = tapped(backend);
        let child = Command::new("ffmpeg")
            .args(["-hide_banner", "-nostdin", "-v", "error", "-f", "lavfi"])
            .args(["-i", "sine=frequency=440:duration=1", "-c:a", "pcm_mulaw"])
            .args(["-f", "rtsp", "-rtsp_transport", "tcp"])
            .arg(format!("rtsp://{addr}/dtp"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = Peer(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = Vec::new();
        let (mut conn, mut got, mut ended) = (None, Vec::new(), None);
        while ended.is_none() {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: no TEARDOWN from ffmpeg"
            );
            rtsp.poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Accepted { conn: c, .. } => conn = Some(c),
                    Event::Received { data, .. } => got.extend_from_slice(&data),
                    Event::Closed { reason, .. } => ended = Some(reason),
                    _ => {}
                }
            }
        }
        let status = child.0.wait().unwrap();
        let mut err = String::new();
        io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{backend:?}: ffmpeg failed: {err}");
        assert_eq!(
            ended,
            Some(dtp_transports::CloseReason::PeerClosed),
            "{backend:?}"
        );
        let (received, _) = log.borrow().get(&conn.unwrap()).cloned().unwrap();
        let methods: Vec<Method> = messages(&received)
            .into_iter()
            .filter_map(|m| match m {
                Message::Request(r) => Some(r.method),
                Message::Response(_) => None,
            })
            .collect();
        assert_eq!(
            methods,
            [
                Method::Options,
                Method::Announce,
                Method::Setup,
                Method::Record,
                Method::Teardown
            ],
            "{backend:?}"
        );
        let rtp: Vec<Vec<u8>> = packets(&received)
            .into_iter()
            .filter_map(|(c, p)| (c == 0).then_some(p))
            .collect();
        assert!(rtp.len() > 10, "{backend:?}: {} RTP packets", rtp.len());
        assert!(
            rtp.iter().all(|p| p.len() > 12 && p[0] >> 6 == 2),
            "{backend:?}: not RTP"
        );
        assert!(
            got == rtp.concat(),
            "{backend:?}: the stream differs from the packets' payloads"
        );
    }
}
