"""Every command, option, argument and help text of ``envdoctor``, declared with Typer.

Each command's body only hands its parsed values to the module that does the work
(``envdoctor.cli.check`` …, each with ``run(invocation) -> exit code``), imported then: a command
loads no other command's code, and ``--help`` loads none. ``invocation.args`` maps each
parameter's name (``with_host``, ``format`` …) to its value (``cli/args.py``).

Usage errors (a bad option, a bad value) are left to ``cli/boundary.py``, the one place that turns
them into a message, a hint and exit 2.

No ``from __future__ import annotations``: Typer reads these annotations at run time.
"""

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from envdoctor import __version__
from envdoctor.cli.usage import Refused
from envdoctor.exitcodes import HEALTHY, UNHEALTHY, UNKNOWN

if TYPE_CHECKING:
    from envdoctor.cli.args import Args

PROG = "envdoctor"

EXIT_CODES = (
    f"Exit codes: {HEALTHY} healthy, {UNHEALTHY} unhealthy, {UNKNOWN} could not determine or a "
    "usage error."
)

TABLE_NAMES = ("cuda-toolkits", "driver-branches", "architectures", "cudnn", "pytorch")
"""``compat.tables.TABLE_NAMES``, spelled here so that help and completion load no tables (a test
keeps the two equal)."""


# --- help and the spellings argparse took ---------------------------------------------------


def _show_help(ctx: Any, _param: Any, value: Any) -> None:
    """``-h``/``--help``: the help through ``emit`` (a full disk or a closed stdout is one
    line and exit 2, as for any output), then exit 0."""
    if not value or ctx.resilient_parsing:
        return
    from envdoctor.cli.boundary import emit

    emit(ctx.get_help() + "\n")
    raise typer.Exit(HEALTHY)


def _long_prefixes(ctx: Any) -> Any:
    """A click ``token_normalize_func`` that reads a unique prefix of one of the command's long
    options as that option (``--form json``, ``--verb``), as argparse did: manifests written
    then still run. A prefix of several is refused, naming them; an unknown one is left to
    click (which refuses it, naming the options it may have meant). Single letters are left
    alone: they are short options."""

    def normalize(token: str) -> str:
        if len(token) < 2:
            return token
        names = {o[2:] for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)}
        names.add("help")
        if token in names:
            return token
        matches = sorted(n for n in names if n.startswith(token))
        if len(matches) > 1:
            spelled = ", ".join(f"--{m}" for m in matches)
            raise Refused(f"ambiguous option --{token} (could be {spelled})", ctx=ctx)
        return matches[0] if matches else token

    return normalize


class Command(TyperCommand):
    """A Typer command whose help goes through ``emit`` and whose long options take unique
    prefixes."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.callback = _show_help
            option.default = False  # see click_command: a None default costs pydantic
        return option

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.token_normalize_func = _long_prefixes(ctx)
        rest: list[str] = super().parse_args(ctx, args)
        return rest


class Group(TyperGroup):
    """A Typer group whose help goes through ``emit``; commands listed as declared."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.callback = _show_help
            option.default = False  # see click_command: a None default costs pydantic
        return option

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(self.commands, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


ORDER = (
    "check",
    "collect",
    "recommend",
    "tables",
    "fix",
    "probe",
    "spec",
    "diff",
    "slurm-healthcheck",
    "smoke",
    "explain",
    "run",
)
"""The order ``envdoctor --help`` lists the commands in: the first-time user's first."""


SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _group(**kwargs: Any) -> typer.Typer:
    return typer.Typer(
        cls=Group,
        no_args_is_help=True,
        rich_markup_mode=None,  # plain help: rich costs ~0.1 s and shows a type on every flag
        pretty_exceptions_enable=False,  # errors are cli/boundary.py's
        context_settings=SETTINGS,
        **kwargs,
    )


# --- what several options share ---------------------------------------------------------------


def _looks_like_option(ctx: typer.Context, text: str) -> bool:
    """Whether ``text`` is one of this command's options (``-o --json``: the user forgot the
    file), rather than a value such as ``-`` or ``-1``."""
    if not text.startswith("-") or text == "-" or text[1:2].isdigit() or text[1:2] == ".":
        return False
    name = text.partition("=")[0]
    opts = {o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}
    if name.startswith("--"):
        return any(o.startswith(name) for o in opts if o.startswith("--"))
    return name[:2] in opts


def _flag_of(param: typer.CallbackParam) -> str:
    return next((o for o in param.opts if o.startswith("--")), param.opts[0])


def _value(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """A text or path value: never empty, never one of the command's own options."""
    for item in value if isinstance(value, (list, tuple)) else [value]:
        if item is None:
            continue
        text = str(item)
        if text == "":
            raise Refused(f"{_flag_of(param)} needs a value (got an empty one)")
        if _looks_like_option(ctx, text):
            raise Refused(f"{_flag_of(param)} needs a value (got the option {text!r})")
    return value


def _path(text: Any) -> Path:
    """A path the user typed: an empty one (``-o ""``) is a mistake, not the current directory
    (``Path("")`` is ``.``)."""
    if str(text) == "":
        raise ValueError("needs a value (got an empty one)")
    return Path(text)


def _seconds(param: typer.CallbackParam, value: float) -> float:
    """A time budget every timer can hold (the one check every command shares)."""
    from envdoctor.cli.watchdog import check_budget
    from envdoctor.errors import EnvdoctorError

    try:
        return check_budget(value, _flag_of(param))
    except EnvdoctorError as exc:
        raise Refused(exc.message) from None


PY_HELP = "Interpreter whose torch to inspect (default: the active venv or conda env, else python3 on PATH)."


def _python(help: str = PY_HELP) -> Any:
    return typer.Option("--python", metavar="PYTHON", help=help, callback=_value)


def _timeout(help: str = "Time budget in seconds.") -> Any:
    return typer.Option("--timeout", metavar="SECONDS", help=help, callback=_seconds)


def _output(help: str = "Write the output to FILE (atomically) instead of stdout.") -> Any:
    return typer.Option("--output", "-o", metavar="FILE", help=help, callback=_value, parser=_path)


def _format(*choices: str, help: str = "Output format.") -> Any:
    return typer.Option(
        "--format", "-f", metavar="[" + "|".join(choices) + "]", help=help, case_sensitive=False
    )


def _snapshot(help: str) -> Any:
    return typer.Option("--snapshot", metavar="FILE", help=help, callback=_value, parser=_path)


JSON = "Shortcut for --format json."
TABLES_HELP = (
    "A directory of tables that extend or override the shipped ones (also ENVDOCTOR_TABLES)."
)
EXPECT_HELP = (
    "What this machine is for: gpu (no usable NVIDIA GPU is an error) or cpu (no GPU is right). "
    "Default: $ENVDOCTOR_EXPECT, else a node spec that lists GPUs, else what is here."
)
COLOR_HELP = (
    "Colour the text report: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always "
    "or never. A file (-o) and JSON are never coloured."
)
NO_CACHE_TORCH = "Import torch afresh and read the compatibility tables again"
NO_CACHE_KB = "Read and check the error signatures again"


def _no_cache_help(what: str = NO_CACHE_TORCH) -> str:
    return (
        f"{what}: do not reuse (or store) an earlier run's from envdoctor's cache "
        "($XDG_CACHE_HOME/envdoctor, by default ~/.cache/envdoctor)."
    )


# Types of the options many commands share (each with its help, where it differs, beside it).
Json = Annotated[bool, typer.Option("--json", help=JSON)]
Tables = Annotated[
    Path | None,
    typer.Option("--tables", metavar="DIR", help=TABLES_HELP, callback=_value, parser=_path),
]
Expect = Annotated[
    Literal["gpu", "cpu"] | None,
    typer.Option("--expect", metavar="[gpu|cpu]", help=EXPECT_HELP, case_sensitive=False),
]
Color = Annotated[
    Literal["auto", "always", "never"],
    typer.Option("--color", metavar="WHEN", help=COLOR_HELP, case_sensitive=False),
]
NoCache = Annotated[bool, typer.Option("--no-cache", help=_no_cache_help())]
NoCacheKb = Annotated[bool, typer.Option("--no-cache", help=_no_cache_help(NO_CACHE_KB))]
Strict = Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also print each cause's generic explanation.")
]


def args_of(ctx: typer.Context) -> "Args":
    """The values Typer parsed for ``ctx``'s command, by parameter name."""
    from envdoctor.cli.args import Args

    given = frozenset(
        name
        for name in ctx.params
        if (source := ctx.get_parameter_source(name)) is not None
        and source.name in ("COMMANDLINE", "ENVIRONMENT")
    )
    where = ctx.command_path.removeprefix(PROG).strip()
    many = {p.name for p in ctx.command.params if p.multiple or p.nargs == -1}
    values = {k: () if v is None and k in many else v for k, v in ctx.params.items()}
    return Args(values, given=given, where=where)


class Parsed:
    """Given as the app's context object, it stops a command before it runs and keeps its
    ``Args`` (``parse``)."""

    args: "Args | None" = None


def _run(ctx: typer.Context, module: str) -> NoReturn:
    """Run ``module.run(invocation)`` with the values Typer parsed, and exit with its code
    (``typer.Exit``: the code reaches ``dispatch`` and Typer's own runner alike)."""
    from envdoctor.cli.common import AppContext, Invocation

    args = args_of(ctx)
    app = ctx.find_root().obj
    if isinstance(app, Parsed):
        app.args = args
        raise typer.Exit(HEALTHY)
    invocation = Invocation(args, app if isinstance(app, AppContext) else AppContext())
    code: int = importlib.import_module(module).run(invocation)
    raise typer.Exit(code)


def parse(argv: list[str]) -> "Args":
    """The ``Args`` the command line ``argv`` (``["probe", "--json"]``) would run its command
    with, without running it (tests, and checks of manifests' command lines); a bad command line
    raises click's ``UsageError`` (``cli/usage.py`` words it)."""
    parsed = Parsed()
    command = click_command()
    try:
        with command.make_context(PROG, list(argv), obj=parsed) as ctx:
            command.invoke(ctx)
    except typer.Exit:
        pass
    if parsed.args is None:
        raise ValueError(f"{argv!r} names no command")
    return parsed.args


# --- the commands -------------------------------------------------------------------------------

app = _group(
    name=PROG,
    help="The doctor for GPU machines that run PyTorch: why it is broken and what to run.",
    epilog=EXIT_CODES + " `envdoctor COMMAND --help` describes a command.",
    add_completion=True,
)


def _print_version(ctx: typer.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from envdoctor.cli.boundary import emit

    emit(f"{PROG} {__version__} (gpu-envdoctor)\n")
    raise typer.Exit(HEALTHY)


@app.callback()
def _top(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print envdoctor's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """envdoctor's own options, before the command (the app's help is given above)."""


@app.command(
    cls=Command,
    short_help="Diagnose this machine (or a snapshot): driver, GPUs, CUDA libraries, torch, environment.",
    epilog=EXIT_CODES,
)
def check(
    ctx: typer.Context,
    format: Annotated[
        Literal["text", "json", "markdown", "prometheus"],
        _format("text", "json", "markdown", "prometheus"),
    ] = "text",
    json: Json = False,
    python: Annotated[
        str | None,
        _python(
            "Interpreter whose torch to inspect (default: the active venv or conda env, else "
            "python3 on PATH; not with --snapshot)."
        ),
    ] = None,
    timeout: Annotated[float, _timeout("Global time budget in seconds.")] = 30.0,
    strict: Strict = False,
    snapshot: Annotated[
        Path | None,
        _snapshot("Diagnose a snapshot from `envdoctor collect` instead of this machine."),
    ] = None,
    list_checks: Annotated[
        bool, typer.Option("--list-checks", help="List every check and its codes.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="List every check with its outcome (passed, not applicable, unknown) and why.",
        ),
    ] = False,
    tables: Tables = None,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also run the smoke kernels (CUDA, cuBLAS, cuDNN) on every GPU (not with --snapshot).",
        ),
    ] = False,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            metavar="FILE",
            parser=_path,
            help="A baseline from `envdoctor spec init`: every drift is a finding.",
            callback=_value,
        ),
    ] = None,
    output: Annotated[
        Path | None, _output("Write the report to FILE (atomically) instead of stdout.")
    ] = None,
    expect: Expect = None,
    no_cache: NoCache = False,
    color: Color = "auto",
) -> None:
    """Diagnose this machine (or a snapshot): driver, GPUs, CUDA libraries, torch, environment."""
    _run(ctx, "envdoctor.cli.check")


@app.command(
    cls=Command,
    short_help="Probe this machine and write all facts as JSON (a redacted, versioned snapshot).",
)
def collect(
    ctx: typer.Context,
    output: Annotated[Path | None, _output("Write the snapshot to FILE instead of stdout.")] = None,
    python: Annotated[str | None, _python()] = None,
    timeout: Annotated[float, _timeout("Global time budget in seconds.")] = 30.0,
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact",
            help="Keep the hostname, user name and GPU UUIDs (the file is then written 0600).",
        ),
    ] = False,
    no_cache: NoCache = False,
) -> None:
    """Probe this machine and write every fact as JSON: a versioned snapshot, redacted
    (hostname, user name, GPU UUIDs) unless --no-redact. See docs/snapshot.md."""
    _run(ctx, "envdoctor.cli.collect")


@app.command(
    cls=Command,
    short_help="The torch wheel that fits this driver and these GPUs, why, and what would not work.",
    epilog="Exit 0 when a wheel fits (the CPU build only on a machine without NVIDIA GPUs), 1 "
    "when none does or the driver must be fixed first (NVML cannot list the GPUs), 2 on errors.",
)
def recommend(
    ctx: typer.Context,
    snapshot: Annotated[
        Path | None, _snapshot("Recommend for the machine in a snapshot (envdoctor collect).")
    ] = None,
    python: Annotated[
        str | None,
        _python(
            "Interpreter whose installed torch to keep where a variant of it fits (default: the "
            "active venv or conda env, else python3 on PATH; not with --snapshot)."
        ),
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option(
            "--torch",
            metavar="VERSION",
            help="Pin a torch release: 2.11, 2.11.0 or 2.11.0+cu128.",
            callback=_value,
        ),
    ] = None,
    format: Annotated[
        Literal["text", "json", "markdown"], _format("text", "json", "markdown")
    ] = "text",
    json: Json = False,
    output: Annotated[
        Path | None, _output("Write the recommendation to FILE (atomically) instead of stdout.")
    ] = None,
    tables: Tables = None,
    expect: Expect = None,
    no_cache: NoCache = False,
    color: Color = "auto",
) -> None:
    """The best official torch wheel for this driver and these GPUs, why, and what would not
    work. The installed torch's version is kept when a variant of it fits."""
    _run(ctx, "envdoctor.cli.recommend")


tables_app = _group(
    help="Check and print the compatibility tables (CUDA, drivers, GPUs, cuDNN, PyTorch wheels).",
    short_help="Check and print the compatibility tables.",
)
app.add_typer(tables_app, name="tables")


@tables_app.command(
    "validate",
    cls=Command,
    short_help="Validate the shipped tables, or DIR's tables merged over them; exit 2 on the first error.",
)
def tables_validate(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            parser=_path,
            help="A directory of your own tables (validated merged over the shipped ones).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Validate the shipped tables, or DIR's tables merged over them; exit 2 on the first
    error."""
    _run(ctx, "envdoctor.cli.tables")


MAX_INDEX = 999_999_999  # an NVML index of more digits is a usage error, not a search


def _table_names(incomplete: str) -> list[str]:
    return [name for name in TABLE_NAMES if name.startswith(incomplete)]


@tables_app.command(
    "show",
    cls=Command,
    short_help="Print one table as envdoctor loaded it (after ENVDOCTOR_TABLES and --tables).",
)
def tables_show(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="cuda-toolkits, driver-branches, architectures, cudnn or pytorch.",
            autocompletion=_table_names,
        ),
    ],
    tables: Tables = None,
    format: Annotated[Literal["text", "json"], _format("text", "json")] = "text",
    json: Json = False,
    output: Annotated[
        Path | None, _output("Write the table to FILE (atomically) instead of stdout.")
    ] = None,
    no_cache: NoCache = False,
    color: Color = "auto",
) -> None:
    """Print one table as envdoctor loaded it (after ENVDOCTOR_TABLES and --tables)."""
    _run(ctx, "envdoctor.cli.tables")


@app.command(
    cls=Command,
    short_help="A script that fixes what `envdoctor check` finds: a dry run unless run with --apply.",
)
def fix(
    ctx: typer.Context,
    snapshot: Annotated[
        Path | None,
        _snapshot("Plan for a snapshot (envdoctor collect) instead of this machine."),
    ] = None,
    output: Annotated[
        Path | None,
        _output("Write to FILE (a script: executable, 0777 less the umask) instead of stdout."),
    ] = None,
    format: Annotated[
        Literal["script", "steps", "json"],
        _format("script", "steps", "json", help="script (bash), steps (a numbered plan) or json."),
    ] = "script",
    python: Annotated[
        str | None,
        _python(
            "Interpreter whose torch to inspect and repair (default: the active venv or conda "
            "env, else python3 on PATH)."
        ),
    ] = None,
    timeout: Annotated[float, _timeout("Time budget for probing, in seconds.")] = 30.0,
    prefer: Annotated[
        Literal["wheel", "driver"],
        typer.Option(
            "--prefer",
            metavar="[wheel|driver]",
            case_sensitive=False,
            help="torch.driver-too-old: reinstall a torch that fits the driver (wheel) or "
            "upgrade the driver (driver).",
        ),
    ] = "wheel",
    index_host: Annotated[
        list[str] | None,
        typer.Option(
            "--index-host",
            metavar="HOST",
            callback=_value,
            help="A host besides download.pytorch.org that the script may install torch from "
            "(a mirror named in your tables); repeatable.",
        ),
    ] = None,
    expect: Expect = None,
    no_cache: NoCache = False,
    color: Color = "auto",
) -> None:
    """Write a reviewable bash script that fixes what `envdoctor check` finds. The script is a
    dry run unless started with --apply; see docs/fix.md."""
    _run(ctx, "envdoctor.cli.fix")


@app.command(
    cls=Command,
    short_help="The fast tier for startup probes: NVML, /proc, /dev; a one-line verdict within a budget.",
    epilog=EXIT_CODES,
)
def probe(
    ctx: typer.Context,
    timeout: Annotated[
        float, _timeout("Hard budget in seconds; past it the verdict is 'unknown' (exit 2).")
    ] = 1.0,
    format: Annotated[
        Literal["text", "json", "prometheus"],
        _format("text", "json", "prometheus", help="text, json, or Prometheus's textfile."),
    ] = "text",
    json: Json = False,
    output: Annotated[
        str | None,
        _output("Write the output to FILE (atomically); stdout still gets the verdict."),
    ] = None,
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require",
            metavar="EXPR",
            callback=_value,
            help="A gate such as gpus>=8, driver>=550, cuda>=12.4, memory_free>=70GiB, "
            "model~=H100; every gate must hold; repeatable.",
        ),
    ] = None,
    expect: Expect = None,
    strict: Strict = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="After the verdict, one line per finding.")
    ] = False,
    color: Color = "auto",
) -> None:
    """Fast health probe (NVML, /proc, /dev, the loader's cache; never torch). The first output
    line is the verdict (at most 80 bytes). A watchdog enforces the budget: past it the verdict
    is 'unknown' and the exit code 2."""
    _run(ctx, "envdoctor.cli.probe")


spec_app = _group(
    help="Node specs (baselines): write one from this machine, or validate one.",
    short_help="Node specs (baselines): write one, or validate one.",
)
app.add_typer(spec_app, name="spec")


@spec_app.command(
    "init",
    cls=Command,
    short_help="Write the spec this machine meets now (review it, then use it with check --spec).",
)
def spec_init(
    ctx: typer.Context,
    output: Annotated[Path | None, _output("Write the spec to FILE instead of stdout.")] = None,
    python: Annotated[
        str | None,
        _python(
            "Interpreter whose torch to record (default: the active venv or conda env, else "
            "python3 on PATH)."
        ),
    ] = None,
    timeout: Annotated[float, _timeout("Global time budget in seconds.")] = 30.0,
    snapshot: Annotated[
        Path | None, _snapshot("Write the spec of a snapshot (envdoctor collect) instead.")
    ] = None,
    no_torch: Annotated[
        bool, typer.Option("--no-torch", help="Do not record (or probe) torch and cuDNN.")
    ] = False,
    no_cache: NoCache = False,
) -> None:
    """Write the spec this machine meets now (review it, then use it with check --spec)."""
    _run(ctx, "envdoctor.cli.spec")


@spec_app.command(
    "validate",
    cls=Command,
    short_help="Check that a spec file is well formed (exit 0), or say what is wrong and where (exit 2).",
)
def spec_validate(
    ctx: typer.Context,
    path: Annotated[
        Path, typer.Argument(metavar="FILE", help="The spec file to read.", parser=_path)
    ],
) -> None:
    """Check that a spec file is well formed (exit 0), or say what is wrong and where (exit 2)."""
    _run(ctx, "envdoctor.cli.spec")


@app.command(
    cls=Command,
    short_help="Compare two snapshots (works on node A, fails on B): only the facts that differ.",
    epilog="Exit 0 when the facts agree, 1 when they differ, 2 when a file cannot be read.",
)
def diff(
    ctx: typer.Context,
    a: Annotated[
        Path,
        typer.Argument(
            metavar="A", help="Snapshot of the first machine (envdoctor collect).", parser=_path
        ),
    ],
    b: Annotated[
        Path, typer.Argument(metavar="B", help="Snapshot of the second machine.", parser=_path)
    ],
    all: Annotated[
        bool, typer.Option("--all", help="Also show facts that change from run to run.")
    ] = False,
    format: Annotated[Literal["text", "json"], _format("text", "json")] = "text",
    json: Json = False,
    output: Annotated[
        Path | None, _output("Write the differences to FILE (atomically) instead of stdout.")
    ] = None,
    color: Color = "auto",
) -> None:
    """Compare two snapshots ("works on node A, fails on B"): only the facts that differ. Facts
    that change from run to run (free memory, processes, timestamps) are hidden unless --all."""
    _run(ctx, "envdoctor.cli.diff")


@app.command(
    "slurm-healthcheck",
    cls=Command,
    short_help="Drain this Slurm node when it is unhealthy; resume it when envdoctor drained it and it is healthy again.",
    epilog=EXIT_CODES,
)
def slurm_healthcheck(
    ctx: typer.Context,
    node: Annotated[
        str | None,
        typer.Option(
            "--node",
            metavar="NAME",
            callback=_value,
            help="Slurm node name (default: $SLURMD_NODENAME, else the short hostname).",
        ),
    ] = None,
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            metavar="FILE",
            parser=_path,
            callback=_value,
            help="Also report drift from this node spec (envdoctor spec init).",
        ),
    ] = None,
    require: Annotated[
        list[str] | None,
        typer.Option(
            "--require", metavar="EXPR", callback=_value, help="A gate such as gpus>=8; repeatable."
        ),
    ] = None,
    python: Annotated[
        str | None, _python("Also check the torch of this interpreter (slower).")
    ] = None,
    timeout: Annotated[
        float, _timeout("Budget for the whole run in seconds (Slurm kills at 60).")
    ] = 45.0,
    scontrol: Annotated[
        str,
        typer.Option(
            "--scontrol", metavar="PATH", callback=_value, help="The scontrol program to run."
        ),
    ] = "scontrol",
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (drain).")] = False,
    drain_on_unknown: Annotated[
        bool,
        typer.Option("--drain-on-unknown", help="Drain when the health cannot be determined."),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Read the node's state but only print the scontrol update."),
    ] = False,
    drain_max_share: Annotated[
        str | None,
        typer.Option(
            "--drain-max-share",
            metavar="SHARE",
            callback=_value,
            help="The most of a partition envdoctor drains within --drain-window without a "
            "person: 0-1 or N% (default $ENVDOCTOR_DRAIN_MAX_SHARE, else 0.10; 1 turns the "
            "budget off).",
        ),
    ] = None,
    drain_window: Annotated[
        str | None,
        typer.Option(
            "--drain-window",
            metavar="SECONDS",
            callback=_value,
            help="The drain budget's window in seconds (default $ENVDOCTOR_DRAIN_WINDOW, else "
            "3600).",
        ),
    ] = None,
    state_dir: Annotated[
        str | None,
        typer.Option(
            "--state-dir",
            metavar="DIR",
            callback=_value,
            help="Where the node keeps the drain budget's state (default $ENVDOCTOR_STATE_DIR, "
            "else $STATE_DIRECTORY, else /var/lib/envdoctor).",
        ),
    ] = None,
    expect: Expect = None,
    no_cache: NoCache = False,
) -> None:
    """Drain this node when it is unhealthy; resume it when envdoctor drained it and it is
    healthy again. An operator's drain is never touched."""
    _run(ctx, "envdoctor.cli.slurm")


@app.command(
    cls=Command,
    short_help="Run CUDA, cuBLAS, cuDNN and NCCL for real on each GPU, time-bounded, and attribute failures.",
    epilog="Exit 0 every step passed, 1 a step failed, 2 could not determine (nothing to test) "
    "or a usage error. With --reproduce: 1 the error reproduced, 0 it did not, 2 undetermined.",
)
def smoke(
    ctx: typer.Context,
    python: Annotated[
        str | None,
        _python(
            "Interpreter whose torch to test (default: the active venv or conda env, else "
            "python3 on PATH)."
        ),
    ] = None,
    timeout: Annotated[
        float, _timeout("Time budget per GPU in seconds (GPUs run in parallel).")
    ] = 60.0,
    step_timeout: Annotated[
        float,
        typer.Option(
            "--step-timeout",
            metavar="SECONDS",
            callback=_seconds,
            help="Time budget per step in seconds (at most --timeout).",
        ),
    ] = 30.0,
    gpu: Annotated[
        list[int] | None,
        typer.Option(
            "--gpu",
            metavar="N",
            min=0,
            max=MAX_INDEX,
            help="Test only this GPU (NVML index); repeatable.",
        ),
    ] = None,
    format: Annotated[Literal["text", "json"], _format("text", "json")] = "text",
    json: Json = False,
    output: Annotated[
        Path | None, _output("Write the report to FILE (atomically) instead of stdout.")
    ] = None,
    color: Color = "auto",
    reproduce: Annotated[
        Literal["cublas-alloc", "cudnn-init"] | None,
        typer.Option(
            "--reproduce",
            metavar="[cublas-alloc|cudnn-init]",
            case_sensitive=False,
            help="Check whether this error reproduces under GPU memory pressure. WARNING: it "
            "fills the GPU's memory to the last MiB; other jobs on that GPU may fail with out of "
            "memory. A GPU NVML shows in use by other processes is refused unless named with "
            "--gpu N --force.",
        ),
    ] = None,
    leave: Annotated[
        int | None,
        typer.Option(
            "--leave",
            metavar="MIB",
            min=0,
            max=1 << 24,
            help="With --reproduce: leave only this many MiB free after the probe's own CUDA "
            "context (default: search for the threshold).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="With --reproduce --gpu N: fill GPU N even though other processes use it.",
        ),
    ] = False,
    in_process: Annotated[
        bool,
        typer.Option(
            "--in-process",
            help="With --reproduce: torch's own cache holds the memory and a new thread creates "
            "its cuBLAS/cuDNN handle (the usual case inside a training process).",
        ),
    ] = False,
    budget: Annotated[
        float,
        typer.Option(
            "--budget",
            metavar="SECONDS",
            callback=_seconds,
            help="With --reproduce: start no new probe after this many seconds.",
        ),
    ] = 300.0,
    no_cache: NoCache = False,
) -> None:
    """Run CUDA, cuBLAS, cuDNN and NCCL for real on each GPU, time-bounded, and attribute
    failures. --reproduce fills a GPU's memory: never run it on a GPU other jobs use."""
    _run(ctx, "envdoctor.cli.smoke")


@app.command(
    cls=Command,
    short_help="Explain an error log: which known failures it contains, the root cause, and the fix.",
    epilog="Exit 0 when no known signature occurs, 1 when a cause is found, 2 when only possible "
    "causes are, when nothing is found in a log that could be read only in part (a damaged or "
    "cut-off .gz: one warning line says so), or on a usage error.",
)
def explain(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE|-",
            help="The log to explain (a file, .gz too; - or nothing: stdin).",
            show_default=False,
        ),
    ] = "-",
    format: Annotated[
        Literal["text", "json", "markdown"], _format("text", "json", "markdown")
    ] = "text",
    json: Json = False,
    with_host: Annotated[
        bool,
        typer.Option(
            "--with-host", help="Confirm or rule out each cause with this machine's live facts."
        ),
    ] = False,
    verbose: Verbose = False,
    timeout: Annotated[float, _timeout("Time budget for --with-host probes, in seconds.")] = 30.0,
    list_signatures: Annotated[
        bool,
        typer.Option("--list-signatures", help="List every known error signature and exit."),
    ] = False,
    output: Annotated[
        Path | None, _output("Write the explanation to FILE (atomically) instead of stdout.")
    ] = None,
    no_cache: NoCacheKb = False,
    color: Color = "auto",
) -> None:
    """Explain an error log: which known failures it contains, the root cause, and the fix."""
    _run(ctx, "envdoctor.cli.explain")


@app.command(
    cls=Command,
    short_help="Run a command, pass its output through unchanged, and explain it if it fails.",
    # options end at the command's first word: `run python train.py --lr 3` keeps --lr
    context_settings={"allow_interspersed_args": False},
)
def run(
    ctx: typer.Context,
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="CMD",
            help="The command to run and its arguments (after -- where the command's first "
            "word starts with -); options after CMD are the command's own.",
            show_default=False,
        ),
    ] = None,
    blocking: Annotated[
        bool,
        typer.Option(
            "--blocking", help="Set CUDA_LAUNCH_BLOCKING=1 so CUDA errors get a true stack."
        ),
    ] = False,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            metavar="FILE",
            callback=_value,
            parser=_path,
            help="Also write the full log to FILE.",
        ),
    ] = None,
    format: Annotated[
        Literal["text", "json", "markdown"],
        _format(
            "text",
            "json",
            "markdown",
            help="Format of the explanation (on stderr; json: on stdout, the command's output "
            "on stderr; with -o: in FILE, the command's output where it was).",
        ),
    ] = "text",
    output: Annotated[
        Path | None,
        _output(
            "Write the explanation to FILE (atomically) instead of stderr (json: instead of "
            "stdout)."
        ),
    ] = None,
    with_host: Annotated[
        bool,
        typer.Option("--with-host", help="On failure, also confirm causes with live facts."),
    ] = False,
    verbose: Verbose = False,
    no_cache: NoCacheKb = False,
    color: Color = "auto",
) -> None:
    """Run a command, pass its output through unchanged, and explain it if it fails. The exit
    code is the command's own (128+N when a signal killed it). The explanation goes to stderr,
    so the command's stdout stays clean. With --format json a JSON document is the only thing
    on stdout, whether the command failed or not; the command's stdout goes to stderr with its
    stderr."""
    if not command:
        raise Refused("missing -- CMD [ARGS]...")
    _run(ctx, "envdoctor.cli.run")


def click_command() -> Any:
    """The click command Typer builds from the declarations above (what runs and completes).

    Typer declares its two completion flags (and ``--help``) with the default ``None``, and a
    ``None`` goes through its value coercion, which imports pydantic (~80 ms here) before a
    subcommand's ``--help`` can answer; ``False`` is the same "not given" to their callbacks and
    needs no coercion.
    """
    command = typer.main.get_command(app)
    for param in command.params:
        if (
            param.name in COMPLETION_PARAMS
            and getattr(param, "is_flag", False)
            and param.default is None
        ):
            param.default = False
    return command


COMPLETION_PARAMS = ("install_completion", "show_completion")
