"""The package's modules call each other through public, documented names only (issue 41): a name
with a leading underscore is its own module's business, so reaching it from another module (an
import, a getattr by string, an attribute of an object held in a private attribute, another
object's __dict__) hides a dependency instead of stating it. The compiled half, _tessera, is the
exception: its names are python/src's to choose."""

from __future__ import annotations

import ast
import glob
import os

import tessera


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def crossings(source: str) -> list:
    """(line, what) for each use of another module's private name in one module's source."""
    tree = ast.parse(source)
    siblings = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None
                for alias in node.names} - {"_tessera"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            found += [(node.lineno, f"from .{node.module or ''} import {alias.name}")
                      for alias in node.names if private(alias.name) and alias.name != "_tessera"]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and private(node.args[1].value)):
            found.append((node.lineno, f"{node.func.id}(..., {node.args[1].value!r})"))
        elif isinstance(node, ast.Attribute) and private(node.attr):
            held = node.value
            if isinstance(held, ast.Name) and held.id in siblings:
                found.append((node.lineno, f"{held.id}.{node.attr}"))
            elif isinstance(held, ast.Attribute) and private(held.attr):
                found.append((node.lineno, f"{ast.unparse(node)}"))
        elif (isinstance(node, ast.Attribute) and node.attr == "__dict__"
              and not (isinstance(node.value, ast.Name) and node.value.id == "self")):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_package_modules_use_each_others_public_names_only():
    folder = os.path.dirname(tessera.__file__)
    paths = sorted(glob.glob(os.path.join(folder, "*.py")))
    assert {"cluster.py", "expressions.py", "graphs.py"} <= {os.path.basename(path) for path in paths}
    offences = []
    for path in paths:
        with open(path) as file:
            offences += [f"{os.path.basename(path)}:{line}: {what}" for line, what in crossings(file.read())]
    assert not offences, "private names used across modules:\n" + "\n".join(offences)


def test_the_check_sees_each_kind_of_crossing():
    source = "\n".join([
        "from . import errors",
        "from .arrays import _as_matrix",
        "getattr(weights, '_partition_weights', None)",
        "self._cluster._evaluate()",
        "errors._BY_CODE",
        "report.__dict__['timing'] = 1",
        "self.__dict__['plan'] = 1",   # its own: fine
        "other._inputs",               # an object of its own class: fine
    ])
    assert [line for line, _ in crossings(source)] == [2, 3, 4, 5, 6]
