"""Failure attribution: which agent, at which step, made a failed run fail (issue 26 room).

Built on an audited run (:class:`icore.adapters.AuditResult`): every (agent, step)
candidate gets features read from X (:data:`FEATURES`, :func:`candidates`); a learned,
transparent scorer (:func:`fit_scorer`, :class:`ScorerModel`, logistic regression; the
shipped model :func:`load_shipped_model`) ranks them; :func:`attribute` names the top
candidate with its chain of evidence; :func:`score` compares predictions with the
annotations (Who&When), next to the baselines (:data:`BASELINES`,
:func:`first_unsupported`, :func:`majority_agent`, :func:`random_expectation`, ...) and
the published figures (:data:`PUBLISHED`). :class:`LLMAttributor` asks an LLM instead
(modes :data:`LLM_MODES`). :func:`cross_validate` / :func:`cv_score` / :func:`markdown`
are the cross-validated evaluation protocol behind every accuracy figure (``icore audit
--attribution``, ``icore bench attribution``; numpy and scikit-learn, extra
``icore[attribution]``, load only when it runs). See docs/audit-real-runs.md, "Failure
attribution".

Until issue 26 these names lived in :mod:`icore.adapters`; the room sits above adapters
(it reads audited runs) and below report.
"""

from icore.attribution._crossval import (
    RANDOM,
    SCORER,
    SUBSET_NAMES,
    TARGETS,
    TOLERANCES,
    AttributionEval,
    MethodResult,
    RunPrediction,
    cross_validate,
    cv_score,
    with_llm_rows,
)
from icore.attribution._crossval_report import (
    best_baseline,
    markdown,
    subset_label,
    weights_markdown,
    write_outputs,
)
from icore.attribution._features import FEATURES, Candidate, Feature, candidates, feature_names
from icore.attribution._llm_attribution import MODES as LLM_MODES
from icore.attribution._llm_attribution import LLMAttributor
from icore.attribution._rank import (
    BASELINES,
    PUBLISHED,
    PUBLISHED_BEST,
    Attribution,
    AttributionScore,
    ChainLink,
    Prediction,
    ScoreRow,
    agent_counts,
    attribute,
    first_error_marker,
    first_output_after_replan,
    first_unsupported,
    last_agent_before_answer,
    majority_agent,
    random_expectation,
    rank_candidates,
    score,
    shipped_models,
    speakers,
)
from icore.attribution._scorer import (
    REGULARIZATION_C,
    ModelSet,
    RankedCandidate,
    ScorerModel,
    fit_model_set,
    fit_scorer,
    group_key,
    load_shipped_model,
)

__all__ = [
    "BASELINES",
    "FEATURES",
    "LLM_MODES",
    "PUBLISHED",
    "PUBLISHED_BEST",
    "RANDOM",
    "REGULARIZATION_C",
    "SCORER",
    "SUBSET_NAMES",
    "TARGETS",
    "TOLERANCES",
    "Attribution",
    "AttributionEval",
    "AttributionScore",
    "Candidate",
    "ChainLink",
    "Feature",
    "LLMAttributor",
    "MethodResult",
    "ModelSet",
    "Prediction",
    "RankedCandidate",
    "RunPrediction",
    "ScoreRow",
    "ScorerModel",
    "agent_counts",
    "attribute",
    "best_baseline",
    "candidates",
    "cross_validate",
    "cv_score",
    "feature_names",
    "first_error_marker",
    "first_output_after_replan",
    "first_unsupported",
    "fit_model_set",
    "fit_scorer",
    "group_key",
    "last_agent_before_answer",
    "load_shipped_model",
    "majority_agent",
    "markdown",
    "random_expectation",
    "rank_candidates",
    "score",
    "shipped_models",
    "speakers",
    "subset_label",
    "weights_markdown",
    "with_llm_rows",
    "write_outputs",
]
