"""The endpoint settings of an LLM-backed team or attributor (design.md 4.5).

:class:`LLMSettings` names an OpenAI-compatible endpoint; the lab's LLM team
(:mod:`icore_lab.agents`) and the LLM failure attributor of :mod:`icore.adapters` build
their :class:`~icore.agents.LLMConfig` from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from icore.agents._llm import LLMConfig


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Endpoint settings.

    Attributes:
        base_url: OpenAI-compatible endpoint, e.g. ``http://127.0.0.1:8000/v1``.
        model: model name.
        api_key: key sent to the endpoint (local servers accept anything).
        timeout_s: request timeout, in seconds.
        temperature: sampling temperature.
        tool_choice: ``negotiate`` or a fixed mode (see :data:`icore.agents.MODES`).
        slots: requests the server serves at once (None: discover).
    """

    base_url: str
    model: str = "gpt-4o-mini"
    api_key: str = "not-needed"
    timeout_s: float = 30.0
    temperature: float = 0.0
    tool_choice: str = "negotiate"
    slots: int | None = None

    def to_config(self) -> LLMConfig:
        """The backend configuration (retries and backoff from the environment)."""
        base = LLMConfig.from_env(base_url=self.base_url, model=self.model,
                                  api_key=self.api_key, timeout_s=self.timeout_s,
                                  tool_choice=self.tool_choice, slots=self.slots)
        return replace(base, temperature=self.temperature)
