/**
 * A minimal keep-alive HTTP server for inside a sandbox, on port 8000: it answers each request
 * with one write (asyncio sets TCP_NODELAY), so neither a direct nor a proxied path waits on Nagle
 * and delayed ACKs. The command starts it in the background.
 */
export const KEEPALIVE_SERVER_ON_8000 = `cat > /tmp/srv.py <<'PY'
import asyncio
RESP = b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok'
async def handle(reader, writer):
    try:
        while True:
            await reader.readuntil(b'\\r\\n\\r\\n')
            writer.write(RESP)
            await writer.drain()
    except Exception:
        writer.close()
async def main():
    await (await asyncio.start_server(handle, '0.0.0.0', 8000)).serve_forever()
asyncio.run(main())
PY
nohup python3 /tmp/srv.py >/dev/null 2>&1 &`;
