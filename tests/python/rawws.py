"""A raw RFC 6455 client on a plain socket, for what the `websockets`
library refuses to send (invalid UTF-8 text, unmasked client frames) and
for reading the server's frames byte for byte."""

import base64
import hashlib
import os
import socket
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


class RawWs:
    """One WebSocket connection after a checked 101 handshake."""

    def __init__(self, host, port, path, headers=(), timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *headers,
        ]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"no handshake answer: {buf!r}")
            buf += chunk
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        status, *fields = head.decode("latin-1").split("\r\n")
        if not status.startswith("HTTP/1.1 101"):
            raise ConnectionError(f"handshake refused: {status}")
        want = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        accept = [f.split(":", 1)[1].strip() for f in fields if f.lower().startswith("sec-websocket-accept:")]
        if accept != [want]:
            raise ConnectionError(f"bad Sec-WebSocket-Accept {accept} (want {want})")

    def send(self, opcode, payload, fin=True, mask=True):
        """Sends one frame; masked with a random key unless `mask` is false."""
        first = (0x80 if fin else 0) | opcode
        n = len(payload)
        bit = 0x80 if mask else 0
        if n < 126:
            head = struct.pack("!BB", first, bit | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", first, bit | 126, n)
        else:
            head = struct.pack("!BBQ", first, bit | 127, n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            head += key
        self.sock.sendall(head + payload)

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"connection ended with {len(self.buf)} of {n} bytes")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """One server frame: (fin, opcode, payload); a masked one is an error."""
        b0, b1 = self._read(2)
        if b1 & 0x80:
            raise ConnectionError("the server masked a frame")
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read(8))
        return bool(b0 & 0x80), b0 & 0x0F, self._read(n)

    def close_code(self):
        """Reads frames up to the server's close frame; returns its code
        (None if it had no body) and checks the TCP connection then ends."""
        while True:
            _, opcode, payload = self.recv()
            if opcode == CLOSE:
                break
        code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
        try:
            rest = self.sock.recv(1)
        except ConnectionResetError:
            rest = b""
        except socket.timeout as e:
            raise ConnectionError("the server kept the connection open after its close frame") from e
        if rest:
            raise ConnectionError(f"bytes after the close frame: {rest!r}")
        return code

    def close(self):
        self.sock.close()
