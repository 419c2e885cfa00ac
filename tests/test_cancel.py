"""Cancellation reaches the socket: dispose or a timeout closes a stalled HTTP stream at once.

A loopback server sends the response head and the first event of a turn, framed as the wire's
first route frames it (every registered wire, read by the public source of its framing), then
goes silent while it watches its end of the connection. Every case checks the server saw the
connection close, the client socket closed, and no reading thread outlived the dispose. The
bounds (``BOUND`` seconds) are generous so a loaded machine never fails them; a close that
waits for the silence to end (a read timeout, or the server giving up) exceeds them by far.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import reactivex
from reactivex import Observable
from reactivex import operators as ops
from reactivex.scheduler import NewThreadScheduler, ThreadPoolScheduler

import rxtoolcalls as rt
from rxtoolcalls.serve import ReplayServer
from rxtoolcalls.wires import lookup, names
from tests.helpers import extra, load_fixture
from tests.wire_builders import case, source_of

# Its outcome may depend on the JSON parser: run again with the fast extra.
pytestmark = pytest.mark.json_parser

openai = pytest.importorskip("openai", reason=extra("openai"))
httpx = pytest.importorskip("httpx", reason=extra("test"))

BOUND = 5.0  # seconds; a fixed close takes milliseconds (measured: under 0.01 s)
SETTLE = 0.2  # seconds to let the reader block in recv: the silence a timeout exists for
SILENCE = 60.0  # seconds the server would stay silent if nobody closed the connection


def first_frame(wire: str) -> tuple[str, bytes]:
    """The media type of ``wire``'s first route, and the first event of a turn in its framing."""
    framing = lookup(wire).routes[0].framing
    first = case(wire).turn((), [("call_1", "get_weather", ['{"city": "Paris"}'])])[0]
    return framing.media_type, framing.frame(first)


class StallingServer:
    """Answers one request with one event of ``wire``, then stalls until the client closes.

    ``closed`` is set when the server's ``recv`` returns ``b""`` or the connection is reset;
    leaving the ``with`` block ends the stall whatever happened, so the thread always stops.
    """

    def __init__(self, wire: str = "chat") -> None:
        self.wire = wire
        self._media_type, self._event = first_frame(wire)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(BOUND)
        port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.sent = threading.Event()
        self.closed = threading.Event()
        self.close_seconds: float | None = None
        self._sent_at = 0.0
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="stalling-server", daemon=True)

    def __enter__(self) -> StallingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._thread.join(BOUND)
        self._listener.close()

    def _serve(self) -> None:
        try:
            connection, _ = self._listener.accept()
        except OSError:
            return
        with connection:
            self._read_request(connection)
            event = self._event
            connection.sendall(
                f"HTTP/1.1 200 OK\r\ncontent-type: {self._media_type}\r\n".encode()
                + b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
                + f"{len(event):x}\r\n".encode()
                + event
                + b"\r\n"
            )
            self._sent_at = time.monotonic()
            self.sent.set()
            self._stall(connection)

    def _read_request(self, connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            body += connection.recv(65536)

    def _stall(self, connection: socket.socket) -> None:
        connection.settimeout(0.02)
        deadline = time.monotonic() + SILENCE
        while not self._release.is_set() and time.monotonic() < deadline:
            try:
                received = connection.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                received = b""
            if not received:
                self.close_seconds = time.monotonic() - self._sent_at
                self.closed.set()
                return


def new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since ``before`` still alive after up to ``BOUND`` seconds."""
    deadline = time.monotonic() + BOUND
    for thread in set(threading.enumerate()) - before:
        if thread.name != "stalling-server":
            thread.join(max(0.0, deadline - time.monotonic()))
    return [
        t
        for t in set(threading.enumerate()) - before
        if t.is_alive() and t.name != "stalling-server"
    ]


def socket_of(response: Any) -> socket.socket:
    found = response.extensions["network_stream"].get_extra_info("socket")
    assert isinstance(found, socket.socket)
    return found


@contextlib.contextmanager
def sdk_stream(server: StallingServer) -> Iterator[tuple[Observable[Any], Any]]:
    """``from_openai_stream`` over a real sync SDK stream, and its HTTP response."""
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    try:
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        yield rt.from_openai_stream(stream), stream.response
    finally:
        client.close()


@contextlib.contextmanager
def httpx_response(server: StallingServer) -> Iterator[tuple[Observable[Any], Any]]:
    """The wire's source (``from_sse``, ``from_eventstream``) given an httpx response itself,
    with no read timeout at all."""
    body = {"model": "m", "messages": [], "stream": True}
    with (
        httpx.Client(timeout=None) as client,
        client.stream("POST", f"{server.base_url}/stream", json=body) as response,
    ):
        yield source_of(server.wire)(response), response


Opener = Callable[[StallingServer], contextlib.AbstractContextManager[tuple[Observable[Any], Any]]]
# The OpenAI SDK (a Chat stream), and an httpx response on every wire.
OPENERS = [
    pytest.param(sdk_stream, "chat", id="openai-sdk"),
    *(pytest.param(httpx_response, wire, id=f"httpx-{wire}") for wire in names()),
]


def assert_connection_freed(
    server: StallingServer,
    response: Any,
    client_socket: Any,
    before: set[threading.Thread],
    pool: ThreadPoolScheduler | None = None,
) -> None:
    assert server.closed.wait(BOUND), "the server never saw the connection close"
    if pool is not None:
        pool.executor.shutdown(wait=False)  # idle workers leave; one still reading would not
    assert new_threads(before) == []
    assert response.is_closed
    assert client_socket.fileno() == -1


@pytest.mark.parametrize("through", [None, "assemble", "lifecycle", "fields"])
@pytest.mark.parametrize(("opener", "wire"), OPENERS)
def test_dispose_on_a_new_thread_closes_the_connection(
    opener: Opener, wire: str, through: str | None
) -> None:
    # Through an operator too: assemble() folds in its own stage, lifecycle() and fields() in
    # lift's; each holds the source's subscription, and disposing the turn must reach the socket.
    before = set(threading.enumerate())
    got = threading.Event()
    notes: list[str] = []
    with StallingServer(wire) as server, opener(server) as (chunks, response):
        client_socket = socket_of(response)
        seen = chunks.pipe(ops.do_action(lambda _: got.set()))
        if through is not None:
            seen = seen.pipe(getattr(rt, through)())
        subscription = seen.subscribe(
            lambda _: None,
            lambda _: notes.append("error"),
            lambda: notes.append("completed"),
            scheduler=NewThreadScheduler(),
        )
        assert got.wait(BOUND)
        time.sleep(SETTLE)
        subscription.dispose()
        assert_connection_freed(server, response, client_socket, before)
    assert notes == []


@pytest.mark.parametrize(("opener", "wire"), OPENERS)
def test_dispose_under_subscribe_on_a_pool_closes_the_connection(opener: Opener, wire: str) -> None:
    # subscribe_on disposes through the pool's scheduler: it must not wait behind the read.
    before = set(threading.enumerate())
    pool = ThreadPoolScheduler(2)
    got = threading.Event()
    with StallingServer(wire) as server, opener(server) as (chunks, response):
        client_socket = socket_of(response)
        subscription = chunks.pipe(ops.subscribe_on(pool)).subscribe(lambda _: got.set())
        assert got.wait(BOUND)
        time.sleep(SETTLE)
        subscription.dispose()
        assert_connection_freed(server, response, client_socket, before, pool)


@pytest.mark.parametrize(("opener", "wire"), OPENERS)
def test_typed_timeout_returns_from_subscribe_and_closes(opener: Opener, wire: str) -> None:
    # The README's pattern, subscribed on the calling thread (here a helper, to bound it).
    before = set(threading.enumerate())
    errors: list[Exception] = []
    returned = threading.Event()
    received: list[Any] = []
    stalled = reactivex.throw(rt.StreamInterruptedError(f"no chunk for {SETTLE} s"))
    with StallingServer(wire) as server, opener(server) as (chunks, response):
        client_socket = socket_of(response)

        def subscribe() -> None:
            chunks.pipe(
                ops.do_action(received.append), ops.timeout(SETTLE, other=stalled), rt.assemble()
            ).subscribe(on_error=errors.append)
            returned.set()

        caller = threading.Thread(target=subscribe, name="caller")
        caller.start()
        assert returned.wait(BOUND), "subscribe() waited for the silent server"
        assert_connection_freed(server, response, client_socket, before)
    assert len(received) == 1
    assert len(errors) == 1
    assert isinstance(errors[0], rt.StreamInterruptedError)


@pytest.mark.parametrize(("opener", "wire"), OPENERS)
def test_take_until_from_another_thread_on_run(opener: Opener, wire: str) -> None:
    # .run() gives a scheduler: the read runs on a thread of its own, stopped from the caller's.
    before = set(threading.enumerate())
    abort: reactivex.subject.Subject[None] = reactivex.subject.Subject()
    with StallingServer(wire) as server, opener(server) as (chunks, response):
        client_socket = socket_of(response)
        got = threading.Event()

        def abort_once_blocked() -> None:
            if got.wait(BOUND):  # the first chunk is read: the reader blocks in recv next
                time.sleep(SETTLE)
            abort.on_next(None)

        threading.Thread(target=abort_once_blocked).start()
        received = chunks.pipe(
            ops.do_action(lambda _: got.set()), ops.take_until(abort), ops.to_list()
        ).run()
        assert_connection_freed(server, response, client_socket, before)
    assert len(received) == 1


def test_async_sdk_dispose_and_timeout_close_the_connection() -> None:
    async def case(dispose: bool) -> tuple[bool, bool, list[Exception]]:
        errors: list[Exception] = []
        with StallingServer() as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            stream = await client.chat.completions.create(model="m", messages=[], stream=True)
            got = asyncio.Event()
            chunks = rt.from_async_openai_stream(stream).pipe(ops.do_action(lambda _: got.set()))
            if not dispose:
                stalled = reactivex.throw(rt.StreamInterruptedError(f"no chunk for {SETTLE} s"))
                chunks = chunks.pipe(ops.timeout(SETTLE, other=stalled))
            subscription = chunks.subscribe(on_error=errors.append)
            await asyncio.wait_for(got.wait(), BOUND)
            if dispose:
                await asyncio.sleep(SETTLE)
                subscription.dispose()
            deadline = time.monotonic() + BOUND
            while not server.closed.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await client.close()
            return server.closed.is_set(), stream.response.is_closed, errors

    assert asyncio.run(case(dispose=True)) == (True, True, [])
    closed, response_closed, errors = asyncio.run(case(dispose=False))
    assert (closed, response_closed) == (True, True)
    assert len(errors) == 1
    assert isinstance(errors[0], rt.StreamInterruptedError)


@pytest.mark.parametrize("wire", names())
def test_async_httpx_response_dispose_closes_it(wire: str) -> None:
    async def stalled() -> tuple[bool, bool, list[str]]:
        notes: list[str] = []
        body = {"model": "m", "messages": [], "stream": True}
        with StallingServer(wire) as server:
            async with (
                httpx.AsyncClient(timeout=None) as client,
                client.stream("POST", f"{server.base_url}/stream", json=body) as response,
            ):
                got = asyncio.Event()
                subscription = source_of(wire)(response).subscribe(
                    lambda _: got.set(),
                    lambda _: notes.append("error"),
                    lambda: notes.append("completed"),
                )
                await asyncio.wait_for(got.wait(), BOUND)
                await asyncio.sleep(SETTLE)
                subscription.dispose()
                deadline = time.monotonic() + BOUND
                while not (server.closed.is_set() and response.is_closed):
                    if time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.01)
                return server.closed.is_set(), response.is_closed, notes

    assert asyncio.run(stalled()) == (True, True, [])


# -- the paths that do not cancel keep their behaviour --------------------------------------


def test_from_sse_reads_a_whole_httpx_response_and_closes_it() -> None:
    recorded = load_fixture("openai__parallel_tool_calls")
    body = {"model": "m", "messages": [], "stream": True}
    with (
        ReplayServer([recorded]) as server,
        httpx.Client() as client,
        client.stream("POST", f"{server.base_url}/chat/completions", json=body) as response,
    ):
        on_this_thread = rt.from_sse(response).pipe(ops.to_list())
        chunks: list[Any] = []
        on_this_thread.subscribe(chunks.extend)
        assert response.is_closed
    assert chunks == recorded


def test_from_sse_reads_a_whole_async_httpx_response() -> None:
    recorded = load_fixture("openai__parallel_tool_calls")

    async def main(base_url: str) -> tuple[rt.AssistantTurn, bool]:
        body = {"model": "m", "messages": [], "stream": True}
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", f"{base_url}/chat/completions", json=body) as response,
        ):
            turn: rt.AssistantTurn = await rt.from_sse(response).pipe(rt.assemble())
            return turn, response.is_closed

    with ReplayServer([recorded]) as server:
        turn, closed = asyncio.run(main(server.base_url))
    assert [c.name for c in turn.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    assert closed


class PooledResponse:
    """A response over one end of a socket pair: ``body`` pieces, then reads from the socket."""

    def __init__(self, sock: socket.socket, body: list[bytes], http_version: str) -> None:
        self.http_version = http_version
        self.extensions = {"network_stream": self}
        self.is_closed = False
        self._sock, self._body = sock, body

    def get_extra_info(self, info: str) -> Any:
        return self._sock if info == "socket" else None

    def iter_bytes(self) -> Iterator[bytes]:
        yield from self._body
        while piece := self._sock.recv(4096):
            yield piece

    def close(self) -> None:
        self.is_closed = True


def test_a_finished_read_never_shuts_the_socket_down() -> None:
    # Once read to the end, the connection may serve the pool's next request: hands off.
    ours, peer = socket.socketpair()
    with ours, peer:
        body = [b'data: {"choices": []}\n\n', b"data: [DONE]\n\n"]
        response = PooledResponse(ours, body, "HTTP/1.1")
        subscription = rt.from_sse(response).subscribe(scheduler=NewThreadScheduler())
        deadline = time.monotonic() + BOUND
        while not response.is_closed and time.monotonic() < deadline:
            time.sleep(0.01)
        subscription.dispose()
        ours.sendall(b"still open")
        assert peer.recv(64) == b"still open"


def test_http2_socket_is_left_to_its_other_streams() -> None:
    # One HTTP/2 socket carries other requests' streams: disposing closes the response only.
    ours, peer = socket.socketpair()
    with ours, peer:
        got = threading.Event()
        response = PooledResponse(ours, [b'data: {"choices": []}\n\n'], "HTTP/2")
        subscription = rt.from_sse(response).subscribe(
            lambda _: got.set(), scheduler=NewThreadScheduler()
        )
        assert got.wait(BOUND)
        subscription.dispose()
        assert response.is_closed
        ours.sendall(b"still open")
        assert peer.recv(64) == b"still open"
        peer.sendall(b": ping\n\n")  # lets the fake's blocked read return


def test_from_sse_refuses_what_it_cannot_read() -> None:
    with pytest.raises(TypeError, match="from_sse needs an httpx response"):
        rt.from_sse(42)  # type: ignore[arg-type]
