"""bench_service's rows: issue 27's goals as ratios from one run, and the curve."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._core import Row, check_goals  # noqa: E402

from benchmarks import bench_service  # noqa: E402


def _cell(c: int, per_s: float, p50: float, p99: float) -> dict:
    return {"concurrency": c, "items_per_s": per_s, "p50_ms": p50, "p99_ms": p99, "items": 1}


@pytest.fixture()
def result() -> dict:
    r = {
        "batch_size": 50,
        "cpus": 2,
        "in_process": {"single": {"items_per_s": 700.0}, "batch": {"items_per_s": 4000.0}},
        "service": {
            "single": [
                _cell(c, v, 4.0, p) for c, v, p in ((1, 200, 9), (8, 600, 12), (32, 900, 40))
            ],
            "batch": [_cell(c, v, 40, 90) for c, v in ((1, 2500), (8, 3400), (32, 3600))],
        },
        "paired": {
            "c1": {
                "on": _cell(1, 200, 4.1, 9),
                "off": _cell(1, 205, 4.0, 9),
                "p50_ratio_each": [1.02, 1.0, 1.04, 0.99],
                "throughput_ratio_each": [0.98, 1.0, 0.97, 1.01],
            }
        },
        "service_workers": {
            "workers": 2,
            "single": [_cell(32, 1500, 20, 60)],
            "batch": [_cell(32, 6000, 200, 400)],
        },
    }
    r["ratios"] = bench_service.ratios(r)
    return r


def test_the_goal_rows_are_ratios_with_their_goals(result):
    rows = {r["key"]: Row(bench="service", **r) for r in bench_service._goal_rows(result)}
    assert rows["service.single_vs_batch_c32"].ratio == pytest.approx(900 / 3600)
    assert rows["service.single_vs_batch_c32"].goal == 0.8
    assert rows["service.single_c8_p99_ms"].ratio == pytest.approx(12 / 15)
    assert rows["service.single_c8_p99_ms"].goal_op == "<="
    c1 = rows["service.single_c1_p50_vs_unbatched"]
    assert c1.ratio == pytest.approx(1.01) and c1.noise == pytest.approx(0.025 / 1.01)
    assert rows["service.batch_c8_vs_in_process"].ratio == pytest.approx(3400 / 4000)
    check_goals(list(rows.values()))
    verdicts = {k: r.verdict for k, r in rows.items()}
    assert verdicts == {
        "service.single_vs_batch_c32": "FAIL",
        "service.single_c8_p99_ms": "meets",
        "service.single_c1_p50_vs_unbatched": "within noise",
        "service.batch_c8_vs_in_process": "meets",
    }


def test_workers_rows_compare_with_one_worker(result):
    rows = bench_service._worker_rows(result)
    assert [r["key"] for r in rows] == ["service.single_workers_2", "service.batch_workers_2"]
    assert rows[0]["value"] / rows[0]["baseline"] == pytest.approx(1500 / 900)


def test_ratios_name_batches_and_the_unbatched_service(result):
    single1 = result["ratios"]["single@c1"]
    assert single1["vs_batch"] == pytest.approx(200 / 2500, abs=1e-3)
    assert single1["p50_vs_unbatched"] == pytest.approx(1.01, abs=1e-3)
    assert "vs_unbatched" not in result["ratios"]["single@c8"]


def test_postgres_rows_compare_workers_and_replicas_with_one_worker(result):
    assert bench_service._postgres_rows(result) == []  # not measured: no rows
    shapes = {}
    for (label, workers, replicas), (single, batch) in zip(
        bench_service.PG_SHAPES, ((500, 3000), (800, 4500), (700, 4000)), strict=True
    ):
        shapes[label] = {
            "workers": workers,
            "replicas": replicas,
            "single": [{**_cell(32, single, 20, 60), "server_cpu_us_per_item": 900.0}],
            "batch": [_cell(32, batch, 200, 400)],
        }
    result["postgres"] = {"concurrency": 32, "shapes": shapes}
    rows = {r["key"]: r for r in bench_service._postgres_rows(result)}
    assert list(rows) == [
        "service.pg_single_1_worker",
        "service.pg_single_2_workers",
        "service.pg_single_2_replicas",
        "service.pg_batch_1_worker",
        "service.pg_batch_2_workers",
        "service.pg_batch_2_replicas",
    ]
    assert rows["service.pg_single_2_workers"]["value"] == 800
    assert rows["service.pg_single_2_workers"]["baseline"] == 500
    assert "900 us per item" in rows["service.pg_single_2_replicas"]["notes"]
    assert "not measured" in rows["service.pg_batch_2_replicas"]["notes"]
