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
        let mut tmp = [0u8; 4096];
        let limits = ResponseLimits {
            max_head_bytes: MAX_ANSWER,
            max_headers: 16,
        };
        loop {
            let parsed =
                parse_response_head(&self.buf, &limits).map_err(|e| format!("publisher: {e}"))?;
            if let Some((head, n)) = parsed {
                let len = head.content_length().unwrap_or(0);
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= MAX_ANSWER)
                    .ok_or_else(|| format!("publisher: an answer of {len} bytes"))?;
                if self.buf.len() >= n + len {
                    let body: Vec<u8> = self.buf[n..n + len].to_vec();
                    self.buf.drain(..n + len);
                    if head.status() != 201 {
                        return Err(format!(
                            "publisher: answered {}: {}",
                            head.status(),
                            String::from_utf8_lossy(&body)
                        ));
                    }
                    return parse_published(&body);
                }
            }
            if self.buf.len() > MAX_ANSWER {
                return Err("publisher: no whole answer in 64 KiB".into());
            }
            let k = self
                .stream
                .read(&mut tmp)
                .map_err(|e| format!("publisher: read: {e}"))?;
            if k == 0 {
                return Err("publisher: the server closed the connection".into());
            }
            self.buf.extend_from_slice(&tmp[..k]);
        }
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
