"""An approval covers exactly what was approved (issue 28 item 5).

A human approval of a protected call is bound to the call's normalised arguments and
to the plan's record ids (the versions of the facts the call was derived from, i.e. the
action record's parents). :class:`ApprovalRequest` is what is put to the human; its
``id`` is the sha256 of that binding, so an answer naming an id approves that call and no
other: after a replan (other arguments, or the same arguments from other versions) the
id differs and the changed call must be put to the human again.

:class:`ApprovalBook` serves frameworks that *replay* a call to deliver the human's
answer (LangGraph ``interrupt`` / ``Command(resume=...)``, run states resumed later):
it remembers, per call, the requests already put to the human in order, so a bare
"yes" delivered for request *i* is matched against request *i*, never against the
call as it looks after a replan. Answers it cannot attribute never approve (fail
closed): the request is put to the human again.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icore.errors import brief
from icore.fence import canonical_args
from icore.records import JSONValue, Record, RecordId, canonical_json
from icore.workspace._errors import WorkspaceError

APPROVAL_FIELD = "planfence.approval"
"""The key of an approval request's payload and of an id-bearing answer."""

_YES = frozenset({"yes", "y", "approve", "approved", "ok", "accept", "accepted", "true"})
_NO = frozenset({"no", "n", "reject", "rejected", "deny", "denied", "false", "cancel"})


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One protected call as put to a human: action, arguments and the plan's records.

    Attributes:
        action: the tool's name.
        args: the call's normalised (JSON) arguments.
        basis: ``(key, record id)`` of every version the call derives from (the action
            record's parents), sorted by key.
        id: sha256 hex of ``{action, args, basis}`` in canonical JSON, with ``scope``
            added when it is not empty.
        values: ``(key, value)`` of every version of ``basis`` whose record was given
            (sorted by key): what the human is shown the call was planned from. Not part
            of ``id`` (the record ids already bind the values).
        scope: which pending request this is when equal calls can be pending in several
            places at once, e.g. a conversation (LangGraph ``thread_id``) and the model's
            tool-call id; part of ``id`` when not empty, so an answer naming one
            conversation's request never approves another's (QA qa-new17c #4). Empty:
            the id names the call's content only.
    """

    action: str
    args: Mapping[str, JSONValue]
    basis: tuple[tuple[str, RecordId], ...]
    id: str
    values: tuple[tuple[str, JSONValue], ...] = ()
    scope: str = ""

    @classmethod
    def of(cls, action: str, args: Mapping[str, Any],
           basis: Sequence[Record] | Mapping[str, RecordId], *,
           scope: str = "") -> ApprovalRequest:
        """Bind ``action(args)`` derived from ``basis`` (records, or key -> record id).

        ``scope`` (a str): the pending request's place (see the class), part of ``id``.

        Raises:
            MalformedRecord: an argument is not JSON (normalise it first).
        """
        canon = canonical_args(args)
        if isinstance(basis, Mapping):
            pairs, values = sorted(basis.items()), []
        else:
            pairs = sorted((r.key, r.id) for r in basis)
            values = sorted(((r.key, r.content) for r in basis if r.has_content),
                            key=lambda kv: kv[0])
        return cls(action, canon, tuple(pairs), _request_id(action, canon, pairs, scope),
                   tuple(values), scope)

    def scoped(self, scope: str) -> ApprovalRequest:
        """This request pending in ``scope`` (its ``id`` covers ``scope`` too).

        Deterministic: the same call pending in the same place gets the same id, so a
        request put to the human again (after a restart) still matches an answer given
        to its first asking.
        """
        if scope == self.scope:
            return self
        return ApprovalRequest(self.action, self.args, self.basis,
                               _request_id(self.action, self.args, self.basis, scope),
                               self.values, scope)

    def payload(self) -> dict[str, JSONValue]:
        """What to show the human: ``{"planfence.approval": {id, action, args, basis}}``.

        Each ``basis`` item is ``{"key", "id"}``, with ``"value"`` (the version's value)
        when the request was made from records (QA qa-new13b: a human shown only record
        ids cannot judge what the call was planned from).
        """
        shown = dict(self.values)
        return {APPROVAL_FIELD: {
            "id": self.id, "action": self.action, "args": dict(self.args),
            "basis": [{"key": k, "id": rid, **({"value": shown[k]} if k in shown else {})}
                      for k, rid in self.basis]}}

    def approve(self) -> dict[str, JSONValue]:
        """The answer that approves exactly this request.

        ``{"planfence.approval": id, "approved": true}``: pass it back as the framework's
        resume value.
        """
        return {APPROVAL_FIELD: self.id, "approved": True}

    def reject(self, reason: str = "") -> dict[str, JSONValue]:
        """The answer that rejects this request."""
        return {APPROVAL_FIELD: self.id, "approved": False, "reason": reason}

    def covers(self, answer: Any) -> bool:
        """Whether ``answer`` approves exactly this request.

        Only an id-bearing approval (:meth:`approve`, or a mapping with this ``id``)
        covers a request on its own; a bare "yes" does not (see :class:`ApprovalBook`).
        """
        verdict = read_answer(answer)
        return verdict.approved and verdict.id == self.id


def _request_id(action: str, args: Mapping[str, JSONValue],
                basis: Sequence[tuple[str, RecordId]], scope: str) -> str:
    body: dict[str, JSONValue] = {"action": action, "args": dict(args),
                                  "basis": [[k, rid] for k, rid in basis]}
    if scope:
        body["scope"] = scope
    return hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True, slots=True)
class Answer:
    """A human's answer as read by :func:`read_answer`.

    Attributes:
        approved: True for an approval.
        id: the request id the answer names (None for a bare yes/no).
        reason: the rejection's reason, when given.
    """

    approved: bool
    id: str | None
    reason: str = ""


def read_answer(answer: Any) -> Answer:
    """Read a human's answer: a bool, ``"yes"``/``"no"``-like text, or a mapping.

    Mappings: ``{"planfence.approval": id, "approved": bool}`` (from
    :meth:`ApprovalRequest.approve`), or ``{"approved": bool}`` / ``{"type": "accept"}``
    without an id. Anything else is a rejection (fail closed), and so is an answer that
    names an id that is no str (``7``, a list, ``None``: a ``"planfence.approval"`` or
    ``"id"`` key that is present names an id, even ``null``; meant for some request,
    attributable to none) or that cannot be read (a mapping whose lookups raise, a ``reason`` whose
    ``str`` raises): reading an answer never raises.
    """
    try:
        return _read_answer(answer)
    except Exception:  # a hostile or broken answer object: never an approval
        return Answer(False, None, f"unreadable answer {brief(answer, 80)}")


def _read_answer(answer: Any) -> Answer:
    if isinstance(answer, bool):
        return Answer(answer, None)
    if isinstance(answer, str):
        word = str.lower(str.strip(answer))
        return Answer(word in _YES and word not in _NO, None,
                      "" if word in _YES else answer)
    if isinstance(answer, Mapping):
        field = APPROVAL_FIELD if APPROVAL_FIELD in answer else "id" if "id" in answer \
            else None
        rid = answer[field] if field is not None else None
        if field is not None and not isinstance(rid, str):
            # a present id that is no str, null included (QA qa-new17c #7: it approved as
            # a bare yes): meant for some request, attributable to none
            return Answer(False, None, f"the answer names {brief(rid, 80)} as its "
                          f"{field!r}, which is no request id (a str): not "
                          "attributable, so not an approval")
        if "approved" in answer:
            ok = answer["approved"] is True
        else:
            kind = answer.get("type", answer.get("action", answer.get("decision")))
            ok = isinstance(kind, str) and str.lower(str.strip(kind)) in _YES
        reason = answer.get("reason", "")
        return Answer(ok, rid, reason if isinstance(reason, str) else
                      ("" if reason is None else brief(reason, 400)))
    return Answer(False, None, "unreadable answer")


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of :meth:`ApprovalBook.resolve` for the call as it is now.

    Attributes:
        approved: the human approved exactly this request.
        request: the request decided.
        reason: the rejection's reason (empty when approved).
    """

    approved: bool
    request: ApprovalRequest
    reason: str = ""


_UNATTRIBUTED = ApprovalRequest("", {}, (), "")


class ApprovalBook:
    """Requests put to a human, per call, for frameworks that replay a call to resume it.

    Thread-safe; keeps the last ``max_calls`` calls.

    Args:
        max_calls: how many calls' histories to keep (older ones are forgotten; their
            bare answers then approve nothing and the human is asked again); an int >= 1.

    Raises:
        WorkspaceError: ``max_calls`` is not an int >= 1 (a bool, a float, a str, 0 or
            below: ``-1`` made every later request a ``KeyError``, ``"5"`` a
            ``TypeError``).
    """

    def __init__(self, *, max_calls: int = 4096) -> None:
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise WorkspaceError("ApprovalBook(max_calls=) must be an int >= 1",
                                 got=brief(max_calls, 80), fix="max_calls=4096")
        self._asked: OrderedDict[Hashable, list[ApprovalRequest]] = OrderedDict()
        self._ran: OrderedDict[Hashable, tuple[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_calls = max_calls

    def asked(self, call: Hashable) -> list[ApprovalRequest]:
        """The requests put to the human for ``call``, in order."""
        with self._lock:
            return list(self._asked.get(call, ()))

    def _append(self, call: Hashable, request: ApprovalRequest) -> None:
        with self._lock:
            self._asked.setdefault(call, []).append(request)
            self._asked.move_to_end(call)
            while len(self._asked) > self.max_calls:
                self._asked.popitem(last=False)

    def note(self, call: Hashable, request: ApprovalRequest) -> None:
        """Remember that ``request`` was put to the human for ``call`` (next index).

        For a question the framework asked by other means (e.g. the tool body's own
        ``interrupt``), so the answer delivered at that index is attributed to it.
        """
        self._append(call, request)

    def forget(self, call: Hashable) -> None:
        """Drop ``call``'s history (after it ran or was refused for good)."""
        with self._lock:
            self._asked.pop(call, None)
            self._ran.pop(call, None)

    def ran(self, call: Hashable, request_id: str, result: Any) -> None:
        """Record that ``call`` executed under the approval ``request_id``, with its result.

        The executed-call ledger: a replaying framework (LangGraph re-runs a whole tool
        node on every resume) consults :meth:`executed` first, so an approved call runs
        at most once and its replay returns the recorded result.
        """
        with self._lock:
            self._ran[call] = (request_id, result)
            self._ran.move_to_end(call)
            while len(self._ran) > self.max_calls:
                self._ran.popitem(last=False)

    def executed(self, call: Hashable) -> tuple[str, Any] | None:
        """``(approval request id, result)`` when ``call`` already executed, else None."""
        with self._lock:
            return self._ran.get(call)

    def resolve(self, call: Hashable, request: ApprovalRequest,
                ask: Callable[[dict[str, JSONValue]], Any], *,
                fresh_answers: bool = False) -> Verdict:
        """Decide ``request`` (the call as it is now) from the answers ``ask`` delivers.

        ``ask(payload)`` is the framework's "put this to the human" (LangGraph:
        ``interrupt``): on a replay it returns the answer already given to the i-th
        request of this call, else it asks (and, for an interrupting framework, raises to
        suspend the run). The i-th answer counts for ``request`` only when it names
        ``request.id`` or - a bare answer - when the i-th request the book remembers is
        ``request`` itself. Otherwise ``request`` is put to the human next.

        Args:
            call: the call's identity (e.g. thread and tool-call id).
            request: the call as it is now (after any replan).
            ask: delivers the answer to a payload (may raise to suspend the run).
            fresh_answers: True when ``ask`` answers immediately what it was just asked
                (a synchronous prompt); False for replaying frameworks, where an answer
                at an index the book does not remember is not attributable (fail closed).

        Returns:
            :class:`Verdict` for ``request``.
        """
        asked = self.asked(call)
        i = 0
        while True:
            known = i < len(asked)
            shown = asked[i] if known else request
            if not known:
                self._append(call, request)
            answer = read_answer(ask(shown.payload()))
            if answer.id is not None:
                covers = answer.id == request.id
            else:
                covers = shown.id == request.id and (known or fresh_answers)
                if not known and not fresh_answers:
                    # an answer replayed for a request this book never saw: whatever it
                    # was for, it is not attributable; remember the slot as such
                    self._mark_unattributed(call, i)
            if covers:
                return Verdict(answer.approved, request, answer.reason)
            i += 1
            asked = self.asked(call)

    def _mark_unattributed(self, call: Hashable, index: int) -> None:
        with self._lock:
            lst = self._asked.get(call)
            if lst is not None and index < len(lst):
                lst[index] = _UNATTRIBUTED


class AnsweredFirst(Exception):
    """Raised by :meth:`AskThenValidate.ask` once the human answered: nothing ran yet."""


def check_hooks(action: Any, approve: Any, check: Any) -> None:
    """Refuse an ``approve=`` or ``check=`` that is no function, before the call is asked.

    Raises:
        WorkspaceError: either is neither None nor callable (named).
    """
    for name, hook in (("approve", approve), ("check", check)):
        if hook is not None and not callable(hook):
            raise WorkspaceError(f"{name}= must be a function (ApprovalRequest) -> bool or "
                                 "None", action=repr(action)[:80], got=type(hook).__name__)


class AskThenValidate:
    """A human approval that waits on the human, validated again after the answer.

    ``Agent.execute(approve=f)`` runs the call in two passes. The first runs the gate
    and, once it authorized the call, puts the :class:`ApprovalRequest` to ``f`` (the
    human decides, as long as they need; a stale call is never put to them) and stops
    before the tool runs. The second runs the gate again, so the validation point is
    after the answer: a fact that changed while the human decided blocks the call (the
    fresh values go to the agent and its next call is asked again), and the call runs
    only when it is the exact request the human approved (same id: arguments and
    versions).

    ``f`` may also raise to suspend the run (LangGraph ``interrupt``); nothing ran then.
    Its answer is read with :func:`read_answer` (a bool, yes/no text, an id-bearing
    mapping naming this request); anything else rejects.

    Args:
        approve: the human's decision on a request.
        check: a check without a human, asked first in both passes (``Agent.execute``'s
            ``check=``); anything but ``True`` rejects (a truthy ``"no"``, ``1``, ``[0]``
            or an array-like object is no approval: fail closed, #29).
    """

    def __init__(self, approve: Callable[[ApprovalRequest], Any],
                 check: Callable[[ApprovalRequest], bool] | None = None) -> None:
        check_hooks("<approval>", approve, check)
        self._approve = approve
        self._check = check
        self._answer: tuple[str, bool] | None = None

    def ask(self, request: ApprovalRequest) -> bool:
        """First pass: put ``request`` to the human, remember the answer, stop.

        Returns:
            False when ``check`` rejects (the human is not asked).

        Raises:
            AnsweredFirst: once the human answered (the second pass runs the call).
        """
        if self._check is not None and self._check(request) is not True:
            return False  # only a real yes passes a check (fail closed: "no", 1, [0])
        verdict = read_answer(self._approve(request))
        self._answer = (request.id, verdict.approved and verdict.id in (None, request.id))
        raise AnsweredFirst(request.id)

    def approved(self, request: ApprovalRequest) -> bool:
        """Second pass: True only for the request the human approved (and ``check``)."""
        if self._answer != (request.id, True):
            return False
        return self._check is None or self._check(request) is True
