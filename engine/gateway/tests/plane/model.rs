//! SPEC HO-3b through the plane: a model answering over real local HTTP
//! decides on a worker thread; with the model down, the fallback priority
//! script decides.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use dtp_codec::{AuthOutcome, ErrorCode};

use crate::rig::{Rig, auth_result, config};

/// A port nothing listens on (bound, then released).
pub(crate) fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A model endpoint that answers every decision request with `answer` and
/// keeps the request bodies.
struct ModelServer {
    port: u16,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl ModelServer {
    fn start(answer: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let seen = bodies.clone();
        // Serves until the test process ends.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                serve(stream, answer, &seen);
            }
        });
        ModelServer { port, bodies }
    }
}

/// One HTTP/1.1 exchange: headers, a Content-Length body, a JSON answer.
fn serve(stream: TcpStream, answer: &str, bodies: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    bodies
        .lock()
        .unwrap()
        .push(String::from_utf8(body).unwrap());
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let mut stream = stream;
    let _ = stream.write_all(reply.as_bytes());
}

/// SPEC HO-3b: fay-c, whom the fallback script would refuse, asks for the
/// held `cam`; the model (real HTTP, on a worker thread) allows. The answer
/// comes at a later tick, woken by the worker; the model saw only the
/// configured context fields.
#[test]
fn ai_model_allows_over_local_http() {
    let server = ModelServer::start(r#"{"decision":"allow"}"#);
    let mut rig = Rig::new(config(server.port));
    rig.up(0, 1);
    rig.up(0, 3);
    rig.session(0, 1, "fay-a", "cam");
    let (id, out) = rig.auth(0, 3, "fay-c", "cam");
    assert!(
        auth_result(&out, 0, 3, id).is_none(),
        "decided before the model: {out:?}"
    );
    assert_eq!(rig.plane.metrics().model_calls, 1);

    let out = rig.tick_until("the model's answer", |out| {
        auth_result(out, 0, 3, id).is_some()
    });
    assert!(
        matches!(
            auth_result(&out, 0, 3, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
    let bodies = server.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"version": 1, "context": {
            "source": {"fay_id": "fay-a"}, "target": {"fay_id": "fay-c"}}})
    );
}

/// SPEC HO-3b: the model is down (connection refused), so the fallback
/// priority script decides: fay-c is refused, and says why.
#[test]
fn ai_model_down_falls_back_to_the_script() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 3);
    rig.session(0, 1, "fay-a", "cam");
    let (id, _) = rig.auth(0, 3, "fay-c", "cam");
    let out = rig.tick_until("the fallback's answer", |out| {
        auth_result(out, 0, 3, id).is_some()
    });
    match auth_result(&out, 0, 3, id) {
        Some(AuthOutcome::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
            assert!(message.contains("ai model unavailable"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// SPEC HO-3b: with the model down, the fallback script lets fay-b win.
#[test]
fn ai_model_down_fallback_script_can_allow() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 2);
    rig.session(0, 1, "fay-a", "cam");
    let (id, _) = rig.auth(0, 2, "fay-b", "cam");
    let out = rig.tick_until("the fallback's answer", |out| {
        auth_result(out, 0, 2, id).is_some()
    });
    assert!(
        matches!(
            auth_result(&out, 0, 2, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
}
