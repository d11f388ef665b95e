"""PlanFence live runs: one OS process per agent over real owner services (issue 8).

planfence Sec. 5.2 and App. A.2-A.5, icore Sec. 4; see docs/live-runs.md.

* the run manifest (:class:`RunManifest`, :func:`load_manifest`, :func:`default_manifest`,
  :func:`manifest_from_dict`; errors: :class:`LiveManifestError`);
* the five-agent workflow templates (:data:`ROLES`, :data:`FAMILY_SPECS`,
  :data:`FAMILIES`, :data:`SEEDS_PER_FAMILY`, :func:`make_task`);
* the team (:class:`LiveTeam`): one ``python -m icore.live._agent_proc CONFIG`` process per
  agent, each with its own SQLite (or NATS) memory behind a mutual-TLS owner service,
  deciding through an :mod:`icore.agents` host policy (scripted or LLM);
* the coordinator (:func:`run_live`, :func:`run_policies`, :func:`arun_live`;
  :class:`LiveRunResult`), which records every step in iCORE (:class:`LiveLedger`;
  ``LiveAudit`` is its former name);
* the matched study (planfence App. A.5: :func:`run_matched`, :class:`MatchedResult`).

Layer: ``live`` sits between ``agents`` (the deciders it hosts) and ``adapters`` (the
OpenTelemetry export of a live run), so it imports records, memory, fence, net, state,
audit and agents only. Its HTML page is rendered by :mod:`icore.report`
(:func:`icore.report.write_live_report`, passed in as the ``reporter``).

The agent process imports only what it needs: nothing in this package front door loads
the agent process module, and ``icore.live._agent_proc`` imports no coordinator module.
"""

from typing import TYPE_CHECKING

from icore._extras import lazy_attributes

if TYPE_CHECKING:
    from icore.live._errors import AgentCrashed, LiveRunError, StepTimeout
    from icore.live._ledger import (
        AuditListener,
        LedgerListener,
        LiveAudit,
        LiveLedger,
        live_declaration,
    )
    from icore.live._matched import (
        TABLE_HEADER,
        MatchedResult,
        MatchedRow,
        matched_manifest,
        run_matched,
    )
    from icore.live._process_team import LiveTeam
    from icore.live._results import LiveRunResult, RunObserver, TaskResult
    from icore.live._run_manifest import (
        LiveAgentSpec,
        LiveManifestError,
        RunManifest,
        default_manifest,
        load_manifest,
        manifest_from_dict,
    )
    from icore.live._runner import Reporter, arun_live, run_live, run_policies
    from icore.live._workflow import (
        FAMILIES,
        FAMILY_SPECS,
        ROLES,
        SEEDS_PER_FAMILY,
        TaskSpec,
        make_task,
    )

_HOMES: dict[str, tuple[str, ...]] = {
    "icore.live._runner": ("Reporter", "arun_live", "run_live", "run_policies"),
    "icore.live._results": ("LiveRunResult", "RunObserver", "TaskResult"),
    "icore.live._ledger": (
        "AuditListener", "LedgerListener", "LiveAudit", "LiveLedger", "live_declaration",
    ),
    "icore.live._run_manifest": (
        "LiveAgentSpec", "LiveManifestError", "RunManifest", "default_manifest",
        "load_manifest", "manifest_from_dict",
    ),
    "icore.live._matched": (
        "TABLE_HEADER", "MatchedResult", "MatchedRow", "matched_manifest", "run_matched",
    ),
    "icore.live._errors": ("AgentCrashed", "LiveRunError", "StepTimeout"),
    "icore.live._process_team": ("LiveTeam",),
    "icore.live._workflow": (
        "FAMILIES", "FAMILY_SPECS", "ROLES", "SEEDS_PER_FAMILY", "TaskSpec", "make_task",
    ),
}
"""Front-door names by the module that defines them."""

__getattr__ = lazy_attributes(
    __name__, {name: module for module, names in _HOMES.items() for name in names})


def __dir__() -> list[str]:
    """The module's attributes and every exported name (loaded or not)."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "FAMILIES",
    "FAMILY_SPECS",
    "ROLES",
    "SEEDS_PER_FAMILY",
    "TABLE_HEADER",
    "AgentCrashed",
    "AuditListener",
    "LedgerListener",
    "LiveAgentSpec",
    "LiveAudit",
    "LiveLedger",
    "LiveManifestError",
    "LiveRunError",
    "LiveRunResult",
    "LiveTeam",
    "MatchedResult",
    "MatchedRow",
    "Reporter",
    "RunManifest",
    "RunObserver",
    "StepTimeout",
    "TaskResult",
    "TaskSpec",
    "arun_live",
    "default_manifest",
    "live_declaration",
    "load_manifest",
    "make_task",
    "manifest_from_dict",
    "matched_manifest",
    "run_live",
    "run_matched",
    "run_policies",
]
