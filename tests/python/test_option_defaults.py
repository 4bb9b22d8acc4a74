"""The Python keyword defaults are the CLI's flag defaults, and its option checks the CLI's: both
come from one C++ value (balance/session/settings.hpp). Checked against what ``tessera multiply
--help`` and ``tessera graph --help`` print, so a default repeated (and changed) on either side
fails here, and against the CLI's message for the same mistake.

The keywords are checked against that value's fields too: each field of MultiplySettings,
GraphSettings, EvalSettings, PartitionSettings and ProfileOptions is a keyword of every signature
SIGNATURES says takes it, spelled as the C++ checks name it, or is listed in NOT_KEYWORDS; and each
keyword is such a field or one SIGNATURES lists as the function's own. A keyword or a field
renamed on one side only fails here."""

from __future__ import annotations

import inspect
import os
import re
import subprocess

import pytest

import tessera
from tessera import _tessera

from conftest import run_cli

# The Python keyword of a settings field whose name it does not share: keyword_spelling() in
# python/src/cluster_handle.cpp, through which every check names the option. A keyword renamed in
# the package alone would leave those messages naming a keyword that does not exist.
KEYWORD_OF_FIELD = {"node_timeout_s": "node_timeout", "reference_size": "probe_size", "only_nodes": "nodes"}

GRAPH_RUN_FIELDS = {"mode", "partition", "nodes", "placement_cache", "seed", "verify", "poll_ms", "snapshot_ms",
                    "node_timeout_s", "max_seconds"}
# weights: --weights, read against the cluster file, is not a GraphSettings field.
GRAPH_OWN = {"graph", "num_vertices", "weights", "progress"}
EVAL_FIELDS = {"mode", "tile", "nodes", "every_node", "policy", "verify", "rewrite", "tile_route"}
PARTITION_INPUT = {"graph", "num_vertices", "edge_weights", "vertex_weights"}

# (function, the settings value its keywords fill, the fields it takes as keywords, its keywords
# that are no field of it)
SIGNATURES = [
    (tessera.Cluster.multiply, _tessera.MultiplySettings,
     {"policy", "layout", "distribution", "verify", "weights", "seed", "panel_width", "panels_in_flight",
      "refill_threshold", "overlap", "tile_rows", "node_timeout_s", "allow_nonfinite"},
     {"A", "B", "out", "progress", "plan", "allow_copy"}),
    # A plan is made without running it: nothing to verify (verify, seed), no inputs (allow_nonfinite),
    # no timeout.
    (tessera.Cluster.plan, _tessera.MultiplySettings,
     {"policy", "layout", "distribution", "weights", "panel_width", "panels_in_flight", "refill_threshold",
      "overlap", "tile_rows"},
     {"m", "n", "k"}),
    (tessera.Cluster.pagerank, _tessera.GraphSettings, GRAPH_RUN_FIELDS | {"tolerance", "damping"}, GRAPH_OWN),
    (tessera.Cluster.katz, _tessera.GraphSettings, GRAPH_RUN_FIELDS | {"tolerance", "source", "beta"}, GRAPH_OWN),
    (tessera.Cluster.connected_components, _tessera.GraphSettings, GRAPH_RUN_FIELDS | {"label"}, GRAPH_OWN),
    (tessera.Cluster.sssp, _tessera.GraphSettings, GRAPH_RUN_FIELDS | {"source"}, GRAPH_OWN),
    (tessera.directed_graph, _tessera.GraphSettings, {"seed"}, {"graph", "num_vertices"}),
    (tessera.Expression.compute, _tessera.EvalSettings, EVAL_FIELDS, {"explain", "progress"}),
    (tessera.Cluster.evaluate, _tessera.EvalSettings, EVAL_FIELDS, {"expression", "explain", "progress"}),
    (tessera.partition, _tessera.PartitionSettings, {"method", "imbalance", "objective", "seed"},
     PARTITION_INPUT | {"weights"}),
    (tessera.partition_graph_input, _tessera.PartitionSettings, {"seed"}, PARTITION_INPUT),
    (tessera.Cluster.profile, _tessera.ProfileOptions,
     {"refresh", "quick", "only_nodes", "reference_size", "window_seconds"}, {"progress"}),
]

# Fields no Python signature takes. algorithm: the method called (pagerank(), sssp(), ...) sets it.
# The others are `tessera graph`'s engine tuning flags and `tessera eval --cache-mb`, not (yet)
# offered as keywords: a field added to a settings value fails test_every_field_is_a_keyword_or_listed
# until it is given a keyword or a place here.
NOT_KEYWORDS = {
    _tessera.MultiplySettings: set(),
    _tessera.GraphSettings: {"algorithm", "level_fraction", "batch_age_ms", "batch_entries", "priority_fraction"},
    _tessera.EvalSettings: {"cache_mb"},
    _tessera.PartitionSettings: set(),
    _tessera.ProfileOptions: set(),
}

# Where a default is the signature's own, not the field's: plan()'s policy, because the model's
# plan is the one worth looking at before a run (docs/python.md); sssp()'s source has none, as
# GraphSettings requires one for sssp.
OWN_DEFAULTS = {(tessera.Cluster.plan, "policy"): "model", (tessera.Cluster.sssp, "source"): inspect.Parameter.empty}


def keyword(field: str) -> str:
    return KEYWORD_OF_FIELD.get(field, field)


def fields_of(settings) -> set:
    """The fields the compiled module binds on a settings class (its read-write attributes)."""
    return {name for name in dir(settings) if not name.startswith("_")}


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
    return {name: parameter.default for name, parameter in inspect.signature(function).parameters.items()
            if name != "self"}


def signature_id(entry) -> str:
    return entry[0].__qualname__


def test_every_field_is_a_keyword_or_listed():
    for settings, not_keywords in NOT_KEYWORDS.items():
        taken = set().union(*(fields for _, filled, fields, _ in SIGNATURES if filled is settings))
        assert not taken & not_keywords, (settings.__name__, "both taken and listed", taken & not_keywords)
        placed, bound = taken | not_keywords, fields_of(settings)
        assert placed == bound, (
            f"{settings.__name__}: fields no signature takes and NOT_KEYWORDS does not list: "
            f"{sorted(bound - placed)}; named here but not fields: {sorted(placed - bound)}")


@pytest.mark.parametrize("function, settings, fields, own", SIGNATURES, ids=[signature_id(e) for e in SIGNATURES])
def test_keywords_are_the_fields_they_fill(function, settings, fields, own):
    assert fields <= fields_of(settings), (settings.__name__, "has no field", sorted(fields - fields_of(settings)))
    keywords = set(python_defaults(function))
    expected = {keyword(field) for field in fields} | own
    assert keywords == expected, (
        f"{function.__qualname__}: keywords missing: {sorted(expected - keywords)}; keywords that are neither a "
        f"{settings.__name__} field nor the function's own: {sorted(keywords - expected)}")


@pytest.mark.parametrize("function, settings, fields, own", SIGNATURES, ids=[signature_id(e) for e in SIGNATURES])
def test_signatures_read_the_compiled_defaults(function, settings, fields, own):
    defaults = settings()
    python = python_defaults(function)
    for field in sorted(fields):
        value, compiled = python[keyword(field)], getattr(defaults, field)
        if (function, keyword(field)) in OWN_DEFAULTS:
            assert value == OWN_DEFAULTS[function, keyword(field)], (function.__qualname__, field, value)
        elif value is None and not isinstance(compiled, bool):
            # None stands for the field's empty value (tile 0: chosen by simulation; no weights).
            assert not compiled, (function.__qualname__, field, compiled)
        else:
            assert value == compiled, (function.__qualname__, field, value, compiled)


def test_compute_is_evaluate_on_its_cluster():
    compute = inspect.signature(tessera.Expression.compute).parameters
    evaluate = inspect.signature(tessera.Cluster.evaluate).parameters
    assert [(p.name, p.kind, p.default) for p in compute.values() if p.name != "self"] == \
        [(p.name, p.kind, p.default) for p in evaluate.values() if p.name not in ("self", "expression")]
    evaluation, multiply = _tessera.EvalSettings(), _tessera.MultiplySettings()
    assert (evaluation.policy, evaluation.verify) == (multiply.policy, multiply.verify)


def test_multiply_defaults_are_the_clis():
    flags = cli_defaults("multiply")
    python = python_defaults(tessera.Cluster.multiply)
    for keyword_, flag in [("policy", "--policy"), ("layout", "--layout"), ("verify", "--verify"), ("seed", "--seed"),
                           ("panel_width", "--panel-width"), ("panels_in_flight", "--panels-in-flight"),
                           ("refill_threshold", "--refill"), ("overlap", "--overlap"),
                           ("node_timeout", "--node-timeout"), ("distribution", "--distribution")]:
        assert flag in flags, f"{flag} shows no default in `tessera multiply --help`"
        assert same(flags[flag], python[keyword_]), (keyword_, python[keyword_], flag, flags[flag])


# GraphSettings field -> the `tessera graph` flag whose --help shows its default.
GRAPH_FLAGS = {"mode": "--mode", "partition": "--partition", "nodes": "--nodes", "seed": "--seed",
               "poll_ms": "--poll-ms", "snapshot_ms": "--snapshot-ms", "node_timeout_s": "--node-timeout",
               "max_seconds": "--max-seconds", "damping": "--damping", "label": "--label"}


def test_graph_defaults_are_the_clis():
    flags = cli_defaults("graph")
    compared = set()
    for function, settings, fields, _ in SIGNATURES:
        if settings is not _tessera.GraphSettings:
            continue
        python = python_defaults(function)
        for field in sorted(fields & GRAPH_FLAGS.keys()):
            flag = GRAPH_FLAGS[field]
            assert flag in flags, f"{flag} shows no default in `tessera graph --help`"
            assert same(flags[flag], python[keyword(field)]), (function.__qualname__, field, python[keyword(field)],
                                                                flags[flag])
            compared.add(field)
    # damping is pagerank()'s alone, label connected_components()': each is compared where it is.
    assert compared == GRAPH_FLAGS.keys(), sorted(GRAPH_FLAGS.keys() - compared)


def test_profile_defaults_are_the_clis():
    flags = cli_defaults("profile")
    python = python_defaults(tessera.Cluster.profile)
    for keyword_, flag in [("probe_size", "--probe-size"), ("window_seconds", "--window-seconds")]:
        assert flag in flags, f"{flag} shows no default in `tessera profile --help`"
        assert same(flags[flag], python[keyword_]), (keyword_, python[keyword_], flag, flags[flag])
    assert (python["refresh"], python["quick"]) == (False, False)


def test_eval_defaults_are_the_clis():
    flags = cli_defaults("eval")
    for function in (tessera.Expression.compute, tessera.Cluster.evaluate):
        python = python_defaults(function)
        for keyword_, flag in [("mode", "--mode"), ("policy", "--policy"), ("verify", "--verify"),
                               ("tile_route", "--tile-route")]:
            assert flag in flags, f"{flag} shows no default in `tessera eval --help`"
            assert same(flags[flag], python[keyword_]), (function.__qualname__, keyword_, python[keyword_], flags[flag])


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
