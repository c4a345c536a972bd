#!/usr/bin/env python3
"""Runs the ```python blocks of a Markdown file (docs/python.md) in order, in one namespace, from the repository
root, and compares what each prints with the ```text block that follows it (when one does: blank lines only in
between). A block whose first line is `# needs pandas` runs only where pandas is importable, and its output is
not compared (the CI machine has no pandas).

    doc_snippets.py [--update] FILE    check (exit 1 naming each difference), or rewrite the output blocks

With PYTHONPATH naming the module (build/python). tests/python/test_docs.py runs the check in ctest."""

import contextlib
import io
import re
import sys

FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(lines):
    """[(language, first line index, end line index (the closing fence))] of the fenced blocks."""
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "```":
                j += 1
            out.append((m.group(1), i, j))
            i = j + 1
        else:
            i += 1
    return out


def has_pandas():
    try:
        import pandas  # noqa: F401
        return True
    except ImportError:
        return False


def run(path, update=False):
    """Returns the list of differences (empty: the file is current); with update, rewrites the outputs."""
    with open(path) as f:
        lines = f.read().split("\n")
    found = blocks(lines)
    namespace = {"__name__": "__doc__"}
    problems, replacements = [], []
    pandas = has_pandas()
    for k, (lang, start, end) in enumerate(found):
        if lang != "python":
            continue
        code = "\n".join(lines[start + 1:end])
        needs_pandas = lines[start + 1].strip() == "# needs pandas"
        if needs_pandas and not pandas:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{path}:{start + 2}", "exec"), namespace)
        nxt = found[k + 1] if k + 1 < len(found) else None
        follows = nxt and nxt[0] == "text" and all(not s.strip() for s in lines[end + 1:nxt[1]])
        if not follows or needs_pandas:
            continue
        expected = "\n".join(lines[nxt[1] + 1:nxt[2]])
        got = out.getvalue().rstrip("\n")
        if got != expected:
            problems.append(f"{path}:{nxt[1] + 1}: the output of the block at line {start + 1} differs:\n"
                            f"--- documented\n{expected}\n--- printed\n{got}")
            replacements.append((nxt[1] + 1, nxt[2], got.split("\n")))
    if update and replacements:
        for first, end, new in reversed(replacements):
            lines[first:end] = new
        with open(path, "w") as f:
            f.write("\n".join(lines))
    return problems


def main(argv):
    update = "--update" in argv
    files = [a for a in argv if a != "--update"]
    if len(files) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    problems = run(files[0], update)
    for p in problems:
        print(p, file=sys.stderr)
    if problems and not update:
        print(f"{files[0]} is stale: PYTHONPATH=build/python python3 tests/python/doc_snippets.py --update "
              f"{files[0]} rewrites its outputs",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
