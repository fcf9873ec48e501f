#!/usr/bin/env python3
"""Slow resumers against `dtp serve`: the abuse case of paced replay.

Publishes EVENTS events of ~1 KiB on the demo stream, then opens SSE
clients and WebSocket clients (SUBS subscriptions each) that all resume
from the oldest event and never read (receive buffer 4 KiB). For HOLD
seconds it samples the server's RSS and times GET /v1/health from another
connection. Prints one JSON object: RSS before, peak and growth, health
latency (max, p99), how many slow clients were ended as slow consumers
(the server's queue_overflow_total) and how each client ended.

    python3 run.py BIN [--events N] [--sse N] [--ws N] [--subs N] [--hold S]

BIN is a `dtp` binary; any version that serves the realtime front end.
Loopback only; the server is stopped at the end.
"""

import argparse, base64, json, os, socket, subprocess, sys, tempfile, time, urllib.request

TOKEN = "dtp-demo-token"
SCOPE = "demo-scope"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def http(port, head, body=b"", sock=None, timeout=5.0):
    """One request on `sock` (kept) or a new connection; (status, body)."""
    own = sock is None
    if own:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    req = head + f"\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n"
    sock.sendall(req.encode() + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("closed")
        buf += chunk
    headb, rest = buf.split(b"\r\n\r\n", 1)
    lines = headb.decode().split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for l in lines[1:]:
        k, _, v = l.partition(":")
        if k.lower() == "content-length":
            length = int(v)
    while len(rest) < length:
        rest += sock.recv(65536)
    if own:
        sock.close()
    return status, rest[:length]


def slow_socket(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    return s


def ws_frame(text):
    data = text.encode()
    mask = os.urandom(4)
    n = len(data)
    head = bytes([0x81])
    if n < 126:
        head += bytes([0x80 | n])
    else:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--sse", type=int, default=50)
    ap.add_argument("--ws", type=int, default=20)
    ap.add_argument("--subs", type=int, default=8)
    ap.add_argument("--hold", type=float, default=30.0)
    a = ap.parse_args()

    port = 17780
    cfg = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    cfg.write(f"""[engine]
listen = ["127.0.0.1:17700"]
[admin]
listen = "127.0.0.1:19700"
[realtime]
listen = "127.0.0.1:{port}"
[[realtime.clients]]
token = "{TOKEN}"
streams = ["*"]
publish = true
admin = true
[[realtime.streams]]
id = "demo"
recovery = "CURSOR"
event_types = ["demo.tick"]
scope = "{SCOPE}"
retain_events = {a.events}
retain_bytes = {a.events * 4096}
retain_secs = 3600
""")
    cfg.close()
    srv = subprocess.Popen([a.bin, "serve", "--config", cfg.name],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(100):
            try:
                if http(port, "GET /v1/health HTTP/1.1")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        keep = socket.create_connection(("127.0.0.1", port))
        pad = "p" * 900
        first = None
        for n in range(1, a.events + 1):
            body = json.dumps({"eventType": "demo.tick", "payload": {"n": n, "pad": pad}}).encode()
            st, b = http(port, f"POST /v1/streams/demo/events HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json", body, sock=keep)
            assert st == 201, b
            if first is None:
                first = json.loads(b)["resumeCursor"]
        keep.close()
        time.sleep(0.5)
        rss0 = rss_kib(srv.pid)
        clients = []
        for _ in range(a.sse):
            s = slow_socket(port)
            s.sendall(f"GET /v1/streams/demo/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\nLast-Event-ID: {first}\r\n\r\n".encode())
            clients.append(("sse", s))
        for _ in range(a.ws):
            s = slow_socket(port)
            key = base64.b64encode(os.urandom(16)).decode()
            s.sendall(f"GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: realtime.v1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
            for i in range(a.subs):
                sub = {"type": "SUBSCRIBE", "subscriptionId": f"s{i}", "streamId": "demo", "cursor": first, "scopeBinding": SCOPE}
                s.sendall(ws_frame(json.dumps(sub)))
            clients.append(("ws", s))
        peak, lat = rss0, []
        end = time.time() + a.hold
        while time.time() < end:
            t = time.time()
            try:
                http(port, "GET /v1/health HTTP/1.1", timeout=5.0)
                lat.append(time.time() - t)
            except OSError:
                lat.append(float("inf"))
            peak = max(peak, rss_kib(srv.pid))
            time.sleep(0.2)
        metrics = urllib.request.urlopen("http://127.0.0.1:19700/metrics", timeout=5).read()
        overflow = 0
        for line in metrics.decode().splitlines():
            if line.startswith("dtp_realtime_queue_overflow_total"):
                overflow = int(float(line.split()[-1]))
        ended = {f"{k}_{v}": 0 for k in ("sse", "ws") for v in ("told_slow", "closed", "still_open")}
        for kind, s in clients:
            s.settimeout(2.0)
            data, eof = b"", False
            stop = time.time() + 3.0
            try:
                while time.time() < stop:
                    c = s.recv(1 << 20)
                    if not c:
                        eof = True
                        break
                    data += c
            except OSError:
                pass
            tail = data[-4096:]
            if b"QUEUE_OVERFLOW" in tail or b"OVERLOADED" in tail:
                ended[f"{kind}_told_slow"] += 1
            elif eof:
                ended[f"{kind}_closed"] += 1
                if os.environ.get("SHOW_TAIL"):
                    print(kind, len(data), data[-120:], file=sys.stderr)
            else:
                ended[f"{kind}_still_open"] += 1
                if os.environ.get("SHOW_TAIL"):
                    print(kind, "open", len(data), data[:300], file=sys.stderr)
            s.close()
        lat.sort()
        out = {
            "bin": a.bin, "events": a.events, "sse": a.sse, "ws": a.ws, "subs": a.subs,
            "rss_before_mib": round(rss0 / 1024, 1), "rss_peak_mib": round(peak / 1024, 1),
            "rss_growth_mib": round((peak - rss0) / 1024, 1),
            "health_max_s": round(lat[-1], 3), "health_p99_s": round(lat[int(len(lat) * 0.99) - 1], 3),
            "health_samples": len(lat), "queue_overflow_total": overflow, "clients_ended": ended,
        }
        print(json.dumps(out))
    finally:
        srv.terminate()
        try:
            srv.wait(10)
        except subprocess.TimeoutExpired:
            srv.kill()
        os.unlink(cfg.name)


if __name__ == "__main__":
    main()
