"""Remediation: turn a report's findings into a safe, reviewable plan and script (`envdoctor fix`).

``build_plan(report, fix_facts)`` decides the steps (``planner``); ``render_script`` writes them as
a bash script (``script``), ``render_steps`` / ``plan_to_json`` as a list or JSON (``render``).
May import: model, engine (``Report``), probes.holders (its records), rules' helpers.
"""

from __future__ import annotations

from envdoctor.remedy.model import Plan, Step
from envdoctor.remedy.planner import PlanOptions, build_plan
from envdoctor.remedy.render import plan_to_json, render_steps
from envdoctor.remedy.script import render_script

__all__ = [
    "Plan",
    "PlanOptions",
    "Step",
    "build_plan",
    "plan_to_json",
    "render_script",
    "render_steps",
]
