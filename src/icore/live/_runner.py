"""``icore run``: live multi-agent runs over real processes and authenticated TCP.

planfence Sec. 5.2, App. A.2-A.5; design.md 2, data flow 1.

:func:`run_live` starts the team (:class:`~icore.live.LiveTeam`), runs every task of
the manifest through the five-agent workflow::

    reviser: requirement r0 -> retriever: catalog + shortlist -> planner: plan p(r0)
    -> reviser: revision r1 (post-plan, optional) -> executor: protected action through
    the gate (one isolated replan) -> auditor: checks the outcome against the owner's head

records every step in iCORE (:class:`~icore.live.LiveLedger`), stops every process
(also on Ctrl-C, a timeout or an agent crash) and writes ``run.json`` into the run folder
(and ``report.html`` through the ``reporter`` the caller passes, e.g.
:func:`icore.report.write_live_report`).

Ground truth per task (independent of the policy under test): the primary action is
*invalid* when it ran from a plan whose requirement frontier is not the owner's head at
issue time (planfence eq. 1); the task *succeeds* when the primary action ran and was
valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from icore._clock import WallClock
from icore._files import make_room, mark_folder
from icore.agents import decision_tally, fit_timeouts, negotiated_backend
from icore.fence import judge_action, strategy
from icore.live._errors import AgentCrashed, LiveRunError, ReplyFormatError
from icore.live._ledger import LiveLedger
from icore.live._process_team import CENTRAL, LiveTeam
from icore.live._replies import (
    AuditReply,
    CommittedRecord,
    ExecuteReply,
    PlanReply,
    ShortlistReply,
)
from icore.live._results import LiveRunResult, RunObserver, TaskResult
from icore.live._run_manifest import (
    LIVE_POLICIES,
    CrashSpec,
    LiveManifestError,
    RunManifest,
    load_manifest,
)
from icore.live._workflow import TaskSpec, make_task
from icore.memory import SQLiteStore


def _is_invalid(req_key: str, head_id: str, r0_id: str, parents: Sequence[str]) -> bool:
    """Ground truth of one executed action (planfence eq. 1), by the one fence rule.

    ``F_a(x)`` of the requirement key is the requirement version among the executed
    root's parents (the owner's head, else the first version r0; none: unknown);
    ``H(x)`` is the owner's head at issue time.
    """
    f = head_id if head_id in parents else r0_id if r0_id in parents else None
    frontier = {} if f is None else {req_key: f}
    return judge_action([req_key], frontier, {req_key: head_id}).invalid(
        ground_truth=True)


_RECORD_FIELDS = ("id", "key", "owner", "seq", "type", "parents", "content")

R = TypeVar("R")


def _committed(rec: CommittedRecord | None, step: str) -> CommittedRecord:
    """The record a step's accepted decision committed.

    Raises:
        ReplyFormatError: the reply carries none (field ``<step>.record``).
    """
    if rec is None:
        raise ReplyFormatError("an accepted decision committed no record",
                               field=f"{step}.record")
    return rec


# ---------------------------------------------------------------------------- runner
class _Run:
    def __init__(self, manifest: RunManifest, out: Path, policy: str,
                 specs: Sequence[TaskSpec] | None = None,
                 reporter: Reporter | None = None,
                 observer: RunObserver | None = None) -> None:
        self.manifest = manifest
        self.reporter = reporter
        self.specs = list(specs) if specs is not None else None
        self.out = out
        self.policy = policy
        self.backend = negotiated_backend(manifest.backend.resolved())
        n_tasks = len(self.specs) if self.specs is not None else \
            len(manifest.seeds) * manifest.repeat
        # a model decision may take its retries and one correction: steps and the run
        # get the time that needs (never less than the manifest says)
        manifest = self.manifest = manifest.with_(timeouts=fit_timeouts(
            manifest.timeouts.model_dump(), self.backend, n_tasks))
        self.team = LiveTeam(manifest, out, policy=policy, backend=self.backend)
        self.team_manifest = manifest.team_manifest(out, policy=policy)
        self.observer = observer
        self.audit = LiveLedger(manifest, out / "icore.sqlite", WallClock(),
                               listener=observer.audit_call if observer else None)
        self.committed: dict[str, set[str]] = {}
        self.crash_done = False
        self.role: dict[str, str] = {a.role: a.id for a in manifest.agents}
        self.t0 = time.perf_counter()

    def _note_record(self, agent: str, rec: Mapping[str, Any] | None) -> None:
        if rec and rec.get("id"):
            self.committed.setdefault(agent, set()).add(str(rec["id"]))
            if strategy(self.policy).central and not self.team.nats:
                self.committed.setdefault(CENTRAL, set()).add(str(rec["id"]))

    async def _maybe_crash(self, stage: str) -> None:
        c: CrashSpec | None = self.manifest.crash
        if c is None or self.crash_done or c.at != stage:
            return
        self.crash_done = True
        await self.team.kill(c.agent)

    async def task(self, spec: TaskSpec) -> TaskResult:
        """Run one five-agent workflow (planfence Sec. 5.2) and record it in iCORE."""
        steps: list[dict[str, Any]] = []
        gate: list[dict[str, Any]] = []
        lineage: list[dict[str, Any]] = []
        responses = accepted = 0
        t_start = time.perf_counter()
        st: dict[str, Any] = {"executed": False, "invalid": False, "replanned": False,
                              "successful_replan": False, "blocked": False,
                              "block_reason": "", "redundant": 0, "verdict": None,
                              "error": "", "decisions": []}
        task = spec.task
        req_key = spec.key("req")
        req_head: dict[str, str] = {}
        A = self.audit

        async def step(name: str, role: str, cmd: str, reply: Callable[[Mapping[str, Any]], R],
                       **args: Any) -> R:
            """Ask ``role`` for ``cmd`` and read its result as ``reply`` (a typed reply).

            The decision and the committed record are accounted for first.
            """
            nonlocal responses, accepted
            agent = self.role[role]
            t = time.perf_counter()
            try:
                res = await self.team.request(agent, cmd, task=task, family=spec.family,
                                              **args)
            except LiveRunError as exc:
                steps.append({"step": name, "agent": agent, "ok": False,
                              "ms": round((time.perf_counter() - t) * 1e3, 2),
                              "detail": str(exc)})
                raise
            dec = res.get("decision")
            if isinstance(dec, dict):
                st["decisions"].append(dec)
                responses += int(dec.get("responses", 0))
                accepted += int(dec.get("accepted", 0))
            steps.append({"step": name, "agent": agent, "ok": True,
                          "ms": round((time.perf_counter() - t) * 1e3, 2),
                          "detail": (dec or {}).get("error", "") if isinstance(dec, dict)
                          else ""})
            self._note_record(agent, res.get("record") if "record" in res else
                              (res if "id" in res and "key" in res else None))
            return reply(res)

        def keep(role: str, rec: CommittedRecord | None) -> None:
            if rec is not None and rec.id:
                d = rec.to_dict()
                lineage.append({k: d.get(k) for k in _RECORD_FIELDS} | {"role": role})

        def decision_failed(role: str, decision: Mapping[str, Any], obligation: str) -> bool:
            dec = decision or {}
            if dec.get("ok", True):
                return False
            st["error"] = f"{role} decision failed: {dec.get('error')}"
            A.failed(task, obligation, "decision_failed", self.role[role],
                     {"role": role, "error": str(dec.get("error"))[:500],
                      "violations": dec.get("violations", [])})
            return True

        try:
            A.introduce(task)
            r0 = await step("seed", "reviser", "seed", CommittedRecord.from_dict,
                            requirement=dict(spec.requirement))
            req_head["id"] = r0.id
            keep("requirement", r0)
            A.committed(task, "requirement_committed", self.role["reviser"], r0.to_dict())
            await self._maybe_crash("after_seed")
            cat = await step("catalog", "retriever", "catalog", CommittedRecord.from_dict,
                             catalog=list(spec.catalog))
            keep("catalog", cat)
            A.committed(task, "catalog_committed", self.role["retriever"], cat.to_dict())
            sh = await step("shortlist", "retriever", "shortlist", ShortlistReply.from_dict)
            if decision_failed("retriever", sh.decision, "plan"):
                return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)
            short = _committed(sh.record, "shortlist")
            keep("shortlist", short)
            A.committed(task, "shortlist_committed", self.role["retriever"], short.to_dict())
            pl = await step("plan", "planner", "plan", PlanReply.from_dict)
            if decision_failed("planner", pl.decision, "plan"):
                return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)
            plan = _committed(pl.record, "plan")
            keep("plan", plan)
            A.planned(task, self.role["planner"], plan.to_dict(), req_key, r0.id, replan=False)
            await self._maybe_crash("after_plan")
            if self.manifest.revision:
                r1 = await step("revise", "reviser", "revise", CommittedRecord.from_dict,
                                revision=dict(spec.revision))
                req_head["id"] = r1.id
                keep("revision", r1)
                A.revised(task, self.role["reviser"], r1.to_dict())
            await self._maybe_crash("after_revision")
            ex = await step("execute", "executor", "execute", ExecuteReply.from_dict,
                            plan=plan.id)
            for rr in ex.replan_replies:
                if rr is not None:
                    dec = rr.decision
                    st["decisions"].append(dec)
                    responses += int(dec.get("responses", 0))
                    accepted += int(dec.get("accepted", 0))
                    rec = rr.record
                    self._note_record(self.role["planner"],
                                      None if rec is None else rec.to_dict())
                    keep("replan", rec)
                    if rec is not None:
                        fresh_req = next((p for p in rec.parents if p == req_head["id"]),
                                         rec.parents[0])
                        A.planned(task, self.role["planner"], rec.to_dict(), req_key,
                                  fresh_req, replan=True)
                    elif not dec.get("ok", True):
                        A.failed(task, "plan", "decision_failed", self.role["planner"],
                                 {"role": "planner", "error": str(dec.get("error"))[:500]})
            if decision_failed("executor", ex.decision, "act"):
                return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)
            decisions = ex.decisions
            gate.extend(d.to_dict() for d in decisions)
            last_gate = ""
            for d in decisions:
                last_gate = A.gate(task, self.role["executor"], d)
            st["replanned"] = ex.replanned
            if ex.executed:
                st["executed"] = True
                root = ex.roots[0]
                parents = ex.root_parents.get(root, [])
                # ground truth: the plan's requirement frontier vs the owner's head now
                st["invalid"] = _is_invalid(req_key, req_head["id"], r0.id, parents)
                st["successful_replan"] = st["replanned"]
                frontier = next((p for p in parents if p in (r0.id, req_head["id"])),
                                parents[0] if parents else "")
                A.executed(task, self.role["executor"], ex.args.get("action", "")
                           or self._action(spec), str(ex.args.get("option")), last_gate,
                           req_key, frontier)
            else:
                st["blocked"] = ex.outcome == "blocked"
                reason = decisions[-1].reason if decisions else None
                st["block_reason"] = "" if reason is None else reason
                st["error"] = f"primary action blocked: {reason} ({ex.detail})"
                A.failed(task, "act", "step_failed", self.role["executor"],
                         {"step": "execute", "error": st["error"][:500]})
                return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)
            keep("action", ex.record)
            await self._maybe_crash("after_execute")
            act = _committed(ex.record, "execute")  # an executed action was committed
            au = await step("audit", "auditor", "audit", AuditReply.from_dict, act=act.id)
            if decision_failed("auditor", au.decision, "audit"):
                return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)
            verdict = str(au.verdict)
            st["verdict"] = verdict
            valid = st["executed"] and not st["invalid"]
            if valid and verdict in ("repeat_action", "reject"):
                st["redundant"] = 1
            A.audited(task, self.role["auditor"], verdict, req_key, au.current_requirement)
        except LiveRunError as exc:
            st["error"] = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                if isinstance(exc, AgentCrashed):
                    A.event(task, "agent_crashed", "run", {"agent": exc.fields.get("agent")})
                A.failed(task, "act", "step_failed", "run",
                         {"step": steps[-1]["step"] if steps else "?",
                          "error": st["error"][:500]})
        return self._result(spec, st, steps, gate, responses, accepted, t_start, lineage)

    @staticmethod
    def _action(spec: TaskSpec) -> str:
        return spec.spec.action

    def _result(self, spec: TaskSpec, st: Mapping[str, Any], steps: list[dict[str, Any]],
                gate: list[dict[str, Any]], responses: int, accepted: int,
                t_start: float, lineage: Sequence[Mapping[str, Any]] = ()) -> TaskResult:
        icore_v = tuple(v for v in self.audit.verdicts if v["task"] == spec.task)
        res = TaskResult(
            task=spec.task, family=spec.family, seed=spec.seed, policy=self.policy,
            success=bool(st["executed"] and not st["invalid"]), executed=bool(st["executed"]),
            invalid=bool(st["invalid"]), replanned=bool(st["replanned"]),
            successful_replan=bool(st["successful_replan"]), blocked=bool(st["blocked"]),
            block_reason=str(st["block_reason"]), redundant_auditor=int(st["redundant"]),
            responses=responses, accepted=accepted, audit_verdict=st["verdict"],
            error=str(st["error"]), gate=tuple(gate), steps=tuple(steps), icore=icore_v,
            duration_ms=round((time.perf_counter() - t_start) * 1e3, 2),
            lineage=tuple(dict(r) for r in lineage),
            llm=decision_tally(st["decisions"]))
        if self.observer is not None:
            self.observer.task_done(res)
        return res

    def tasks(self) -> list[TaskSpec]:
        """The workflows to run: the explicit specs, else family x seeds x repeat."""
        if self.specs is not None:
            return list(self.specs)
        out = []
        family, repeat = self.manifest.family, self.manifest.repeat
        for seed in self.manifest.seeds:
            for r in range(repeat):
                tid = f"{family}-{seed:02d}" + (f"-w{r:02d}" if repeat > 1 else "")
                out.append(make_task(family, seed, tid))
        return out

    async def run(self) -> LiveRunResult:
        """Start the team, run every workflow (bounded by ``timeouts.run_s``), stop it."""
        results: list[TaskResult] = []
        interrupted = False
        error = ""
        if self.observer is not None:
            self.observer.run_started(self.manifest, self.policy)
        try:
            try:
                await self.team.start()
                # concurrency fits the model server: no more workflows than its slots
                cap = int(self.backend.get("slots") or self.manifest.concurrency)
                sem = asyncio.Semaphore(max(1, min(self.manifest.concurrency, cap)))
                specs = self.tasks()
                slots: list[TaskResult | None] = [None] * len(specs)

                async def one(i: int, s: TaskSpec) -> None:
                    async with sem:
                        slots[i] = await self.task(s)

                runner = asyncio.gather(*(one(i, s) for i, s in enumerate(specs)))
                try:
                    await asyncio.wait_for(runner, self.manifest.timeouts.run_s)
                except TimeoutError:
                    error = f"run exceeded timeouts.run_s={self.manifest.timeouts.run_s}"
                results = [r for r in slots if r is not None]
            except asyncio.CancelledError:
                interrupted = True
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            except LiveRunError as exc:
                error = str(exc)
        finally:
            await asyncio.shield(self.team.stop())
        try:
            return self._finish(results, interrupted, error)
        finally:
            self.team.stop_engine()

    def _verify_records(self) -> tuple[int, list[str]]:
        if self.team.engine is not None:
            return self._verify_records_nats()
        om = self.manifest.ownership_map()
        checked, lost = 0, []
        for agent, ids in sorted(self.committed.items()):
            db = self.team_manifest.store_path(agent)
            try:
                store = SQLiteStore(db, om, None if agent == CENTRAL else agent)
            except Exception:
                lost.extend(sorted(ids))
                continue
            try:
                for rid in sorted(ids):
                    checked += 1
                    if store.get(rid) is None:
                        lost.append(rid)
            finally:
                store.close()
        return checked, lost

    def _verify_records_nats(self) -> tuple[int, list[str]]:
        """Every acknowledged record is in the engine (read back as the admin)."""
        from icore.net.nats import ADMIN_IDENTITY, NatsStore

        eng = self.team.engine
        checked, lost = 0, []
        ids = sorted({r for v in self.committed.values() for r in v})
        try:
            store = NatsStore(eng.urls, certs_dir=eng.certs_dir,
                              ownership=self.manifest.ownership_map(), agent=None,
                              identity=ADMIN_IDENTITY, prefix=eng.spec.prefix,
                              timeout_s=self.manifest.timeouts.rpc_s)
        except Exception:
            return len(ids), ids
        try:
            for rid in ids:
                checked += 1
                if store.get(rid) is None:
                    lost.append(rid)
        finally:
            store.close()
        return checked, lost

    def _finish(self, results: list[TaskResult], interrupted: bool, error: str) -> LiveRunResult:
        checked, lost = self._verify_records()
        summary: dict[str, Any] = {}
        with contextlib.suppress(Exception):
            summary = self.audit.summary()
        self.audit.close()
        res = LiveRunResult(
            name=self.manifest.name, policy=self.policy, family=self.manifest.family,
            backend=self.manifest.backend.kind, out_dir=self.out, tasks=tuple(results),
            crashes=tuple(self.team.crashes), interrupted=interrupted, error=error,
            duration_s=time.perf_counter() - self.t0, icore=summary,
            records_checked=checked, records_lost=tuple(lost),
            processes_left=tuple(self.team.alive()),
            pids={a.id: a.proc.pid for a in self.team.agents.values()},
            timeline=tuple(self.audit.timeline), state=self.audit.state,
            negotiation=dict(self.backend.get("negotiation") or {}),
            diagnoses=tuple(self.audit.diagnoses.values()))
        if self.reporter is not None:
            res = LiveRunResult(**{**res.__dict__, "report": self.reporter(res)})
        (self.out / "run.json").write_text(json.dumps(res.to_json(), indent=1, default=str),
                                           encoding="utf-8")
        if self.observer is not None:
            self.observer.run_done(res)
        return res


Reporter = Callable[[LiveRunResult], Path | None]
"""Writes a finished run's HTML report, returns its path (e.g.
:func:`icore.report.write_live_report`; the report layer sits above this one)."""


async def arun_live(manifest: RunManifest | str | Path, out_dir: str | Path, *,
                    policy: str | None = None,
                    tasks: Sequence[TaskSpec] | None = None,
                    reporter: Reporter | None = None,
                    observer: RunObserver | None = None) -> LiveRunResult:
    """Async form of :func:`run_live` (``tasks`` overrides the manifest's templates)."""
    m = manifest if isinstance(manifest, RunManifest) else load_manifest(manifest)
    pol = policy or m.policy
    if pol not in LIVE_POLICIES:
        raise LiveManifestError(
            f"a live run supports {', '.join(LIVE_POLICIES)}, not {pol!r}", path="policy")
    if strategy(pol).replica_views and m.memory.backend == "nats":
        raise LiveManifestError(f"{pol} reads replica views from each agent's owner "
                                "service; on NATS the engine is the one service",
                                path="policy")
    out = _fresh_run_folder(Path(out_dir))
    if tasks is not None:
        names = {t.name for t in m.tools}
        for t in tasks:
            if t.spec.action not in names:
                raise LiveManifestError(
                    f"task {t.task} needs a protected tool {t.spec.action!r}", path="tools")
    return await _Run(m, out, pol, tasks, reporter, observer).run()


RUN_FILES = ("icore.sqlite", "icore.sqlite-wal", "icore.sqlite-shm", "run.json", "agents",
             "certs", "logs", "nats", "team.yaml", "report.html", "icore-report", "assets")
"""Every name a run writes at the top of its folder: a folder icore did not create that
holds any of them is refused, so a run never mixes with or overwrites a user's files
(issue 29)."""


def _fresh_run_folder(out: Path) -> Path:
    """Create ``out`` for a new run; a previous run there is moved to ``out.1``, ``out.2``...

    A run's log, memories and certificates belong to that run: appending a second run to
    them would mix two histories, and deleting them would lose committed records. Only a
    folder icore created (its marker file) is moved; a missing or empty folder is
    created/used and marked; any other folder of the user's (its own files, or
    :data:`RUN_FILES`) is refused (:func:`icore._files.make_room`, FileExistsError):
    marking it would let the next run move the user's whole folder away (QA r8-bad D18).
    """
    make_room(out)
    out.mkdir(parents=True, exist_ok=True)
    mark_folder(out)
    return out


def run_live(manifest: RunManifest | str | Path, out_dir: str | Path, *,
             policy: str | None = None, tasks: Sequence[TaskSpec] | None = None,
             reporter: Reporter | None = None,
             observer: RunObserver | None = None) -> LiveRunResult:
    """Run a live team: one process per agent on 127.0.0.1, mutual-TLS owner services.

    Args:
        manifest: a :class:`RunManifest` or the path of a YAML manifest.
        out_dir: run folder (certs, per-agent SQLite memories, logs, ``icore.sqlite``,
            ``run.json``, ``report.html`` when a ``reporter`` is given); a previous run
            found there is first moved to ``<out_dir>.1`` (then ``.2``, ...), never
            overwritten or appended to.
        policy: override the manifest's policy (any :class:`~icore.fence.Policy` name).
        tasks: explicit workflows (e.g. several families on one team); default: the
            manifest's ``family`` x ``seeds`` x ``repeat``.
        reporter: called with the finished result (also after Ctrl-C) to write its
            HTML report; ``icore run`` passes :func:`icore.report.write_live_report`
            (``report.html`` plus the iCORE page). None: only ``run.json``.
        observer: watches the run as it happens (:class:`RunObserver`; e.g.
            :class:`icore.adapters.OtelExporter` for OpenTelemetry spans).

    Returns:
        :class:`LiveRunResult`. Ctrl-C stops every process and returns a result with
        ``interrupted=True`` (the report is still written).

    Raises:
        LiveManifestError: the manifest file is invalid; ``policy`` is not one of
            :data:`LIVE_POLICIES` (``fields['path'] == "policy"``), or a replica-view
            policy (majority/all replica) on NATS memory; a task in ``tasks`` names a tool
            the manifest does not protect (``"tools"``). Nothing has started then. It is
            a ``ValueError`` too.
    """
    return asyncio.run(arun_live(manifest, out_dir, policy=policy, tasks=tasks,
                                 reporter=reporter, observer=observer))


def run_policies(manifest: RunManifest | str | Path, out_dir: str | Path,
                 policies: Sequence[str] = ("owner_head_freshness", "planfence"),
                 reporter: Reporter | None = None) -> dict[str, LiveRunResult]:
    """Run the same manifest once per policy (sub-folders of ``out_dir``)."""
    out = Path(out_dir)
    return {p: run_live(manifest, out / p, policy=p, reporter=reporter) for p in policies}
