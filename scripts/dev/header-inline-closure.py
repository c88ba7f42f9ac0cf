#!/usr/bin/env python3
"""Checks that every public header, included on its own in header-only mode, defines every holdback
function its inline code calls (the link check of cmake/header_checks.cmake).

    header-inline-closure.py CALLGRAPH CXX -- INCLUDE_FLAGS... -- HEADERS...

CALLGRAPH is GCC's -fcallgraph-info output (.ci, or a directory holding exactly one) for one
translation unit that includes every public header in header-only mode, compiled with -fkeep-inline-functions: one node per
function the TU defines (its definition's file and line) and one edge per direct call. For each
header H, the files H pulls in (`CXX -M -DHOLDBACK_HEADER_ONLY`, cheap: preprocessing only) are
the TU H's own check would compile. Every non-template function defined in one of those files is
emitted there (inline, and -fkeep-inline-functions emits every inline function), so every holdback
function it calls must be defined in one of those files too; a call to one defined elsewhere is
an undefined reference for a host that includes H alone. Example: with plugin-inl.hpp no longer
included by plugin.hpp in header-only mode, config/detector_config.hpp alone calls readPluginList
and defines it nowhere.

Reported: header, caller (file:line), callee, and the file that defines the callee. Not covered
(the union TU's link covers them for the headers together, not one by one): virtual functions
reached only through a vtable, variables, and the callees of template instantiations (which depend
on what instantiates them).
"""
import os
import re
import subprocess
import sys

NODE = re.compile(r'^node: \{ title: "([^"]*)" label: "((?:[^"\\]|\\.)*)"')
EDGE = re.compile(r'^edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)"')


def closure(cxx, flags, header):
    """The files a TU that includes only `header` reads, in header-only mode (real paths)."""
    out = subprocess.run([cxx, "-std=gnu++20", "-DHOLDBACK_HEADER_ONLY", *flags, "-M", "-x", "c++",
                          "-"], input=f'#include "{header}"\n', capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{header}: preprocessing failed:\n{out.stderr}")
    files = out.stdout.replace("\\\n", " ").split(":", 1)[1].split()
    return {os.path.realpath(f) for f in files}


def is_template_code(label):
    """Whether a demangled function (GCC's label: return type, qualified name, parameters) is a
    template instantiation, a member of one, or a lambda in one: its qualified name, without the
    parameter lists and the return type, still has template arguments."""
    if " [with " in label:  # GCC names a specialization's template arguments so
        return True
    text = label
    for op in ("operator<=>", "operator<<=", "operator<<", "operator<=", "operator<",
               "operator->", "operator>>=", "operator>>", "operator>=", "operator>"):
        text = text.replace(op, "operator")
    flat, depth = [], 0
    for ch in text:  # drop every parenthesized group (parameter lists, lambda signatures)
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    flat = "".join(flat).replace("<lambda>", "LAMBDA")
    angle, cut = 0, 0
    for i, ch in enumerate(flat):  # the return type ends at the last space outside <...>
        if ch == "<":
            angle += 1
        elif ch == ">":
            angle -= 1
        elif ch == " " and angle == 0:
            cut = i + 1
    return "<" in flat[cut:]


def main():
    args = sys.argv[1:]
    if len(args) < 4 or args.count("--") != 2 or args[2] != "--":
        raise SystemExit(__doc__)
    callgraph, cxx = args[0], args[1]
    second = args.index("--", 3)
    flags, headers = args[3:second], args[second + 1:]
    if os.path.isdir(callgraph):
        found = [os.path.join(d, f) for d, _, files in os.walk(callgraph) for f in files
                 if f.endswith(".ci")]
        if len(found) != 1:
            raise SystemExit(f"{callgraph}: expected one .ci file, found {found}")
        callgraph = found[0]

    with open(callgraph, encoding="utf-8", errors="replace") as f:
        m = re.match(r'graph: \{ title: "([^"]*)"', f.readline())
    if not m:
        raise SystemExit(f"{callgraph}: not GCC -fcallgraph-info output")
    tu = m.group(1)
    prefix = tu + ":"
    defined = {}  # symbol -> (file, line, label)
    edges = []
    with open(callgraph, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = NODE.match(line)
            if m:
                title, label = m.groups()
                where = label.rsplit("\\n", 1)[-1]
                file, _, rest = where.partition(":")
                if title.startswith(prefix) and file:
                    name = title[len(prefix):]
                    defined[name] = (os.path.realpath(file), rest.split(":")[0],
                                     label.rsplit("\\n", 1)[0])
                continue
            m = EDGE.match(line)
            if m:
                edges.append(m.groups())
    if not defined:
        raise SystemExit(f"{callgraph}: no function defined by {tu}; is it GCC's -fcallgraph-info?")

    def strip(title):
        return title[len(prefix):] if title.startswith(prefix) else title

    calls = []  # (caller file, caller line, caller label, callee label, callee file)
    for source, target in edges:
        caller, callee = defined.get(strip(source)), defined.get(strip(target))
        if caller is None or callee is None or "/holdback/" not in caller[0] or \
                "/holdback/" not in callee[0] or is_template_code(caller[2]):
            continue
        if caller[0] != callee[0]:
            calls.append((caller[0], caller[1], caller[2], callee[2], callee[0]))

    failures = []
    for header in headers:
        files = closure(cxx, flags, header)
        for file, line, caller, callee, callee_file in calls:
            if file in files and callee_file not in files:
                failures.append(f"{header} on its own (header-only): {callee} is called by "
                                f"{caller} ({file}:{line}) but defined in {callee_file}, "
                                f"which {header} does not include")
    for message in sorted(set(failures)):
        print(message, file=sys.stderr)
    if failures:
        raise SystemExit(1)
    print(f"{len(headers)} headers on their own: every holdback function their inline code calls "
          f"is defined ({len(calls)} calls across files)")


if __name__ == "__main__":
    main()
