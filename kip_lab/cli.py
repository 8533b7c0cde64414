"""``kip-lab``: validate, run, compare and list scenarios, and print the scenario JSON Schema.

Exit codes: 0 ok; 1 a run's expectations failed, an invariant was violated or its budget ran
out; 2 invalid input (a bad scenario file, an unknown library name, an unusable option or
output path); 3 a fault in kip_lab itself (a bug: ``--debug`` shows the traceback); 130
interrupted (Ctrl-C). No input makes ``kip-lab`` print a traceback unless ``--debug`` asks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from kip_lab.assignors import BUILTIN_ASSIGNORS
from kip_lab.errors import KipLabError
from kip_lab.files import write_atomically
from kip_lab.scenarios import (
    Scenario,
    ScenarioError,
    ScenarioResult,
    list_library,
    load_library_scenario,
    load_scenario,
    run_scenario,
    scenario_schema,
)
from kip_lab.scenarios.model import LONG_MAX, export_schema

OK, FAILED, INVALID, INTERNAL, INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(KipLabError):
    """An option the command cannot use (an output path it cannot write): exit 2 with the message."""


def main(argv: list[str] | None = None) -> int:
    debug = False
    try:  # the handler is installed inside: a Ctrl-C the instant after is caught below
        if threading.current_thread() is threading.main_thread():  # from here on Ctrl-C is KeyboardInterrupt
            signal.signal(signal.SIGINT, signal.default_int_handler)
        args = _parser().parse_args(argv)
        debug = args.debug
        return args.command(args)
    except ScenarioError as exc:
        print(terminal_safe(str(exc)), file=sys.stderr)
        return INVALID
    except UsageError as exc:
        print(f"kip-lab: {terminal_safe(str(exc))}", file=sys.stderr)
        return INVALID
    except BrokenPipeError:  # the reader went away (``kip-lab run basic | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return FAILED
    except KeyboardInterrupt:
        print("kip-lab: interrupted", file=sys.stderr)
        return INTERRUPTED
    except OSError as exc:  # writing an output: a full disk, a permission taken away mid-run
        if debug:
            raise
        print(terminal_safe(f"kip-lab: {exc.filename or 'output'}: {exc.strerror or exc}"), file=sys.stderr)
        return INVALID
    except Exception as exc:  # a bug in kip_lab: one line, not a traceback
        if debug:
            raise
        error = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        print(f"kip-lab: internal error: {terminal_safe(error)} (--debug shows the traceback)", file=sys.stderr)
        return INTERNAL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kip-lab", description="Run deterministic simulations of Kafka's group protocols (KIP-848)."
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    validate = commands.add_parser("validate", help="check a scenario file; exit 0 if valid, 2 if not")
    validate.add_argument("file", type=Path)
    validate.set_defaults(command=_validate)

    run = commands.add_parser("run", help="run a scenario file or a library scenario and check its expectations")
    run.add_argument("scenario", help="a scenario file (.yaml) or a library name (see 'kip-lab list')")
    run.add_argument("--seed", type=_seed, help="override the scenario's seed")
    run.add_argument("--trace", type=Path, help="write the trace: .parquet (needs pandas, pyarrow), else JSONL")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.set_defaults(command=_run)

    shrinking = commands.add_parser(
        "shrink", help="reduce a scenario that violates an invariant to a smallest one that still does"
    )
    shrinking.add_argument("scenario", help="a scenario file (.yaml) or a library name")
    shrinking.add_argument("--invariant", help="the invariant to keep violating (default: the first one violated)")
    shrinking.add_argument("--out", type=Path, help="write the smallest scenario here (default: print it)")
    shrinking.set_defaults(command=_shrink)

    listing = commands.add_parser("list", help="list the library scenarios")
    listing.set_defaults(command=_list)

    schema = commands.add_parser("schema", help="print the scenario JSON Schema, or write it to PATH")
    schema.add_argument("path", nargs="?", type=Path)
    schema.set_defaults(command=_schema)

    sweep = commands.add_parser(
        "sweep", help="run a sweep spec (a grid of runs) on Spark or in-process into Parquet tables; resumable"
    )
    sweep.add_argument("spec", type=Path, help="a sweep spec (.yaml): template or scenario, grid, seeds")
    sweep.add_argument("--out", type=Path, required=True, help="the output folder (run again to resume)")
    target = sweep.add_mutually_exclusive_group()
    target.add_argument("--master", help="a Spark master URL (default: $KIP_LAB_SPARK_MASTER, else local[*])")
    target.add_argument("--remote", help="a Spark Connect endpoint, sc://host:port (default: $KIP_LAB_SPARK_REMOTE)")
    target.add_argument("--in-process", action="store_true", help="run in this process without Spark")
    sweep.set_defaults(command=_sweep)

    review = commands.add_parser(
        "compare", help="a design review: run a scenario's options side by side over seeds, write DIR/report.html"
    )
    review.add_argument("scenario", help="a scenario file (.yaml) or a library name (see 'kip-lab list')")
    review.add_argument(
        "--vary", action="append", required=True, metavar="KEY=V1,V2", help="an option and its values (repeatable)"
    )
    review.add_argument("--seeds", type=int, default=5, help="seeds per variant, 0..N-1 (default 5)")
    review.add_argument("--out", type=Path, required=True, help="the folder report.html is written to")
    on_spark = review.add_mutually_exclusive_group()
    on_spark.add_argument("--spark", action="store_true", help="run on Spark ($KIP_LAB_SPARK_*, else local[*])")
    on_spark.add_argument("--master", help="run on this Spark master URL")
    on_spark.add_argument("--remote", help="run on this Spark Connect endpoint, sc://host:port")
    review.set_defaults(command=_compare)

    serve = commands.add_parser(
        "serve", help="serve Kafka's wire protocol on loopback in front of a Lab on the wall clock (real clients)"
    )
    serve.add_argument("scenario", nargs="?", help="a scenario file or library name to start from (default: empty)")
    serve.add_argument("--port", type=int, default=9092, help="the bootstrap port (broker-N listens on port + N)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    serve.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS", help="create a topic")
    serve.add_argument("--seed", type=int, default=0, help="the seed of an empty Lab (a scenario has its own)")
    serve.add_argument("--duration", type=float, help="stop after this many seconds (default: at Ctrl-C)")
    serve.add_argument("--trace", type=Path, help="write the trace as JSONL when the server stops")
    serve.add_argument("--quiet", action="store_true", help="log only warnings, not each connection")
    settings = serve.add_argument_group("Lab settings (an empty Lab: a scenario has its own)")
    settings.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Lab setting by its dotted name, e.g. coordinator.session_timeout_ms=10000 (repeatable)",
    )
    settings.add_argument("--session-timeout-ms", type=int, help="the group coordinator's session timeout (KIP-848)")
    settings.add_argument("--heartbeat-interval-ms", type=int, help="the heartbeat interval it gives members (KIP-848)")
    settings.add_argument("--initial-rebalance-delay-ms", type=int, help="group.initial.rebalance.delay.ms (classic)")
    settings.add_argument(
        "--assignors",
        metavar="NAME,NAME",
        help="the server assignors offered, the first the default for members naming none "
        f"(group.consumer.assignors; built in: {', '.join(BUILTIN_ASSIGNORS)})",
    )
    settings.add_argument("--share-record-lock-duration-ms", type=int, help="group.share.record.lock.duration.ms")
    settings.add_argument("--share-delivery-count-limit", type=int, help="group.share.delivery.count.limit")
    settings.add_argument("--share-auto-offset-reset", choices=["latest", "earliest"], help="share groups' start")
    settings.add_argument("--fidelity", choices=["kafka", "kip"], help="Kafka's behaviour, or the KIP's reading")
    serve.set_defaults(command=_serve)
    return parser


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with control characters shown escaped (``\\x1b``), so that a name holding a terminal
    escape sequence is printed, not obeyed; newlines and tabs are kept."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def _seed(text: str) -> int:
    value = int(text)
    if abs(value) > LONG_MAX:
        raise argparse.ArgumentTypeError(f"a seed is a long: at most {LONG_MAX} in size")
    return value


def check_output_path(path: Path) -> None:
    """Refuse, before any work, a file that cannot be written: raises UsageError naming why."""
    parent = path.parent
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{path}: not writable")


def _validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.file)
    counts = f"{len(scenario.members)} members, {len(scenario.events)} events"
    print(terminal_safe(f"{args.file}: valid scenario {scenario.name!r} ({counts})"))
    return OK


def _resolve(name: str) -> Scenario:
    """A file if one exists at that path (or it looks like one), else a library name."""
    path = Path(name)
    if path.exists() or path.suffix in (".yaml", ".yml", ".json"):
        return load_scenario(path)
    return load_library_scenario(name)


def _run(args: argparse.Namespace) -> int:
    scenario = _resolve(args.scenario)
    if args.seed is not None:
        scenario = scenario.model_copy(update={"seed": args.seed})
    parquet = args.trace is not None and args.trace.suffix == ".parquet"
    if parquet and (find_spec("pandas") is None or find_spec("pyarrow") is None):
        print("kip-lab: --trace *.parquet needs pandas and pyarrow; write a .jsonl trace instead", file=sys.stderr)
        return INVALID
    if args.trace is not None:
        check_output_path(args.trace)
    result = run_scenario(scenario)
    trace_error = None
    if args.trace is not None:
        try:
            if parquet:
                result.trace.save_parquet(args.trace)
            else:
                result.trace.save_jsonl(args.trace)
        except OSError as exc:  # the run's summary is printed all the same
            trace_error = f"kip-lab: {args.trace}: cannot write the trace: {exc.strerror or exc}"
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        print(terminal_safe(_summary(result, None if trace_error else args.trace)))
    if trace_error:
        print(trace_error, file=sys.stderr)
        return INVALID
    return OK if result.ok else FAILED


def _summary(result: ScenarioResult, trace: Path | None) -> str:
    """The run in a terminal's words: headline, groups, members, metrics, invariants, expectations, verdict."""
    lines = [_headline(result)]
    lines += [
        f"group {gid}: {group['state']}, group epoch {group['group_epoch']}, "
        f"assignment epoch {group['assignment_epoch']}"
        for gid, group in result.groups.items()
    ]
    lines += ["", *_table(_member_table(result)), ""]
    lines += _metrics_lines(result)
    lines += _invariant_lines(result)
    lines += _expectation_lines(result)
    if trace is not None:
        lines.append(f"trace: {len(result.trace)} events written to {trace}")
    if result.stopped is not None:
        lines.append(f"STOPPED: {result.stopped}")
    lines.append("OK" if result.ok else "FAILED")
    return "\n".join(lines)


def _headline(result: ScenarioResult) -> str:
    scripted = any(m.client_state is None for m in result.members)
    return (
        f"scenario {result.scenario} (seed {result.seed}): {result.steps} steps, ended at {result.end_ms} ms, "
        + ("stable" if result.stable else "not stable")
        + ("" if result.stable or not scripted else " (the Lab does not judge scripted members: see the group state)")
        + ("" if result.time_to_stable_ms is None else f" ({result.time_to_stable_ms} ms after the last event)")
    )


def _member_table(result: ScenarioResult) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("member", "member id", "epoch", "client state", "assignment")]
    for m in result.members:
        rows.append(
            (
                m.name,
                m.member_id,
                "-" if m.member_epoch is None else str(m.member_epoch),
                (m.client_state or "(scripted)") + ("" if m.alive else " (crashed)"),
                "not in the group" if m.assignment is None else _partitions(m.assignment),
            )
        )
    return rows


def _metrics_lines(result: ScenarioResult) -> list[str]:
    if result.metrics is None:
        return [result.metrics_note or "no metrics"]
    return ["metrics:", *(f"  {key}: {_compact(value)}" for key, value in sorted(result.metrics.items()))]


def _invariant_lines(result: ScenarioResult) -> list[str]:
    if not result.violations:
        return ["invariants: all held"]
    return [
        f"invariants: VIOLATED ({len(result.violations)})",
        *(f"  step {v['step']} at {v['time_ms']} ms: {v['invariant']}: {v['explanation']}" for v in result.violations),
    ]


def _expectation_lines(result: ScenarioResult) -> list[str]:
    """How many expectations passed, then each: its value when it passed, expected and got when it failed."""
    passed = sum(e.passed for e in result.expectations)
    lines = [f"expectations: {passed}/{len(result.expectations)} passed"]
    for e in result.expectations:
        detail = _compact(e.actual) if e.passed else f"expected {_compact(e.expected)}, got {_compact(e.actual)}"
        lines.append(f"  {'ok  ' if e.passed else 'FAIL'} {e.name}: {detail}")
    return lines


def _partitions(assignment: dict[str, list[int]]) -> str:
    return ", ".join(f"{topic}-{p}" for topic, parts in assignment.items() for p in parts) or "(none)"


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _shrink(args: argparse.Namespace) -> int:
    """Exit 0 with the smallest scenario written (or printed); 1 if the run violates nothing."""
    from kip_lab.scenarios.shrink import NothingToShrink, scenario_yaml, shrink

    scenario = _resolve(args.scenario)
    if args.out is not None:
        check_output_path(args.out)
    try:
        result = shrink(scenario, args.invariant)
    except NothingToShrink as exc:
        print(terminal_safe(f"kip-lab shrink: {exc}"), file=sys.stderr)
        return FAILED
    text = scenario_yaml(result.scenario)
    if args.out is None:
        print(text, end="")
        print(terminal_safe(result.summary()), file=sys.stderr)
        return OK
    write_atomically(args.out, text)
    print(terminal_safe(result.summary()))
    print(f"wrote {args.out}: replay it with 'kip-lab run {args.out}'; in a notebook, open it at the violation with")
    print(f"  widgets.explore(run_lab(load_scenario({str(args.out)!r})), start_step={result.step})")
    return OK


def _list(args: argparse.Namespace) -> int:
    for name in list_library():
        description = " ".join(load_library_scenario(name).description.split())
        first = description.split(". ")[0].rstrip(".")
        print(f"{name:<22} {first}")
    return OK


def _schema(args: argparse.Namespace) -> int:
    if args.path is None:
        print(json.dumps(scenario_schema(), indent=2, sort_keys=True))
    else:
        check_output_path(args.path)
        export_schema(args.path)
        print(f"wrote {args.path}")
    return OK


def _sweep(args: argparse.Namespace) -> int:
    """Validate the spec before anything starts (exit 2 naming the field), then run; exit 1 if a run failed."""
    if find_spec("pyarrow") is None:
        print('kip-lab sweep needs the spark extra: pip install "kip-lab[spark]"', file=sys.stderr)
        return INVALID
    from kip_lab.pipeline import SweepOutputError, load_sweep, run_sweep
    from kip_lab.pipeline.session import SparkSettings, SparkSetupError, spark_session
    from kip_lab.pipeline.sweep import check_output_folder

    spec = load_sweep(args.spec)
    try:
        check_output_folder(args.out.absolute())
        settings = SparkSettings.from_env(master=args.master, remote=args.remote)
        spark = None if args.in_process else spark_session(settings)
        summary = run_sweep(spec, args.out, executor="local" if args.in_process else "spark", spark=spark)
    except (SweepOutputError, SparkSetupError) as exc:
        print(f"kip-lab sweep: {exc}", file=sys.stderr)
        return INVALID
    print(summary)
    return FAILED if summary.failed else OK


def _compare(args: argparse.Namespace) -> int:
    """Every variant validated before anything runs (exit 2 naming the --vary), then the runs and the report."""
    if any(find_spec(name) is None for name in ("pandas", "altair", "vl_convert")):
        print('kip-lab compare needs the viz extra for its report: pip install "kip-lab[viz]"', file=sys.stderr)
        return INVALID
    import yaml

    from kip_lab.review import ReviewError, compare

    vary: dict[str, list[Any]] = {}
    for option in args.vary:
        key, equals, values = option.partition("=")
        if not equals or not key or not values:
            raise UsageError(f"--vary {option}: write KEY=V1,V2 (a scenario path and its values)")
        if key in vary:
            raise UsageError(f"--vary {key} is given twice; list its values once: {key}=V1,V2")
        vary[key] = [yaml.safe_load(value) for value in values.split(",")]
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file: give the folder report.html goes to")
    spark = None
    if args.spark or args.master or args.remote:
        from kip_lab.pipeline.session import SparkSettings, spark_session

        spark = spark_session(SparkSettings.from_env(master=args.master, remote=args.remote))
    try:
        review = compare(
            args.scenario,
            vary,
            seeds=args.seeds,
            out=args.out,
            executor="local" if spark is None else "spark",
            spark=spark,
            progress=lambda line: print(line, file=sys.stderr),
        )
    except ReviewError as exc:
        raise UsageError(str(exc)) from None
    print("\n".join(review.verdicts))
    print(f"report written to {args.out / 'report.html'} ({len(review.runs)} runs in {review.seconds:.1f} s)")
    return OK


def _serve(args: argparse.Namespace) -> int:
    """A Lab (a scenario's, or empty) on the wall clock with Kafka's wire protocol in front of it."""
    if find_spec("kio") is None:
        print('kip-lab serve needs the wire extra: pip install "kip-lab[wire]"', file=sys.stderr)
        return INVALID
    from kip_lab.scenarios.runner import build_lab
    from kip_lab.wire import command

    if not 0 <= args.port <= 65535:
        print(f"kip-lab serve: --port must be in 0..65535, got {args.port}", file=sys.stderr)
        return INVALID
    if args.trace is not None:
        check_output_path(args.trace)  # now, not after the whole session: the trace would be lost
    try:
        chosen = command.chosen_settings(args)
        config = command.lab_config(chosen) if chosen else None
        scenario_lab = None if args.scenario is None else build_lab(_resolve(args.scenario))
        lab = command.build(scenario_lab, args.topic, args.seed, config)
    except ValueError as exc:
        print(f"kip-lab serve: {terminal_safe(str(exc))}", file=sys.stderr)
        return INVALID
    last_port = args.port + lab.config.brokers - 1  # broker-N listens on port + N
    if args.port and last_port > 65535:
        print(
            f"kip-lab serve: --port {args.port} puts broker-{lab.config.brokers - 1} on port {last_port}; "
            f"with {lab.config.brokers} brokers the bootstrap port is at most {65536 - lab.config.brokers}",
            file=sys.stderr,
        )
        return INVALID
    return command.run(
        lab, host=args.host, port=args.port, duration_s=args.duration, trace=args.trace, quiet=args.quiet
    )


if __name__ == "__main__":
    sys.exit(main())
