"""A CrewAI task's human feedback, recorded (``Task(human_input=True)``; QA qa-new13b S3).

CrewAI asks a human for feedback on a task's answer through its human-input provider
(``crewai.core.providers.human_input``: ``get_provider`` / ``set_provider``, a
``ContextVar``). The provider hands each non-empty answer to the agent through its
executor context's ``_format_feedback_message(feedback)`` (part of CrewAI's
``ExecutorContext`` protocol), then runs the agent again. :func:`hear_human_input`
wraps the provider in force when a :func:`~icore.integrations.crewai.recording` block
starts (the application's own, or CrewAI's default terminal prompt): every call is
passed on to it unchanged; only the context it is given notes each feedback on its way
to the agent. Each becomes one ``instruction`` line of agent ``human`` to the task's
agent (``human_input: true``, the task's description, ``round``: 1 for the first
feedback on the task's answer), in run order: the actions it leads to follow it, so
they are not unprompted (icore Sec. 3: a human's message in G; not an approval of a
protected action). An empty answer (the human accepts the result) reaches the agent
as nothing and is not recorded. The block's end puts the previous provider back.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from icore.integrations import RunRecorder

HUMAN = "human"
"""The agent a human's feedback is recorded as (the declaration's human)."""

Hear = Callable[[Any, str, int], None]
"""Notes one feedback: (the executor context, the text, its round for this answer)."""


class _Heard:
    """The executor context a provider is handed: every attribute is the executor's.

    ``_format_feedback_message`` notes the feedback first; setting an attribute sets it
    on the executor (``ask_for_human_input = False``); ``isinstance`` sees its class.
    """

    __slots__ = ("_ctx", "_hear", "_rounds")

    def __init__(self, ctx: Any, hear: Hear) -> None:
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "_hear", hear)
        object.__setattr__(self, "_rounds", itertools.count(1))

    @property  # type: ignore[misc]
    def __class__(self) -> type[Any]:
        # a provider checking isinstance(context, AgentExecutor) still finds it one
        return type(self._ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._ctx, name, value)

    def _format_feedback_message(self, feedback: str) -> Any:
        self._hear(self._ctx, feedback, next(self._rounds))
        return self._ctx._format_feedback_message(feedback)


class HeardProvider:
    """A CrewAI human-input provider passing every call to ``inner``, noting feedback.

    Args:
        inner: the provider in force before (the application's, or CrewAI's default).
        hear: notes each feedback the human gave (see :data:`Hear`).
    """

    def __init__(self, inner: Any, hear: Hear) -> None:
        self.inner = inner
        self._hear = hear

    def setup_messages(self, context: Any) -> bool:
        """``inner.setup_messages`` (CrewAI's protocol)."""
        return bool(self.inner.setup_messages(context))

    def post_setup_messages(self, context: Any) -> None:
        """``inner.post_setup_messages`` (CrewAI's protocol)."""
        self.inner.post_setup_messages(context)

    def handle_feedback(self, formatted_answer: Any, context: Any) -> Any:
        """``inner.handle_feedback`` with a context that notes each feedback."""
        return self.inner.handle_feedback(formatted_answer, _Heard(context, self._hear))

    async def handle_feedback_async(self, formatted_answer: Any, context: Any) -> Any:
        """``inner.handle_feedback_async`` with a context that notes each feedback."""
        return await self.inner.handle_feedback_async(formatted_answer,
                                                      _Heard(context, self._hear))

    def __getattr__(self, name: str) -> Any:  # anything else the provider offers
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _recorder_of(rec: RunRecorder, active: Callable[[], RunRecorder | None]) -> Hear:
    """Write each feedback into ``rec`` when the run is ``rec``'s (not a nested block's)."""
    def hear(ctx: Any, feedback: str, n: int) -> None:
        owner = active()
        if owner is not None and owner is not rec:
            return  # an inner recording block records it
        agent = getattr(getattr(ctx, "agent", None), "role", None) or "agent"
        task = getattr(getattr(ctx, "task", None), "description", None)
        rec.add(HUMAN, "instruction", feedback, to=str(agent), human_input=True,
                crewai_task=str(task) if task else None, round=n)

    return hear


@contextmanager
def hear_human_input(rec: RunRecorder, active: Callable[[], RunRecorder | None]
                     ) -> Iterator[None]:
    """Inside the block, CrewAI's human-input provider in this context notes feedback.

    Does nothing on a CrewAI without ``crewai.core.providers.human_input``.
    """
    try:
        from crewai.core.providers.human_input import (
            SyncHumanInputProvider,
            reset_provider,
            set_provider,
        )
    except ImportError:  # pragma: no cover - an older CrewAI: nothing to hear
        yield
        return
    wrapper = HeardProvider(None, _recorder_of(rec, active))
    token = set_provider(wrapper)  # type: ignore[arg-type]
    before = token.old_value
    wrapper.inner = SyncHumanInputProvider() if before is token.MISSING or before is None \
        else before  # the application's provider is kept, never replaced
    try:
        yield
    finally:
        reset_provider(token)


__all__ = ["HUMAN", "HeardProvider", "hear_human_input"]
