#!/usr/bin/env python3
"""Checks the documents' links: every relative link in README.md and docs/*.md must point at a file
that exists and, when it names an anchor (#heading) in a Markdown file, at a heading that exists
there (GitHub's slugs); and every docs/*.md must be reachable from docs/index.md by links.

    python3 tests/docs/check_links.py [REPOSITORY_ROOT]

The root defaults to two folders above this script. Prints one line per problem,
FILE:LINE: what is wrong, and exits 1 when there is any; 0 and a summary otherwise.
Standard library only, so that it runs wherever python3 does.
"""

import os
import re
import sys
from urllib.parse import unquote

# [text](target) or ![alt](target); the target ends at the first space (a "title" may follow).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# Reference definitions: [name]: target
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, inline code spans blanked."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker[0] * 3
                continue
            if marker.startswith(fence):
                fence = None
                continue
        if fence is not None:
            continue
        yield number, line


def strip_code_spans(line):
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lowercase, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        counts = {}
        for _, line in prose_lines(path):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def links(path):
    """(line, target) of every link in the file's prose."""
    for number, line in prose_lines(path):
        text = strip_code_spans(line)
        for match in LINK.finditer(text):
            yield number, match.group(1)
        match = REFERENCE.match(text)
        if match:
            yield number, match.group(1)


def check(root):
    docs = os.path.join(root, "docs")
    pages = sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    files = [os.path.join(root, "README.md")] + pages
    problems = []
    edges = {}  # page -> docs pages it links to
    checked = 0
    for path in files:
        shown = os.path.relpath(path, root)
        edges[path] = set()
        for number, target in links(path):
            if SCHEME.match(target) or target.startswith("//"):
                continue  # http:, https:, mailto: are outside this check
            checked += 1
            file_part, _, anchor = target.partition("#")
            file_part = unquote(file_part)
            if file_part.startswith("/"):
                problems.append(f"{shown}:{number}: link '{target}' is absolute; write it relative to {shown}")
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"{shown}:{number}: link '{target}' points at {os.path.relpath(resolved, root)}, "
                                "which does not exist")
                continue
            if anchor:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append(f"{shown}:{number}: link '{target}' names an anchor in a file that is not Markdown")
                elif unquote(anchor) not in anchors(resolved):
                    problems.append(f"{shown}:{number}: link '{target}': {os.path.relpath(resolved, root)} has no "
                                    f"heading whose anchor is '#{anchor}'")
            if resolved in pages:
                edges[path].add(resolved)

    index = os.path.join(docs, "index.md")
    if not os.path.exists(index):
        problems.append("docs/index.md does not exist; it is where every docs page must be reachable from")
    else:
        reached = {index}
        queue = [index]
        while queue:
            for page in edges.get(queue.pop(), ()):
                if page not in reached:
                    reached.add(page)
                    queue.append(page)
        for page in pages:
            if page not in reached:
                problems.append(f"{os.path.relpath(page, root)}: not reachable from docs/index.md by links; "
                                "link it from the index or from a page the index reaches")
    return problems, checked, len(files)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    problems, checked, count = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_links: {len(problems)} problem(s) in README.md and docs/*.md")
        return 1
    print(f"check_links: {checked} relative links in {count} files point at files and headings that exist; "
          "every docs page is reachable from docs/index.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
