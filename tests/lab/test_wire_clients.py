"""The life cycle of a consumer group, with each Kafka client a user brings, through the front door.

Each client runs in processes of its own against a fresh ``serve`` with the topic ``orders`` of
6 partitions: 150 records are produced, two members of one group read them all, committing after
each batch (a commit a rebalance refuses is tried again on the next poll, as an application must);
one member is killed (SIGKILL: no leave); 150 more records are produced; the killed
member starts again. Checked, as a user would count: every one of the 300 records is read
(nothing skipped), each partition is read after the kill from exactly the offset committed
before it (no record committed is read again), and the group ends with all 300 committed.

Clients: confluent-kafka (librdkafka; KIP-848 and classic with two assignors), kafka-python,
aiokafka, kafkajs (Node, installed from the npm registry into a cache directory by the test
setup) and kcat (Debian's package). A client that is not installed skips with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from kip_lab.coordinator import CoordinatorConfig
from kip_lab.lab.lab import Lab, LabConfig
from kip_lab.wire import serve
from tests.wire_support import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka", reason="needs confluent-kafka (the test extra)")

TOPIC = "orders"
PARTITIONS = 6
GROUP = "life"
CLIENTS_DIR = Path(__file__).resolve().parents[1] / "clients"
NPM_CACHE = Path(os.environ.get("KIP_LAB_NPM_DIR", Path.home() / ".cache" / "kip-lab-npm"))
PHASE_TIMEOUT_S = 90.0


class Member:
    """One consumer process; its JSON-line events (``record``, ``committed``, ``error``) in ``events``."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env={**os.environ, **(env or {})}
        )
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def records(self, since: int = 0) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.events[since:] if e["event"] == "record"]

    def errors(self) -> list[str]:
        return [e["error"] for e in self.events if e["event"] == "error"]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)
        self.stderr.close()


def python_client(name: str, *options: str):
    def start(bootstrap: str, client_id: str) -> Member:
        script = str(CLIENTS_DIR / "consumer.py")
        return Member([sys.executable, script, name, bootstrap, GROUP, client_id, TOPIC, *options])

    return start


@pytest.fixture(scope="session")
def kafkajs_modules() -> Path:
    """kafkajs 2, installed from the npm registry once into a cache directory."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("kafkajs needs Node.js and npm (scripts/system-deps.sh installs them)")
    modules = NPM_CACHE / "node_modules"
    if not (modules / "kafkajs").is_dir():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        installed = subprocess.run(
            ["npm", "install", "--prefix", str(NPM_CACHE), "--no-audit", "--no-fund", "kafkajs@2"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if installed.returncode != 0:
            pytest.skip(f"npm could not install kafkajs: {installed.stderr.strip()[-300:]}")
    return modules


def kafkajs_client(modules: Path):
    def start(bootstrap: str, client_id: str) -> Member:
        script = str(CLIENTS_DIR / "consumer.js")
        return Member(["node", script, bootstrap, GROUP, client_id, TOPIC], env={"NODE_PATH": str(modules)})

    return start


def kcat_client(bootstrap: str, client_id: str) -> Member:
    """kcat's balanced consumer (``-G``): librdkafka's classic consumer, committing automatically
    every 100 ms (kcat has no commit of its own)."""
    record = '{"event": "record", "partition": %p, "offset": %o}\\n'
    settings = {
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "auto.commit.interval.ms": "100",
    }
    argv = ["kcat", "-b", bootstrap, "-G", GROUP, "-q", "-u", "-f", record]
    for key, value in settings.items():
        argv += ["-X", f"{key}={value}"]
    return Member([*argv, TOPIC])


def committed(server) -> dict[int, int]:
    """partition -> the group's committed offset, read from the Lab's coordinator."""

    def read(lab) -> dict[int, int]:
        return {p: v.offset for (t, p), v in lab.coordinator.offsets.get(GROUP, {}).items() if t == TOPIC}

    return server.call(read)


def produce(server, first: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": server.bootstrap_servers, "client.id": "producer"})
    for n in range(first, first + count):
        producer.produce(TOPIC, f"r{n}".encode(), partition=n % PARTITIONS)
    assert producer.flush(30) == 0


def life_cycle(start) -> None:
    """The life cycle in the module docstring, for members made by ``start(bootstrap, client_id)``."""
    coordinator = CoordinatorConfig(
        session_timeout_ms=6000, min_session_timeout_ms=6000, heartbeat_interval_ms=1000, min_heartbeat_interval_ms=1000
    )
    lab = Lab(seed=24, config=LabConfig(coordinator=coordinator))
    lab.create_topic(TOPIC, PARTITIONS, produce_rate_per_s=0)
    per_partition = 150 // PARTITIONS
    with serve(lab) as server:
        members = {name: start(server.bootstrap_servers, name) for name in ("a", "b")}
        try:
            produce(server, 0, 150)

            def all_read_and_committed(end: int) -> bool:
                read = {r for m in members.values() for r in m.records()}
                everything = {(p, o) for p in range(PARTITIONS) for o in range(end)}
                return everything <= read and committed(server) == dict.fromkeys(range(PARTITIONS), end)

            def wait_for(condition, what: str) -> None:
                try:
                    wait_until(condition, PHASE_TIMEOUT_S, what)
                except pytest.fail.Exception:
                    errors = {n: m.errors()[-3:] for n, m in members.items() if m.errors()}
                    pytest.fail(f"no {what} in {PHASE_TIMEOUT_S} s; committed {committed(server)}; errors {errors}")

            wait_for(lambda: all_read_and_committed(per_partition), "first 150 read and committed")
            before_kill = committed(server)
            members["a"].kill()
            seen = {name: len(member.events) for name, member in members.items()}
            produce(server, 150, 150)
            members["a again"] = start(server.bootstrap_servers, "a")
            seen["a again"] = 0
            wait_for(lambda: all_read_and_committed(2 * per_partition), "300 read and committed after the restart")
            after_kill = [r for name, m in members.items() if name != "a" for r in m.records(seen[name])]
            for partition in range(PARTITIONS):
                offsets = sorted(o for p, o in after_kill if p == partition)
                assert offsets[0] == before_kill[partition], f"partition {partition} resumed at {offsets[0]}"
                assert set(offsets) == set(range(before_kill[partition], 2 * per_partition))
            read = {r for m in members.values() for r in m.records()}
            assert read == {(p, o) for p in range(PARTITIONS) for o in range(2 * per_partition)}
        finally:
            for member in members.values():
                member.kill()


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        ("group.protocol=consumer",),
        ("group.protocol=classic", "partition.assignment.strategy=range"),
        ("group.protocol=classic", "partition.assignment.strategy=cooperative-sticky"),
    ],
    ids=["kip848", "classic-range", "classic-cooperative-sticky"],
)
def test_confluent_kafka_life_cycle(options):
    life_cycle(python_client("confluent", *options))


@pytest.mark.slow
def test_kafka_python_life_cycle():
    pytest.importorskip("kafka", reason="needs kafka-python (the test extra)")
    life_cycle(python_client("kafka-python"))


@pytest.mark.slow
def test_aiokafka_life_cycle():
    pytest.importorskip("aiokafka", reason="needs aiokafka (the test extra)")
    life_cycle(python_client("aiokafka"))


@pytest.mark.slow
def test_kafkajs_life_cycle(kafkajs_modules):
    life_cycle(kafkajs_client(kafkajs_modules))


@pytest.mark.slow
def test_kcat_life_cycle():
    if shutil.which("kcat") is None:
        pytest.skip("needs kcat (Debian's package kcat: scripts/system-deps.sh installs it)")
    life_cycle(kcat_client)
