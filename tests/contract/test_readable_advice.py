"""Issue 37 item 3: advice a user can paste as it is.

A remediation said `spec.torch-version` must be `<version>` while the spec said 2.11.0+cu130, and
a count read "1 steps". Every finding of every scenario, and a spec's drift, is rendered here:
no `<…>` placeholder stands in a title, a summary or a step where envdoctor knows the value, and
no count of one takes a plural. (Evidence is left out: it quotes what the machine printed, and a
Python traceback's `File "<string>"` is verbatim.)
"""

from __future__ import annotations

import re

import pytest

from envdoctor.fleet import spec as node_spec
from envdoctor.model.finding import Finding
from envdoctor.model.probed import Found
from tests import factories
from tests.conftest import SCENARIO_NAMES, report_of, scenario_facts

PLACEHOLDER = re.compile(r"<[A-Za-z][^<>\n]{0,40}>")
ONE_PLURAL = re.compile(
    r"\b1 (steps|errors|warnings|notes|GPUs|files|processes|findings|checks|levels|holders)\b"
)


def _texts(finding: Finding) -> list[str]:
    texts = [finding.title]
    if finding.remediation is not None:
        texts += [finding.remediation.summary, *finding.remediation.steps]
    return texts


def _bad(findings: tuple[Finding, ...]) -> list[tuple[str, str]]:
    return [
        (f.code, text)
        for f in findings
        for text in _texts(f)
        if PLACEHOLDER.search(text) or ONE_PLURAL.search(text)
    ]


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_no_finding_of_a_scenario_shows_a_placeholder_or_a_wrong_plural(name: str) -> None:
    assert _bad(report_of(scenario_facts(name)).findings) == []


def test_a_spec_drift_names_the_version_the_spec_asks_for() -> None:
    wanted = "2.11.0+cu130"
    spec = node_spec.parse_spec(f"schema_version: 1\ntorch:\n  version: {wanted}\n")
    facts = factories.facts(torch=factories.torch(Found(factories.torch_build(version="2.10.0"))))
    (finding,) = [f for f in node_spec.spec_findings(facts, spec) if f.code == "spec.torch-version"]
    assert _bad((finding,)) == []
    assert finding.remediation is not None
    assert any(f"--torch {wanted}" in step for step in finding.remediation.steps)
