#!/usr/bin/env python3
"""The include graph of the public headers (include/holdback/), checked against the layers.

Layers, bottom to top (docs/design/architecture.md): core -> policy, detector -> flow ->
metrics -> config; testing/ sits beside them and may include any layer; abi.hpp and version.hpp
are below core. Checks: no include (from a header or an -inl implementation file) points up a layer or
sideways between policy and detector, and the headers' own includes (X.hpp -> Y.hpp, neither an
-inl file) have no cycle. An -inl file is an implementation: in header-only mode X.hpp includes
X-inl.hpp at its end, which may include the headers that include X.hpp (pragma once ends it), as
the .cpp file that compiles it would. Prints the layer graph (edges with their include counts) and the nodes per
layer folder, then "include graph: ok" or every violation and exit status 1.

    scripts/dev/include-graph.py [SOURCE_DIR] [--dot]
"""
import os
import re
import sys

LEVEL = {"version": -2, "abi": -1, "core": 0, "policy": 1, "detector": 1, "flow": 2,
         "metrics": 3, "config": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s+"holdback/([^"]+)"', re.M)


def layer(path):
    """'flow/detail/x.hpp' -> 'flow'; 'abi.hpp' -> 'abi'."""
    first = path.split("/")[0]
    return first[:-4] if first.endswith(".hpp") else first


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..")
    base = os.path.join(root, "include", "holdback")
    edges = {}
    layer_edges = {}
    problems = []
    nodes = set()
    for folder, _, files in os.walk(base):
        for name in sorted(files):
            if not name.endswith(".hpp"):
                continue
            path = os.path.relpath(os.path.join(folder, name), base)
            if not path.endswith("-inl.hpp"):
                nodes.add(path)
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                text = f.read()
            for target in INCLUDE.findall(text):
                if not path.endswith("-inl.hpp") and not target.endswith("-inl.hpp"):
                    edges.setdefault(path, set()).add(target)
                la, lb = layer(path), layer(target)
                if la != lb:
                    layer_edges[(la, lb)] = layer_edges.get((la, lb), 0) + 1
                if la == "testing" or la == lb:
                    continue
                if la not in LEVEL or lb not in LEVEL:
                    problems.append(f"{path}: unknown layer of {path} or {target}")
                elif LEVEL[lb] > LEVEL[la] or (LEVEL[lb] == LEVEL[la] and la != lb):
                    problems.append(f"{path} includes holdback/{target}: {la} may not include {lb}")

    # Cycles among nodes (depth-first search, colours).
    colour = {}
    stack = []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if colour.get(m) == 1:
                problems.append("cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
            elif m not in colour:
                visit(m)
        stack.pop()
        colour[n] = 2

    sys.setrecursionlimit(10000)
    for n in sorted(nodes):
        if n not in colour:
            visit(n)

    if "--dot" in sys.argv:
        print("digraph layers {")
        for (a, b), count in sorted(layer_edges.items()):
            print(f'  "{a}" -> "{b}" [label="{count}"];')
        print("}")
    else:
        print("layer -> layer: includes")
        for (a, b), count in sorted(layer_edges.items(), key=lambda e: (-LEVEL.get(e[0][0], 9),
                                                                     e[0])):
            print(f"  {a} -> {b}: {count}")
        print("headers per folder (without their -inl.hpp implementation files):")
        folders = {}
        for n in nodes:
            folders.setdefault(os.path.dirname(n) or ".", []).append(os.path.basename(n))
        for folder in sorted(folders):
            print(f"  {folder}/ ({len(folders[folder])}): {' '.join(sorted(folders[folder]))}")
    if problems:
        print("\n".join(problems))
        print(f"FAIL: {len(problems)} include(s) against the layers or in a cycle")
        return 1
    print("include graph: ok (no include up a layer, no cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
