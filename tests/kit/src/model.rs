//! A model endpoint for the SPEC HO-3b tests: a real HTTP/1.1 server on
//! 127.0.0.1 playing the AI model an `ai_model` policy asks. It keeps every
//! request (head and body, to check what was sent) and answers each as
//! told — at once, or only after the client hung up (a model slower than
//! the call's timeout).
//!
//! Each connection is served on a thread of its own; the threads end with
//! the test process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the model does with each connection.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// Reads the request, writes these bytes, closes.
    Respond(Vec<u8>),
    /// Reads the request and answers nothing until the client hangs up;
    /// then writes these bytes (too late: nobody reads them).
    AfterHangUp(Vec<u8>),
}

/// One request the model received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRequest {
    /// The request line and headers, each line with its `\r\n`.
    pub head: String,
    /// The body (as many bytes as `Content-Length` said, or what came
    /// before the client closed), as text.
    pub body: String,
    /// Under [`Behaviour::AfterHangUp`]: the client has hung up.
    pub hung_up: bool,
}

/// A running model endpoint.
pub struct ModelServer {
    /// Where it listens.
    pub addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl ModelServer {
    /// Serves every connection with `behaviour`.
    pub fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, kept) = (connections.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let (kept, behaviour) = (kept.clone(), behaviour.clone());
                std::thread::spawn(move || exchange(stream, &behaviour, &kept));
            }
        });
        ModelServer {
            addr,
            connections,
            requests,
        }
    }

    /// Answers every request `200 OK` with the JSON `body`.
    pub fn answering(body: &str) -> Self {
        Self::start(Behaviour::Respond(http_response("200 OK", body)))
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The connections accepted so far (counted before their request is
    /// read).
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The requests read so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

/// An HTTP/1.1 response with `status` (`200 OK`) and a JSON `body`.
pub fn http_response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A loopback port nothing listens on (bound, learnt, released): a model
/// that is down.
pub fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Reads one request from `reader`: the head, then a `Content-Length`
/// body (what came, if the client closed early).
pub fn read_request(reader: &mut impl BufRead) -> ModelRequest {
    let (mut head, mut len) = (String::new(), 0);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = Vec::new();
    let _ = reader.take(len).read_to_end(&mut body);
    ModelRequest {
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
        hung_up: false,
    }
}

/// One exchange: the request, then the behaviour's answer.
fn exchange(mut stream: TcpStream, behaviour: &Behaviour, requests: &Mutex<Vec<ModelRequest>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let request = read_request(&mut reader);
    let index = {
        let mut requests = requests.lock().unwrap();
        requests.push(request);
        requests.len() - 1
    };
    let answer = match behaviour {
        Behaviour::Respond(bytes) => bytes,
        Behaviour::AfterHangUp(bytes) => {
            // Blocks until the client closes its side (or resets it).
            let _ = reader.read_to_end(&mut Vec::new());
            requests.lock().unwrap()[index].hung_up = true;
            bytes
        }
    };
    // The client may have given up already.
    let _ = stream.write_all(answer);
}
