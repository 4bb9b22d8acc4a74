#!/usr/bin/env python3
"""Checks that docs/architecture.md lists exactly the first-party links each library has.

    python3 tests/docs/check_dependencies.py [REPOSITORY_ROOT]

Reads every CMakeLists.txt of the project's libraries (any folder but tests/, bench/, apps/,
cmake/ and build trees, at any depth) and python/: each `tessera_add_library(<name> ... PUBLIC ... PRIVATE ...)` (cmake/TesseraLibrary.cmake)
and each `target_link_libraries(<target> ...)` of such a target or of the Python module
(`pybind11_add_module(_tessera ...)`, the library `python`). A first-party link is `tessera::<name>`
(`tessera::warnings`, compile flags only, is not one). Libraries are named by their target, not
their folder, so `tessera_add_library(graphs ...)` is `graphs` in whichever folder it
sits. The architecture page's table with the header `| library | folder | owns | links |` gives,
per library, its first-party links in backticks in the `links` column.

Fails (exit 1), naming the library and the link, when a library links a first-party library the
table does not list for it, when the table lists one it does not link, or when a library and a
table row have no counterpart. Standard library only.
"""

import glob
import os
import re
import sys

FIRST_PARTY = re.compile(r"^tessera::(\w+)$")
NOT_A_LIBRARY = {"warnings", "balance"}  # compile flags; the INTERFACE target over cli
KEYWORDS = {"SOURCES", "SEPARATE", "PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE"}


def strip_comments(text):
    out = []
    for line in text.split("\n"):
        in_quote = False
        for i, c in enumerate(line):
            if c == '"':
                in_quote = not in_quote
            elif c == "#" and not in_quote:
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def commands(text):
    """(name, [arguments], line) of every command call in a CMake file, comments removed."""
    text = strip_comments(text)
    for match in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        body = text[match.end():i - 1]
        line = text.count("\n", 0, match.start()) + 1
        yield match.group(1), re.findall(r'"[^"]*"|[^\s()]+', body), line


def expand(arguments, variables):
    out = []
    for argument in arguments:
        whole = re.fullmatch(r"\$\{(\w+)\}", argument)
        out.extend(variables.get(whole.group(1), []) if whole else [argument])
    return out


def cmake_links(root):
    """{library: {first-party link: 'FILE:LINE'}} from the CMake files, and each library's file."""
    skipped = {"tests", "bench", "apps", "cmake", "peers", "deploy", "docs", "experiments", "configs"}
    files = []
    for top in sorted(os.listdir(root)):
        if top in skipped or top.startswith((".", "build")) or not os.path.isdir(os.path.join(root, top)):
            continue
        files += sorted(glob.glob(os.path.join(root, top, "**", "CMakeLists.txt"), recursive=True))
    links, homes = {}, {}
    for path in files:
        if not os.path.exists(path):
            continue
        shown = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        variables, targets = {}, {}
        for name, arguments, line in commands(text):
            if name == "set" and arguments:
                variables[arguments[0]] = expand(arguments[1:], variables)
            elif name == "list" and len(arguments) >= 2 and arguments[0] == "APPEND":
                # Every conditional append counts: a link made in any configuration is a link.
                variables.setdefault(arguments[1], []).extend(expand(arguments[2:], variables))
            elif name == "tessera_add_library" and arguments:
                library = arguments[0].replace("/", "_")
                targets["tessera_" + library] = library
                homes[library] = shown
                links.setdefault(library, {})
                section = None
                for argument in expand(arguments[1:], variables):
                    if argument in KEYWORDS:
                        section = argument
                    elif section in ("PUBLIC", "PRIVATE"):
                        add_link(links[library], argument, f"{shown}:{line}")
            elif name == "pybind11_add_module" and arguments:
                targets[arguments[0]] = "python"
                homes["python"] = shown
                links.setdefault("python", {})
            elif name == "target_link_libraries" and arguments:
                target = arguments[0]
                library = targets.get(target)
                if library is None and target.startswith("tessera::"):
                    library = target[len("tessera::"):]
                if library is None:
                    continue
                links.setdefault(library, {})
                for argument in expand(arguments[1:], variables):
                    if argument not in KEYWORDS:
                        add_link(links[library], argument, f"{shown}:{line}")
    return links, homes


def add_link(found, argument, where):
    match = FIRST_PARTY.match(argument)
    if match and match.group(1) not in NOT_A_LIBRARY:
        found.setdefault(match.group(1), where)


def documented_links(path):
    """{library: {first-party link: line}} from the architecture page's table, and each row's line."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    table, rows, columns = {}, {}, None
    for number, line in enumerate(lines, start=1):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            columns = None
            continue
        if columns is None:
            if [c.lower() for c in cells[:1]] == ["library"] and "links" in [c.lower() for c in cells]:
                columns = [c.lower() for c in cells]
            continue
        if set(line.replace("|", "").strip()) <= set("-: "):
            continue  # the separator row
        if len(cells) != len(columns):
            raise SystemExit(f"{os.path.basename(path)}:{number}: a row of the library table has {len(cells)} "
                             f"cells, the header {len(columns)}; keep '|' out of the cells")
        name = cells[0].strip("`")
        if name in table:
            raise SystemExit(f"{os.path.basename(path)}:{number}: library '{name}' has two rows")
        rows[name] = number
        table[name] = {link: number for link in re.findall(r"`([^`]+)`", cells[columns.index("links")])}
    return table, rows


def check(root):
    page = os.path.join(root, "docs", "architecture.md")
    shown_page = os.path.relpath(page, root)
    built, homes = cmake_links(root)
    documented, rows = documented_links(page)
    problems = []
    if not documented:
        return [f"{shown_page}: no table with the header '| library | folder | owns | links |'"]
    for library in sorted(built):
        if library not in documented:
            problems.append(f"library '{library}' ({homes.get(library, '?')}) has no row in {shown_page}'s "
                            "library table; add one with its links")
            continue
        for link, where in sorted(built[library].items()):
            if link not in documented[library]:
                problems.append(f"library '{library}' links '{link}' ({where}), which {shown_page} "
                                f"(line {rows[library]}) does not list for it; add `{link}` to its links, or drop "
                                "the link")
        for link, number in sorted(documented[library].items()):
            if link not in built[library]:
                known = "" if link in built else " (no library of that name exists)"
                problems.append(f"{shown_page}:{number}: lists '{link}' as a link of '{library}', which "
                                f"{homes.get(library, 'its CMakeLists.txt')} does not link{known}; remove it "
                                "from the row, or add the link")
    for library in sorted(set(documented) - set(built)):
        problems.append(f"{shown_page}:{rows[library]}: the table has a row for '{library}', but no "
                        "tessera_add_library makes a library of that name")
    return problems, len(built)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    result = check(root)
    if isinstance(result, list):
        problems, count = result, 0
    else:
        problems, count = result
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_dependencies: {len(problems)} difference(s) between the CMake files and docs/architecture.md")
        return 1
    print(f"check_dependencies: the first-party links of all {count} libraries match docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
