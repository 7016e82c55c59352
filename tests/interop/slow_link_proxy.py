"""A slow link between hosts, as a TCP proxy: the kernel here has veth and namespaces but no netem.

Usage: slow_link_proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS STALL_EVERY_S STALL_S
Every byte waits DELAY_MS in each direction (so a request and its answer take 2 * DELAY_MS more),
and every STALL_EVERY_S seconds nothing moves for STALL_S seconds, in both directions of every
connection. Prints "ready" once listening. Runs until killed.
"""
import asyncio
import sys
import time


def main():
    host, port, target_host, target_port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    delay, every, stall = int(sys.argv[5]) / 1000.0, float(sys.argv[6]), float(sys.argv[7])
    started = time.monotonic()

    def stalled_for():
        """Seconds left of the stall under way, or 0."""
        t = (time.monotonic() - started) % (every + stall)
        return every + stall - t if t >= every else 0.0

    async def pipe(reader, writer):
        queue = asyncio.Queue()

        async def send():
            while True:
                due, data = await queue.get()
                if data is None:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                await asyncio.sleep(stalled_for())
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.ensure_future(send())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                queue.put_nowait((time.monotonic() + delay, data))
        except ConnectionError:
            pass
        queue.put_nowait((0.0, None))
        try:
            await sender
        except ConnectionError:
            pass

    async def serve(client_reader, client_writer):
        # The target may not listen yet (a worker started before rank 0): keep trying, as the
        # worker's own connect would, rather than hand it a connection that closes at once.
        for _ in range(600):
            try:
                server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    async def run():
        server = await asyncio.start_server(serve, host, port)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(run())


if __name__ == "__main__":
    main()
