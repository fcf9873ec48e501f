//! A stopping gateway says goodbye instead of cutting (SPEC RT-8, RT-9):
//! every SSE stream ends with an `event: control` CLOSE RESTART block and
//! its last chunk, every `realtime.v1` session with CLOSE RESTART and close
//! code 1012 (Service Restart), every echo session with the close frame.

use crate::client::publish_ticks;
use crate::server::{BACKENDS, READER, start_default};
use crate::ssec::{Event, Sse};
use crate::wsc::Ws;

#[test]
fn stopping_the_engine_ends_every_stream_and_session_with_close_restart() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut sse = Sse::ticks(srv.addr, "");
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe_ticks("s1", 1);
        // A session with no subscription is told too.
        let (mut idle, _) = Ws::realtime(srv.addr, READER);
        let mut echo = Ws::echo(srv.addr);
        publish_ticks(srv.addr, 1..=1);
        assert_eq!(sse.wait_for(1).len(), 1);
        ws.expect_event("s1", 1);

        srv.engine.stop();
        let events = sse.read_to_end().to_vec();
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(
            events[1],
            Event {
                kind: "control".into(),
                id: None,
                data: r#"{"type":"CLOSE","category":"RESTART"}"#.into(),
            }
        );
        ws.expect_closed_with("RESTART", 1012);
        idle.expect_closed_with("RESTART", 1012);
        echo.expect_close_frame(1012);
    }
}
