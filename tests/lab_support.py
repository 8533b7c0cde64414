"""A small stable Lab to start a test from (topic foo, members named by letters)."""

from __future__ import annotations

from typing import Any

from kip_lab.lab import Lab, LabConfig


def make_lab(
    partitions: int = 6, members: str = "AB", *, seed: int = 0, config: LabConfig | None = None, **settings: Any
) -> Lab:
    lab = Lab(seed=seed, config=config)
    lab.create_topic("foo", partitions)
    for name in members:
        lab.add_consumer(name, subscribed_topic_names=["foo"], **settings)
    assert lab.run_until_stable()
    return lab
