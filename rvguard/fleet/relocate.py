"""Relocation: a request resumes on another engine from its prompt plus the output streamed so far.

Theory of operation
-------------------
While a completion streams, the gateway keeps the prompt's token ids and
the ids of every token streamed so far (vLLM returns them when asked with
``return_token_ids``; the gateway asks, and strips them again unless the
client asked too). When the request must leave its engine (evicted, or the
engine died under it), the continuation is a ``/v1/completions`` request
whose prompt is those ids, prompt then output, with the token budget that
remains: a model conditions on token ids, so with greedy decoding
(temperature 0) the continuation is the uninterrupted run's remaining
output, token for token (tested on the real engine). Sampled decoding
resumes with the right context but not the same draw.

The client sees one stream (`Progress.outgoing`). After a move the text is
rendered from the output's token ids (the engine's ``/detokenize``), never
taken from the new engine's stream: an engine prints no text for its
prompt's tokens and decodes the prompt's last tokens as the prefix of its
first output, so a prompt ending mid-character or in stray bytes garbles the
continuation's text (seen on vLLM 0.32: the whole prompt printed again).
Every chunk carries the first engine's completion id, creation time and
model name; usage, when present, is the original prompt and the whole output.

Not relocatable (the request then fails once, as a dead engine's requests
do): chat completions (the continuation is a raw token prompt, which the
chat endpoint does not take), ``n`` or ``best_of`` above 1, ``echo``,
``suffix``, beam search, a prompt that is a list of prompts, and a request
that already finished. One whose prompt ids never arrived (the engine died
before its first chunk) is simply sent again as it was.

Pure: no I/O. `RelocationSlots` bounds concurrent relocations (k).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NotRelocatable", "Progress", "RelocationSlots", "continuation", "relocatable"]

_REFUSED = ("echo", "suffix", "use_beam_search")


class NotRelocatable(ValueError):
    """Why a request cannot resume elsewhere (it fails once instead)."""


@dataclass
class Progress:
    """What one completion has produced, and what its client has been sent (chunk by chunk).

    Feed every chunk from whichever engine (`feed`), then pass it to the
    client through `outgoing`.
    """

    prompt_ids: list[int] | None = None
    output_ids: list[int] = field(default_factory=list)
    text: str = ""  # what the client has been sent
    finished: bool = False
    identity: dict[str, Any] = field(default_factory=dict)  # id, created, model of the first engine
    carried: int = 0  # output tokens produced before the last relocation (set by `moved`)
    sent_ids: int = 0  # ``output_ids`` the client has (when it asked for them)
    relocated: bool = False  # once moved, text comes from `outgoing`'s ``rendered``

    def moved(self) -> None:
        """The request resumes elsewhere: what it produced so far is carried over."""
        self.carried = len(self.output_ids)
        self.relocated = True

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Take one parsed stream chunk (or a whole non-streamed response)."""
        for key in ("id", "created", "model"):
            if key in chunk and key not in self.identity:
                self.identity[key] = chunk[key]
        for choice in chunk.get("choices") or ():
            if self.prompt_ids is None and choice.get("prompt_token_ids") is not None:
                self.prompt_ids = list(choice["prompt_token_ids"])
            self.output_ids.extend(choice.get("token_ids") or ())
            if choice.get("finish_reason") is not None:
                self.finished = True

    def outgoing(
        self, chunk: dict[str, Any], *, keep_ids: bool, rendered: str | None = None
    ) -> dict[str, Any]:
        """``chunk`` (already fed) as the client gets it, in place, as one stream.

        Before any move the engine's text passes through. After one, the
        engine's text is not used (an engine garbles text for a prompt that
        ends mid-character): ``rendered`` must be the whole output's text
        (the engine's ``/detokenize`` of `output_ids`), and the client gets
        what it lacks, holding back trailing U+FFFD (bytes of no character
        yet), as the engine's own streaming does, to the end. The id, creation time and
        model are the first engine's; usage counts the original prompt and
        the whole output.
        """
        chunk.update(self.identity)
        for choice in chunk.get("choices") or ():
            choice.pop("prompt_token_ids", None)
            if self.relocated:
                if rendered is None:
                    raise ValueError("a relocated stream needs the rendered output text")
                whole = rendered.rstrip("\ufffd")
                choice["text"] = whole[len(self.text) :] if whole.startswith(self.text) else ""
            self.text += choice.get("text") or ""
            if keep_ids:
                choice["token_ids"] = self.output_ids[self.sent_ids :]
                self.sent_ids = len(self.output_ids)
            else:
                choice.pop("token_ids", None)
        usage = chunk.get("usage")
        if isinstance(usage, dict) and self.prompt_ids is not None:
            usage["prompt_tokens"] = len(self.prompt_ids)
            usage["completion_tokens"] = int(usage.get("completion_tokens") or 0) + self.carried
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return chunk


def relocatable(path: str, body: Mapping[str, Any]) -> str:
    """``""`` when a request on ``path`` with ``body`` may resume elsewhere, else why not."""
    if not path.endswith("/completions") or path.endswith("/chat/completions"):
        return "only /v1/completions requests resume elsewhere"
    for key in _REFUSED:
        if body.get(key):
            return f"{key} is set"
    for key in ("n", "best_of"):
        if (body.get(key) or 1) != 1:
            return f"{key} > 1"
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return "a list of prompts"
    return ""


def continuation(body: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
    """The request that resumes ``body`` from ``progress`` on another engine.

    A request that produced nothing yet (not even its prompt's ids) is sent
    again as it was.

    Raises:
        NotRelocatable: the request already finished, or has no budget left.
    """
    if progress.finished:
        raise NotRelocatable("the request already finished")
    out = dict(body)
    out["return_token_ids"] = True
    if progress.prompt_ids is None:
        return out
    done = progress.output_ids
    out["prompt"] = progress.prompt_ids + done
    if body.get("max_tokens") is not None:
        left = int(body["max_tokens"]) - len(done)
        if left <= 0:
            raise NotRelocatable("no token budget left")
        out["max_tokens"] = left
    if body.get("min_tokens"):
        out["min_tokens"] = max(int(body["min_tokens"]) - len(done), 0)
    return out


class RelocationSlots:
    """At most ``k`` relocations at once (the runbook's bound on concurrent moves)."""

    __slots__ = ("_busy", "k", "refused")

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        self.k = k
        self._busy = 0
        self.refused = 0

    @property
    def busy(self) -> int:
        """Relocations under way."""
        return self._busy

    def acquire(self) -> bool:
        """Take a slot; False (and counted) when k are already under way."""
        if self._busy >= self.k:
            self.refused += 1
            return False
        self._busy += 1
        return True

    def release(self) -> None:
        """Give a slot back."""
        if self._busy <= 0:
            raise RuntimeError("release() without acquire()")
        self._busy -= 1
