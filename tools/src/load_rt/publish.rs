//! The publisher of a realtime load run: one keep-alive HTTP connection
//! that publishes events at a fixed rate, each carrying its send time, and
//! remembers the sequences of the measured window.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use dtp_codec::http::{ResponseLimits, parse_response_head};
use dtp_codec::realtime::{JsonLimits, PublishReceipt, write_publication};

/// The largest publication answer (head or body) accepted: they are a few
/// hundred bytes.
const MAX_ANSWER: usize = 64 * 1024;

/// What a publication answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) epoch: String,
    pub(crate) sequence: u64,
    pub(crate) cursor: Option<String>,
}

/// A keep-alive publishing connection.
pub(crate) struct Publisher {
    stream: TcpStream,
    target: SocketAddr,
    path: String,
    token: String,
    event_type: String,
    pad: String,
    buf: Vec<u8>,
}

impl Publisher {
    /// Connects to `target` to publish `event_type` on `stream`, payloads
    /// padded to about `payload_bytes`.
    pub(crate) fn connect(
        target: SocketAddr,
        stream: &str,
        token: &str,
        event_type: &str,
        payload_bytes: usize,
    ) -> Result<Self, String> {
        let s =
            TcpStream::connect(target).map_err(|e| format!("publisher: connect {target}: {e}"))?;
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        Ok(Self {
            stream: s,
            target,
            path: format!("/v1/streams/{stream}/events"),
            token: token.to_owned(),
            event_type: event_type.to_owned(),
            pad: "x".repeat(payload_bytes.saturating_sub(32)),
            buf: Vec::new(),
        })
    }

    /// Publishes one event stamped with `t_ns` (the load generator's clock).
    pub(crate) fn publish(&mut self, t_ns: u64) -> Result<Published, String> {
        let payload = format!("{{\"t\":{t_ns},\"pad\":\"{}\"}}", self.pad);
        let mut body = Vec::with_capacity(payload.len() + 64);
        write_publication(&mut body, &self.event_type, payload.as_bytes())
            .map_err(|e| format!("publisher: event type {:?}: {e}", self.event_type))?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.path,
            self.target,
            self.token,
            body.len()
        );
        let mut req = head.into_bytes();
        req.extend_from_slice(&body);
        self.stream
            .write_all(&req)
            .map_err(|e| format!("publisher: send: {e}"))?;
        self.read_answer()
    }

    fn read_answer(&mut self) -> Result<Published, String> {
        let (status, body) =
            read_framed(&mut self.stream, &mut self.buf).map_err(|e| format!("publisher: {e}"))?;
        if status != 201 {
            return Err(format!(
                "publisher: answered {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        parse_published(&body)
    }
}

/// Reads one `Content-Length` framed answer from a keep-alive connection:
/// its status and body; `buf` keeps what came after it.
fn read_framed(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(u16, Vec<u8>), String> {
    let mut tmp = [0u8; 4096];
    let limits = ResponseLimits {
        max_head_bytes: MAX_ANSWER,
        max_headers: 16,
    };
    loop {
        if let Some((head, n)) = parse_response_head(buf, &limits).map_err(|e| e.to_string())? {
            let len = head.content_length().unwrap_or(0);
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_ANSWER)
                .ok_or_else(|| format!("an answer of {len} bytes"))?;
            if buf.len() >= n + len {
                let body = buf[n..n + len].to_vec();
                buf.drain(..n + len);
                return Ok((head.status(), body));
            }
        }
        if buf.len() > MAX_ANSWER {
            return Err("no whole answer in 64 KiB".into());
        }
        let k = stream.read(&mut tmp).map_err(|e| format!("read: {e}"))?;
        if k == 0 {
            return Err("the server closed the connection".into());
        }
        buf.extend_from_slice(&tmp[..k]);
    }
}

fn parse_published(body: &[u8]) -> Result<Published, String> {
    let r = PublishReceipt::decode(body, &JsonLimits::default())
        .map_err(|e| format!("publisher: bad answer: {e}"))?;
    Ok(Published {
        epoch: r.stream_epoch,
        sequence: r.sequence,
        cursor: r.resume_cursor,
    })
}

/// Publishes at `rate` per second from `from` until `until`, stamping each
/// event with `clock`'s nanoseconds; returns what each publication answered.
pub(crate) fn run(
    p: &mut Publisher,
    rate: f64,
    until: Instant,
    clock: impl Fn() -> u64,
) -> Result<Vec<Published>, String> {
    let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut next = Instant::now();
    let mut out = Vec::new();
    while next < until {
        let now = Instant::now();
        if now < next {
            std::thread::sleep(next - now);
        }
        out.push(p.publish(clock())?);
        next += period;
    }
    Ok(out)
}

/// Ends every subscription of `stream` through the operator API (`POST
/// /v1/streams/ID/kick`, answered 200 when the token has the admin grant).
/// Asked on a keep-alive connection and read by its `Content-Length`.
pub(crate) fn kick(target: SocketAddr, stream: &str, token: &str) -> Result<(), String> {
    let mut s = TcpStream::connect(target).map_err(|e| format!("kick: connect {target}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let req = format!(
        "POST /v1/streams/{stream}/kick HTTP/1.1\r\nHost: {target}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("kick: send: {e}"))?;
    let (status, body) = read_framed(&mut s, &mut Vec::new()).map_err(|e| format!("kick: {e}"))?;
    if status != 200 {
        return Err(format!(
            "kick: answered {status}: {} (does --token have the admin grant?)",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(())
}
