//! The NATS client against a fake server speaking fixed bytes: the
//! handshake, answers matched to their request, and bad bytes as errors.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Nats, NatsConfig};
use crate::error::Error;

const INFO: &[u8] = b"INFO {\"server_id\":\"x\",\"headers\":true,\"max_payload\":1024}\r\n";

/// Accepts one client, sends `greeting`, waits for the client's PING and
/// runs `then` on the connection.
fn fake(
    greeting: &'static [u8],
    then: fn(&mut TcpStream, &mut BufReader<TcpStream>),
) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(greeting).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while r.read_line(&mut line).unwrap_or(0) > 0 {
            if line.starts_with("PING") {
                then(&mut s, &mut r);
                return;
            }
            line.clear();
        }
    });
    (addr, h)
}

fn config() -> NatsConfig {
    NatsConfig {
        request_timeout: Duration::from_millis(500),
        ..NatsConfig::default()
    }
}

/// Reads a PUB line and returns its reply subject (payload skipped).
fn read_pub(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut payload = String::new();
    r.read_line(&mut payload).unwrap();
    words[2].to_owned()
}

#[test]
fn answers_are_matched_to_their_request() {
    let (addr, h) = fake(INFO, |s, r| {
        s.write_all(b"PONG\r\n").unwrap();
        let reply = read_pub(r);
        let msg = format!(
            "PING\r\nMSG {reply}x 1 3\r\nold\r\n+OK\r\nHMSG {reply} 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
        );
        s.write_all(msg.as_bytes()).unwrap();
        // The client answers our PING.
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "PONG\r\n");
    });
    let mut n = Nats::connect(&[&addr], config()).unwrap();
    let m = n.request("svc", &[], b"q").unwrap();
    assert_eq!(m.payload, b"hi");
    assert_eq!(m.headers.unwrap().status, None);
    h.join().unwrap();
}

#[test]
fn no_responders_timeouts_and_server_errors() {
    let (addr, h) = fake(INFO, |s, r| {
        s.write_all(b"PONG\r\n").unwrap();
        let reply = read_pub(r);
        let msg = format!("HMSG {reply} 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n");
        s.write_all(msg.as_bytes()).unwrap();
        read_pub(r); // the second request goes unanswered
        read_pub(r);
        s.write_all(b"-ERR 'Permissions Violation'\r\n").unwrap();
    });
    let mut n = Nats::connect(&[&addr], config()).unwrap();
    assert!(matches!(
        n.request("svc", &[], b""),
        Err(Error::NoResponders { .. })
    ));
    assert!(matches!(
        n.request("svc", &[], b""),
        Err(Error::Timeout { .. })
    ));
    assert!(
        matches!(n.request("svc", &[], b""), Err(Error::Nats(e)) if e == "Permissions Violation")
    );
    h.join().unwrap();
}

#[test]
fn bad_handshakes_and_bad_bytes() {
    let (addr, h) = fake(b"HELLO\r\n", |_, _| {});
    assert!(matches!(
        Nats::connect(&[&addr], config()),
        Err(Error::Protocol { .. })
    ));
    h.join().unwrap();
    let (addr, h) = fake(b"INFO {\"headers\":false}\r\n", |_, _| {});
    assert!(matches!(
        Nats::connect(&[&addr], config()),
        Err(Error::Protocol { .. })
    ));
    h.join().unwrap();
    let (addr, h) = fake(INFO, |s, _| {
        s.write_all(b"-ERR 'Authorization Violation'\r\n").unwrap()
    });
    assert!(matches!(
        Nats::connect(&[&addr], config()),
        Err(Error::AuthRefused { .. })
    ));
    h.join().unwrap();
    let (addr, h) = fake(INFO, |s, r| {
        s.write_all(b"PONG\r\n").unwrap();
        read_pub(r);
        s.write_all(b"MSG a 1 99999999999\r\n").unwrap();
    });
    let mut n = Nats::connect(&[&addr], config()).unwrap();
    assert!(matches!(
        n.request("svc", &[], b""),
        Err(Error::TooLarge { .. })
    ));
    assert_eq!(n.server(), None, "a desynchronised connection is dropped");
    h.join().unwrap();
    let (addr, h) = fake(INFO, |s, r| {
        s.write_all(b"PONG\r\n").unwrap();
        read_pub(r);
        s.write_all(b"MSG a\r\n").unwrap();
    });
    let mut n = Nats::connect(&[&addr], config()).unwrap();
    assert!(matches!(
        n.request("svc", &[], b""),
        Err(Error::Protocol { .. })
    ));
    assert_eq!(n.server(), None);
    h.join().unwrap();
}

#[test]
fn requests_are_checked_before_sending() {
    let (addr, h) = fake(INFO, |s, _| s.write_all(b"PONG\r\n").unwrap());
    let mut n = Nats::connect(&[&addr], config()).unwrap();
    assert!(matches!(
        n.request("a b", &[], b""),
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        n.request("s", &[("X", "a\r\nb")], b""),
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        n.request("s", &[], &[0; 2000]),
        Err(Error::TooLarge { max: 1024, .. })
    ));
    drop(n);
    h.join().unwrap();
    assert!(Nats::connect(&[], config()).is_err());
}
