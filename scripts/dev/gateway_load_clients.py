#!/usr/bin/env python3
"""Hostile and idle client connections for the gateway's load figures (docs/performance/gateway.md).

  gateway_load_clients.py slowloris HOST PORT N SECONDS
      N connections that each send a request header one byte every 2 s (reconnecting when the
      gateway closes them), for SECONDS.
  gateway_load_clients.py idle HOST PORT N SECONDS
      N keep-alive connections, each sends one GET /healthz, reads the reply, then stays open and
      silent for SECONDS; prints how many are open.
"""
import asyncio
import resource
import sys


async def slowloris(host, port, stop):
    header = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 10000
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            for b in header:
                if stop.is_set():
                    break
                writer.write(bytes([b]))
                await writer.drain()
                await asyncio.sleep(2)
                if reader.at_eof():
                    break
            writer.close()
        except (OSError, ConnectionError):
            await asyncio.sleep(0.5)


async def idle(host, port, opened):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    await reader.readuntil(b"ok")
    opened.append(writer)


async def main():
    mode, host, port, n, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if mode == "slowloris":
        stop = asyncio.Event()
        tasks = [asyncio.create_task(slowloris(host, port, stop)) for _ in range(n)]
        await asyncio.sleep(seconds)
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    else:
        opened = []
        sem = asyncio.Semaphore(200)

        async def one():
            async with sem:
                try:
                    await idle(host, port, opened)
                except (OSError, asyncio.IncompleteReadError) as e:
                    pass
        await asyncio.gather(*(one() for _ in range(n)))
        print(f"open idle connections: {len(opened)}", flush=True)
        await asyncio.sleep(seconds)
        for w in opened:
            w.close()


asyncio.run(main())
