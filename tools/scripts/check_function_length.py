#!/usr/bin/env python3
"""Checks that no function of the library (sim/ and include/) is longer than a limit (issue 12: ~80 lines).

A brace-matching scanner, not a C++ parser: comments, string and character literals (raw strings included)
and preprocessor lines are blanked first; then, at namespace, class and `extern` scope, each `{` is classed by
the text before it: a namespace, class, struct or union body is entered; an enum body or a variable's
initializer (`= {`, `name{...}`) is skipped; a head with a parameter list (`name(...)`, then qualifiers, a
trailing return type or a constructor's initializer list) opens a function body, which runs to its matching
`}` (lambdas and local classes inside it count as its lines). A function's length is the lines from its name
to its closing brace, both included. A lambda stored in a variable at namespace scope is an initializer and
is not measured.

Prints `file:line: name: N lines (limit L)` for every function over the limit that the allow-list below does
not name, and exits 1 if there is one; an allow-list entry whose function is no longer over the limit (or no
longer exists) fails too, so the list stays true.

usage: check_function_length.py [--root DIR] [--limit N] [--top N] [--self-test]
  --limit N     the most lines a function may have (default 80)
  --top N       print the N longest functions and exit 0 (a survey, not a check)
  --self-test   check the scanner on tricky snippets (comments, strings, initializer lists) and exit
"""
import argparse
import os
import re
import sys

DEFAULT_LIMIT = 80
SCANNED = ("sim", "include")
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")

# Functions allowed over the limit: (path relative to the root, function name) -> the reason. Only data
# tables belong here: a function whose length is one entry per catalogue item, with no logic to split.
ALLOWED = {
    ("sim/cluster/gpu_catalog.cpp", "build_catalog"):
        "data table: the GPU catalog, one entry per GPU type with its sourced figures",
    # The input schemas (issue 12, "one schema per input struct"): each field declared once, in order; the
    # order is the order of docs/inputs.md, --help and the JSON output, so the table stays one list.
    ("sim/model/layout_schema.cpp", "make_layout_fields"):
        "data table: the layout schema, one entry per field (name, unit, range, documentation)",
    ("sim/io/topology_schema.cpp", "make_topology_fields"):
        "data table: the topology schema, one entry per field (name, unit, range, documentation)",
    ("sim/model/model_schema.cpp", "make_model_fields"):
        "data table: the model schema, one entry per field (name, unit, range, documentation)",
}

CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas", "noexcept",
           "requires", "static_assert", "__attribute__", "alignof", "typeid"}


def blank(text):
    """`text` with comments, string and character literals and preprocessor lines replaced by spaces (newlines
    kept, so offsets and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":  # preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        at_line_start = False
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and not (i > 0 and (text[i - 1].isalnum() or
                                                                            text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            # A quote after a digit or a hex letter inside a number is a digit separator (1'000'000).
            if c == "'" and i > 0 and re.match(r"[0-9A-Fa-f]", text[i - 1]) and re.search(
                    r"\b\d[\w']*$", text[max(0, i - 40):i]):
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(code, i, open_c, close_c):
    """The index just past the bracket that closes the one at `i`."""
    depth = 0
    n = len(code)
    while i < n:
        if code[i] == open_c:
            depth += 1
        elif code[i] == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def top_level(head):
    """`head` with the insides of (), [] and <> groups blanked (their brackets kept)."""
    out = list(head)
    depth = 0
    for k, c in enumerate(head):
        if c in "([":
            depth += 1
            if depth > 1:
                out[k] = " "
        elif c in ")]":
            depth -= 1
            if depth > 0:
                out[k] = " "
        elif depth > 0:
            out[k] = " "
    return "".join(out)


def function_name(head):
    """The name of the function whose head (the text before its `{`) is `head`, or None if it is no function
    head."""
    flat = re.sub(r"\boperator\s*(\(\s*\)|[^\s(]+)", lambda m: "operator" + "_" * (len(m.group(0)) - 8), head)
    flat = top_level(flat)
    m = None
    for cand in re.finditer(r"([~\w]+(?:\s*::\s*[~\w]+)*)\s*\(", flat):
        last = re.split(r"::", cand.group(1))[-1].strip()
        if last in CONTROL:
            continue
        m = cand
        break
    if not m:
        return None
    before = flat[:m.start()]
    # `x = ...(` or `[...](` at the top level: an initializer or a lambda, not a function head.
    if re.search(r"(?<![=!<>])=(?!=)", before) or before.rstrip().endswith("]"):
        return None
    start, end = m.span(1)
    params_end = matching(flat, m.end() - 1, "(", ")")
    return re.sub(r"\s+", "", head[start:end]), start, params_end


def scan(code):
    """[(name, first line, last line)] of every function body in `code` (already blanked)."""
    found = []
    i, n = 0, len(code)
    head_start = 0

    def line_of(k):
        return code.count("\n", 0, k) + 1

    # A stack of container scopes; a function body is skipped whole, so the scanner only walks containers.
    while i < n:
        c = code[i]
        if c in ";}":
            i += 1
            head_start = i
            continue
        if c == ":" and re.search(r"\b(public|private|protected)\s*$", code[head_start:i]) and \
                code[i + 1:i + 2] != ":":
            i += 1
            head_start = i
            continue
        if c == "(":
            i = matching(code, i, "(", ")")
            continue
        if c != "{":
            i += 1
            continue
        head = code[head_start:i]
        words = head.split()
        if re.search(r"\b(namespace|extern)\b", head) and "(" not in head:
            i += 1  # enter the namespace
            head_start = i
            continue
        if re.search(r"\b(class|struct|union)\b", top_level(head)) and "(" not in top_level(head) and \
                not re.search(r"\benum\b", head):
            if not re.search(r"(?<![=!<>])=(?!=)", top_level(head)):
                i += 1  # enter the class body
                head_start = i
                continue
        named = function_name(head) if words and not re.search(r"\benum\b", head) else None
        if named:
            name, offset, params_end = named
            # A constructor's initializer list: `) : a_(x), b_{y} {`; a brace after a name is an initializer.
            if re.search(r"(?<!:):(?!:)", head[params_end:]) and re.search(r"[\w>]\s*$", head):
                i = matching(code, i, "{", "}")
                continue
            end = matching(code, i, "{", "}")
            found.append((name, line_of(head_start + offset), line_of(end - 1)))
            i = end
            head_start = i
            continue
        # An enum body, an initializer or anything else: skipped whole.
        i = matching(code, i, "{", "}")
    return found


def functions(path):
    with open(path, encoding="utf-8") as f:
        return scan(blank(f.read()))


def library_files(root):
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, name)


SELF_TESTS = [
    # (snippet, [(name, length)])
    ("int f() {\n  // } a brace in a comment\n  const char* s = \"}\";\n  char c = '}';\n  return 1;\n}\n",
     [("f", 6)]),
    ("namespace a {\nnamespace {\nvoid g(int x = 1) {\n  if (x) {\n  }\n}\n}  // namespace\n}\n", [("g", 4)]),
    ("struct S {\n  int v{3};\n  S(int a) : v_(a), w_{a} {\n    x();\n  }\n  int get() const { return v; }\n"
     "  bool operator==(const S& o) const {\n return v == o.v; }\n};\n",
     [("S", 3), ("get", 1), ("operator==", 2)]),
    ("const std::vector<int> table = {\n 1, 2,\n 3};\nenum class E { a, b };\n"
     "auto h = [](int x) {\n return x;\n};\n",
     []),
    ("static const char* doc = R\"(\n{ not code }\n)\";\nint k() { return 1'000'000; }\n"
     "#define M(x) { x }\nint m()\n{\n  return 2;\n}\n",
     [("k", 1), ("m", 4)]),
    ("double Foo::bar(int a) const noexcept -> double {\n  return a;\n}\n"
     "template <typename T>\nT baz(T t) requires std::is_integral_v<T> {\n  return t;\n}\n",
     [("Foo::bar", 3), ("baz", 3)]),
]


def self_test():
    failures = 0
    for snippet, want in SELF_TESTS:
        got = [(name, last - first + 1) for name, first, last in scan(blank(snippet))]
        if got != want:
            failures += 1
            print(f"self-test: got {got}, want {want} for:\n{snippet}", file=sys.stderr)
    print(f"self-test: {len(SELF_TESTS) - failures} of {len(SELF_TESTS)} snippets scanned as expected")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    root = os.path.normpath(args.root)
    every = []
    for path in library_files(root):
        rel = os.path.relpath(path, root)
        for name, first, last in functions(path):
            every.append((last - first + 1, rel, first, name))
    if args.top:
        for length, rel, first, name in sorted(every, key=lambda e: (-e[0], e[1], e[2]))[:args.top]:
            print(f"{rel}:{first}: {name}: {length} lines")
        return 0
    bad = 0
    seen = set()
    for length, rel, first, name in sorted(every, key=lambda e: (e[1], e[2])):
        if length <= args.limit:
            continue
        if (rel, name) in ALLOWED:
            seen.add((rel, name))
            continue
        bad += 1
        print(f"{rel}:{first}: {name}: {length} lines (limit {args.limit})")
    for (rel, name), why in sorted(ALLOWED.items()):
        if (rel, name) not in seen:
            bad += 1
            print(f"{rel}: {name}: allowed over the limit ({why}) but not over it (or gone): remove it from "
                  f"ALLOWED in {os.path.relpath(__file__, root)}")
    if bad:
        print(f"check_function_length: {bad} problem(s); split the function along its seams (or, for a data "
              f"table only, allow it with the reason)", file=sys.stderr)
        return 1
    print(f"check_function_length: {len(every)} functions in {', '.join(SCANNED)}, none over {args.limit} "
          f"lines but the {len(ALLOWED)} allowed data table(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
