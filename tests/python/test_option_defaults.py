"""The Python keyword defaults are the CLI's flag defaults, and its option checks the CLI's: both
come from one C++ value (balance/session/settings.hpp). Checked against what ``tessera multiply
--help`` and ``tessera graph --help`` print, so a default repeated (and changed) on either side
fails here, and against the CLI's message for the same mistake."""

from __future__ import annotations

import inspect
import os
import re
import subprocess

import pytest

import tessera
from tessera import _tessera

from conftest import run_cli


def cli_defaults(subcommand: str) -> dict:
    """flag -> the default its --help shows (CLI11 writes "--flag TYPE=default", a range check
    between the type and the "=")."""
    binary = os.environ.get("TESSERA_CLI")
    if not binary:
        pytest.skip("TESSERA_CLI is not set (ctest sets it)")
    text = subprocess.run([binary, subcommand, "--help"], capture_output=True, text=True, check=True).stdout
    defaults = {}
    for line in text.splitlines():
        match = re.match(r"\s+(--[a-z-]+) (\S.*?)(?:\s{2,}|$)", line)
        if match and "=" in match.group(2):
            defaults[match.group(1)] = match.group(2).rsplit("=", 1)[1]
    return defaults


def same(cli_text: str, python_value) -> bool:
    if isinstance(python_value, bool):
        return cli_text in (("on", "true", "1") if python_value else ("off", "false", "0"))
    if isinstance(python_value, (int, float)):
        return float(cli_text) == float(python_value)
    return cli_text == python_value


def python_defaults(function) -> dict:
    return {name: parameter.default for name, parameter in inspect.signature(function).parameters.items()}


def test_multiply_defaults_are_the_clis():
    flags = cli_defaults("multiply")
    python = python_defaults(tessera.Cluster.multiply)
    for keyword, flag in [("policy", "--policy"), ("layout", "--layout"), ("verify", "--verify"), ("seed", "--seed"),
                          ("panel_width", "--panel-width"), ("panels_in_flight", "--panels-in-flight"),
                          ("refill_threshold", "--refill"), ("overlap", "--overlap"),
                          ("node_timeout", "--node-timeout"), ("distribution", "--distribution")]:
        assert flag in flags, f"{flag} shows no default in `tessera multiply --help`"
        assert same(flags[flag], python[keyword]), (keyword, python[keyword], flag, flags[flag])


def test_graph_defaults_are_the_clis():
    flags = cli_defaults("graph")
    for function in (tessera.Cluster.pagerank, tessera.Cluster.connected_components):
        python = python_defaults(function)
        for keyword, flag in [("mode", "--mode"), ("partition", "--partition"), ("seed", "--seed"),
                              ("poll_ms", "--poll-ms"), ("snapshot_ms", "--snapshot-ms"),
                              ("node_timeout", "--node-timeout"), ("max_seconds", "--max-seconds"),
                              ("damping", "--damping"), ("label", "--label")]:
            if keyword not in python:
                continue
            assert flag in flags, f"{flag} shows no default in `tessera graph --help`"
            assert same(flags[flag], python[keyword]), (function.__name__, keyword, python[keyword], flags[flag])


def test_profile_defaults_are_the_clis():
    flags = cli_defaults("profile")
    python = python_defaults(tessera.Cluster.profile)
    for keyword, flag in [("probe_size", "--probe-size"), ("window_seconds", "--window-seconds")]:
        assert flag in flags, f"{flag} shows no default in `tessera profile --help`"
        assert same(flags[flag], python[keyword]), (keyword, python[keyword], flag, flags[flag])
    assert (python["refresh"], python["quick"]) == (False, False)


def test_signatures_read_the_compiled_defaults():
    multiply = _tessera.MultiplySettings()
    python = python_defaults(tessera.Cluster.multiply)
    for keyword, field in [("policy", "policy"), ("layout", "layout"), ("verify", "verify"), ("seed", "seed"),
                           ("panel_width", "panel_width"), ("panels_in_flight", "panels_in_flight"),
                           ("refill_threshold", "refill_threshold"), ("overlap", "overlap"),
                           ("tile_rows", "tile_rows"), ("node_timeout", "node_timeout_s"),
                           ("allow_nonfinite", "allow_nonfinite"), ("distribution", "distribution")]:
        assert python[keyword] == getattr(multiply, field), keyword
    graph = _tessera.GraphSettings()
    python = python_defaults(tessera.Cluster.sssp)
    for keyword, field in [("mode", "mode"), ("partition", "partition"), ("seed", "seed"), ("verify", "verify"),
                           ("poll_ms", "poll_ms"), ("snapshot_ms", "snapshot_ms"),
                           ("node_timeout", "node_timeout_s"), ("max_seconds", "max_seconds")]:
        assert python[keyword] == getattr(graph, field), keyword
    evaluation = _tessera.EvalSettings()
    compute = python_defaults(tessera.Expression.compute)
    for keyword in ("mode", "every_node", "policy", "verify", "rewrite"):
        assert compute[keyword] == getattr(evaluation, keyword), keyword
    assert (evaluation.policy, evaluation.verify) == (multiply.policy, multiply.verify)


def test_eval_defaults_are_the_clis():
    flags = cli_defaults("eval")
    python = python_defaults(tessera.Expression.compute)
    for keyword, flag in [("mode", "--mode"), ("policy", "--policy"), ("verify", "--verify")]:
        assert flag in flags, f"{flag} shows no default in `tessera eval --help`"
        assert same(flags[flag], python[keyword]), (keyword, python[keyword], flag, flags[flag])


def test_one_check_spelled_by_each_front_end(local, cluster, cli):
    with pytest.raises(tessera.InvalidInputError,
                       match=re.escape("refill_threshold=9 must be between 1 and panels_in_flight=4")):
        cluster.plan(64, 64, 64, policy="even", refill_threshold=9)
    output = run_cli(cli, "multiply", local.config, "--run-dir", local.run_dir, "--n", "64", "--policy", "even",
                     "--refill", "9", check=False)
    assert output.returncode == 2
    assert "--refill 9 must be between 1 and --panels-in-flight 4" in output.stderr
    with pytest.raises(tessera.InvalidInputError, match=re.escape("node_timeout=0 must be between 0 and 86400")):
        cluster.connected_components("rmat:4", node_timeout=0.0)
    with pytest.raises(tessera.InvalidInputError, match=re.escape("probe_size must be within 16..8192")):
        cluster.profile(probe_size=8)


def test_partition_defaults_are_the_clis():
    flags = cli_defaults("partition")
    python = python_defaults(tessera.partition)
    settings = _tessera.PartitionSettings()
    for keyword, flag in [("method", "--method"), ("imbalance", "--imbalance"), ("objective", "--objective"),
                          ("seed", "--seed")]:
        assert flag in flags, f"{flag} shows no default in `tessera partition --help`"
        assert same(flags[flag], python[keyword]), (keyword, python[keyword], flag, flags[flag])
        assert python[keyword] == getattr(settings, keyword), keyword
    assert python_defaults(tessera.partition_graph_input)["seed"] == settings.seed
