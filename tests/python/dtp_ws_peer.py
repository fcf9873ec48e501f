"""The Python `websockets` library as the other end of DTP over WebSocket
(subprotocol dtp.v1, binary messages), for the transport's real-counterpart
tests.

    dtp_ws_peer.py echo-server
        Serves ws://127.0.0.1:PORT/dtp, prints PORT, and echoes every binary
        message unchanged (a text message is refused with 1003). Runs until
        stdin closes.
    dtp_ws_peer.py client URL FILE
        Connects to URL offering dtp.v1, sends FILE's bytes as binary
        messages of varied sizes, and reads until the same bytes came back
        (the other end echoes). Prints 'ok N' or a one-line error; exit 0
        only if every byte came back unaltered and in order.
"""

import asyncio
import random
import sys

from websockets.asyncio.client import connect
from websockets.asyncio.server import serve


async def echo(ws):
    if ws.subprotocol != "dtp.v1":
        await ws.close(1002, "dtp.v1 required")
        return
    async for message in ws:
        if isinstance(message, str):
            await ws.close(1003, "binary only")
            return
        await ws.send(message)


async def echo_server():
    async with serve(echo, "127.0.0.1", 0, subprotocols=["dtp.v1"], max_size=1 << 22) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


async def client(url, path):
    data = open(path, "rb").read()
    rng = random.Random(7)
    async with connect(url, subprotocols=["dtp.v1"], max_size=1 << 22) as ws:
        if ws.subprotocol != "dtp.v1":
            print(f"error: subprotocol {ws.subprotocol!r}")
            return 1

        async def send():
            i = 0
            while i < len(data):
                n = rng.choice([1, 7, 100, 4096, 70000])
                await ws.send(data[i:i + n])
                i += n

        sender = asyncio.create_task(send())
        got = bytearray()
        while len(got) < len(data):
            message = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(message, str):
                print("error: a text message came back")
                return 1
            got += message
        await sender
        if bytes(got) != data:
            print("error: the bytes that came back differ")
            return 1
        print(f"ok {len(got)}")
        return 0


def main():
    if sys.argv[1:2] == ["echo-server"]:
        asyncio.run(echo_server())
    elif sys.argv[1:2] == ["client"] and len(sys.argv) == 4:
        sys.exit(asyncio.run(client(sys.argv[2], sys.argv[3])))
    else:
        print(__doc__)
        sys.exit(2)


main()
