"""Outputs stay valid UTF-8 when the environment holds bytes that are not UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", [["probe", "--json"], ["check", "--json"]])
def test_a_non_utf8_variable_is_shown_as_an_escape_in_valid_json(command: list[str]) -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0\udcff")  # the byte 0xff, as Python holds it
    result = subprocess.run(
        [sys.executable, "-m", "envdoctor", *command],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    data = json.loads(result.stdout.decode("utf-8"))  # strict: raises on a raw 0xff byte
    variables = dict(data["facts"]["env"]["variables"])
    assert variables["CUDA_VISIBLE_DEVICES"] == "0\\xff"
