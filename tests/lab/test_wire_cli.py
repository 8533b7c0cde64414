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


def serve_process(*arguments: str) -> tuple[subprocess.Popen, int]:
    """``kip-lab serve --port 0 --quiet ARGUMENTS`` in a child process, and its bootstrap port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kip_lab.cli", "serve", "--port", "0", "--quiet", *arguments],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = process.stdout.readline()
    assert "bootstrap.servers=127.0.0.1:" in first, first + process.stderr.read()
    return process, int(first.split("bootstrap.servers=127.0.0.1:")[1].split()[0])


def test_serve_a_library_scenario_with_an_extra_topic_then_stop(tmp_path):
    trace = tmp_path / "trace.jsonl"
    process, port = serve_process("basic", "--topic", "extra:3", "--duration", "3", "--trace", str(trace))
    try:
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


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--set", "coordinator.sesion_timeout_ms=1"], "coordinator has no 'sesion_timeout_ms'; it has"),
        (["--set", "coordinator.session_timeout_ms=abc"], "coordinator.session_timeout_ms: Input should be a valid"),
        (["--set", "novalue"], "expected KEY=VALUE"),
        (["--session-timeout-ms", "0"], "coordinator.session_timeout_ms: Input should be greater than 0"),
        (["--set", "brokers.x=1"], "brokers is a value, not a group of settings"),
        (["basic", "--fidelity", "kip"], "settings (--set and the named options) apply to an empty Lab"),
        (["--assignors", "range,sticky"], "'sticky' is not a built-in server assignor; the built-in ones are"),
        (["--set", "coordinator.assignors=[]"], "at least one server-side assignor is required"),
    ],
)
def test_serve_refuses_a_bad_setting_naming_it(arguments, message, capsys):
    assert main(["serve", *arguments, "--port", "0", "--duration", "0", "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_named_options_and_set_make_the_labs_config():
    """A session timeout below the default range widens the range (the coordinator would refuse
    it otherwise); ``--fidelity`` sets the coordinator's and the share-partitions' profile."""
    from kip_lab.wire.command import NAMED_SETTINGS, lab_config, parse_setting

    chosen = [
        parse_setting("coordinator.session_timeout_ms=10000"),
        parse_setting("share.record_lock_duration_ms=5000"),
    ]
    chosen += [(key, "kip") for key in NAMED_SETTINGS["fidelity"]]
    config = lab_config(chosen)
    assert config.coordinator.session_timeout_ms == config.coordinator.min_session_timeout_ms == 10_000
    assert config.share.record_lock_duration_ms == 5_000
    assert config.coordinator.fidelity == config.share.fidelity == "kip"


@pytest.mark.parametrize(
    "arguments", [["--assignors", "range,uniform"], ["--set", 'coordinator.assignors=["range","uniform"]']]
)
def test_the_assignors_are_set_by_name_or_by_their_dotted_key(arguments):
    """``--assignors`` takes Kafka's comma-separated form; ``--set`` a JSON list as well."""
    from kip_lab.cli import _parser
    from kip_lab.wire.command import chosen_settings, lab_config

    chosen = chosen_settings(_parser().parse_args(["serve", *arguments]))
    assert lab_config(chosen).coordinator.assignors == ("range", "uniform")


def test_serve_with_a_setting_describes_it_to_an_admin_client():
    """``--set`` and the named options reach the running Lab: DescribeConfigs reads them back."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    process, port = serve_process(
        "--duration",
        "20",
        "--set",
        "coordinator.session_timeout_ms=10000",
        "--heartbeat-interval-ms",
        "2000",
        "--assignors",
        "range, uniform",
    )
    try:
        resource = DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)
        answer = RawClient(port).request(
            DescribeConfigsRequest(resources=(resource,), include_synonyms=False, include_documentation=False)
        )
        configs = {c.name: c.value for c in answer.results[0].configs}
    finally:
        process.kill()
    assert configs["group.consumer.session.timeout.ms"] == "10000"
    assert configs["group.consumer.min.session.timeout.ms"] == "10000"
    assert configs["group.consumer.heartbeat.interval.ms"] == "2000"
    assert configs["group.consumer.assignors"] == "range,uniform"  # a list config, as Kafka writes one


def test_serve_assignors_decide_what_real_kip848_consumers_receive():
    """``--assignors range``: two librdkafka KIP-848 consumers naming no server assignor
    (``group.remote.assignor`` unset) get range's co-partitioned split of two 3-partition topics,
    4 and 2 partitions, where the default (uniform) gives 3 and 3; one naming ``uniform``, which
    this broker does not offer, is refused with UNSUPPORTED_ASSIGNOR, as Kafka refuses it."""
    pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")
    from tests.wire_support import ConsumerProcess, wait_until

    process, port = serve_process(
        "--topic", "foo:3", "--topic", "bar:3", "--assignors", "range", "--heartbeat-interval-ms", "500"
    )
    base = {"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g", "group.protocol": "consumer"}
    consumers = [ConsumerProcess({**base, "client.id": name}, ["foo", "bar"]) for name in ("c1", "c2")]
    refused = ConsumerProcess({**base, "group.id": "u", "group.remote.assignor": "uniform"}, ["foo"])
    try:

        def split() -> list[list[tuple[str, int]]] | None:
            owned = sorted((consumer.assignment() for consumer in consumers), key=len)
            both = all(owned) and sum(map(len, owned)) == len(set().union(*owned)) == 6
            return owned if both else None  # both hold their targets: no partition moves any more

        assert wait_until(split, 15, "c1 and c2 to share foo and bar") == [
            [("bar", 2), ("foo", 2)],
            [("bar", 0), ("bar", 1), ("foo", 0), ("foo", 1)],
        ]
        errors = wait_until(lambda: [e["error"] for e in refused.events if e["event"] == "error"], 10, "the refusal")
        assert "The assignor or its version range is not supported by the consumer group" in errors[0], errors
    finally:
        for consumer in [*consumers, refused]:
            consumer.kill()
        process.kill()
