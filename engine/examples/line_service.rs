//! A gateway builder's starting point: your own protocol on the engine's
//! shards, over TCP and a Unix socket at once, with a control thread that
//! sees every shard.
//!
//! The service speaks lines: each line is answered upper-cased, and the
//! line `count` is answered with how many lines every connection on every
//! shard has sent so far — a number only the control thread knows, so the
//! shard asks it (`Outbox::to_control`) and answers when the decision comes
//! back (`Service::decision`). The control plane is sans-IO: requests and
//! time in, decisions out.
//!
//! ```text
//! cargo run -p dtp-engine --example line_service
//! ```
//!
//! It starts the engine on a free TCP port and a Unix socket, talks to both
//! as a client would, prints what it heard, and stops.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use dtp_codec::{ErrorCode, Limits};
use dtp_engine::{
    Connections, ControlPlane, Decision, Engine, EngineConfig, Listener, Origin, Outbox, Request,
    Service,
};
use dtp_transports::{ConnId, DriverConfig, Endpoint, RecvBuf};

/// What a shard tells the control thread.
enum Up {
    /// A connection sent a line.
    Lines(u64),
    /// Connection `.0` asks for the total.
    Count(ConnId),
}

/// What the control thread tells a shard: the total, for a connection.
struct Total {
    conn: ConnId,
    lines: u64,
}

/// The per-shard half: one instance per shard, state per connection.
struct LineService;

impl Service for LineService {
    /// The connection's id (to be answered by it) and the bytes of the
    /// line being read.
    type Conn = (ConnId, BytesMut);
    type Up = Up;
    type Down = Total;

    fn open(&mut self, conn: ConnId, _: Origin, _: &mut Outbox<'_, Up>) -> (ConnId, BytesMut) {
        (conn, BytesMut::new())
    }

    fn bytes(
        &mut self,
        (conn, line): &mut (ConnId, BytesMut),
        data: RecvBuf,
        out: &mut Outbox<'_, Up>,
    ) -> Result<(), ErrorCode> {
        for &b in data.iter() {
            if b != b'\n' {
                // A bounded line: a peer cannot make a shard hold more.
                if line.len() >= 4096 {
                    return Err(ErrorCode::LIMIT_EXCEEDED);
                }
                line.put_u8(b);
                continue;
            }
            let text = std::mem::take(line);
            // Told in order: this line is counted before a `count` asks.
            out.to_control(Up::Lines(1));
            if &text[..] == b"count" {
                out.to_control(Up::Count(*conn));
            } else {
                out.wire().extend_from_slice(&text.to_ascii_uppercase());
                out.wire().put_u8(b'\n');
            }
        }
        Ok(())
    }

    fn decision(
        &mut self,
        total: Total,
        conns: &mut dyn Connections<(ConnId, BytesMut), Up>,
    ) -> Option<Total> {
        // The connection may have gone meanwhile: then there is no one to
        // tell.
        conns.visit(total.conn, &mut |_, out| {
            out.wire()
                .extend_from_slice(format!("{} lines\n", total.lines).as_bytes());
        });
        None
    }
}

/// The control thread's half: one for the whole engine.
#[derive(Default)]
struct Counter {
    lines: u64,
}

impl ControlPlane<Up, Total> for Counter {
    fn handle(
        &mut self,
        shard: usize,
        request: Request<Up>,
        _now: Instant,
        out: &mut Vec<(usize, Decision<Total>)>,
    ) {
        match request {
            Request::Service(Up::Lines(n)) => self.lines += n,
            Request::Service(Up::Count(conn)) => {
                let total = Total {
                    conn,
                    lines: self.lines,
                };
                out.push((shard, Decision::Service(total)));
            }
            _ => {}
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let socket = std::env::temp_dir().join(format!("line-service-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let config = EngineConfig {
        shards: 2,
        pin: false,
        listen: vec![
            Listener::new("tcp", "127.0.0.1:0".parse::<Endpoint>()?),
            Listener::new("unix", Endpoint::Unix(socket.clone())),
        ],
        driver: DriverConfig::default(),
        limits: Limits::default(),
        drain: Duration::from_secs(1),
        control_ring: 1024,
        quic: None,
    };
    let engine =
        Engine::start_with_control(config, |_shard| LineService, Box::new(Counter::default()))?;
    let tcp_addr = engine.local_addrs()[0].tcp().ok_or("no TCP address")?;
    println!(
        "serving lines on tcp {tcp_addr} and unix {}",
        socket.display()
    );

    // A client on TCP, another on the Unix socket.
    let tcp = TcpStream::connect(tcp_addr)?;
    let unix = UnixStream::connect(&socket)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    unix.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut tcp_lines = BufReader::new(tcp.try_clone()?);
    let mut unix_lines = BufReader::new(unix.try_clone()?);
    let ask = |w: &mut dyn Write, r: &mut dyn BufRead, line: &str| {
        w.write_all(format!("{line}\n").as_bytes())?;
        let mut answer = String::new();
        r.read_line(&mut answer)?;
        Ok::<_, std::io::Error>(answer.trim_end().to_owned())
    };
    let (mut tcp_w, mut unix_w) = (tcp, unix);
    println!(
        "tcp:  hello     -> {}",
        ask(&mut tcp_w, &mut tcp_lines, "hello")?
    );
    println!(
        "unix: shards    -> {}",
        ask(&mut unix_w, &mut unix_lines, "shards")?
    );
    // The Unix client's own two lines are counted before its `count` (one
    // shard's messages reach the control thread in order); the TCP
    // client's line, from another shard, by now or a moment later.
    let count = ask(&mut unix_w, &mut unix_lines, "count")?;
    println!("unix: count     -> {count}");
    assert!(["2 lines", "3 lines"].contains(&count.as_str()), "{count}");
    let again = ask(&mut tcp_w, &mut tcp_lines, "count")?;
    println!("tcp:  count     -> {again}");
    assert_eq!(
        again, "4 lines",
        "every shard's lines reach the control thread"
    );

    engine.stop();
    engine.join()?;
    let _ = std::fs::remove_file(&socket);
    println!("stopped");
    Ok(())
}
