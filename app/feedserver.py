"""The HTTP server under ``--serve``: one asyncio loop on one thread, made to face any client.

* a connection limit below the process's descriptor limit: past it, connections wait in the
  kernel's backlog (nothing is accepted, no descriptor is taken) until one closes;
* a header timeout (the request line and headers must arrive within ``HEADER_SECONDS``) and a
  send timeout (a client that takes no byte for ``SEND_SECONDS`` is dropped); one request per
  connection (``Connection: close``), so no connection idles between requests;
* a bounded request (``MAX_REQUEST`` bytes of request line and headers; GET and HEAD only);
* bodies are shared immutable documents written in ``CHUNK`` pieces as the client reads them, so a
  client that never reads holds at most one chunk of its own;
* optional TLS (``ssl.SSLContext``) and basic authentication (``authorize``);
* every error is one line in the feed's log file (``FeedLog``), never on the terminal.

``route(path)`` returns ``(status, content type, body)`` and may block (it runs on one worker
thread beside the loop, one call at a time).
"""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import os
import resource
import socket
import tempfile
import threading
import time
from pathlib import Path

HEADER_SECONDS = 5.0
SEND_SECONDS = 10.0
MAX_REQUEST = 8192
CHUNK = 1 << 16
MAX_CONNECTIONS = 64

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}


def connection_limit(wanted: int = MAX_CONNECTIONS) -> int:
    """``wanted``, lowered so clients can never take more than half the descriptors still free
    (the other half is the session's: capture file, kernel cache, outputs)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 16
    return max(1, min(wanted, (soft - used) // 2))


class FeedLog:
    """One line per error, appended to ``dptop/feed-PID.log`` in the user's cache folder (or the
    temporary folder when that cannot be written); opened once at start, so a process out of
    descriptors can still log. Lines are dropped, never raised, if neither folder can be written."""

    def __init__(self):
        self.path, self._file = None, None
        for folder in (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dptop",
                       Path(tempfile.gettempdir())):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"dptop-feed-{os.getpid()}.log"
                self._file, self.path = open(path, "a", buffering=1, encoding="utf-8"), path
                break
            except OSError:
                continue
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        if self._file is None:
            return
        with self._lock:
            try:
                self._file.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(text.split())}\n")
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        if self._file is not None:
            with self._lock:
                self._file.close()
                self._file = None


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and message."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class HttpServer:
    """Binds ``host:port`` at once (an ``OSError`` names what failed); ``start`` serves on a
    daemon thread, ``close`` stops it and closes every connection."""

    def __init__(self, route, host: str, port: int, ssl_context=None, authorize=None,
                 max_connections: int = MAX_CONNECTIONS, log: FeedLog | None = None):
        self.route, self.ssl, self.authorize = route, ssl_context, authorize
        self.log = log or FeedLog()
        self.limit = connection_limit(max_connections)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(lambda loop, ctx: self.log.line(
            f"{ctx.get('message', '')} {describe(ctx['exception']) if 'exception' in ctx else ''}"))
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            self.sock.bind(address)
            self.sock.listen(128)
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            self.loop.close()
            raise
        self.host, self.port = host, self.sock.getsockname()[1]
        self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dptop-feed-worker")
        self.checker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dptop-feed-auth")
        self.open = 0
        self._room = asyncio.Event()
        self._task = self.loop.create_task(self._accept())
        self.thread = threading.Thread(target=self._serve, name="dptop-feed", daemon=True)

    def start(self) -> "HttpServer":
        self.thread.start()
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:  # every connection closed, every task ended, before the loop closes
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.close()

    async def _accept(self) -> None:
        while True:
            while self.open >= self.limit:  # the rest wait in the kernel's backlog
                self._room.clear()
                await self._room.wait()
            try:
                conn, _ = await self.loop.sock_accept(self.sock)
            except OSError as exc:  # descriptors out, a connection reset before accept: wait, retry
                self.log.line(f"accept: {describe(exc)}")
                await asyncio.sleep(0.5)
                continue
            self.open += 1
            self.loop.create_task(self._connection(conn))

    async def _connection(self, conn: socket.socket) -> None:
        writer = None
        try:
            reader = asyncio.StreamReader(limit=MAX_REQUEST, loop=self.loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=self.loop)
            transport, _ = await asyncio.wait_for(self.loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self.ssl, ssl_handshake_timeout=HEADER_SECONDS if self.ssl else None),
                HEADER_SECONDS)
            writer = asyncio.StreamWriter(transport, protocol, reader, self.loop)
            await self._exchange(reader, writer)
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # noqa: BLE001 - one line in the log, the connection closed
            self.log.line(f"connection: {describe(exc)}")
        finally:
            if writer is not None:
                writer.transport.abort()
            else:
                conn.close()
            self.open -= 1
            self._room.set()

    async def _exchange(self, reader, writer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_SECONDS)
        except asyncio.TimeoutError:
            return await self._send(writer, 408, "text/plain", b"request timeout\n", False)
        except asyncio.LimitOverrunError:
            return await self._send(writer, 431, "text/plain", b"request too large\n", False)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return await self._send(writer, 400, "text/plain", b"bad request\n", False)
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return await self._send(writer, 405, "text/plain", b"GET only\n", False)
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if self.authorize is not None:
            user, password = basic_credentials(headers.get("authorization", ""))
            if user is None or not await self.loop.run_in_executor(self.checker, self.authorize, user, password):
                return await self._send(writer, 401, "text/plain", b"unauthorized\n", method == "HEAD",
                                        ('WWW-Authenticate: Basic realm="dptop"',))
        code, ctype, body = await self.loop.run_in_executor(self.worker, self._route, target.split("?", 1)[0])
        await self._send(writer, code, ctype, body, method == "HEAD")

    def _route(self, path: str):
        try:
            return self.route(path)
        except Exception as exc:  # noqa: BLE001 - one line in the log, a 500 to the client
            self.log.line(f"{path}: {describe(exc)}")
            return 500, "text/plain", b"internal error (see the feed's log)\n"

    async def _send(self, writer, code: int, ctype: str, body: bytes, head_only: bool, extra=()) -> None:
        lines = [f"HTTP/1.1 {code} {REASONS.get(code, '')}", f"Content-Type: {ctype}",
                 f"Content-Length: {len(body)}", "Connection: close", *extra]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        view = memoryview(b"" if head_only else body)
        for at in range(0, len(view), CHUNK):
            writer.write(view[at:at + CHUNK])
            await asyncio.wait_for(writer.drain(), SEND_SECONDS)
        await asyncio.wait_for(writer.drain(), SEND_SECONDS)

    def close(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5.0)
        elif not self.loop.is_closed():
            self._task.cancel()
            self.loop.run_until_complete(asyncio.gather(self._task, return_exceptions=True))
            self.loop.close()
        self.sock.close()
        for pool in (self.worker, self.checker):
            pool.shutdown(wait=False, cancel_futures=True)
        self.log.close()


def basic_credentials(header: str) -> tuple[str | None, str]:
    """(user, password) of an ``Authorization: Basic`` header, or (None, "")."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "basic":
        return None, ""
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, ""
    return (user, password) if sep else (None, "")
