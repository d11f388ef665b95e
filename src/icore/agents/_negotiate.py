"""Negotiating an endpoint's tool-call mode and fitting timeouts (planfence App. A.3).

:func:`negotiate` probes the modes of :data:`~icore.agents.MODES` once per endpoint
(cached per process); :func:`negotiated_backend` resolves a manifest backend;
:func:`fit_timeouts` sizes a live run's timeouts to the model. See
:mod:`icore.agents._llm`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from icore.agents._decide import ToolSpec
from icore.agents._llm_config import (
    CONSTRAINED,
    MAX_ATTEMPTS,
    MODES,
    TOOL_MODES,
    LLMConfig,
    LLMUnavailable,
    Negotiation,
)
from icore.agents._llm_wire import _GLOBAL_LOCK, _Wire, discover_slots, parse_reply

_PROBE_CODE = "k7-q2-x9"


_PROBE_TOOL = ToolSpec("report_code", "Report the code.", {
    "type": "object", "properties": {"code": {"type": "string", "enum": [_PROBE_CODE]}},
    "required": ["code"], "additionalProperties": False})


_NEGOTIATED: dict[tuple[str, str], Negotiation] = {}


def negotiate(config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep,
              use_cache: bool = True) -> Negotiation:
    """Find the tool-call mode and the slots of ``config``'s endpoint.

    Probes the modes of :data:`MODES` in order with one small request each (retrying
    infrastructure failures) and takes the first that works; ``config.tool_choice``
    other than ``negotiate`` is taken as is. Cached per ``(base_url, model)``.

    Raises:
        LLMUnavailable: no mode works (every probe failed), with the per-mode reasons.
    """
    key = (config.base_url, config.model)
    if use_cache:
        with _GLOBAL_LOCK:
            hit = _NEGOTIATED.get(key)
        if hit is not None and (config.tool_choice in ("negotiate", hit.mode)):
            return hit
    if config.slots is not None:
        slots, source = config.slots, "config"
    else:
        found, source = discover_slots(config.base_url, timeout_s=min(config.timeout_s, 5.0))
        slots, source = (found, source) if found else (1, "assumed")
    if config.tool_choice != "negotiate":
        neg = Negotiation(config.tool_choice, config.tool_choice in CONSTRAINED, slots,
                          source, ({"mode": config.tool_choice, "ok": True, "status": None,
                                    "note": "configured, not probed"},))
    else:
        neg = _probe_modes(config, slots, source, sleep)
    if use_cache:
        with _GLOBAL_LOCK:
            _NEGOTIATED[key] = neg
    return neg


def _probe_modes(config: LLMConfig, slots: int, source: str,
                 sleep: Callable[[float], None]) -> Negotiation:
    wire = _Wire(replace(config, max_tokens=min(config.max_tokens, 64)), sleep=sleep)
    probes: list[dict[str, Any]] = []
    for mode in MODES:
        # the response_format probe hides the code: only a constraining server finds it
        ask = ("Call the tool report_code." if mode in TOOL_MODES
               else "Reply with a JSON object.")
        msgs = [{"role": "system", "content": "You are a test client."},
                {"role": "user", "content": ask}]
        body = wire.body(mode, _PROBE_TOOL, msgs)
        rep, _ = wire.send(body, tries=2)  # a mode the server rejects fails fast
        if rep.infra and rep.status == 0:  # unreachable or slow: the full retries
            rep, _ = wire.send(body)
        if rep.infra:
            probes.append({"mode": mode, "ok": False, "status": rep.status,
                           "note": rep.infra})
            if rep.status == 0:  # unreachable after every retry: other modes cannot help
                break
            continue
        args, bad, _ = parse_reply(mode, _PROBE_TOOL, rep.body)
        if mode in TOOL_MODES:
            called = bad is None or not bad.startswith("exactly one call")
            if mode != "auto" and not called:
                probes.append({"mode": mode, "ok": False, "status": 200,
                               "note": f"server ignored tool_choice ({bad})"})
                continue
            probes.append({"mode": mode, "ok": True, "status": 200,
                           "note": "probe valid" if bad is None else f"probe: {bad}"})
            return Negotiation(mode, mode in CONSTRAINED and bad is None, slots, source,
                               tuple(probes))
        if args is None:
            probes.append({"mode": mode, "ok": False, "status": 200,
                           "note": f"schema not enforced ({bad})"})
            continue
        probes.append({"mode": mode, "ok": True, "status": 200, "note": "schema enforced"})
        return Negotiation(mode, True, slots, source, tuple(probes), verified=True)
    reason = ("the server is unreachable or does not answer in time"
              if probes and probes[-1]["status"] == 0
              else "no tool-call mode works on this server")
    raise LLMUnavailable(reason, base_url=config.base_url,
                         probes=[f"{p['mode']}: {p['note']}" for p in probes])


def negotiated_backend(backend: Mapping[str, Any], *,
                       sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """A manifest's resolved backend with the negotiated mode and slots filled in.

    For ``kind: llm`` the parent of a live run negotiates once, so the agent processes
    skip the probe and the run records which mode it used (``negotiation``).
    Other backends are returned unchanged.

    Raises:
        LLMUnavailable: see :func:`negotiate`.
        ValueError: no base URL or model is configured.
    """
    out = dict(backend)
    if out.get("kind") != "llm":
        return out
    cfg = LLMConfig.from_env(base_url=out.get("base_url"), model=out.get("model"),
                             api_key=out.get("api_key"), timeout_s=out.get("timeout_s"),
                             tool_choice=out.get("tool_choice"), slots=out.get("slots"))
    neg = negotiate(cfg, sleep=sleep)
    out.update(tool_choice=neg.mode, slots=neg.slots, negotiation=neg.to_dict(),
               base_url=cfg.base_url, model=cfg.model)
    return out


DECISIONS_PER_TASK = 6
"""Model decisions of one live workflow at most (shortlist, plan, replan, action, audit,
one spare)."""


def decision_budget_s(backend: Mapping[str, Any]) -> float:
    """Longest one model decision may take, in seconds.

    Two responses, each with its retries and backoff (0 for the scripted backend).
    """
    if backend.get("kind") != "llm":
        return 0.0
    cfg = LLMConfig.from_env(base_url=backend.get("base_url") or "http://unset",
                             model=backend.get("model") or "unset",
                             timeout_s=backend.get("timeout_s"))
    per_response = (cfg.retries + 1) * cfg.timeout_s + cfg.backoff_s * (2 ** cfg.retries)
    return float(MAX_ATTEMPTS * per_response)


def fit_timeouts(timeouts: Mapping[str, Any], backend: Mapping[str, Any], tasks: int
                 ) -> dict[str, Any]:
    """Step and run timeouts that leave a model its decision budget.

    ``step_s`` covers one decision (capped at 3600 s), ``run_s`` every decision of
    ``tasks`` workflows at the server's slots (capped at one day); neither is lowered.
    """
    out = dict(timeouts)
    budget = decision_budget_s(backend)
    if budget <= 0:
        return out
    slots = max(1, int(backend.get("slots") or 1))
    out["step_s"] = min(3600.0, max(float(out["step_s"]), budget + 30.0))
    need = DECISIONS_PER_TASK * budget * max(1, tasks) / slots
    out["run_s"] = min(86400.0, max(float(out["run_s"]), need))
    return out
