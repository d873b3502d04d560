"""Each finding's example: a small ``poolgrad-cases/1`` file (``example`` in its findings file,
a path relative to that file) holding the case that shows the behaviour, and what showing it
means, for scripts/examples.py, which writes the examples from a run's results, and for
tests/cases/test_examples.py, which checks that they still show it.

An example shows its finding in one AD mode (:func:`mode_of`): the reverse mode where the
finding is about it, else the first mode it lists. It shows it on a target where the finding
explains (Judgement.explained_by) the result of every case of the file that is in its scope,
and at least one case needs it (:func:`needs`).
"""

from __future__ import annotations

from poolgrad.knowledge.finding import Finding
from poolgrad.knowledge.judge import Judgement

# Claims that match any divergence (diverging by no fixed rule, adds that race): one of them in
# scope explains a result whatever else does.
CATCH_ALL = ("wrong", "nondeterministic", "undefined")


def mode_of(finding: Finding) -> str:
    """The derivative an example of ``finding`` is checked in."""
    return "backward" if "backward" in finding.modes else finding.modes[0]


def relative_path(finding_id: str) -> str:
    """Where a finding's example lives, relative to its findings file."""
    return f"examples/{finding_id}.json"


def needs(finding: Finding, without: Judgement) -> bool:
    """Whether a result that ``finding`` explains needs it, from the judgement of the result by
    the knowledge base without it: nothing else explains it, or (for a policy claim) only a
    claim that matches any divergence does."""
    return without.outcome != "expected" or (
        finding.claims_policy and all(g.verdict in CATCH_ALL for g in without.explained_by))
