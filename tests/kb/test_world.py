"""explain on logs sampled from the world, labelled by root cause (tests/kb/world_round.py).

The round's result is stated in docs/explain.md; this test holds the statement to what explain
does today (change the signatures, re-measure, update the doc). It prints counts, never a log.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envdoctor.kb.loader import load_default_kb
from envdoctor.kb.model import Role
from tests.kb import world_round

DOCS = Path(__file__).parents[2] / "docs" / "explain.md"
CATEGORIES = {
    "driver-mismatch", "driver-missing", "torch-cpu-build", "cuda-version-mismatch",
    "arch-unsupported", "library-missing", "library-version", "container-config", "oom",
    "memory-held-by-other-process", "hardware-fault", "device-side-assert",
    "illegal-memory-access", "nccl-network", "distributed-timeout", "dataloader", "numerical",
    "build-toolchain", "permissions", "other",
}  # fmt: skip
ROUNDS = sorted(world_round.WORLD.glob("round*.yaml"))


def test_every_signature_names_known_categories_and_nothing_else_is_mapped() -> None:
    causes = world_round.load_causes()
    roles = {signature.id: signature.role for signature in load_default_kb().signatures}
    assert set(causes) == set(roles), "tests/data/world/causes.yaml must map exactly the signatures"
    for signature, categories in causes.items():
        if roles[signature] is Role.BENIGN:
            assert categories == (), f"{signature} is never a cause: it maps to []"
        else:
            assert categories and set(categories) <= CATEGORIES, signature


@pytest.mark.parametrize("path", ROUNDS, ids=lambda p: p.stem)
def test_a_round_is_well_formed(path: Path) -> None:
    cases = world_round.load_round(path)
    assert len({case.id for case in cases}) == len(cases)
    for case in cases:
        assert case.kind in ("error", "healthy") and case.log.strip(), case.id
        assert case.category in CATEGORIES, case.id


@pytest.mark.parametrize("path", ROUNDS, ids=lambda p: p.stem)
def test_the_world_result_is_the_documented_one(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    number = re.sub(r"\D", "", path.stem)
    measured = world_round.score(world_round.load_round(path), world_round.load_causes())
    with capsys.disabled():
        print(f"\nexplain, world round {number}: {measured.line()}")  # noqa: T201
    text = " ".join(DOCS.read_text(encoding="utf-8").split())
    # A round is measured once; once its logs were read to improve the signatures it is retired
    # (world_round.RETIRED) and its figure is in-sample, stated in a sentence of its own.
    label = "after retiring (in-sample)" if path.stem in world_round.RETIRED else "result"
    stated = re.search(rf"World {re.escape(label)}, round {number}: (.*?)\.(?: |$)", text)
    assert stated is not None, f"docs/explain.md must state world round {number}'s {label}"
    assert stated[1] == measured.line()
