"""A review on Spark: each variant a pipeline sweep with its events kept; the same table as in process."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("vl_convert")

from kip_lab.pipeline.session import SparkSettings, spark_session
from kip_lab.review import compare

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
    pytest.mark.filterwarnings("ignore::UserWarning:pydantic"),  # scenario events pickled to Spark's workers
]
JITTERY = {
    "name": "restart-review",
    "template": "rolling_restart",
    "params": {"members": 3, "partitions": 6, "restart_every_ms": 10_000},
    "lab": {"link": {"latency": {"kind": "uniform", "low": 1, "high": 40}}},
}


def test_a_review_on_spark_has_the_numbers_of_the_same_review_in_process(tmp_path):
    spark = spark_session(SparkSettings(master="local[2]"))
    try:
        on_spark = compare(JITTERY, {"static": [False, True]}, seeds=2, out=tmp_path, executor="spark", spark=spark)
    finally:
        spark.stop()
    in_process = compare(JITTERY, {"static": [False, True]}, seeds=2)
    assert on_spark.cells() == in_process.cells()
    assert on_spark.representative == in_process.representative
    assert sorted(p.name for p in (tmp_path / "sweeps").iterdir()) == [
        "variant-0",
        "variant-0.yaml",
        "variant-1",
        "variant-1.yaml",
    ]
    assert (tmp_path / "report.html").exists() and on_spark.executor == "spark"
