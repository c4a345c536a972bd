#!/usr/bin/env python3
"""Checks the library's layering against sim/modules.txt (the one place it is declared).

Every #include "..." of a module's sources (sim/<module>/*) and of its public headers (include/trainsim/, as
sim/modules.txt assigns them) must name a header of the same module or of a module it depends on, directly or
through its dependencies. A module's private headers (sim/<module>/*.hpp) may be included by other modules
only through the same rule. The dependency graph must be acyclic. Exits 1 naming each violation as
`file:line: <module> includes <header> of <module>, which <module> does not depend on`.

usage: check_layering.py [--root DIR] [--stamp FILE] [--markdown] [--check-doc FILE]
  --stamp FILE      touch FILE when the check passes (the build's custom command)
  --markdown        print the module table (module, depends on, public headers) as Markdown and exit
  --check-doc FILE  also check that FILE holds the table --markdown prints (docs/architecture.md)
"""
import argparse
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def read_table(root):
    path = os.path.join(root, "sim", "modules.txt")
    modules = {}  # name -> {"deps": [...], "headers": [...], "what": str, "line": n}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|")]
            if len(parts) != 4 or not re.fullmatch(r"[a-z0-9_]+", parts[0]):
                sys.exit(f"{path}:{n}: expected `module | depends on | headers | what it is`, got {line!r}")
            name = parts[0]
            if name in modules:
                sys.exit(f"{path}:{n}: module {name} listed twice")
            modules[name] = {"deps": parts[1].split(), "headers": parts[2].split(), "what": parts[3], "line": n}
    for name, m in modules.items():
        for d in m["deps"]:
            if d not in modules:
                sys.exit(f"{path}:{m['line']}: module {name} depends on {d}, which is not a module")
    return modules


def closure(modules):
    """Allowed modules for each module: itself and everything it reaches. Exits on a cycle."""
    allowed = {}
    state = {}

    def visit(name, stack):
        if state.get(name) == "done":
            return allowed[name]
        if state.get(name) == "open":
            cycle = stack[stack.index(name):] + [name]
            sys.exit("sim/modules.txt: the dependencies form a cycle: " + " -> ".join(cycle))
        state[name] = "open"
        reach = {name}
        for d in modules[name]["deps"]:
            reach |= visit(d, stack + [name])
        state[name] = "done"
        allowed[name] = reach
        return reach

    for name in modules:
        visit(name, [])
    return allowed


def header_owners(root, modules, errors):
    owners = {}
    for name, m in modules.items():
        for h in m["headers"]:
            owners[h] = name
    inc = os.path.join(root, "include", "trainsim")
    for h in sorted(os.listdir(inc)):
        if not h.endswith(".hpp") or h in owners:
            continue
        stem = h[: -len(".hpp")]
        implemented_in = [name for name in modules if os.path.exists(os.path.join(root, "sim", name, stem + ".cpp"))]
        if stem in modules:
            owners[h] = stem
        elif len(implemented_in) == 1:
            owners[h] = implemented_in[0]
        else:
            errors.append(f"include/trainsim/{h}: no module in sim/modules.txt lists it (add it to a module's headers)")
    return owners


def module_files(root, modules, owners):
    """(module, path relative to root) of every file the check reads."""
    files = []
    sim = os.path.join(root, "sim")
    for name in modules:
        folder = os.path.join(sim, name)
        if os.path.isdir(folder):
            for dirpath, _, names in os.walk(folder):
                for fn in sorted(names):
                    if fn.endswith((".cpp", ".hpp", ".h", ".hpp.in")):
                        files.append((name, os.path.relpath(os.path.join(dirpath, fn), root)))
    for h, name in sorted(owners.items()):
        p = os.path.join("include", "trainsim", h)
        if os.path.exists(os.path.join(root, p)):
            files.append((name, p))
    return files


def resolve(root, rel_file, target, owners):
    """The module owning an included header, None for a header outside the library (generated, or a
    library's), or a string starting with '?' when it cannot be found."""
    here = os.path.dirname(rel_file)
    if target.startswith("trainsim/"):
        h = target[len("trainsim/"):]
        return ("owner", owners.get(h, "?" + target))
    for base in (here, "sim"):
        p = os.path.normpath(os.path.join(base, target))
        if os.path.exists(os.path.join(root, p)):
            parts = p.split(os.sep)
            if len(parts) >= 3 and parts[0] == "sim":
                return ("owner", parts[1])
            return ("owner", "?" + target)
    # Generated from a template beside the including file (sim/io/embedded_defaults.hpp.in).
    if os.path.exists(os.path.join(root, here, target + ".in")):
        return ("generated", None)
    return ("owner", "?" + target)


def check(root):
    modules = read_table(root)
    allowed = closure(modules)
    errors = []
    sim = os.path.join(root, "sim")
    for entry in sorted(os.listdir(sim)):
        if os.path.isdir(os.path.join(sim, entry)) and entry not in modules:
            errors.append(f"sim/{entry}/: not a module of sim/modules.txt (add a line: {entry} | depends on | headers | what it is)")
    owners = header_owners(root, modules, errors)
    for name, rel in module_files(root, modules, owners):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                kind, owner = resolve(root, rel, m.group(1), owners)
                if kind == "generated":
                    continue
                if owner.startswith("?"):
                    errors.append(f"{rel}:{n}: includes {owner[1:]}, which no module of sim/modules.txt owns")
                elif owner not in allowed[name]:
                    errors.append(f"{rel}:{n}: {name} includes {m.group(1)} of {owner}, which {name} does not "
                                  f"depend on (sim/modules.txt)")
    return modules, errors


def markdown(modules):
    out = ["| module | depends on (directly) | public headers (include/trainsim/) | what it is |",
           "|---|---|---|---|"]
    for name, m in modules.items():
        deps = ", ".join(m["deps"]) or "—"
        headers = ", ".join(m["headers"]) or "—"
        out.append(f"| {name} | {deps} | {headers} | {m['what']} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--stamp")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--check-doc")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if args.markdown:
        sys.stdout.write(markdown(read_table(root)))
        return 0
    modules, errors = check(root)
    if args.check_doc:
        with open(args.check_doc, encoding="utf-8") as f:
            if markdown(modules) not in f.read():
                errors.append(f"{args.check_doc}: its module table is not the one sim/modules.txt gives "
                              f"(tools/scripts/check_layering.py --markdown prints it)")
    for e in errors:
        print(f"layering: {e}", file=sys.stderr)
    if errors:
        return 1
    if args.stamp:
        with open(args.stamp, "w", encoding="utf-8") as f:
            f.write("layering ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
