"""A small fake OpenAI-compatible upstream (asyncio, loopback): for tests, benchmarks and dry runs.

It speaks just enough HTTP/1.1 (keep-alive, chunked SSE) for the gateway, httpx
and the load generator: ``POST /v1/completions`` and ``/v1/chat/completions``
(streamed or not), ``POST /tokenize`` (whitespace words; a prompt starting
``notokenize`` gets 404) and ``GET /v1/models``. Like vLLM with ``--max-num-seqs``, at
most ``slots`` requests generate at once (``None``: unlimited); each token takes
``token_delay`` seconds. The prompt (or the last message) chooses a fault:

* ``hang`` — read the request, never answer (until `FakeUpstream.close`);
* ``reset`` — abort the connection;
* ``4xx`` / ``5xx`` (three digits, e.g. ``400``, ``404``, ``500``) — answer that status with an
  OpenAI-shaped error object;
* ``midfail`` — stream two chunks, then abort;
* ``miderror`` — (streamed) two chunks, then an ``{"error": …}`` chunk and ``[DONE]``;
* ``linesep`` — every token carries U+2028 and U+0085, left raw in the JSON (as a model may);
* ``tool``, ``reason``, ``refuse``, ``extra`` — what a chat answer carries (`_Plan`).

Token ids, as vLLM gives them for ``return_token_ids`` (a completion's first chunk carries
``prompt_token_ids``, every chunk its ``token_ids``): prompt words get ids below `OUT_BASE`,
output token i is ``t<i>`` with id ``OUT_BASE + i``. A prompt given as ids continues after
the output ids it ends with, so a continuation (`rvguard.fleet.relocate`) yields the rest of
the uninterrupted output, as greedy decoding does; ``POST /detokenize`` renders ids back.
With ``metrics=True``, ``GET /metrics`` exports vLLM's ``vllm:kv_cache_usage_perc`` (``kv_usage``
when set, else active / slots), ``vllm:num_requests_running`` (``running_reported`` when set: a
lying engine) and ``..._waiting``; its status is
``metrics_status`` (set it to 503 to make the telemetry fail); without, it answers 404.
``GET /health`` answers 200, or 503 once ``dead`` is set: a vLLM server whose engine process
died (``EngineDeadError``), which still lists its models but answers every completion 500.

Chunks have the real shape (``"object": "chat.completion.chunk"``, a role-only
first delta, ``finish_reason`` on the last). With ``api_key`` set it answers
401 to any request without ``Authorization: Bearer <api_key>``; it records
the ``headers`` of each completion request, beside its body.
It counts what a test needs to see a leak: ``active`` (generating now),
``max_active``, ``served``, ``aborted`` (the client went away mid-stream),
``connections`` (accepted), ``tokenized`` (``/tokenize`` answers) and the
JSON ``bodies`` it received. `kill` drops every connection and stops
listening; `start` listens again on the same port (an upstream restart);
`pause` makes it answer and stream nothing (a hung engine) until `resume`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import zlib
from typing import Any

__all__ = ["OUT_BASE", "FakeUpstream"]

#: the id of output token ``t0``; prompt words get ids below it
OUT_BASE = 100_000

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_HttpRequest = tuple[str, str, dict[str, str], bytes]  # method, path, headers (lower-case names), body


class FakeUpstream:
    """See module doc. ``async with FakeUpstream() as up: up.url``."""

    def __init__(
        self,
        *,
        slots: int | None = None,
        token_delay: float = 0.0,
        model: str = "fake",
        api_key: str | None = None,
        metrics: bool = False,
    ) -> None:
        self.slots = slots
        self.metrics = metrics
        self.metrics_status = 200
        self.kv_usage: float | None = None
        self.running_reported: int | None = None  # set: /metrics lies about the running count
        self.dead = False  # set: its engine died (completions 500, /health 503, /v1/models still 200)
        self.api_key = api_key
        self.headers: list[dict[str, str]] = []
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
        self._go = asyncio.Event()  # cleared by `pause`: nothing is answered or streamed
        self._go.set()
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
        self._go.set()  # a paused engine's handlers end too
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

    def pause(self) -> None:
        """Answer nothing and stream nothing more (a hung engine), until `resume`."""
        self._go.clear()

    def resume(self) -> None:
        """Answer and stream again."""
        self._go.set()

    async def _answer(self, req: _HttpRequest, writer: asyncio.StreamWriter) -> bool:
        await self._go.wait()
        method, path, headers, raw = req
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            err = {"message": "invalid API key", "type": "AuthenticationError", "param": None, "code": 401}
            return await _send_json(writer, 401, {"error": err})
        if method == "GET":
            return await self._get(path, writer)
        if method == "POST" and path == "/tokenize":
            return await self._tokenize(json.loads(raw or b"{}"), writer)
        if method == "POST" and path == "/detokenize":
            ids = json.loads(raw or b"{}").get("tokens") or []
            return await _send_json(writer, 200, {"prompt": "".join(map(_token_text, ids))})
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return await _send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        if self.dead:
            err = {"message": "EngineCore encountered an issue", "type": "InternalServerError", "code": 500}
            return await _send_json(writer, 500, {"error": err})
        body = json.loads(raw or b"{}")
        self.bodies.append(body)
        self.headers.append(headers)
        prompt = body.get("prompt")
        text = "" if isinstance(prompt, list) else prompt
        mode = str(text or (body.get("messages") or [{}])[-1].get("content") or "")
        if mode.startswith("hang"):
            await self._stop.wait()
            return False
        if mode.startswith("reset"):
            writer.transport.abort()
            return False
        if mode[:3].isdigit() and mode[0] in "45":
            status = int(mode[:3])
            err = {
                "message": f"fake failure {status}",
                "type": "FakeError",
                "param": "prompt",
                "code": status,
            }
            return await _send_json(writer, status, {"error": err})
        return await self._generate(body, writer, mode)

    async def _get(self, path: str, writer: asyncio.StreamWriter) -> bool:
        if path == "/v1/models":
            data = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            return await _send_json(writer, 200, data)
        if path == "/health":
            return await _send_json(writer, 503 if self.dead else 200, {})
        if path == "/metrics" and self.metrics:
            return await self._metrics(writer)
        return await _send_json(writer, 404, {"error": {"message": f"no route GET {path}"}})

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

    async def _metrics(self, writer: asyncio.StreamWriter) -> bool:
        if self.metrics_status != 200:
            return await _send_json(writer, self.metrics_status, {"error": {"message": "metrics off"}})
        kv = self.kv_usage if self.kv_usage is not None else (self.active / self.slots if self.slots else 0.0)
        labels = f'{{engine="0",model_name="{self.model}"}}'
        text = "".join(
            f"# TYPE {name} gauge\n{name}{labels} {value}\n"
            for name, value in (
                ("vllm:kv_cache_usage_perc", kv),
                (
                    "vllm:num_requests_running",
                    self.active if self.running_reported is None else self.running_reported,
                ),
                ("vllm:num_requests_waiting", 0),
            )
        ).encode()
        _start(writer, 200, "text/plain; version=0.0.4", length=len(text))
        writer.write(text)
        await writer.drain()
        return True

    async def _generate(self, body: dict[str, Any], writer: asyncio.StreamWriter, mode: str) -> bool:
        async with self._sem if self._sem is not None else contextlib.nullcontext():
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                return await self._emit(body, writer, mode)
            except ConnectionError:
                self.aborted += 1
                return False
            finally:
                self.active -= 1

    async def _emit(self, body: dict[str, Any], writer: asyncio.StreamWriter, mode: str) -> bool:
        self._ids += 1
        chat = "messages" in body
        head = {
            "id": f"fake-{self._ids}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": 1700000000,
            "model": body.get("model") or self.model,
        }
        plan = _Plan(body, mode, chat=chat)
        stream = bool(body.get("stream"))
        if not stream:
            for i in range(len(plan.steps)):
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
                if i == 2 and mode.startswith("midfail"):
                    return await _fail_midway(writer, abort=True)
            self.served += 1
            head["object"] = "chat.completion" if chat else "text_completion"
            return await _send_json(writer, 200, {**head, **plan.whole()})
        _start(writer, 200, "text/event-stream", chunked=True)
        for i, choice in enumerate(plan.chunks()):
            await self._go.wait()
            if self.token_delay and (i or not chat):
                await asyncio.sleep(self.token_delay)
            if i == 2 + chat and mode.startswith(("midfail", "miderror")):
                return await _fail_midway(writer, abort=mode.startswith("midfail"))
            data = json.dumps(
                {**head, **plan.top, "choices": [choice]},
                ensure_ascii=False,
                indent=1 if mode.startswith("multiline") else None,
            )  # U+2028 stays raw
            await _chunk(writer, _event(data))
        self.served += 1
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = json.dumps({**head, "choices": [], "usage": plan.usage()})
            await _chunk(writer, f"data: {usage}\n\n".encode())
        await _chunk(writer, b"data: [DONE]\n\n")
        await _chunk(writer, b"")
        return True


def _event(data: str) -> bytes:
    """One SSE event: each line of ``data`` its own ``data:`` line (several for ``multiline``, which
    an OpenAI-compatible server may send and the SSE spec joins with LF), and a comment before it."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return (": chunk\n" + lines + "\n").encode() if "\n" in data else f"data: {data}\n\n".encode()


class _Plan:
    """What the fake generates for one request, streamed (`chunks`) or whole (`whole`).

    Both are written out from the same plan, independently: ``whole`` is *not* a
    fold of ``chunks``, so a test comparing the gateway's folded answer with
    the fake's own non-streamed one compares two derivations.

    Modes (the prompt's or last message's start): ``tool`` — a tool call to the
    request's first tool (chat), arguments in three pieces; ``reason`` — half the
    tokens as ``reasoning_content`` (chat); ``refuse`` — a ``refusal`` (chat);
    ``extra`` — fields no spec names, in the delta/choice and at the top; a mode
    with ``stop`` in it finishes with ``stop`` (else ``length``, or ``tool_calls``);
    ``linesep`` — tokens carry raw U+2028 and U+0085; ``multiline`` — each streamed chunk's JSON
    spread over several ``data:`` lines of one event.
    """

    def __init__(self, body: dict[str, Any], mode: str, *, chat: bool) -> None:
        self.chat = chat
        self.mode = mode if chat else ("extra" if mode.startswith("extra") else mode)
        self.n = int(body.get("max_tokens") or 16)
        sep = "\u2028\x85" if mode.startswith("linesep") else ""
        prompt = body.get("prompt")
        self.offset = _continues_at(prompt) if isinstance(prompt, list) else 0
        self.prompt_ids = _prompt_ids(prompt) if body.get("return_token_ids") and not chat else None
        self.tokens = [f"t{i}{sep} " for i in range(self.offset, self.offset + self.n)]
        self.logprobs = bool(body.get("logprobs"))
        tools = body.get("tools") or [{"function": {"name": "lookup"}}]
        self.tool = str((tools[0].get("function") or {}).get("name") or "lookup")
        self.args = ['{"q": ', '"t0", ', '"n": 1}']
        self.top: dict[str, Any] = {"x_fake_top": "kept"} if self.mode.startswith("extra") else {}
        self.steps = self.args if self.mode.startswith("tool") and chat else self.tokens

    def _kind(self) -> str:
        for kind in ("tool", "reason", "refuse", "extra"):
            if self.mode.startswith(kind):
                return kind
        return "text"

    def _delta(self, i: int) -> dict[str, Any]:
        kind, token = self._kind(), self.tokens[i]
        if kind == "reason" and i < self.n // 2:
            return {"reasoning_content": token}
        if kind == "refuse":
            return {"refusal": token}
        if kind == "extra":
            return {"content": token, "x_fake_note": f"n{i}"}
        return {"content": token}

    def chunks(self) -> list[dict[str, Any]]:
        """``choices[0]`` of each streamed chunk (chat: a role-only chunk first, as vLLM sends)."""
        out: list[dict[str, Any]] = []
        if self.chat:
            out.append({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None})
        if self._kind() == "tool" and self.chat:
            function = {"name": self.tool, "arguments": ""}
            call = {"index": 0, "id": "call-fake-0", "type": "function", "function": function}
            out.append({"index": 0, "delta": {"tool_calls": [call]}})
            for piece in self.args:
                out.append(
                    {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}}
                )
        else:
            for i, token in enumerate(self.tokens):
                choice: dict[str, Any] = (
                    {"index": 0, "delta": self._delta(i)} if self.chat else {"index": 0, "text": token}
                )
                if self.logprobs:
                    choice["logprobs"] = _logprobs(
                        token, -0.01 * (i + 1), sum(map(len, self.tokens[:i])), chat=self.chat
                    )
                if self._kind() == "extra":
                    choice["x_fake_choice"] = {"seen": [i]}
                out.append(choice)
        for i, choice in enumerate(out):
            choice.setdefault("logprobs", None)
            choice["finish_reason"] = None
            if self.prompt_ids is not None:  # return_token_ids (completions)
                choice["token_ids"] = [OUT_BASE + self.offset + i]
                if i == 0:
                    choice["prompt_token_ids"] = self.prompt_ids
        out[-1]["finish_reason"] = self.finish()
        return out

    def finish(self) -> str:
        if self._kind() == "tool" and self.chat:
            return "tool_calls"
        return "stop" if "stop" in self.mode else "length"

    def usage(self) -> dict[str, int]:
        n = len(self.steps)
        return {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}

    def whole(self) -> dict[str, Any]:
        """The non-streamed answer's ``choices``, ``usage`` (and extra top fields), written out directly."""
        kind, text = self._kind(), "".join(self.tokens)
        choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": self.finish()}
        if self.logprobs:
            lp = [
                _logprobs(t, -0.01 * (i + 1), sum(map(len, self.tokens[:i])), chat=self.chat)
                for i, t in enumerate(self.tokens)
            ]
            choice["logprobs"] = {k: [v for one in lp for v in one[k]] for k in lp[0]}
        if not self.chat:
            choice["text"] = text
            if kind == "extra":
                choice["x_fake_choice"] = {"seen": list(range(self.n))}
            return {**self.top, "choices": [choice], "usage": self.usage()}
        half = "".join(self.tokens[: self.n // 2])
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if kind == "tool":
            call = {
                "id": "call-fake-0",
                "type": "function",
                "function": {"name": self.tool, "arguments": "".join(self.args)},
            }
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
        elif kind == "reason":
            message = {"role": "assistant", "content": text[len(half) :], "reasoning_content": half}
        elif kind == "refuse":
            message = {"role": "assistant", "content": "", "refusal": text}
        elif kind == "extra":
            message["x_fake_note"] = "".join(f"n{i}" for i in range(self.n))
            choice["x_fake_choice"] = {"seen": list(range(self.n))}
        choice["message"] = message
        return {**self.top, "choices": [choice], "usage": self.usage()}


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


async def _read_request(reader: asyncio.StreamReader) -> _HttpRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip():
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    raw = await reader.readexactly(length) if length else b""
    return method, path, headers, raw


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


def _prompt_ids(prompt: object) -> list[int]:
    """A prompt's token ids: ids as given, or one id below `OUT_BASE` per whitespace word."""
    if isinstance(prompt, list):
        return [int(x) for x in prompt]
    return [1 + zlib.crc32(w.encode()) % (OUT_BASE - 1) for w in str(prompt or "").split()]


def _continues_at(ids: list[Any]) -> int:
    """How many output ids (at or above `OUT_BASE`) a prompt of ids ends with: where to continue."""
    n = 0
    for x in reversed(ids):
        if not (isinstance(x, int) and x >= OUT_BASE):
            break
        n += 1
    return n


def _token_text(token: object) -> str:
    i = int(token) if isinstance(token, int) else 0
    return f"t{i - OUT_BASE} " if i >= OUT_BASE else f"w{i} "
