"""RFC 6455 and `realtime.v1` (SPEC RT-9) checks of `dtp serve --echo` with
the `websockets` library, and raw sockets where the library refuses to
misbehave.

Usage: .venv/bin/python test_ws.py http://127.0.0.1:PORT/v1
Prints each check's name and result, then 'N passed, N failed'; exits 0
only if every check passed."""

import asyncio
import json
import sys
import traceback
import urllib.request
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rawws import BINARY, PING, PONG, TEXT, RawWs

BASE = sys.argv[1].rstrip("/")  # http://host:port/v1
HOST, PORT = urlsplit(BASE).hostname, urlsplit(BASE).port
WS = "ws" + BASE[len("http"):]
TOKEN = "dtp-demo-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CEILING = 1 << 20  # the echo endpoint's default message ceiling
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(got, want, what=""):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def http(method, path, body=None):
    """(status, parsed JSON body or None) of one request with the demo token."""
    headers = dict(AUTH)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, None


async def closed_with(ws, code):
    """Reads until the server closes; checks its close code."""
    try:
        while True:
            msg = await asyncio.wait_for(ws.recv(), 5)
            raise AssertionError(f"a message instead of the close: {msg[:200]!r}")
    except ConnectionClosed as e:
        expect(e.rcvd.code if e.rcvd else None, code, "the server's close code")


# --- /v1/echo -----------------------------------------------------------

@check
async def echo_text_and_binary():
    async with connect(WS + "/echo") as ws:
        await ws.send("héllo, wörld ✓")
        expect(await asyncio.wait_for(ws.recv(), 5), "héllo, wörld ✓", "text echo")
        payload = bytes(range(256)) * 4
        await ws.send(payload)
        expect(await asyncio.wait_for(ws.recv(), 5), payload, "binary echo")


@check
async def echo_fragmented_message_whole():
    async def fragments():
        for part in ("frag-one ", "frag-two ", "frag-€-three"):
            yield part

    async with connect(WS + "/echo") as ws:
        await ws.send(fragments())
        expect(await asyncio.wait_for(ws.recv(), 5), "frag-one frag-two frag-€-three", "reassembled")


@check
async def echo_ping_pong_with_payload():
    async with connect(WS + "/echo") as ws:
        waiter = await ws.ping(b"ping-payload-42")
        await asyncio.wait_for(waiter, 5)  # resolves only on a pong with this payload
    raw = RawWs(HOST, PORT, "/v1/echo")
    try:
        raw.send(PING, b"raw-ping \x00\xff")
        expect(raw.recv(), (True, PONG, b"raw-ping \x00\xff"), "raw pong")
    finally:
        raw.close()


@check
async def echo_message_at_ceiling_is_echoed():
    async with connect(WS + "/echo", max_size=2 * CEILING) as ws:
        await ws.send(b"x" * CEILING)
        expect(len(await asyncio.wait_for(ws.recv(), 10)), CEILING, "echoed length")


@check
async def echo_message_over_ceiling_closes_1009():
    async with connect(WS + "/echo", max_size=2 * CEILING) as ws:
        await ws.send(b"x" * (CEILING + 1))
        await closed_with(ws, 1009)


@check
async def echo_invalid_utf8_text_closes_1007():
    raw = RawWs(HOST, PORT, "/v1/echo")
    try:
        raw.send(TEXT, b"ok \xc3\x28 not utf-8")
        expect(raw.close_code(), 1007, "close code")
    finally:
        raw.close()


@check
async def echo_unmasked_client_frame_closes_1002():
    raw = RawWs(HOST, PORT, "/v1/echo")
    try:
        raw.send(TEXT, b"unmasked", mask=False)
        expect(raw.close_code(), 1002, "close code")
    finally:
        raw.close()


@check
async def echo_ping_between_fragments():
    raw = RawWs(HOST, PORT, "/v1/echo")
    try:
        raw.send(TEXT, b"ab", fin=False)
        raw.send(PING, b"mid")
        raw.send(0x0, b"cd")
        expect(raw.recv(), (True, PONG, b"mid"), "the pong, before the message completes")
        expect(raw.recv(), (True, TEXT, b"abcd"), "the message, whole")
    finally:
        raw.close()


@check
async def echo_protocol_violations_close_1002():
    cases = {
        "reserved opcode 0x3": [(0x3, b"x", True)],
        "continuation without a start": [(0x0, b"x", True)],
        "fragmented ping": [(PING, b"x", False)],
        "ping payload of 126 bytes": [(PING, b"p" * 126, True)],
        "close code 1005 on the wire": [(0x8, b"\x03\xed", True)],
        "text inside a fragmented binary": [(BINARY, b"a", False), (TEXT, b"b", True)],
    }
    for name, frames in cases.items():
        raw = RawWs(HOST, PORT, "/v1/echo")
        try:
            for opcode, payload, fin in frames:
                raw.send(opcode, payload, fin=fin)
            expect(raw.close_code(), 1002, name)
        finally:
            raw.close()


@check
async def echo_close_handshake_1000():
    async with connect(WS + "/echo") as ws:
        await ws.close(1000, "bye")
        rcvd = ws.protocol.close_rcvd
        expect(rcvd.code if rcvd else None, 1000, "the server's close code")
    raw = RawWs(HOST, PORT, "/v1/echo")
    try:
        raw.send(0x8, b"\x03\xe8bye")
        expect(raw.close_code(), 1000, "raw close code (then end of connection)")
    finally:
        raw.close()


# --- /v1/ws (realtime.v1) ------------------------------------------------

def rt_connect(**kw):
    return connect(WS + "/ws", subprotocols=["realtime.v1"], additional_headers=AUTH, **kw)


async def recv_json(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), 5))


async def welcome(ws):
    expect(ws.subprotocol, "realtime.v1", "negotiated subprotocol")
    w = await recv_json(ws)
    expect(w.get("type"), "WELCOME", "first message")
    expect(sorted(w), sorted(["type", "protocol", "connectionId", "heartbeat", "limits"]), "WELCOME keys")
    expect(w["protocol"], "realtime.v1", "WELCOME protocol")
    return w


def subscribe_message(sid):
    status, snap = http("GET", "/streams/demo/snapshot")
    expect(status, 200, "snapshot status")
    cp = snap["checkpoint"]
    msg = {"type": "SUBSCRIBE", "subscriptionId": sid, "streamId": "demo",
           "cursor": cp["resumeCursor"] if cp else None, "scopeBinding": snap["scopeBinding"]}
    return msg, int(cp["lastAppliedSequence"]) if cp else 0


async def subscribed(ws, sid, last):
    m = await recv_json(ws)
    expect(m.get("type"), "SUBSCRIBED", f"answer to SUBSCRIBE ({m})")
    expect(sorted(m), sorted(["type", "subscriptionId", "streamEpoch", "acceptedCursor", "nextExpectedSequence"]),
           "SUBSCRIBED keys")
    expect(m["subscriptionId"], sid, "subscriptionId")
    expect(m["nextExpectedSequence"], str(last + 1), "nextExpectedSequence = lastApplied + 1")


@check
async def rt_welcome_subscribe_event_heartbeat():
    async with rt_connect() as ws:
        await welcome(ws)
        msg, last = subscribe_message("py-1")
        await ws.send(json.dumps(msg))
        await subscribed(ws, "py-1", last)
        status, pub = http("POST", "/streams/demo/events", {"eventType": "demo.note", "payload": {"from": "python"}})
        expect(status, 201, "publish status")
        ev = await recv_json(ws)
        expect((ev.get("type"), ev.get("subscriptionId")), ("EVENT", "py-1"), "event message")
        env = ev["envelope"]
        expect((env["sequence"], env["eventType"], env["payload"]), (pub["sequence"], "demo.note", {"from": "python"}),
               "envelope")
        expect(env["resumeCursor"], pub["resumeCursor"], "envelope resumeCursor")
        await ws.send(json.dumps({"type": "HEARTBEAT", "nonce": "hb-1"}))
        expect(await recv_json(ws), {"type": "HEARTBEAT_ACK", "nonce": "hb-1"}, "heartbeat answer")


@check
async def rt_fragmented_subscribe():
    msg, last = subscribe_message("py-frag")
    text = json.dumps(msg)

    async def fragments():
        for i in range(0, len(text), 7):
            yield text[i:i + 7]

    async with rt_connect() as ws:
        await welcome(ws)
        await ws.send(fragments())
        await subscribed(ws, "py-frag", last)


@check
async def rt_binary_frame_closes_1003():
    async with rt_connect() as ws:
        await welcome(ws)
        await ws.send(b'{"type":"HEARTBEAT","nonce":"b"}')
        await closed_with(ws, 1003)


@check
async def rt_bad_json_close_protocol_mismatch_1002():
    async with rt_connect() as ws:
        await welcome(ws)
        await ws.send('{"type":"HEARTBEAT","nonce":')
        expect(await recv_json(ws), {"type": "CLOSE", "category": "PROTOCOL_MISMATCH"}, "CLOSE message")
        await closed_with(ws, 1002)


@check
async def rt_no_subprotocol_refused_400():
    try:
        async with connect(WS + "/ws", additional_headers=AUTH):
            raise AssertionError("the handshake without realtime.v1 was accepted")
    except InvalidStatus as e:
        expect(e.response.status_code, 400, "handshake status")


@check
async def rt_kick_close_restart_1012():
    async with rt_connect() as ws:
        await welcome(ws)
        msg, last = subscribe_message("py-kick")
        await ws.send(json.dumps(msg))
        await subscribed(ws, "py-kick", last)
        status, _ = http("POST", "/streams/demo/kick")
        expect(status, 200, "kick status")
        expect(await recv_json(ws), {"type": "CLOSE", "category": "RESTART"}, "CLOSE message")
        await closed_with(ws, 1012)


async def main():
    print(f"websockets {websockets.__version__} against {BASE}")
    passed = failed = 0
    for fn in CHECKS:
        try:
            await asyncio.wait_for(fn(), 20)
            passed += 1
            print(f"PASS {fn.__name__}")
        except Exception as e:  # every failure is reported, then the next check runs
            failed += 1
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            print(f"FAIL {fn.__name__}: {detail}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
