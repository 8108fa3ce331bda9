"""The rule registry: every rule envdoctor runs, in a stable, explicit order."""

from __future__ import annotations

from envdoctor.rules import compat, devices, driver, env, gpu, libs, torch
from envdoctor.rules.base import Rule

ALL_RULES: tuple[Rule, ...] = (
    *driver.RULES,
    *devices.RULES,
    *gpu.RULES,
    *torch.RULES,
    *env.RULES,
    *libs.RULES,
    *compat.RULES,
)


def all_codes() -> tuple[str, ...]:
    """Every finding code any registered rule can emit."""
    return tuple(code for rule in ALL_RULES for code in rule.codes)
