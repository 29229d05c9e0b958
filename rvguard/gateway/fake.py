"""A small fake OpenAI-compatible upstream (asyncio, loopback): for tests, benchmarks and dry runs.

It speaks just enough HTTP/1.1 (keep-alive, chunked SSE) for the gateway, httpx
and the load generator: ``POST /v1/completions`` and ``/v1/chat/completions``
(streamed or not), ``POST /tokenize`` (whitespace words; a prompt starting
``notokenize`` gets 404) and ``GET /v1/models``. Like vLLM with ``--max-num-seqs``, at
most ``slots`` requests generate at once (``None``: unlimited); each token takes
``token_delay`` seconds. The prompt (or the last message) chooses a fault:

* ``hang`` — read the request, never answer (until `FakeUpstream.close`);
* ``reset`` — abort the connection;
* ``500`` / ``400`` — answer that status;
* ``midfail`` — stream two chunks, then abort;
* ``miderror`` — (streamed) two chunks, then an ``{"error": …}`` chunk and ``[DONE]``;
* ``linesep`` — every token carries U+2028 and U+0085, left raw in the JSON (as a model may).

It counts what a test needs to see a leak: ``active`` (generating now),
``max_active``, ``served``, ``aborted`` (the client went away mid-stream),
``connections`` (accepted), ``tokenized`` (``/tokenize`` answers) and the
JSON ``bodies`` it received. `kill` drops every connection and stops
listening; `start` listens again on the same port (an upstream restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

__all__ = ["FakeUpstream"]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


class FakeUpstream:
    """See module doc. ``async with FakeUpstream() as up: up.url``."""

    def __init__(self, *, slots: int | None = None, token_delay: float = 0.0, model: str = "fake") -> None:
        self.slots = slots
        self.token_delay = token_delay
        self.model = model
        self.url = ""
        self.port = 0
        self.bodies: list[dict[str, Any]] = []
        self.active = self.max_active = self.served = self.aborted = self.connections = 0
        self.tokenized = 0
        self._sem = asyncio.Semaphore(slots) if slots else None
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()
        self._ids = 0

    async def __aenter__(self) -> FakeUpstream:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Listen on 127.0.0.1 (an ephemeral port the first time, the same port after)."""
        self._stop = asyncio.Event()
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def kill(self) -> None:
        """Stop listening and abort every open connection (a crashed upstream)."""
        self._stop.set()
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        if self._handlers:  # let each connection's handler see its abort and end (no task left pending)
            await asyncio.wait(list(self._handlers), timeout=5.0)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def close(self) -> None:
        """Release hanging requests and stop."""
        await self.kill()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while not self._stop.is_set():
                req = await _read_request(reader)
                if req is None:
                    break
                if not await self._answer(req, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._handlers.discard(task)
            writer.transport.abort()

    async def _answer(self, req: tuple[str, str, bytes], writer: asyncio.StreamWriter) -> bool:
        method, path, raw = req
        if method == "GET" and path == "/v1/models":
            data = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            return await _send_json(writer, 200, data)
        if method == "POST" and path == "/tokenize":
            return await self._tokenize(json.loads(raw or b"{}"), writer)
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return await _send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        body = json.loads(raw or b"{}")
        self.bodies.append(body)
        mode = str(body.get("prompt") or (body.get("messages") or [{}])[-1].get("content") or "")
        if mode.startswith("hang"):
            await self._stop.wait()
            return False
        if mode.startswith("reset"):
            writer.transport.abort()
            return False
        if mode[:3] in ("500", "400"):
            return await _send_json(writer, int(mode[:3]), {"error": {"message": "fake failure"}})
        return await self._generate(
            body, writer, midfail=mode.startswith("midfail"), miderror=mode.startswith("miderror")
        )

    async def _tokenize(self, body: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        """vLLM's ``/tokenize``, with whitespace words as tokens (chat: + 2 a message for the template)."""
        messages = body.get("messages") or []
        text = str(body.get("prompt") or " ".join(str(m.get("content") or "") for m in messages))
        if text.startswith("notokenize"):
            return await _send_json(writer, 404, {"error": {"message": "no tokenizer"}})
        count = len(text.split()) + 2 * len(messages)
        self.tokenized += 1
        return await _send_json(
            writer, 200, {"count": count, "max_model_len": 2048, "tokens": list(range(count))}
        )

    async def _generate(
        self, body: dict[str, Any], writer: asyncio.StreamWriter, *, midfail: bool, miderror: bool = False
    ) -> bool:
        async with self._sem if self._sem is not None else contextlib.nullcontext():
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                return await self._emit(body, writer, midfail=midfail, miderror=miderror)
            except ConnectionError:
                self.aborted += 1
                return False
            finally:
                self.active -= 1

    async def _emit(
        self, body: dict[str, Any], writer: asyncio.StreamWriter, *, midfail: bool, miderror: bool = False
    ) -> bool:
        self._ids += 1
        n = int(body.get("max_tokens") or 16)
        chat = "messages" in body
        head = {"id": f"fake-{self._ids}", "created": 1700000000, "model": body.get("model") or self.model}
        stream = bool(body.get("stream"))
        if stream:
            _start(writer, 200, "text/event-stream", chunked=True)
        parts: list[str] = []
        sep = "\u2028\x85" if str(body.get("prompt") or "").startswith("linesep") else ""  # Unicode line ends
        lp: list[dict[str, Any]] = []  # per token, in the endpoint's shape (when asked for)
        for i in range(n):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            if i == 2 and (midfail or (miderror and stream)):
                return await _fail_midway(writer, abort=midfail)
            if body.get("logprobs"):
                lp.append(_logprobs(f"t{i}{sep} ", -0.01 * (i + 1), sum(map(len, parts)), chat=chat))
            parts.append(f"t{i}{sep} ")
            if stream:
                choice = _token_choice(parts[-1], chat, last=i == n - 1, logprobs=lp[-1] if lp else None)
                data = json.dumps({**head, "choices": [choice]}, ensure_ascii=False)  # raw U+2028 stays raw
                await _chunk(writer, f"data: {data}\n\n".encode())
        usage = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}
        self.served += 1
        if not stream:
            text = "".join(parts)
            msg: dict[str, Any] = (
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            if lp:
                msg["logprobs"] = {k: [v for one in lp for v in one[k]] for k in lp[0]}
            return await _send_json(writer, 200, {**head, "choices": [{"index": 0, **msg}], "usage": usage})
        if (body.get("stream_options") or {}).get("include_usage"):
            await _chunk(writer, f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode())
        await _chunk(writer, b"data: [DONE]\n\n")
        await _chunk(writer, b"")
        return True


async def _fail_midway(writer: asyncio.StreamWriter, *, abort: bool) -> bool:
    """``midfail``: abort the connection; ``miderror``: vLLM's error chunk after the 200, then [DONE]."""
    if abort:
        writer.transport.abort()
        return False
    err = {"error": {"message": "fake engine error", "type": "InternalServerError", "code": 500}}
    await _chunk(writer, f"data: {json.dumps(err)}\n\n".encode())
    await _chunk(writer, b"data: [DONE]\n\n")
    await _chunk(writer, b"")
    return True


def _token_choice(token: str, chat: bool, *, last: bool, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    """One streamed token's ``choices[0]``."""
    choice: dict[str, Any] = (
        {"index": 0, "delta": {"content": token}} if chat else {"index": 0, "text": token}
    )
    choice["finish_reason"] = "length" if last else None
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return choice


def _logprobs(token: str, logprob: float, offset: int, *, chat: bool) -> dict[str, Any]:
    """One token's logprobs as a streamed chunk carries them (OpenAI / vLLM shapes)."""
    if chat:
        entry = {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
        return {"content": [entry]}
    return {
        "tokens": [token],
        "token_logprobs": [logprob],
        "top_logprobs": [{token: logprob}],
        "text_offset": [offset],
    }


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    raw = await reader.readexactly(length) if length else b""
    return method, path, raw


def _start(
    writer: asyncio.StreamWriter, status: int, ctype: str, *, chunked: bool = False, length: int = 0
) -> None:
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'X')}\r\nContent-Type: {ctype}\r\n{framing}\r\n\r\n"
    writer.write(head.encode())


async def _chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    if writer.is_closing():
        raise ConnectionResetError("the client went away")
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


async def _send_json(writer: asyncio.StreamWriter, status: int, data: object) -> bool:
    raw = json.dumps(data).encode()
    _start(writer, status, "application/json", length=len(raw))
    writer.write(raw)
    await writer.drain()
    return True
