"""The command line and the files kip_lab reads and writes: each case reported against them, pinned.

Files are written whole (a temporary name, then a rename), and a damaged one is refused naming
the file and the line; sweep grids are compared after validation; ``serve`` checks its ports and
trace path before serving; a name with a terminal escape is printed escaped; Ctrl-C is one line
and exit 130 whenever it arrives, the start-up included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
import yaml

from kip_lab import cli
from kip_lab.lab import Trace, TraceFileError
from kip_lab.pipeline import load_sweep
from kip_lab.scenarios import ScenarioError, load_library_scenario, run_scenario

ROOT = Path(__file__).parents[2]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def basic_trace() -> Trace:
    return run_scenario(load_library_scenario("basic")).trace


# ---------------------------------------------------------------------------- traces: written whole, read or refused
def test_a_trace_write_that_dies_leaves_the_old_trace_whole(basic_trace: Trace, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "t.jsonl"
    basic_trace.save_jsonl(path)
    good = path.read_bytes()

    def killed(self: Trace) -> str:
        raise KeyboardInterrupt  # Ctrl-C while the new trace is being produced

    monkeypatch.setattr(Trace, "to_jsonl", killed)
    with pytest.raises(KeyboardInterrupt):
        Trace(basic_trace).save_jsonl(path)
    assert path.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]  # no temporary file left behind


def test_an_empty_trace_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    path.write_bytes(b"")
    with pytest.raises(TraceFileError, match=r"killed.jsonl:0: file: is empty"):
        Trace.load_jsonl(path)


def test_a_trace_cut_short_is_refused_at_its_last_line(basic_trace: Trace, tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    text = basic_trace.to_jsonl()
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    lines = text[: len(text) // 2].count("\n") + 1
    with pytest.raises(TraceFileError, match=rf"cut.jsonl:{lines}: event: the last line is cut short"):
        Trace.load_jsonl(path)


def test_random_bytes_are_refused_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "noise.jsonl"
    path.write_bytes(b'{"step": 1}\n\xff\xfe\x00garbage\n')
    with pytest.raises(TraceFileError, match=r"noise.jsonl:1: "):  # line 1 lacks fields; line 2 is not UTF-8
        Trace.load_jsonl(path)
    path.write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(TraceFileError, match=r"noise.jsonl:1: event: cannot be read: 'utf-8' codec"):
        Trace.load_jsonl(path)


def test_a_line_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(TraceFileError, match=r"deep.jsonl:1: event: is nested too deeply"):
        Trace.load_jsonl(path)


@pytest.mark.skipif(find_spec("pyarrow") is None, reason="needs pyarrow")
def test_half_a_parquet_trace_is_refused(basic_trace: Trace, tmp_path: Path) -> None:
    whole = tmp_path / "t.parquet"
    basic_trace.save_parquet(whole)
    assert len(Trace.load_parquet(whole)) == len(basic_trace)
    half = tmp_path / "half.parquet"
    half.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(TraceFileError, match=r"half.parquet:0: file: is not a whole Parquet trace"):
        Trace.load_parquet(half)


def test_a_folder_is_not_a_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="is a folder"):
        Trace.load_jsonl(tmp_path)


# ---------------------------------------------------------------------------- scenario files
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_no_one_writes_to_is_read_as_empty_without_waiting(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    code, _, err = run_cli(["validate", str(fifo)], capsys)
    assert code == 2
    assert err == f"{fifo}: expected a mapping with name, topics, members, events, ...\n"
    with pytest.raises(TraceFileError, match=r"pipe\.yaml:0: file: is empty"):
        Trace.load_jsonl(fifo)


def test_a_name_with_a_terminal_escape_is_printed_escaped(tmp_path: Path, capsys) -> None:
    path = tmp_path / "escape.yaml"
    scenario = {
        "name": "escape",
        "topics": [{"name": "t", "partitions": 2}],
        "members": {"\x1b[31mA": {"subscribed_topic_names": ["t"]}},
        "run": {"until_ms": 20_000},
    }
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    code, out, _ = run_cli(["run", str(path)], capsys)
    assert code == 0
    assert "\x1b" not in out
    assert "\\x1b[31mA" in out


# ---------------------------------------------------------------------------- sweeps
SWEEP = {"name": "s", "template": "rolling_bounce", "params": {"partitions": 2}}


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"grid": {"members": [2, 2.0]}}, "grid.members: lists a value twice: [2, 2.0]"),
        ({"grid": {"members": [2, "2"]}}, "grid: two grid points are the same run: members: 2 and '2'"),
        ({"grid": {"seed": [1, 2]}, "seeds": [1]}, "grid.seed: runs take their seeds from seeds:, not from the grid"),
        ({"params": {"partitions": 2, "seed": 1}}, "params.seed: runs take their seeds from seeds:"),
        ({"seeds": {"start": 2**63 - 1, "count": 3}}, "seeds: start + count - 1 is past 9,223,372,036,854,775,807"),
        ({"seeds": [2**63]}, "seeds.0: Input should be less than or equal to 9223372036854775807"),
    ],
)
def test_a_sweep_whose_runs_would_collide_or_overflow_is_refused(changes: dict, words: str) -> None:
    with pytest.raises(ScenarioError) as refused:
        load_sweep({**SWEEP, **changes})
    assert words in str(refused.value)


# ---------------------------------------------------------------------------- serve
needs_wire = pytest.mark.skipif(find_spec("kio") is None, reason="needs the wire extra")


@needs_wire
def test_serve_refuses_a_port_whose_last_broker_would_be_past_65535(capsys) -> None:
    code, out, err = run_cli(["serve", "--port", "65535", "--duration", "0"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "kip-lab serve: --port 65535 puts broker-2 on port 65537; with 3 brokers the bootstrap port is at most 65533\n"
    )


@needs_wire
def test_serve_refuses_a_trace_path_that_is_a_folder_before_serving(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(["serve", "--port", "0", "--duration", "30", "--trace", str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    assert err == f"kip-lab: {tmp_path} is a folder; give a file name\n"


# ---------------------------------------------------------------------------- Ctrl-C, the start-up included
IMPORT_TIME = b"import time:"


def _interrupted_after(delay: float) -> tuple[float, int, str]:
    """Start ``kip-lab run rolling_bounce``, Ctrl-C it ``delay`` s after its handler is installed.

    Until ``kip_lab.console.main`` installs its handler, no code of kip_lab's has run, and Python's
    own KeyboardInterrupt traceback is all there can be. So the delays count from the moment the
    child says it is past that point, not from a measured interpreter start (which a loaded machine
    stretches): ``-X importtime`` writes a line as each import ends, and the first one after
    ``kip_lab.console``'s is from an import that ``main`` starts after installing the handler. Those
    lines are read as they come (a full pipe would block the child) and left out of what is checked.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "kip_lab", "run", "rolling_bounce"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stderr is not None
    lines: list[bytes] = []
    ready = threading.Event()

    def read() -> None:
        console_imported = False
        for line in child.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if console_imported and line.startswith(IMPORT_TIME):
                ready.set()
            console_imported |= line.startswith(IMPORT_TIME) and line.rsplit(b"|", 1)[-1].strip() == b"kip_lab.console"
        ready.set()  # the child ended without saying so: the assertions below tell why

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(120), "the child never got past kip_lab.console"
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        child.wait(timeout=120)
    finally:
        child.kill()
        child.wait()
    reader.join(timeout=30)
    err = b"".join(line for line in lines if not line.startswith(IMPORT_TIME))
    return delay, child.returncode, err.decode()


def test_ctrl_c_at_any_moment_is_one_line_and_exit_130() -> None:
    """SIGINT while importing, while building the run, and while running: always one line, 130."""
    outcomes = [_interrupted_after(delay) for delay in (0.0, 0.1, 0.3, 0.6, 1.2)]
    interrupted = [(delay, code, err) for delay, code, err in outcomes if code != 0]  # 0: it had finished
    assert interrupted and all(code == 130 and err == "kip-lab: interrupted\n" for _, code, err in interrupted), (
        outcomes
    )
    assert outcomes[0][1] == 130, outcomes  # at once, the command is still importing


def test_the_console_entry_point_imports_nothing_heavy() -> None:
    """The handler is installed before the imports that take time: the entry module imports no pydantic."""
    probe = (
        "import sys, kip_lab.console; print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'kip_lab'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout
    assert json.loads(loaded.replace("'", '"')) == ["kip_lab", "kip_lab.console", "kip_lab.errors"]
