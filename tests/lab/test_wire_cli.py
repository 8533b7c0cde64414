"""``kip-lab serve``: the wire front door from the command line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest

from kip_lab.cli import main
from tests.wire_support import RawClient

ROOT = Path(__file__).resolve().parents[2]


def test_serve_a_library_scenario_with_an_extra_topic_then_stop(tmp_path):
    trace = tmp_path / "trace.jsonl"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kip_lab.cli",
            "serve",
            "basic",
            "--port",
            "0",
            "--topic",
            "extra:3",
            *("--duration", "3", "--quiet", "--trace", str(trace)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline()
        assert "bootstrap.servers=127.0.0.1:" in first, first
        port = int(first.split("bootstrap.servers=127.0.0.1:")[1].split()[0])
        client = RawClient(port)
        assert client.request(ApiVersionsRequest()).error_code == ErrorCode.none
        metadata = client.request(
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
        assert sorted((t.name, len(t.partitions)) for t in metadata.topics) == [("extra", 3), ("foo", 3)]
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "consumer group g: Stable" in out and "invariants: all held" in out
    assert trace.exists() and trace.read_text().count("\n") > 10


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--topic", "t:0"], "PARTITIONS must be at least 1"),
        (["--topic", "t:x"], "PARTITIONS must be a whole number"),
        (["--port", "70000"], "--port must be in 0..65535"),
        (["no-such-scenario"], "no-such-scenario"),
    ],
)
def test_serve_refuses_bad_input_with_exit_2(arguments, message, capsys):
    assert main(["serve", *arguments, "--duration", "0"]) == 2
    assert message in capsys.readouterr().err


def test_serve_on_a_port_in_use_exits_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--duration", "0", "--quiet"]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
