"""``kip_lab.assignors.java_hash_order`` against Java itself, on generated keys that share hash buckets.

The cases are generated from a fixed seed so that keys collide: topic ids (Kafka ``Uuid``), member ids
(``String``) and partitions (``Integer``) in one or a few buckets, up to tree bins (nine keys or more in
one bucket of a table of 64), the early doubling of a smaller table, and the topic set Kafka's
``UniformHomogeneousAssignmentBuilder`` iterates (a member's subscribed names read into a ``HashSet``,
then their topic ids into another). Java's answers are stored in ``tests/data/java/hash_orders.json``
(made by ``tests/data/java/HashOrder.java``, which uses Java's own ``HashMap`` and ``HashSet``); where a
``java`` launcher is installed, the same cases are also run live.

Regenerate the stored answers: ``python tests/unit/test_java_hash_order_against_java.py --update``.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kip_lab.assignors.java_hash_order import (
    hash_order_after,
    hash_set_copy_capacity,
    partition_order,
    string_hash,
    string_key_order,
    topic_id_hash,
    topic_id_order,
    topic_order,
)

JAVA_DIR = Path(__file__).resolve().parents[1] / "data" / "java"
HARNESS = JAVA_DIR / "HashOrder.java"
STORED = JAVA_DIR / "hash_orders.json"


def _spread(hash_code: int) -> int:
    return hash_code ^ (hash_code >> 16)


def _uuid_in_bucket(rng: random.Random, mask: int, wanted: int) -> str:
    while True:
        text = base64.urlsafe_b64encode(rng.randbytes(16)).decode()[:22]
        if not text.startswith("-") and _spread(topic_id_hash(text)) & mask == wanted:
            return text


def _string_in_bucket(rng: random.Random, mask: int, wanted: int) -> str:
    while True:
        text = f"member-{rng.randrange(10**9)}"
        if _spread(string_hash(text)) & mask == wanted:
            return text


def generated_cases(seed: int = 26) -> list[str]:
    """Harness lines: keys crowded into few buckets, in random insertion orders and table sizes."""
    rng = random.Random(seed)
    cases = []
    for _ in range(60):
        mask = rng.choice([15, 63])
        buckets = rng.sample(range(mask + 1), rng.randint(1, 3))
        count = rng.choice([2, 3, 5, 9, 12, 40])
        kind = rng.choice(["uuid", "string"])
        make = _uuid_in_bucket if kind == "uuid" else _string_in_bucket
        keys = [make(rng, mask, rng.choice(buckets)) for _ in range(count)]
        capacity = rng.choice([-1, 16, 64, hash_set_copy_capacity(count)])
        cases.append(f"map {kind} {capacity} {' '.join(keys)}")
        cases.append(f"copy {kind} {' '.join(keys)}")
    for _ in range(30):
        stride = rng.choice([16, 32, 64, 128])
        count = rng.choice([5, 9, 10, 20, 50])
        partitions = rng.sample(range(0, stride * 60, stride), count) + rng.sample(range(stride * 60), 3)
        cases.append(f"map int {rng.choice([-1, 16, 64])} {' '.join(map(str, partitions))}")
        cases.append(f"copy int {' '.join(map(str, partitions))}")
    for _ in range(30):  # a member's next target: its old topics, some dropped, then the ones it gains
        mask = rng.choice([3, 15])
        old = [_uuid_in_bucket(rng, mask, rng.randrange(2)) for _ in range(rng.choice([0, 1, 3, 5, 10]))]
        gained = [_uuid_in_bucket(rng, mask, rng.randrange(2)) for _ in range(rng.choice([1, 3, 8]))]
        dropped = rng.sample(old, rng.randint(0, len(old)))
        ops = [f"+{k}" for k in old] + [f"-{k}" for k in dropped] + [f"+{k}" for k in gained]
        cases.append(f"ops uuid {len(old)} {' '.join(ops)}")
    for _ in range(40):
        mask = 15 if rng.random() < 0.7 else 63
        bucket = rng.randrange(mask + 1)
        count = rng.choice([2, 3, 4, 9, 13])
        topic_ids = [_uuid_in_bucket(rng, mask, bucket) for _ in range(count)]
        names = [f"topic-{rng.randrange(10**6)}" for _ in range(count)]
        cases.append("subscribed " + " ".join(f"{n}={t}" for n, t in zip(names, topic_ids, strict=True)))
    return cases


def modelled(case: str) -> list[str]:
    """What ``java_hash_order`` says Java prints for one harness line."""
    command, *fields = case.split(" ")
    if command == "subscribed":
        ids = dict(field.split("=") for field in fields)
        names = string_key_order(ids, hash_set_copy_capacity(len(ids)))
        return topic_order([ids[name] for name in names], hash_set_copy_capacity(len(ids)))
    kind, *rest = fields
    if command == "ops":  # puts, then removals, then puts (the shape generated_cases gives)
        ops = rest[1:]
        first = next((i for i, op in enumerate(ops) if op[0] == "-"), len(ops))
        removed = {op[1:] for op in ops if op[0] == "-"}
        later = [op[1:] for op in ops[first:] if op[0] == "+"]
        return hash_order_after(
            [op[1:] for op in ops[:first]], removed, later, topic_id_hash, topic_id_order, int(rest[0])
        )
    capacity: int | None
    if command == "map":
        capacity, keys = (None if int(rest[0]) < 0 else int(rest[0])), rest[1:]
    else:
        capacity, keys = hash_set_copy_capacity(len(rest)), rest
    if kind == "int":
        return [str(p) for p in partition_order([int(k) for k in keys], capacity)]
    if kind == "uuid":
        return topic_order(keys, capacity)
    return string_key_order(keys, capacity)


def run_java(cases: list[str]) -> list[list[str]]:
    result = subprocess.run(
        ["java", str(HARNESS)], input="\n".join(cases) + "\n", capture_output=True, text=True, check=True, timeout=120
    )
    return [line.split(" ") if line else [] for line in result.stdout.splitlines()]


def test_generated_cases_include_tree_bins_and_early_doubling() -> None:
    """The generated keys reach the cases worth checking: nine or more keys in one bucket of 16 or of 64."""
    cases = generated_cases()
    crowded = [c for c in cases if c.startswith("map") and len(c.split(" ")) - 3 >= 9]
    assert len(crowded) >= 20


def test_stored_java_orders_match_the_model() -> None:
    """``java.util.HashMap``/``HashSet`` (``putVal``, ``resize``, ``treeifyBin``, ``TreeNode.putTreeVal``,
    ``split``) and Kafka's ``UniformHomogeneousAssignmentBuilder`` topic set, as Java printed them."""
    stored = json.loads(STORED.read_text())
    cases = generated_cases()
    assert stored["cases"] == cases, "the generated cases changed: regenerate the stored answers"
    for case, java_order in zip(cases, stored["orders"], strict=True):
        assert modelled(case) == java_order, case


@pytest.mark.skipif(shutil.which("java") is None, reason="no java launcher installed")
def test_live_java_orders_match_the_model() -> None:
    """The same cases, run by the installed Java."""
    cases = generated_cases()
    for case, java_order in zip(cases, run_java(cases), strict=True):
        assert modelled(case) == java_order, case


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    all_cases = generated_cases()
    STORED.write_text(json.dumps({"cases": all_cases, "orders": run_java(all_cases)}, indent=0) + "\n")
