"""The learner, asked under a deadline and off the event loop: it cannot stall the Guard.

Theory of operation
-------------------
A learner is untrusted code. The Guard asks it through a `BoundedLearner`,
which answers a `Proposal` by the deadline ``timeout`` whatever the learner
does; an overrun is a `learners.LearnerTimeout` (a learner that rejects:
the core rejects the surplus with ``learner-timeout``), and anything else a
learner raises or returns is a `learners.LearnerFailure` (`consult`).

* A synchronous learner runs in one daemon thread of its own, one question
  at a time (so a learner written for one caller stays correct). While the
  thread is still busy with a question that already overran, new questions
  are answered at once with a timeout rather than queued behind it, so a
  learner that never returns costs each later question nothing and holds
  no queue. The thread is a daemon: a hung learner cannot keep the process
  from exiting (it can keep its thread, which Python cannot kill).
* An ``async def propose`` runs on an event loop of its own, in one daemon
  thread, never on the Guard's: a coroutine that blocks (``time.sleep``, a
  synchronous HTTP client) stalls only its own loop. Its questions may
  overlap there; on overrun the question is cancelled (in the learner's
  loop) and abandoned, and while a question that overran has not ended
  (a blocked loop cannot even run the cancellation) new questions are
  answered at once with a timeout, as for a synchronous learner. A
  `asyncio.CancelledError` the learner raises itself is its failure; only a
  cancellation of the asking coroutine (its caller's, or the Guard's at
  shutdown) propagates.
* rvguard's own learners (`AdmitAll`, `RejectAll`, `RandomLearner`,
  `LSQLearner`, by exact type: O(1), no I/O) and, with ``timeout=None``,
  any synchronous learner are *inline*: asked synchronously with the
  arrival, at no thread hop, as before. ``timeout=None`` is the caller's
  statement that its learner is trusted to be quick.

Every learner sees `Request.read_only` (a deep read-only copy).

Cost: inline, one `consult`; otherwise one thread hop per question and O(1) memory beyond
the questions in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import queue
import threading
from typing import Any

from ..errors import SpecError
from ..events import Proposal
from .learners import OWN_LEARNERS, Learner, LearnerTimeout, LoadView, checked_proposal, consult, failure_from
from .request import Request

__all__ = ["DEFAULT_LEARNER_TIMEOUT", "BoundedLearner"]

#: seconds a learner may take to answer by default: small next to any deadline worth guarding
DEFAULT_LEARNER_TIMEOUT = 0.1


class _Question:
    """One question for the learner thread."""

    __slots__ = ("answer", "late", "request", "view")

    def __init__(self, request: Request, view: LoadView) -> None:
        self.request = request
        self.view = view
        self.answer: concurrent.futures.Future[Proposal] = concurrent.futures.Future()
        self.late = False  # its asker stopped waiting: the learner overran


class _Thread:
    """The daemon thread that asks a synchronous learner, one question at a time."""

    def __init__(self, learner: Learner) -> None:
        self._learner = learner
        self._questions: queue.SimpleQueue[_Question | None] = queue.SimpleQueue()
        self.current: _Question | None = None  # written by the thread, read by the loop
        threading.Thread(target=self._serve, name="rvguard-learner", daemon=True).start()

    def ask(self, request: Request, view: LoadView) -> _Question:
        question = _Question(request, view)
        self._questions.put(question)
        return question

    def close(self) -> None:
        self._questions.put(None)  # the thread ends after the question it is on

    def _serve(self) -> None:
        while (question := self._questions.get()) is not None:
            if not question.answer.set_running_or_notify_cancel():
                continue  # its asker gave up while it was queued
            self.current = question
            try:
                answer = consult(self._learner, question.request, question.view)
            except BaseException as exc:  # noqa: BLE001 - nothing a learner raises may end its thread
                answer = failure_from(exc)
            self.current = None
            question.answer.set_result(answer)


class _LoopThread:
    """The daemon thread running an ``async def propose`` learner's own event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.late: set[concurrent.futures.Future[object]] = set()  # overran, not yet ended there
        threading.Thread(target=self._serve, name="rvguard-async-learner", daemon=True).start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:  # stopped (`close`): cancel what is left, let it end, close the loop
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            if tasks:
                self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.close()

    def ask(self, propose: Any, request: Request, view: LoadView) -> _AsyncQuestion:
        """Start ``propose`` on the learner's loop."""
        ended: concurrent.futures.Future[object] = concurrent.futures.Future()

        async def run() -> None:
            try:
                value = await propose(request.read_only(), view)
            except BaseException as exc:  # noqa: BLE001 - the learner's own: passed to the asker
                ended.set_exception(exc)
            else:
                ended.set_result(value)

        return _AsyncQuestion(ended, asyncio.run_coroutine_threadsafe(run(), self.loop))

    def stuck(self) -> bool:
        """A question that overran has not ended yet (its loop is blocked, or it ignores cancellation)."""
        self.late = {f for f in self.late if not f.done()}
        return bool(self.late)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class _AsyncQuestion:
    """One question on the learner's loop: ``ended`` when its coroutine has; ``task`` to cancel it."""

    __slots__ = ("ended", "task")

    def __init__(self, ended: concurrent.futures.Future[object], task: concurrent.futures.Future[None]):
        self.ended = ended
        self.task = task


class BoundedLearner:
    """A learner asked within ``timeout`` seconds (module doc).

    Args:
        learner: the untrusted proposer.
        timeout: seconds an answer may take; ``None``: no limit, and a
            synchronous learner is asked inline.

    Raises:
        SpecError: ``timeout`` is neither ``None`` nor a positive finite number.
    """

    def __init__(self, learner: Learner, timeout: float | None = DEFAULT_LEARNER_TIMEOUT) -> None:
        if timeout is not None and not (isinstance(timeout, int | float) and 0 < timeout < math.inf):
            raise SpecError(
                f"learner_timeout must be a positive number of seconds or None, got {timeout!r}",
                field="learner_timeout",
                value=timeout,
            )
        self.learner = learner
        self.timeout = timeout
        self._async = inspect.iscoroutinefunction(getattr(learner, "propose", None))
        self.inline = type(learner) in OWN_LEARNERS or (timeout is None and not self._async)
        self._thread: _Thread | None = None
        self._loop: _LoopThread | None = None
        self.timeouts = 0

    def ask_now(self, request: Request, view: LoadView) -> Proposal:
        """The answer of an inline learner (`consult`)."""
        return consult(self.learner, request, view)

    async def ask(self, request: Request, view: LoadView) -> Proposal:
        """The learner's answer, or a `LearnerTimeout` by the deadline; never raises but the
        cancellation of the asking coroutine."""
        if self._async:
            return await self._ask_coroutine(request, view)
        thread = self._thread = self._thread or _Thread(self.learner)
        busy = thread.current
        if busy is not None and busy.late:
            return self._overrun("still busy with an earlier question that overran")
        question = thread.ask(request, view)
        answer = asyncio.wrap_future(question.answer)
        try:
            await asyncio.wait((answer,), timeout=self.timeout)
        finally:
            if not answer.done():
                answer.cancel()  # dequeued if not started; its answer, if any, is dropped
        if answer.cancelled():
            question.late = True
            return self._overrun(f"no answer within {self.timeout} s")
        return answer.result()

    async def _ask_coroutine(self, request: Request, view: LoadView) -> Proposal:
        """Ask an ``async def propose`` on its own loop, in its own thread (module doc)."""
        runner = self._loop = self._loop or _LoopThread()
        if runner.stuck():
            return self._overrun("still busy with an earlier question that overran")
        try:
            question = runner.ask(self.learner.propose, request, view)
        except Exception as exc:  # noqa: BLE001 - a learner failure is a learner decision
            return failure_from(exc)
        answer = asyncio.wrap_future(question.ended)
        answer.add_done_callback(_retrieve)
        await asyncio.wait((answer,), timeout=self.timeout)
        if not question.ended.done():
            question.task.cancel()  # cancels the coroutine in its own loop, when that loop runs
            runner.late.add(question.ended)
            return self._overrun(f"no answer within {self.timeout} s")
        error = question.ended.exception()
        if isinstance(error, asyncio.CancelledError):  # nobody here cancelled it: the learner's own doing
            return failure_from(asyncio.CancelledError("the learner's coroutine was cancelled"))
        return failure_from(error) if error is not None else checked_proposal(question.ended.result())

    def _overrun(self, why: str) -> LearnerTimeout:
        self.timeouts += 1
        return LearnerTimeout(reason=f"timeout: {why}")

    def close(self) -> None:
        """Let the learner's thread end (after the question it is on, if any), or its loop stop."""
        if self._thread is not None:
            self._thread.close()
            self._thread = None
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _retrieve(task: asyncio.Future[object]) -> None:
    """Mark an abandoned learner task's exception as seen (asyncio would log it)."""
    if not task.cancelled():
        task.exception()
