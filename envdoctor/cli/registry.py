"""Every command, its options and its help, as data (``cli/options.py``).

Importing this module loads no command: ``envdoctor --help``, ``envdoctor check --help`` and
usage errors are answered from here, and a command's module (``Command.module``, which defines
``run(invocation) -> exit code``) is imported only to run it.
"""

from __future__ import annotations

from envdoctor.cli.options import Argument, Command, Option
from envdoctor.exitcodes import HEALTHY, UNHEALTHY, UNKNOWN

EXIT_CODES = (
    f"Exit codes: {HEALTHY} healthy, {UNHEALTHY} unhealthy, {UNKNOWN} could not determine or a "
    "usage error."
)


TABLE_NAMES = ("cuda-toolkits", "driver-branches", "architectures", "cudnn", "pytorch")
"""``compat.tables.TABLE_NAMES``, spelled here so that help and completion load no tables (a test
keeps the two equal)."""

# --- options shared by several commands -------------------------------------------------------


def python_option(
    help: str = "Interpreter whose torch to inspect (default: the active venv or conda env, else python3 on PATH).",
) -> Option:
    return Option(("--python",), "python", help, metavar="PYTHON")


def timeout_option(default: float = 30.0, help: str = "Time budget in seconds.") -> Option:
    return Option(("--timeout",), "timeout", help, kind="seconds", default=default)


def snapshot_option(help: str) -> Option:
    return Option(("--snapshot",), "snapshot", help, kind="path", metavar="FILE")


def tables_option() -> Option:
    return Option(
        ("--tables",),
        "tables",
        "A directory of tables that extend or override the shipped ones (also ENVDOCTOR_TABLES).",
        kind="path",
        metavar="DIR",
    )


def expect_option() -> Option:
    return Option(
        ("--expect",),
        "expect",
        "What this machine is for: gpu (no usable NVIDIA GPU is an error) or cpu (no GPU is "
        "right). Default: $ENVDOCTOR_EXPECT, else a node spec that lists GPUs, else what is here.",
        kind="choice",
        choices=("gpu", "cpu"),
    )


def output_option(help: str = "Write the output to FILE (atomically) instead of stdout.") -> Option:
    return Option(("--output", "-o"), "output", help, kind="path", metavar="FILE")


def format_option(*formats: str, help: str = "Output format.") -> Option:
    return Option(
        ("--format", "-f"), "format", help, kind="choice", choices=formats, default=formats[0]
    )


def no_cache_option(
    what: str = "Import torch afresh and read the compatibility tables again",
) -> Option:
    return Option(
        ("--no-cache",),
        "no_cache",
        f"{what}: do not reuse (or store) an earlier run's from envdoctor's cache "
        "($XDG_CACHE_HOME/envdoctor, by default ~/.cache/envdoctor).",
        kind="flag",
    )


NO_CACHE_KB = "Read and check the error signatures again"


def json_option(help: str = "Shortcut for --format json.") -> Option:
    return Option(("--json",), "json", help, kind="flag")


def color_option() -> Option:
    return Option(
        ("--color",),
        "color",
        "Colour the text report: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), "
        "always or never. A file (-o) and JSON are never coloured.",
        kind="choice",
        choices=("auto", "always", "never"),
        default="auto",
        metavar="WHEN",
    )


# --- the commands -------------------------------------------------------------------------------

CHECK = Command(
    "check",
    "Diagnose this machine (or a snapshot): driver, GPUs, CUDA libraries, torch, environment.",
    module="envdoctor.cli.check",
    options=(
        format_option("text", "json", "markdown", "prometheus"),
        json_option(),
        python_option(
            "Interpreter whose torch to inspect (default: the active venv or conda env, else python3 on PATH; not with --snapshot)."
        ),
        timeout_option(help="Global time budget in seconds."),
        Option(("--strict",), "strict", "Warnings fail too (exit 1).", kind="flag"),
        snapshot_option("Diagnose a snapshot from `envdoctor collect` instead of this machine."),
        Option(("--list-checks",), "list_checks", "List every check and its codes.", kind="flag"),
        Option(
            ("--verbose", "-v"),
            "verbose",
            "List every check with its outcome (passed, not applicable, unknown) and why.",
            kind="flag",
        ),
        tables_option(),
        Option(
            ("--deep",),
            "deep",
            "Also run the smoke kernels (CUDA, cuBLAS, cuDNN) on every GPU (not with --snapshot).",
            kind="flag",
        ),
        Option(
            ("--spec",),
            "spec",
            "A baseline from `envdoctor spec init`: every drift is a finding.",
            kind="path",
            metavar="FILE",
        ),
        output_option("Write the report to FILE (atomically) instead of stdout."),
        expect_option(),
        no_cache_option(),
        color_option(),
    ),
    epilog=EXIT_CODES,
)

COLLECT = Command(
    "collect",
    "Probe this machine and write all facts as JSON (a redacted, versioned snapshot).",
    description="Probe this machine and write every fact as JSON: a versioned snapshot, "
    "redacted (hostname, user name, GPU UUIDs) unless --no-redact. See docs/snapshot.md.",
    module="envdoctor.cli.collect",
    options=(
        output_option("Write the snapshot to FILE instead of stdout."),
        python_option(),
        timeout_option(help="Global time budget in seconds."),
        Option(
            ("--no-redact",),
            "no_redact",
            "Keep the hostname, user name and GPU UUIDs (the file is then written 0600).",
            kind="flag",
        ),
        no_cache_option(),
    ),
)

RECOMMEND = Command(
    "recommend",
    "The torch wheel that fits this driver and these GPUs, why, and what would not work.",
    description="The best official torch wheel for this driver and these GPUs, why, and what "
    "would not work. The installed torch's version is kept when a variant of it fits.",
    module="envdoctor.cli.recommend",
    options=(
        snapshot_option("Recommend for the machine in a snapshot (envdoctor collect)."),
        python_option(
            "Interpreter whose installed torch to keep where a variant of it fits (default: the "
            "active venv or conda env, else python3 on PATH; not with --snapshot)."
        ),
        Option(
            ("--torch",),
            "torch",
            "Pin a torch release: 2.11, 2.11.0 or 2.11.0+cu128.",
            metavar="VERSION",
        ),
        format_option("text", "json", "markdown"),
        json_option(),
        output_option("Write the recommendation to FILE (atomically) instead of stdout."),
        tables_option(),
        expect_option(),
        no_cache_option(),
        color_option(),
    ),
    epilog="Exit 0 when a wheel fits (the CPU build only on a machine without NVIDIA GPUs), 1 "
    "when none does or the driver must be fixed first (NVML cannot list the GPUs), 2 on errors.",
)

FIX = Command(
    "fix",
    "A script that fixes what `envdoctor check` finds: a dry run unless run with --apply.",
    description="Write a reviewable bash script that fixes what `envdoctor check` finds. The "
    "script is a dry run unless started with --apply; see docs/fix.md.",
    module="envdoctor.cli.fix",
    options=(
        snapshot_option("Plan for a snapshot (envdoctor collect) instead of this machine."),
        output_option(
            "Write to FILE (a script: executable, 0777 less the umask) instead of stdout."
        ),
        format_option(
            "script", "steps", "json", help="script (bash), steps (a numbered plan) or json."
        ),
        python_option(
            "Interpreter whose torch to inspect and repair (default: the active venv or conda env, else python3 on PATH)."
        ),
        timeout_option(help="Time budget for probing, in seconds."),
        Option(
            ("--prefer",),
            "prefer",
            "torch.driver-too-old: reinstall a torch that fits the driver (wheel) or upgrade the "
            "driver (driver).",
            kind="choice",
            choices=("wheel", "driver"),
            default="wheel",
        ),
        Option(
            ("--index-host",),
            "index_host",
            "A host besides download.pytorch.org that the script may install torch from (a "
            "mirror named in your tables); repeatable.",
            kind="list",
            metavar="HOST",
        ),
        expect_option(),
        no_cache_option(),
        color_option(),
    ),
)

PROBE = Command(
    "probe",
    "The fast tier for startup probes: NVML, /proc, /dev; a one-line verdict within a budget.",
    description="Fast health probe (NVML, /proc, /dev, the loader's cache; never torch). The "
    "first output line is the verdict (at most 80 bytes). A watchdog enforces the budget: past "
    "it the verdict is 'unknown' and the exit code 2.",
    module="envdoctor.cli.probe",
    options=(
        timeout_option(1.0, "Hard budget in seconds; past it the verdict is 'unknown' (exit 2)."),
        format_option("text", "json", "prometheus", help="text, json, or Prometheus's textfile."),
        json_option(),
        output_option("Write the output to FILE (atomically); stdout still gets the verdict."),
        Option(
            ("--require",),
            "require",
            "A gate such as gpus>=8, driver>=550, cuda>=12.4, memory_free>=70GiB, model~=H100; "
            "every gate must hold.",
            kind="list",
            metavar="EXPR",
        ),
        expect_option(),
        Option(("--strict",), "strict", "Warnings fail too (exit 1).", kind="flag"),
        Option(
            ("--verbose", "-v"), "verbose", "After the verdict, one line per finding.", kind="flag"
        ),
        color_option(),
    ),
    epilog=EXIT_CODES,
)

SPEC = Command(
    "spec",
    "Node specs (baselines): write one from this machine, or validate one.",
    subcommands=(
        Command(
            "init",
            "Write the spec this machine meets now (review it, then use it with check --spec).",
            module="envdoctor.cli.spec",
            options=(
                output_option("Write the spec to FILE instead of stdout."),
                python_option(
                    "Interpreter whose torch to record (default: the active venv or conda env, else python3 on PATH)."
                ),
                timeout_option(help="Global time budget in seconds."),
                snapshot_option("Write the spec of a snapshot (envdoctor collect) instead."),
                Option(
                    ("--no-torch",),
                    "no_torch",
                    "Do not record (or probe) torch and cuDNN.",
                    kind="flag",
                ),
                no_cache_option(),
            ),
        ),
        Command(
            "validate",
            "Check that a spec file is well formed (exit 0), or say what is wrong and where "
            "(exit 2).",
            module="envdoctor.cli.spec",
            arguments=(Argument("path", "FILE", "The spec file to read."),),
        ),
    ),
)

DIFF = Command(
    "diff",
    "Compare two snapshots (works on node A, fails on B): only the facts that differ.",
    description='Compare two snapshots ("works on node A, fails on B"): only the facts that '
    "differ. Facts that change from run to run (free memory, processes, timestamps) are hidden "
    "unless --all.",
    module="envdoctor.cli.diff",
    options=(
        Option(("--all",), "all", "Also show facts that change from run to run.", kind="flag"),
        format_option("text", "json"),
        json_option(),
        output_option("Write the differences to FILE (atomically) instead of stdout."),
        color_option(),
    ),
    arguments=(
        Argument("a", "A", "Snapshot of the first machine (envdoctor collect)."),
        Argument("b", "B", "Snapshot of the second machine."),
    ),
    epilog="Exit 0 when the facts agree, 1 when they differ, 2 when a file cannot be read.",
)

SLURM = Command(
    "slurm-healthcheck",
    "Drain this Slurm node when it is unhealthy; resume it when envdoctor drained it and it is "
    "healthy again.",
    description="Drain this node when it is unhealthy; resume it when envdoctor drained it and "
    "it is healthy again. An operator's drain is never touched.",
    module="envdoctor.cli.slurm",
    options=(
        Option(
            ("--node",),
            "node",
            "Slurm node name (default: $SLURMD_NODENAME, else the short hostname).",
            metavar="NAME",
        ),
        Option(
            ("--spec",),
            "spec",
            "Also report drift from this node spec (envdoctor spec init).",
            kind="path",
            metavar="FILE",
        ),
        Option(
            ("--require",),
            "require",
            "A gate such as gpus>=8.",
            kind="list",
            metavar="EXPR",
        ),
        python_option("Also check the torch of this interpreter (slower)."),
        timeout_option(45.0, "Budget for the whole run in seconds (Slurm kills at 60)."),
        Option(
            ("--scontrol",),
            "scontrol",
            "The scontrol program to run.",
            metavar="PATH",
            default="scontrol",
        ),
        Option(("--strict",), "strict", "Warnings fail too (drain).", kind="flag"),
        Option(
            ("--drain-on-unknown",),
            "drain_on_unknown",
            "Drain when the health cannot be determined.",
            kind="flag",
        ),
        Option(
            ("--dry-run",),
            "dry_run",
            "Read the node's state but only print the scontrol update.",
            kind="flag",
        ),
        expect_option(),
        no_cache_option(),
    ),
    epilog=EXIT_CODES,
)

SMOKE = Command(
    "smoke",
    "Run CUDA, cuBLAS, cuDNN and NCCL for real on each GPU, time-bounded, and attribute failures.",
    description="Run CUDA, cuBLAS, cuDNN and NCCL for real on each GPU, time-bounded, and "
    "attribute failures. --reproduce fills a GPU's memory: never run it on a GPU other jobs "
    "use.",
    module="envdoctor.cli.smoke",
    options=(
        python_option(
            "Interpreter whose torch to test (default: the active venv or conda env, else python3 on PATH)."
        ),
        timeout_option(60.0, "Time budget per GPU in seconds (GPUs run in parallel)."),
        Option(
            ("--step-timeout",),
            "step_timeout",
            "Time budget per step in seconds (at most --timeout).",
            kind="seconds",
            default=30.0,
        ),
        Option(
            ("--gpu",),
            "gpu",
            "Test only this GPU (NVML index).",
            kind="integers",
            metavar="N",
            minimum=0,
        ),
        format_option("text", "json"),
        json_option(),
        output_option("Write the report to FILE (atomically) instead of stdout."),
        color_option(),
        Option(
            ("--reproduce",),
            "reproduce",
            "Check whether this error reproduces under GPU memory pressure. WARNING: it fills the "
            "GPU's memory to the last MiB; other jobs on that GPU may fail with out of memory. A "
            "GPU NVML shows in use by other processes is refused unless named with --gpu N "
            "--force.",
            kind="choice",
            choices=("cublas-alloc", "cudnn-init"),
        ),
        Option(
            ("--leave",),
            "leave",
            "With --reproduce: leave only this many MiB free after the probe's own CUDA context "
            "(default: search for the threshold).",
            kind="integer",
            metavar="MIB",
            minimum=0,
            maximum=1 << 24,
        ),
        Option(
            ("--force",),
            "force",
            "With --reproduce --gpu N: fill GPU N even though other processes use it.",
            kind="flag",
        ),
        Option(
            ("--in-process",),
            "in_process",
            "With --reproduce: torch's own cache holds the memory and a new thread creates its "
            "cuBLAS/cuDNN handle (the usual case inside a training process).",
            kind="flag",
        ),
        Option(
            ("--budget",),
            "budget",
            "With --reproduce: start no new probe after this many seconds.",
            kind="seconds",
            default=300.0,
        ),
        no_cache_option(),
    ),
    epilog="Exit 0 every step passed, 1 a step failed, 2 could not determine (nothing to test) "
    "or a usage error. With --reproduce: 1 the error reproduced, 0 it did not, 2 undetermined.",
)

EXPLAIN = Command(
    "explain",
    "Explain an error log: which known failures it contains, the root cause, and the fix.",
    module="envdoctor.cli.explain",
    options=(
        format_option("text", "json", "markdown"),
        json_option(),
        Option(
            ("--with-host",),
            "with_host",
            "Confirm or rule out each cause with this machine's live facts.",
            kind="flag",
        ),
        timeout_option(help="Time budget for --with-host probes, in seconds."),
        Option(
            ("--list-signatures",),
            "list_signatures",
            "List every known error signature and exit.",
            kind="flag",
        ),
        output_option("Write the explanation to FILE (atomically) instead of stdout."),
        no_cache_option(NO_CACHE_KB),
        color_option(),
    ),
    arguments=(
        Argument(
            "source",
            "FILE|-",
            "The log to explain (a file, .gz too; - or nothing: stdin).",
            required=False,
            default="-",
        ),
    ),
    epilog="Exit 0 when no known signature occurs, 1 when a cause is found, 2 when only "
    "possible causes are, when nothing is found in a log that could be read only in part (a "
    "damaged or cut-off .gz: one warning line says so), or on a usage error.",
)

RUN = Command(
    "run",
    "Run a command, pass its output through unchanged, and explain it if it fails.",
    description="Run a command, pass its output through unchanged, and explain it if it fails. "
    "The exit code is the command's own (128+N when a signal killed it). The explanation goes "
    "to stderr, so the command's stdout stays clean. With --format json a JSON document is the "
    "only thing on stdout, whether the command failed or not; the command's stdout goes to "
    "stderr with its stderr.",
    module="envdoctor.cli.run",
    interspersed=False,
    options=(
        Option(
            ("--blocking",),
            "blocking",
            "Set CUDA_LAUNCH_BLOCKING=1 so CUDA errors get a true stack.",
            kind="flag",
        ),
        Option(
            ("--save",),
            "save",
            "Also write the full log to FILE.",
            kind="path",
            metavar="FILE",
        ),
        format_option(
            "text",
            "json",
            "markdown",
            help="Format of the explanation (on stderr; json: on stdout, the command's output on "
            "stderr; with -o: in FILE, the command's output where it was).",
        ),
        output_option(
            "Write the explanation to FILE (atomically) instead of stderr (json: instead of "
            "stdout)."
        ),
        Option(
            ("--with-host",),
            "with_host",
            "On failure, also confirm causes with live facts.",
            kind="flag",
        ),
        no_cache_option(NO_CACHE_KB),
        color_option(),
    ),
    arguments=(Argument("command", "CMD [ARGS]...", "The command to run, after --.", many=True),),
)

TABLES = Command(
    "tables",
    "Check and print the compatibility tables (CUDA, drivers, GPUs, cuDNN, PyTorch wheels).",
    subcommands=(
        Command(
            "validate",
            "Validate the shipped tables, or DIR's tables merged over them; exit 2 on the first "
            "error.",
            module="envdoctor.cli.tables",
            arguments=(
                Argument(
                    "directory",
                    "DIR",
                    "A directory of your own tables (validated merged over the shipped ones).",
                    required=False,
                ),
            ),
        ),
        Command(
            "show",
            "Print one table as envdoctor loaded it (after ENVDOCTOR_TABLES and --tables).",
            module="envdoctor.cli.tables",
            options=(
                tables_option(),
                format_option("text", "json"),
                json_option(),
                output_option("Write the table to FILE (atomically) instead of stdout."),
                no_cache_option(),
                color_option(),
            ),
            arguments=(
                Argument(
                    "name",
                    "NAME",
                    "cuda-toolkits, driver-branches, architectures, cudnn or pytorch.",
                    completions=TABLE_NAMES,
                ),
            ),
        ),
    ),
)

COMMANDS: tuple[Command, ...] = (
    CHECK,
    COLLECT,
    RECOMMEND,
    TABLES,
    FIX,
    PROBE,
    SPEC,
    DIFF,
    SLURM,
    SMOKE,
    EXPLAIN,
    RUN,
)
"""In the order ``envdoctor --help`` lists them."""

TOP = Command(
    "",
    "The doctor for GPU machines that run PyTorch: why it is broken and what to run.",
    subcommands=COMMANDS,
    options=(
        Option(("--version",), "version", "Print envdoctor's version and exit.", kind="flag"),
        Option(
            ("--install-completion",),
            "install_completion",
            "Install shell completion for SHELL (bash, zsh, fish, pwsh; default: this shell).",
            metavar="[SHELL]",
        ),
        Option(
            ("--show-completion",),
            "show_completion",
            "Print the completion script for SHELL, to install it by hand.",
            metavar="[SHELL]",
        ),
    ),
    epilog=EXIT_CODES + " `envdoctor COMMAND --help` describes a command.",
)


def find(name: str, group: Command = TOP) -> Command | None:
    return next((c for c in group.subcommands if c.name == name), None)
