"""The quick start's protected action, traced: GenAI spans for the fence's decisions.

Run: ``.venv/bin/python examples/otel_quickstart.py [OTLP_URL]`` (needs ``icore[otel]``).
With a URL (e.g. ``http://127.0.0.1:6006`` for a local Phoenix) the spans go there over
OTLP/HTTP; without one they are written to ``quickstart.otlp.json`` (OTLP JSON lines)
and read back with the importer.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from icore.adapters import OtelExporter, load_otlp, parse_spans
from icore.fence import Fence, Replan, ReplanRequest, bind_action, protected
from icore.memory import LocalOwners, MemoryStore, OwnershipMap
from icore.records import Record, derive

ownership = OwnershipMap({"req/trip-17": "reviser"}, {"plan/*": "planner"})
reviser, executor = MemoryStore(ownership, "reviser"), MemoryStore(ownership, "executor")
r3 = Record.create(key="req/trip-17", owner="reviser", seq=1, content={"dest": "Lisbon"})
reviser.commit(r3, writer="reviser")
executor.install(r3)
plan = derive(key="plan/trip-17", owner="planner", seq=1,
              content=bind_action("book", {"dest": "Lisbon"}), inputs=[r3])
executor.install(plan)
r4 = derive(key="req/trip-17", owner="reviser", seq=2, content={"dest": "Porto"},
            inputs=[r3], type="record")
reviser.commit(r4, writer="reviser")  # the owner revises after planning


@protected(depends_on={"req/trip-17"})
def book(dest: str) -> str:
    return f"booked {dest}"


def replan(req: ReplanRequest) -> Replan:
    fresh = req.fresh["req/trip-17"]
    new_plan = derive(key="plan/trip-17", owner="planner", seq=2,
                      content=bind_action("book", {"dest": fresh.content["dest"]}),
                      inputs=[fresh])
    executor.install(new_plan)
    return Replan(roots=[new_plan.id])  # the fresh plan's bound arguments are executed


url = sys.argv[1] if len(sys.argv) > 1 else None
out = Path(tempfile.mkdtemp()) / "quickstart.otlp.json"
with OtelExporter(endpoint=url or f"file:{out}", capture_content=True) as otel:
    fence = Fence.for_store(executor, LocalOwners({"reviser": reviser}), log=otel.fence_log())
    result = otel.protect(fence, book, roots=[plan.id], args={"dest": "Lisbon"},
                          replan=replan, call_id="call-1", agent="executor")
print(result.value)  # booked Porto
if url is None:
    for s in parse_spans(out.read_text(encoding="utf-8")):
        print(f"{s.name:22} {s.attributes.get('openinference.span.kind', ''):9} "
              f"{s.attributes.get('icore.decision', '')}")
    trace = load_otlp(out)
    print(f"imported: {[st.kind.value for st in trace.steps]}")
