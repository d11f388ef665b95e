"""Failure attribution: which agent, at which step, made a failed run fail (issue 26 room).

Built on an audited run (:class:`icore.adapters.AuditResult`): every (agent, step)
candidate gets features read from X (:data:`FEATURES`, :func:`candidates`); a learned,
transparent scorer (:func:`fit_scorer`, :class:`ScorerModel`, logistic regression; the
shipped model :func:`load_shipped_model`) ranks them; :func:`attribute` names the top
candidate with its chain of evidence; :func:`score` compares predictions with the
annotations (Who&When), next to the baselines (:data:`BASELINES`,
:func:`first_unsupported`, :func:`majority_agent`, :func:`random_expectation`, ...) and
the published figures (:data:`PUBLISHED`). :class:`LLMAttributor` asks an LLM instead
(modes :data:`LLM_MODES`). See docs/audit-real-runs.md, "Failure attribution".

Until issue 26 these names lived in :mod:`icore.adapters`; the room sits above adapters
(it reads audited runs) and below report.
"""

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
    "REGULARIZATION_C",
    "Attribution",
    "AttributionScore",
    "Candidate",
    "ChainLink",
    "Feature",
    "LLMAttributor",
    "ModelSet",
    "Prediction",
    "RankedCandidate",
    "ScoreRow",
    "ScorerModel",
    "agent_counts",
    "attribute",
    "candidates",
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
    "random_expectation",
    "rank_candidates",
    "score",
    "shipped_models",
    "speakers",
]
