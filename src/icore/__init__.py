"""icore: safe-to-act, auditable LLM multi-agent teams.

Two published systems joined in one distribution:

* **PlanFence** (planfence Sec. 3-4): owner-managed versioned public memory, plans bound
  to exact record versions, a dependency-scoped gate at the action boundary (Alg. 1).
* **iCORE** (icore Sec. 3-4): the state X = (G, Q, Pi) and iCORE-Audit.

Layering (lowest first; each layer may import only layers listed before it, and
the shared top-level modules ``icore.errors``, ``_clock``, ``_data``, ``_extras``,
``_files``, ``_tls``, ``_threads``, which every layer may use)::

    records   pure   Record, RecordId, canonical codec, lineage traversal, frontier
    memory    I/O    in-memory + SQLite stores, ownership map, head rules, owner access
    fence     pure   dependency declaration, the gate (Alg. 1), protected action, policies
    net       I/O    sans-io protocol, transports (asyncio TCP with mutual TLS, NATS)
    workspace I/O    shared facts with owners, agents' reads, action records from tool calls
    state     pure*  iCORE declaration package, G/Q/Pi, legality, metrics (*SQLite log)
    audit     pure   iCORE-Audit loop, triggers, diagnosis, routing, recovery audit
    agents    I/O    host policies: scripted, LLM
    live      I/O    PlanFence live runs: one process per agent, manifest, matched study
    adapters  I/O    Who&When / JSONL / OTLP importers, PROV and OpenTelemetry export
    attribution I/O  failure attribution: features, scorer, ranking, cross-validation
    report    I/O    HTML reports and plots
    integrations I/O drop-ins for LangGraph, OpenAI Agents SDK, AG2, CrewAI (extras);
                     import only the public API of records, fence, memory, workspace,
                     state, adapters
    mcp       I/O    the MCP gateway (``icore mcp``, extra): PlanFence + recording in
                     front of any MCP server (over workspace)
    cli              the ``icore`` command (thin)

Pure layers do no I/O and read no clock; their one documented I/O edge is iCORE's SQLite
log and declaration loader in ``state``. Inside a package no import circle closes, not
even through an import inside a function. No module imports another package's private
``_module``: packages meet through their ``__init__`` front doors. ``tests/test_layering.py``
and ``tests/test_private_imports.py`` enforce these rules; docs/architecture.md draws the
layers and the data flows.

The paper reproductions (benchmarks, simulated teams, workloads, the virtual-time network)
are the lab, a second top-level package ``icore_lab`` (extra ``icore[lab]``) that imports
this library's front doors; the library never imports it.
"""

from icore.errors import IcoreError

__version__ = "0.1.0"

__all__ = ["IcoreError", "__version__"]
