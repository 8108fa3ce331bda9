"""The rule registry: every rule envdoctor runs, in a stable, explicit order.

``core_rules()`` need no compatibility tables; ``all_rules()`` adds the table-driven ones. Both
import their rule modules on first call, so the fast probe tier does not import the table machinery.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envdoctor.rules.base import Rule


@functools.cache
def core_rules() -> tuple[Rule, ...]:
    """Rules over facts alone (driver, devices, GPUs, torch, environment, libraries)."""
    from envdoctor.rules import (
        container_cdi,
        container_host,
        container_inside,
        devices,
        driver,
        env,
        gpu,
        gpu_health,
        health,
        libs,
        machine,
        nvlink,
        pcie,
        toolkit,
        topology,
        torch,
    )

    return (
        *machine.RULES,
        *container_inside.RULES,
        *container_host.RULES,
        *container_cdi.RULES,
        *driver.RULES,
        *devices.RULES,
        *gpu.RULES,
        *gpu_health.RULES,
        *torch.RULES,
        *env.RULES,
        *libs.RULES,
        *health.RULES,
        *toolkit.RULES,
        *nvlink.RULES,  # the interconnect (issue 39, items 4-6)
        *topology.RULES,
        *pcie.RULES,
    )


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Core rules plus the compatibility-table rules."""
    from envdoctor.rules import companions, compat

    return (*core_rules(), *compat.RULES, *companions.RULES)


def all_codes() -> tuple[str, ...]:
    """Every finding code any registered rule can emit."""
    return tuple(code for rule in all_rules() for code in rule.codes)
