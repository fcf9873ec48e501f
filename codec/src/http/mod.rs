//! HTTP/1.1 request heads and response heads, sans-IO (issue 6 item 1).
