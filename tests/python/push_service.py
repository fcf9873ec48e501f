"""A local Web Push service for DTP's push sender tests (SPEC RT-12).

It checks what a real push service checks and what a browser does with the
body, with code DTP did not write:

- the VAPID `Authorization: vapid t=<JWT>, k=<key>` header (RFC 8292): the
  ES256 signature under `k` (with `cryptography`), `aud` equal to the
  request's origin, `exp` in the future and at most 24 h ahead, `sub` a
  `mailto:` or `https:` URI, and `k` the expected public key;
- the RFC 8030 headers (`TTL`, `Content-Encoding: aes128gcm`, `Urgency`,
  optional `Topic`);
- the body, decrypted with `http_ece` (the reference RFC 8188/8291
  implementation pywebpush uses) under the subscription's private key and
  auth secret.

Modes:

  serve --cert C --key K --config J   HTTPS on 127.0.0.1, an ephemeral port.
      J: {"vapid_public": b64url, "subscriptions": {NAME: {"private": b64url,
      "auth": b64url, "answers": [{"status": 201, "retry_after": "1"}, ...]}}}
      A POST to /push/NAME gets the n-th answer (the last one repeats).
      Prints `PORT <n>`, then one JSON line per request: {"sub", "n", "t"
      (unix seconds, float), "status", "peer_port" (the client's TCP port:
      one per connection), "vapid" ("ok" or why not),
      "headers" (the RFC 8030 ones), "plaintext" (or null), "error"}.

  decrypt --private P --auth A --vapid-public V --origin O
      Reads one whole HTTP/1.1 request from stdin, checks and decrypts it
      as `serve` does, prints the same JSON line.
"""

import argparse
import base64
import http.server
import json
import ssl
import sys
import threading
import time

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def check_vapid(authorization, origin, vapid_public):
    """`ok`, or why the header is not a valid VAPID authorization."""
    if not authorization or not authorization.startswith("vapid "):
        return "no vapid authorization"
    params = {}
    for part in authorization[len("vapid "):].split(","):
        name, _, value = part.strip().partition("=")
        params[name] = value
    token, key = params.get("t"), params.get("k")
    if not token or not key:
        return "missing t or k"
    if key != vapid_public:
        return "k is not the expected public key"
    try:
        header_b64, claims_b64, sig_b64 = token.split(".")
        header = json.loads(b64d(header_b64))
        claims = json.loads(b64d(claims_b64))
        sig = b64d(sig_b64)
    except ValueError as e:
        return f"malformed JWT: {e}"
    if header.get("alg") != "ES256":
        return "alg is not ES256"
    if len(sig) != 64:
        return "signature is not 64 bytes"
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64d(key))
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    try:
        public.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return "bad signature"
    if claims.get("aud") != origin:
        return f"aud {claims.get('aud')!r} is not {origin!r}"
    now = time.time()
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= now or exp > now + 24 * 3600:
        return f"exp {exp!r} not within 24 h ahead"
    sub = claims.get("sub", "")
    if not (sub.startswith("mailto:") or sub.startswith("https:")):
        return "sub is not mailto: or https:"
    return "ok"


def receiver_key(private_b64):
    return ec.derive_private_key(int.from_bytes(b64d(private_b64), "big"), ec.SECP256R1())


def examine(headers, body, sub, origin, vapid_public):
    """The record of one request: VAPID verdict, headers, plaintext."""
    record = {
        "vapid": check_vapid(headers.get("authorization"), origin, vapid_public),
        "headers": {k: headers.get(k.lower()) for k in ("TTL", "Content-Encoding", "Urgency", "Topic")},
        "plaintext": None,
        "error": None,
    }
    try:
        plain = http_ece.decrypt(
            body,
            private_key=receiver_key(sub["private"]),
            auth_secret=b64d(sub["auth"]),
            version="aes128gcm",
        )
        record["plaintext"] = plain.decode("utf-8")
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        record["error"] = f"decrypt: {type(e).__name__}: {e}"
    return record


def serve(args):
    with open(args.config) as f:
        config = json.load(f)
    subs = config["subscriptions"]
    counts = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            t = time.time()
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            name = self.path.rsplit("/", 1)[-1]
            sub = subs.get(name)
            if sub is None:
                self.answer(404, None)
                return
            with lock:
                n = counts.get(name, 0)
                counts[name] = n + 1
            answers = sub["answers"]
            answer = answers[min(n, len(answers) - 1)]
            origin = f"https://{self.headers.get('Host')}"
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = examine(headers, body, sub, origin, config["vapid_public"])
            record.update({
                "sub": name,
                "n": n,
                "t": t,
                "status": answer["status"],
                "peer_port": self.client_address[1],
            })
            print(json.dumps(record), flush=True)
            self.answer(answer["status"], answer.get("retry_after"))

        def answer(self, status, retry_after):
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"PORT {server.server_address[1]}", flush=True)
    # The test closes stdin (or dies) when done: stop then.
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


def decrypt(args):
    raw = sys.stdin.buffer.read()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("ascii").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "-1"))
    sub = {"private": args.private, "auth": args.auth}
    record = examine(headers, body, sub, args.origin, args.vapid_public)
    record["request_line"] = lines[0]
    record["host"] = headers.get("host")
    record["length_ok"] = length == len(body)
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser()
    modes = parser.add_subparsers(dest="mode", required=True)
    s = modes.add_parser("serve")
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--config", required=True)
    d = modes.add_parser("decrypt")
    d.add_argument("--private", required=True)
    d.add_argument("--auth", required=True)
    d.add_argument("--vapid-public", required=True)
    d.add_argument("--origin", required=True)
    args = parser.parse_args()
    serve(args) if args.mode == "serve" else decrypt(args)


if __name__ == "__main__":
    main()
