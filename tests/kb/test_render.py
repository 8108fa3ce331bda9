"""explain's answer as people read it: the conclusion for this log first (and, with --with-host,
for this machine), the generic explanation only with -v, the fix as commands to run."""

from __future__ import annotations

import json
from dataclasses import replace

from envdoctor.kb.model import Explanation, HostCheck, Verdict
from envdoctor.kb.render import commands, conclusion, render, render_text
from tests.kb.helpers import CORPUS, run
from tests.runner import invoke as cli_invoke
from tests.schemas import validate

OOM_LOG = CORPUS / "cuda.out-of-memory" / "dcrnn-6.txt"
OOM_LINE = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total "
    "capacity; 4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)"
)
HEALTHY = "epoch 1 loss 0.3\nepoch 2 loss 0.2\n"


def _with_check(explanation: Explanation, *checks: HostCheck) -> Explanation:
    top = replace(explanation.causes[0], host_checks=checks)
    return replace(explanation, causes=(top, *explanation.causes[1:]))


def test_the_first_line_is_the_conclusion_for_this_log() -> None:
    explanation = run("step 1 loss 2.3\n" + OOM_LINE + "\n")
    first = render_text(explanation).splitlines()[0]
    assert first.startswith("✗ ")
    assert explanation.causes[0].summary in first
    assert first.endswith("(line 2)")


def test_the_generic_explanation_comes_only_with_verbose() -> None:
    explanation = run(OOM_LINE + "\n")
    generic = "PyTorch's caching allocator prints its numbers"
    quiet, loud = render_text(explanation), render_text(explanation, verbose=True)
    assert generic not in quiet and "why:" not in quiet
    assert "the same command with -v" in quiet
    assert generic in " ".join(loud.split()) and "  why:" in loud
    # what is specific to this log stays without -v: the allocator's numbers read from it
    assert "Allocator numbers on GPU 0" in quiet


def test_the_fix_gives_the_commands_to_run() -> None:
    text = render_text(run(OOM_LINE + "\n"))
    lines = text.splitlines()
    assert "       $ export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in lines
    assert "       $ nvidia-smi" in lines
    assert not any(line.strip() == "$ torch.no_grad()" for line in lines)


def test_only_shell_commands_are_commands() -> None:
    step = (
        "Reload: `sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm`, with `--ipc=host`, "
        "`torch.no_grad()`, `cuda:0` and `NCCL_DEBUG=INFO` set, then `nvidia-smi -L`."
    )
    assert commands(step) == [
        "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm",
        "export NCCL_DEBUG=INFO",
        "nvidia-smi -L",
    ]
    assert commands("no code here") == []
    assert commands("an empty span `` and `   `") == []


def test_with_host_the_second_line_says_what_this_machine_shows() -> None:
    explanation = run(OOM_LINE + "\n")
    held = HostCheck("memory-holders", Verdict.CONFIRMS, "PID 4242 holds 7.1 GiB of GPU 0 now")
    free = HostCheck("gpu-memory", Verdict.RULES_OUT, "GPU 0 is free now")
    unknown = HostCheck("gpu-memory", Verdict.NEUTRAL, "GPU memory unknown: NVML failed")
    lead = conclusion(_with_check(explanation, held), with_host=True)
    assert lead[1] == "on this machine: confirmed — PID 4242 holds 7.1 GiB of GPU 0 now"
    # a check that rules the cause out is said first, whatever the others say
    lead = conclusion(_with_check(explanation, held, free), with_host=True)
    assert lead[1] == "on this machine: ruled out now — GPU 0 is free now"
    lead = conclusion(_with_check(explanation, unknown), with_host=True)
    assert lead[1].startswith("on this machine: not decided — GPU memory unknown")
    assert len(conclusion(explanation, with_host=True)) == 2  # no check applies: says so
    assert len(conclusion(explanation)) == 1  # without --with-host, one line
    text = render_text(_with_check(explanation, held), with_host=True).splitlines()
    assert text[1] == "  on this machine: confirmed — PID 4242 holds 7.1 GiB of GPU 0 now"


def test_a_log_without_a_signature_has_no_conclusion_line() -> None:
    explanation = run(HEALTHY)
    assert conclusion(explanation) == []
    assert render_text(explanation).startswith("envdoctor explain: - (")


def test_a_possible_cause_is_said_as_possible() -> None:
    explanation = run("No devices were found\n")
    assert explanation.status == "possible"
    assert conclusion(explanation)[0].startswith("? possibly: ")


def test_json_adds_the_conclusion_and_the_commands_and_keeps_its_schema() -> None:
    data = json.loads(render(run(OOM_LINE + "\n"), "json"))
    validate(data)
    assert data["conclusion"] == [data["conclusion"][0]]
    assert data["conclusion"][0].startswith("✗ ")
    cause = data["causes"][0]
    assert "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in cause["commands"]
    assert cause["fix"] and cause["explanation"]  # the fields it had stay
    assert json.loads(render(run(HEALTHY), "json"))["conclusion"] == []


def test_the_command_leads_with_the_answer() -> None:
    result = cli_invoke(["explain", str(OOM_LOG)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("✗ ") and lines[0].endswith("(line 4)")
    assert lines[2].startswith("envdoctor explain: ")
    assert "why:" not in result.output
