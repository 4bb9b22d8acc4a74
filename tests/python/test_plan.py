"""Plans: repr, ==, shares, the text `tessera model` / `--show-plan` print, running a given plan,
and the model's forecast."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import tessera
from conftest import run_cli


def test_plan_is_a_value(cluster):
    plan = cluster.plan(1000, 800, 600)
    assert plan.policy == "model" and plan.layout == "rows"
    assert (plan.m, plan.n, plan.k) == (1000, 800, 600)
    assert list(plan.rows) == ["node1", "node2"]
    covered = sorted(plan.rows.values())
    assert covered[0][0] == 0 and covered[-1][1] == 1000
    assert all(covered[i][1] == covered[i + 1][0] for i in range(len(covered) - 1))
    assert abs(sum(plan.weights.values()) - 1.0) < 1e-9
    assert plan == cluster.plan(1000, 800, 600)
    assert plan != cluster.plan(1000, 800, 600, policy="even")
    assert repr(plan).startswith("Plan(policy='model', m=1000, n=800, k=600, layout='rows'")
    assert Plan_roundtrip(plan) == plan


def Plan_roundtrip(plan):
    return tessera.Plan.from_dict(json.loads(json.dumps(plan.to_dict())))


def test_plan_text_equals_tessera_model(cluster, cli):
    output = run_cli(cli, "model", cluster.config_path, "--n", "1000").stdout
    for policy in ("even", "proportional", "model"):
        text = str(cluster.plan(1000, 1000, 1000, policy=policy))
        assert text in output, f"{policy} plan not in `tessera model` output:\n{text}\n---\n{output}"
        prediction = cluster.predict(1000, 1000, 1000, policy=policy)
        block = output[output.index(text):]
        makespan = float(re.search(r"predicted makespan ([0-9.]+) s", block).group(1))
        assert prediction.makespan_s == pytest.approx(makespan, abs=1e-3)
        assert set(prediction.finish_s) == {"node1", "node2"}


def test_show_plan_of_the_cli_equals_the_plan_that_ran(local, cluster, cli):
    output = run_cli(cli, "multiply", local.config, "--run-dir", local.run_dir, "--n", "300", "--policy", "even",
                     "--show-plan").stdout
    plan = cluster.plan(300, 300, 300, policy="even")
    assert str(plan) in output
    a = np.ones((300, 300))
    _, report = cluster.multiply(a, a, policy="even")
    assert report.plan == plan
    assert str(report.plan) in output


def test_running_a_given_plan_round_trips(cluster):
    plan = cluster.plan(120, 90, 60, policy="even")
    edited = plan.to_dict()
    edited["shares"][0]["rows"], edited["shares"][1]["rows"] = [0, 100], [100, 120]
    custom = tessera.Plan.from_dict(edited)
    a = np.arange(120 * 60, dtype=np.float64).reshape(120, 60) % 7
    b = np.arange(60 * 90, dtype=np.float64).reshape(60, 90) % 5
    c, report = cluster.multiply(a, b, plan=custom, verify="exact")
    assert np.array_equal(c, a @ b)
    assert report.plan == custom
    assert [node["rows"] for node in report.nodes] == [100, 20]
    with pytest.raises(tessera.InvalidInputError, match="the plan is for"):
        cluster.multiply(a[:10], b, plan=custom)
