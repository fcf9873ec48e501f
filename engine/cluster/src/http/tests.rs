//! The client against a fake server that answers with fixed bytes: good
//! answers in every framing, and bad ones that must become errors.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{HttpClient, HttpConfig, Retry};
use crate::error::Error;

/// Serves `answers`, one per request received on one connection, then
/// closes; returns the address.
fn serve(answers: Vec<&[u8]>) -> (String, JoinHandle<()>) {
    let answers: Vec<Vec<u8>> = answers.into_iter().map(<[u8]>::to_vec).collect();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        for answer in answers {
            let mut buf = [0u8; 4096];
            // One read holds one small request here.
            if s.read(&mut buf).unwrap_or(0) == 0 {
                return;
            }
            let _ = s.write_all(&answer);
        }
    });
    (addr, handle)
}

fn client(addr: &str) -> HttpClient {
    let config = HttpConfig {
        io_timeout: Duration::from_secs(5),
        max_body: 64,
        ..HttpConfig::default()
    };
    HttpClient::new(&[addr], config).unwrap()
}

#[test]
fn framings_and_keep_alive() {
    let (addr, h) = serve(vec![
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\nX-T: y\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nnope",
    ]);
    let mut c = client(&addr);
    let a = c.post("/a", b"{}", None, Retry::Once).unwrap();
    assert_eq!((a.status, a.body.as_slice()), (200, &b"ok"[..]));
    let b = c.post("/b", b"{}", None, Retry::Once).unwrap();
    assert_eq!(b.body, b"abc");
    // The same connection served all three (the fake accepts only one).
    let closed = c.post("/c", b"{}", None, Retry::Once).unwrap();
    assert_eq!((closed.status, closed.body.as_slice()), (404, &b"nope"[..]));
    h.join().unwrap();
}

#[test]
fn bad_answers_are_errors() {
    let long_chunk = [
        &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n80\r\n"[..],
        &[b'a'; 128],
    ]
    .concat();
    let cases: [&[u8]; 5] = [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
        &long_chunk,
    ];
    for (i, answer) in cases.into_iter().enumerate() {
        let (addr, h) = serve(vec![answer]);
        let err = client(&addr)
            .post("/", b"{}", None, Retry::Idempotent)
            .unwrap_err();
        let ok = match i {
            0..=2 => matches!(err, Error::Protocol { .. }),
            _ => matches!(err, Error::TooLarge { max: 64, .. }),
        };
        assert!(ok, "case {i}: {err:?}");
        h.join().unwrap();
    }
}

#[test]
fn a_write_cut_mid_answer_has_an_unknown_outcome() {
    let (addr, h) = serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"]);
    let err = client(&addr)
        .post("/", b"{}", None, Retry::Once)
        .unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    h.join().unwrap();
    // The same cut on a read is a plain connection error.
    let (addr, h) = serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"]);
    let err = client(&addr)
        .post("/", b"{}", None, Retry::Idempotent)
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    h.join().unwrap();
}

#[test]
fn endpoints_are_checked() {
    assert!(HttpClient::new(&[], HttpConfig::default()).is_err());
    assert!(HttpClient::new(&["http://h:1/path"], HttpConfig::default()).is_err());
    assert!(HttpClient::new(&["http://h:1/", "h:2"], HttpConfig::default()).is_ok());
}
