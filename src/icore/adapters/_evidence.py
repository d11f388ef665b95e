"""Observable facts extracted from recorded messages, and the validators of V that check them.

The importer only *extracts* facts that are visible in a message (the page an agent is on,
a digest of what it observed, error markers, code blocks, an exit code); the judgement
"is this claim supported by what is in G?" is made by the validators below, which are
declared in V of every adapter declaration package (docs/audit-real-runs.md, "Evidence").
All functions are pure and deterministic.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from icore.state import ValidatorInput

_URL = re.compile(r"\]\((?P<u>https?://[^)\s]+)\)")
_ADDRESS = re.compile(r"^Address:\s*(?P<u>\S+)", re.MULTILINE)
_CODE = re.compile(r"```(?:python|py|sh|bash|shell)\b", re.IGNORECASE)
_ERROR = re.compile(
    r"Traceback \(most recent call last\)|exitcode: [1-9]|execution failed|Error 404|"
    r"File not found|\b(?:unable|not able) to\b|"
    r"\bcould(?:n't| not) (?:find|access|locate|load|open|retrieve)\b|"
    r"\bno (?:results|relevant results) (?:were )?found\b|\bI(?:'m| am) sorry\b|"
    r"\bI cannot\b|\bI can't\b",
    re.IGNORECASE,
)
_CLAIM = re.compile(
    r"\b(?:verified|confirmed|the (?:final )?answer is|final answer|is correct|are correct|"
    r"conclusion|in summary|therefore|thus)\b|\bTERMINATE\b",
    re.IGNORECASE,
)
_ASSUMPTION = re.compile(
    r"\b(?:assum(?:e|es|ed|ing|ption)|hypothetical(?:ly)?|placeholder|simulat(?:e|ed|ing)|"
    r"mock(?:ed)?|dummy|made[- ]up|let's say|for (?:the sake of )?(?:example|illustration)|"
    r"sample data|example data|fictional|estimat(?:e|ed)|approximately|manually)\b",
    re.IGNORECASE,
)
"""What an unsupported (assumed, simulated, estimated) result looks like in agent prose."""
_ANCHORS: dict[re.Pattern[str], tuple[str, ...]] = {
    _ERROR: ("traceback", "exitcode: ", "execution failed", "error 404", "file not found",
             "able to", "could", "results", "sorry", "i can"),
    _CLAIM: ("verified", "confirmed", "answer", "correct", "conclusion", "summary",
             "therefore", "thus", "terminate"),
    _ASSUMPTION: ("assum", "hypothetical", "placeholder", "simulat", "mock", "dummy",
                  "made", "let's say", "example", "illustration", "sample", "fictional",
                  "estimat", "approximately", "manually"),
}
"""Per marker pattern, lowercase words one of which every match contains (its anchors):
a text in which none occurs cannot match, and a match starts at most :data:`_REACH`
characters before the first anchor it contains (issue 29: ``icore audit`` read a 50 MB
output in 27.5 s, the three patterns trying every position)."""
_REACH = 64
"""More than any pattern's characters before its anchor (``no relevant `` before
``results``: 12; ``for the sake of `` before ``example``: 16)."""
_FOLDS = ("\u0130", "\u0131", "\u017f")
"""Non-ASCII letters ``re.IGNORECASE`` matches to an ASCII letter that ``str.lower``
does not turn into that one letter (capital I with dot: ``i`` + a combining dot; dotless
i; long s). The only other one, the Kelvin sign, lowers to ``k``."""


_FOLDED = re.compile("[" + "".join(_FOLDS) + "]")
"""A letter of :data:`_FOLDS` (one scan of a non-ASCII text, no generator per call)."""


def _marked(rx: re.Pattern[str], text: str, low: str | None = None) -> bool:
    """``rx.search(text) is not None`` for a marker pattern of :data:`_ANCHORS`, cheaply.

    Exactly that answer: the pattern runs only when one of its anchors occurs in the
    lowercased text (a case-insensitive match needs one), from :data:`_REACH` characters
    before the first anchor when the text is ASCII (lowercasing keeps positions), else
    from the start; a text holding a letter in :data:`_FOLDS` is searched whole. Linear:
    a few substring scans, then the pattern over the rest only when an anchor is there.

    Args:
        rx: ``_ERROR``, ``_CLAIM`` or ``_ASSUMPTION``.
        text: the message.
        low: ``text.lower()`` when the caller has it (shared by several patterns).
    """
    if not text.isascii() and _FOLDED.search(text) is not None:  # isascii: O(1)
        return rx.search(text) is not None
    low = text.lower() if low is None else low
    at = [i for a in _ANCHORS[rx] if (i := low.find(a)) >= 0]
    if not at:
        return False
    start = max(0, min(at) - _REACH) if text.isascii() else 0
    return rx.search(text, start) is not None


_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
_INTERACTION = re.compile(r"^\s*I (?:typed|clicked|selected|entered|pressed|hovered)\b",
                          re.IGNORECASE)
_WS = re.compile(r"\s+")


def digest(text: str) -> str:
    """A short digest of a message's observation (whitespace- and case-normalized)."""
    norm = _WS.sub(" ", text.strip().lower())
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:16]


def _observation(text: str) -> str:
    """The part of a message after its first line (what the agent reports it saw)."""
    _, _, rest = text.strip().partition("\n")
    return rest or text


def numbers(text: str) -> set[str]:
    """The numbers stated in ``text`` (thousands separators dropped), e.g. ``{"850000"}``."""
    return {n.replace(",", "").rstrip(".") for n in _NUMBER.findall(text)}


def assumes(text: str) -> bool:
    """The text marks its result as assumed, simulated, estimated or made up."""
    return _marked(_ASSUMPTION, text)


def output_facts(text: str, calls: str | None = None) -> dict[str, Any]:
    """Facts of an agent output: page, digest, error/code/claim markers, interaction, size.

    ``calls`` (the tool calls the turn asked for, canonical JSON) is part of the digest: a
    turn asking for a tool with other arguments reports something new.
    """
    m = _URL.search(text) or _ADDRESS.search(text)
    seen = _observation(text) if not calls else f"{_observation(text)}\n{calls}"
    low = text.lower()
    return {
        "page": m["u"] if m else None,
        "digest": digest(seen),
        "error": _marked(_ERROR, text, low),
        "code": bool(_CODE.search(text)),
        "claims": _marked(_CLAIM, text, low),
        "interaction": bool(_INTERACTION.match(text)),
        "chars": len(text),
    }


def tool_facts(text: str, exitcode: int | None, *, plain: bool = False) -> dict[str, Any]:
    """Facts of a tool output: exit code, error marker, whether it printed anything.

    What it printed is the text after a code executor's ``Code output:`` marker (Who&When);
    ``plain`` (a generic JSONL tool line, e.g. a framework tool's result): the whole text
    when it carries no such marker.
    """
    marked = "Code output:" in text
    _, _, out = text.partition("Code output:")
    if plain and not marked:
        out = text
    return {
        "exitcode": exitcode,
        "error": _marked(_ERROR, text) or (exitcode is not None and exitcode != 0),
        "empty": not out.strip() or out.strip() in ("[]", "{}", "None", "''"),
        "digest": digest(text),
        "chars": len(text),
    }


# ------------------------------------------------------------------ validators of V
def check_output(inp: ValidatorInput) -> bool:
    """``output_evidence``: an agent output is supported by what G shows.

    Inputs: events[0] is the output; further events are the tool outputs that ran its
    code. Payload: ``seen_digests`` / ``seen_pages`` (what this agent already reported) and
    ``evidence_before`` (number of observations of the environment in G before it:
    successful tool outputs and supported outputs that report a page or file).

    Passes iff the output reports no error; it is not a repeat (same observation again,
    or an interaction that left the agent on a page it had already reported); code it
    offered was run and succeeded with output; and a conclusion it states without code
    rests on earlier observed evidence.
    """
    if not inp.events:
        return False
    out = inp.events[0].fields
    p: Mapping[str, Any] = inp.payload if isinstance(inp.payload, Mapping) else {}
    if out.get("error"):
        return False
    if out.get("digest") in set(p.get("seen_digests", ())):
        return False
    page = out.get("page")
    if out.get("interaction") and page is not None and page in set(p.get("seen_pages", ())):
        return False
    tools = [e.fields for e in inp.events[1:]]
    if out.get("code"):
        return bool(tools) and all(not t.get("error") and not t.get("empty") for t in tools)
    if out.get("claims"):
        return int(p.get("evidence_before", 0)) > 0
    return True


def check_ledger(inp: ValidatorInput) -> bool:
    """``ledger_evidence``: an orchestrator ledger claim is backed by the outputs in G.

    Payload: ``claim`` (name), ``value`` (the claimed boolean), ``outputs`` (one
    ``{"passed": bool, "repeat": bool}`` per agent output cited, i.e. since the previous
    ledger), ``plans`` (plans cited), ``ever_passed`` (supported outputs so far).

    - ``is_progress_being_made = true`` needs a new plan or a supported output;
    - ``is_in_loop = false`` fails when every cited output repeats an earlier one;
    - ``is_request_satisfied = true`` needs some supported output in the run;
    - a claim of ``false`` (or ``is_in_loop = true``) admits a problem and needs no evidence.
    """
    p: Mapping[str, Any] = inp.payload if isinstance(inp.payload, Mapping) else {}
    claim, value = p.get("claim"), p.get("value")
    outs = [o for o in p.get("outputs", ()) if isinstance(o, Mapping)]
    if claim == "is_progress_being_made" and value is True:
        return int(p.get("plans", 0)) > 0 or any(o.get("passed") for o in outs)
    if claim == "is_in_loop" and value is False:
        return not outs or not all(o.get("repeat") for o in outs)
    if claim == "is_request_satisfied" and value is True:
        return int(p.get("ever_passed", 0)) > 0
    return True


def normalize_answer(text: str | None) -> str:
    """Lower-case, strip punctuation and spaces; numbers lose thousands separators."""
    if text is None:
        return ""
    t = text.strip().lower().replace(",", "")
    t = re.sub(r"[^0-9a-z.]+", " ", t).strip()
    return re.sub(r"\.$", "", t)


_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str, *, min_len: int = 4) -> set[str]:
    """The distinct lower-case words of ``text`` with at least ``min_len`` characters.

    Short function words drop out without a stop-word table.
    """
    return {w for w in _WORD.findall(text.lower()) if len(w) >= min_len}


def answer_checkable(ground_truth: str | None, recorded_outcome: bool | None) -> bool:
    """Whether a run's final answer can be checked: a recorded outcome or a ground truth.

    A ground truth that normalizes to nothing (:func:`normalize_answer`) does not count.
    """
    return isinstance(recorded_outcome, bool) or bool(normalize_answer(ground_truth))


def check_answer(inp: ValidatorInput) -> bool:
    """``answer_check``: the final answer is right, or (nothing to check it with) exists.

    Payload: ``recorded_outcome`` (the benchmark's own verdict, used when known), else
    ``final_answer`` compared with ``ground_truth`` after :func:`normalize_answer`
    (numbers compared numerically).

    With neither a recorded outcome nor a ground truth (:func:`answer_checkable` False,
    e.g. a framework run recorded without ``RunRecorder(ground_truth=...)``) the answer
    cannot be checked, and the certificate claims only what G shows: the run ended with a
    non-empty final answer (the payload then carries ``checked: false``, and the audit
    reports the answer as *not checked*, not as wrong). iCORE certifies the process;
    "semantic task correctness still depends on validator adequacy" (icore Sec. 3), and
    outside that assumption cq "remains a process-quality diagnostic rather than a
    certificate of open-ended answer quality" (icore, Conclusion): a validator with no
    reference answer is not adequate to judge correctness, so it must not fail (nor pass)
    the answer on correctness. An empty final answer still fails (no terminal evidence).
    """
    p: Mapping[str, Any] = inp.payload if isinstance(inp.payload, Mapping) else {}
    rec = p.get("recorded_outcome")
    if isinstance(rec, bool):
        return rec
    fa, gt = normalize_answer(p.get("final_answer")), normalize_answer(p.get("ground_truth"))
    if not gt:  # nothing to check against: certify only that there is an answer
        return bool(fa)
    if not fa:
        return False
    try:
        return abs(float(fa) - float(gt)) < 1e-9
    except ValueError:
        return fa == gt


# ------------------------------------------------------------------ work kinds
KINDS: Mapping[str, tuple[str, ...]] = {
    "web": ("web", "browser", "search", "bing", "internet", "website", "url", "online",
            "navigate", "click", "scroll", "page"),
    "file": ("file", "pdf", "document", "spreadsheet", "xlsx", "csv", "local"),
    "code": ("python", "code", "script", "shell", "terminal", "linux", "program", "debug",
             "execute", "run "),
    "verification": ("verif", "validat", "check", "review", "fact", "confirm"),
    "analysis": ("analy", "reason", "language", "knowledge", "expert", "statistic", "math",
                 "calculat", "comput", "data", "general"),
}
"""Work kinds and the keywords that indicate them (capabilities and obligation kinds)."""


def classify(text: str, agents: Iterable[str] = ()) -> str:
    """Work kind of an instruction or message: the first kind whose keyword occurs.

    ``agents``: the run's agent ids; each one that occurs in ``text`` as a word (case
    folded; an underscore bounds a word too) is left out first, so an agent's own name
    decides no kind ("researcher, please take the next step" and a hand-off call
    ``transfer_to_researcher`` are not ``web`` work for "search"; QA qa-new15c S3).
    """
    t = text.lower()
    names = tuple(sorted({a.lower() for a in agents if a}))
    if names:
        t = _names_pattern(names).sub(" ", t)
    for kind, words in KINDS.items():
        for w in words:  # a plain loop: no generator per kind (one call per output)
            if w in t:
                return kind
    return "analysis"


@functools.lru_cache(maxsize=64)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """The agent ids ``names`` (lower case) as whole words (longest first).

    A word ends at anything but a letter or digit (``_`` too: ``transfer_to_writer``).
    """
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])")


def capabilities(description: str, *, llm: bool = True) -> dict[str, float]:
    """Declared capability values of an agent from its description (system prompt).

    Every kind whose keywords occur in the description gets 1.0; an LLM agent can do
    ``analysis`` at 0.5 at least.
    """
    t = description.lower()
    caps = {k: 1.0 for k, words in KINDS.items() if any(w in t for w in words)}
    if llm:
        caps.setdefault("analysis", 0.5)
    return caps


__all__ = [
    "KINDS",
    "answer_checkable",
    "assumes",
    "capabilities",
    "check_answer",
    "check_ledger",
    "check_output",
    "classify",
    "content_words",
    "digest",
    "normalize_answer",
    "numbers",
    "output_facts",
    "tool_facts",
]
