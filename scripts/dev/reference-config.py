#!/usr/bin/env python3
"""Writes docs/reference/configuration.md (on stdout) from the loader itself.

For every built-in plugin type and every flowControl field, the field list and the defaults come
from the effective configuration `holdback validate --json` prints for a file that uses the type
with no parameters, and the "type" and "rejects" columns from the loader's own error messages for
probe values (a string, -1e18, 1e18, a negative duration, ...). The "meaning" and "use" columns
come from the field tables in the binary (`holdback validate --schema`: each key's row, written
once beside its options struct, include/holdback/core/field_table.hpp; "common" for the keys most
files set, every other key advanced): a field without a meaning fails the run, so a new field
cannot reach the page undocumented. A field the loader warns about as deprecated when a file sets it (the probe
sets it to its default) leaves the tables for the list of deprecated keys, with the loader's own
advice.

    scripts/dev/reference-config.py BUILD_DIR > docs/reference/configuration.md

ctest's Docs.ConfigReference runs it and fails when the checked-in page differs, or when a
built-in type (a `kType` in include/holdback) has no section here.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HOLDBACK = None
REQUIRED_MARK = object()

POLICIES = ["static-usage-limit-policy", "priority-holdback-policy",
            "reservation-holdback-policy", "soft-reflective-ceiling-policy"]
DETECTORS = ["utilization-detector", "concurrency-detector"]
FAIRNESS = ["global-strict-fairness-policy", "round-robin-fairness-policy",
            "program-aware-fairness", "vtc-fairness-policy"]
ORDERING = ["fcfs-ordering-policy", "edf-ordering-policy", "slo-deadline-ordering-policy"]
# The parameter sets a type is loaded with to list its fields: a type whose fields depend on
# another field (a strategy) has one set per variant; the fields named in the second element
# cannot load without a value (shown as "required").
VARIANTS = {
    "priority-holdback-policy": [
        ({"minCeiling": 0.6}, ["minCeiling"]),
        ({"strategy": "sigmoid-smoothed", "minCeiling": 0.6}, ["minCeiling"]),
        ({"strategy": "static", "ceilings": {"0": 0.5}}, ["ceilings"]),
    ],
}
# Types a file may declare that have no parameters of their own and no section of their own.
OTHER_TYPES = ["sheddable-eviction-filter", "priority-then-time-eviction-order-policy",
               "my-policy"]

# Per section, each key's meaning and the keys marked common: main() fills them from the tables.
MEANING = {}
COMMON = {}

# Values to set a field to when asking the loader whether it is deprecated (its default, or
# one of these when the default is null).
DEPRECATION_PROBES = ["1s", 0.5]


def validate(doc):
    """Runs `holdback validate --json` on doc (a dict) and returns the parsed report."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
        path = f.name
    try:
        out = subprocess.run([HOLDBACK, "validate", "--json", path], capture_output=True,
                             text=True, check=False).stdout
        return json.loads(out)
    finally:
        os.unlink(path)


def base(plugins=None, flow=None):
    doc = {"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig",
           "featureGates": ["flowControl"], "plugins": plugins or [], "flowControl": flow or {}}
    return doc


def plugin_doc(kind, type_name, params, variant=None):
    merged = dict(variant or {})
    merged.update(params)
    plugins = [{"name": "p", "type": type_name, "parameters": merged}]
    if kind == "policy":
        return base(plugins, {"usageLimitPolicyPluginRef": "p"})
    if kind == "detector":
        return base(plugins, {"saturationDetector": {"pluginRef": "p"}})
    key = "fairnessPolicyRef" if kind == "fairness" else "orderingPolicyRef"
    return base(plugins, {"defaultPriorityBand": {key: "p"}})


def plugin_params(kind, effective):
    if kind == "policy":
        return effective["usageLimitPolicy"]["parameters"]
    if kind == "detector":
        return effective["saturationDetector"]["parameters"]
    key = "fairnessPolicy" if kind == "fairness" else "orderingPolicy"
    return effective["defaultPriorityBand"][key]["parameters"] or {}


def flatten(obj, prefix=""):
    """{"a": {"b": 1}} -> [("a.b", 1)], in document order."""
    out = []
    for k, v in obj.items():
        # A map keyed by priority ("0", "-1", ...) is one field, not a nested block.
        if isinstance(v, dict) and v and not all(re.fullmatch(r"-?[0-9]+", x) for x in v):
            out += flatten(v, prefix + k + ".")
        else:
            out.append((prefix + k, v))
    return out


def nest(path, value):
    d = value
    for part in reversed(path.split(".")):
        d = {part: d}
    return d


def show(value):
    if value is REQUIRED_MARK:
        return "(required)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        return f"`{value:.1f}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, dict):
        return "`{}`"
    return f"`{value}`"


def add_schema_columns():
    """Fills MEANING and COMMON from every field table (`holdback validate --schema`; a section
    may come in several tables: flowControl's own keys and its blocks'); a key with two rows
    fails the run."""
    out = subprocess.run([HOLDBACK, "validate", "--schema"], capture_output=True, text=True,
                         check=True).stdout
    for section in json.loads(out)["sections"]:
        name = section["section"]
        meaning = MEANING.setdefault(name, {})
        common = COMMON.setdefault(name, set())
        for f in section["fields"]:
            if f["key"] in meaning or f["key"] in common:
                raise SystemExit(f"{name}: {f['key']} has two field table rows")
            if "meaning" in f:
                meaning[f["key"]] = f["meaning"]
            if f["use"] == "common":
                common.add(f["key"])


def errors_at(report, pointer):
    return [e["message"] for e in report.get("errors", []) if e["path"] == pointer]


def deprecation(make_doc, pointer, default):
    """(path, advice) when the loader warns that the field at pointer (or its block) is
    deprecated, else None."""
    if default is REQUIRED_MARK:
        return None
    for value in ([default] if default is not None else DEPRECATION_PROBES):
        report = validate(make_doc(value))
        for w in report.get("warnings", []):
            if (w["path"] == pointer or pointer.startswith(w["path"] + "/")) and \
                    w["message"].startswith("deprecated"):
                return w["path"], w["message"].split(": ", 1)[-1]
        if not report.get("errors"):
            break
    return None


def probe(make_doc, pointer, default):
    """(type, constraint) of one field from the loader's messages for probe values."""
    kinds = []
    constraints = []
    probes = ["not-a-value", -1e18, 1e18, -1, 0]
    if isinstance(default, bool) or default is None:
        probes = ["not-a-value"]
    duration = isinstance(default, str) and re.fullmatch(r"-?[0-9.]+(ns|us|ms|s|m|h)", default)
    if duration:
        # 0 first: a duration that must be positive says so there (a negative one is refused by
        # the parser before the range check); a negative one only when 0 is accepted.
        probes = ["not-a-value", "0s", "-1s"]
    for value in probes:
        if duration and value == "-1s" and constraints:
            break
        for message in errors_at(validate(make_doc(value)), pointer):
            if "is not a Kubernetes quantity" in message:
                kinds.append('a Kubernetes quantity ("5000", "1k", "500M", "1Gi")')
                continue
            if "is not a duration" in message:
                kinds.append('a Go duration ("250ms", "1.5s", "2m")')
                continue
            m = re.search(r"(?:is a [a-z]+|is out of range|is not supported); expected (.*)$",
                          message)
            if m:
                kinds.append(m.group(1))
                continue
            text = re.sub(r"^-?[0-9][0-9.e+-]* ", "", message)
            text = re.sub(r",? (but )?got .*$", "", text)
            constraints.append(text)
    kind = "; ".join(dict.fromkeys(kinds))
    if not kind:
        if isinstance(default, bool):
            kind = "true or false"
        elif isinstance(default, (int, float)):
            kind = "a number"
        elif isinstance(default, str):
            kind = "a string"
    return kind, "; ".join(dict.fromkeys(constraints))


def escape(text):
    return text.replace("|", "\\|").replace("\n", " ")


def table(section, rows):
    lines = ["| field | use | default | type | out of range (the loader's error) | meaning |",
             "|---|---|---|---|---|---|"]
    missing = []
    for field, default, kind, rejects in rows:
        meaning = MEANING.get(section, {}).get(field)
        if meaning is None:
            missing.append(f"{section}: {field}")
            meaning = "(undocumented)"
        use = "common" if field in COMMON.get(section, ()) else "advanced"
        lines.append(f"| `{field}` | {use} | {show(default)} | {escape(kind)} | "
                     f"{escape(rejects)} | {meaning} |")
    return lines, missing


# (where, key, advice) of every deprecated field, in page order.
DEPRECATED = []


def deprecated(where, make_doc, pointer, default, strip):
    """True (and the key recorded in DEPRECATED once) when the field is deprecated."""
    found = deprecation(make_doc, pointer, default)
    if found is None:
        return False
    key = found[0][len(strip):].replace("/", ".")
    if (where, key) not in {(w, k) for w, k, _ in DEPRECATED}:
        DEPRECATED.append((where, key, found[1]))
    return True


def plugin_section(kind, type_name):
    rows = []
    seen = set()
    for variant, required in VARIANTS.get(type_name, [({}, [])]):
        report = validate(plugin_doc(kind, type_name, {}, variant))
        if not report.get("ok"):
            raise SystemExit(f"{type_name} {variant} does not load: {report.get('errors')}")
        for field, default in flatten(plugin_params(kind, report["effective"])):
            if field in seen:
                continue
            seen.add(field)
            if field in required:
                default = REQUIRED_MARK
            pointer = "/plugins/0/parameters/" + field.replace(".", "/")
            make = lambda v, f=field, var=variant: plugin_doc(kind, type_name, nest(f, v), var)
            if deprecated(f"`{type_name}`", make, pointer, default, "/plugins/0/parameters/"):
                continue
            rows.append((field, default) + probe(make, pointer, default))
    return rows


FLOW_SKIP = {"schemaVersion", "flowControl", "usageLimitPolicy", "saturationDetector",
             "priorityBands", "defaultNegativePriorityBand", "defaultPriorityBand",
             "eviction.filter", "eviction.order"}


# Keys the effective configuration writes only while a switch is on (their rows' `when`): the
# switch's block and the values that turn them on. Their defaults are the effective
# configuration's with the switch on, the switches' own the value that keeps them off.
WRITTEN_WHILE_ON = {
    "eviction.restoreReserve": {"evictionBudget": (0.05, 0.0), "wasteBudget": (0.01, 0.0),
                                "burstSignificance": (3.0, 0.0)},
}


def flow_skipped(field):
    """Whether a flowControl field has its own section (or none) instead of a row here."""
    return field in FLOW_SKIP or field.split(".")[0] in FLOW_SKIP - {"eviction"}


def flow_rows():
    report = validate(base())
    rows = []
    seen = set()
    for field, default in flatten(report["effective"]):
        if flow_skipped(field):
            continue
        seen.add(field)
        pointer = "/flowControl/" + field.replace(".", "/")
        make = lambda v, f=field: base(flow=nest(f, v))
        if deprecated("`flowControl`", make, pointer, default, "/flowControl/"):
            continue
        rows.append((field, default) + probe(make, pointer, default))
    for block, switches in WRITTEN_WHILE_ON.items():
        on = {k: v[0] for k, v in switches.items()}
        effective = validate(base(flow=nest(block, on)))["effective"]
        for field, default in flatten(effective):
            if field in seen or not field.startswith(block + "."):
                continue
            seen.add(field)
            key = field[len(block) + 1:]
            if key in switches:
                default = switches[key][1]
            pointer = "/flowControl/" + field.replace(".", "/")
            make = lambda v, k=key: base(flow=nest(block, {**on, k: v}))
            rows.append((field, default) + probe(make, pointer, default))
    # Every flowControl key of the field tables has a row or is deprecated (a key written only
    # while a switch is on needs its switch in WRITTEN_WHILE_ON).
    for key in MEANING.get("flowControl", {}):
        if key not in seen and not any(key.startswith(s + ".") for s in seen) \
                and not flow_skipped(key):
            raise SystemExit(f"flowControl.{key} has a field table row but no reference row")
    return rows


def band_rows():
    report = validate(base())
    band = report["effective"]["defaultPriorityBand"]
    rows = [("priority", 0) + probe(
        lambda v: base(flow={"defaultPriorityBand": {"priority": v}}),
        "/flowControl/defaultPriorityBand/priority", 0)]
    for field, default in band.items():
        if isinstance(default, dict):
            continue
        pointer = "/flowControl/defaultPriorityBand/" + field
        rows.append((field, default) + probe(
            lambda v, f=field: base(flow={"defaultPriorityBand": {f: v}}), pointer, default))
    for field, default in (("fairnessPolicyRef", "global-strict-fairness-policy"),
                           ("orderingPolicyRef", "fcfs-ordering-policy")):
        rows.append((field, default, "a plugin name or a built-in type", ""))
    return rows


def main():
    global HOLDBACK
    if len(sys.argv) != 2:
        raise SystemExit("usage: reference-config.py BUILD_DIR")
    HOLDBACK = os.path.join(sys.argv[1], "holdback")
    add_schema_columns()
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))

    # Every built-in type in the headers has a section (or is listed as parameterless).
    known = set(POLICIES + DETECTORS + FAIRNESS + ORDERING + OTHER_TYPES)
    found = set()
    for folder, _, files in os.walk(os.path.join(root, "include", "holdback")):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found |= set(re.findall(r'kType = "([a-z-]+)"', f.read()))
    if found - known:
        raise SystemExit(f"types without a section in reference-config.py: {sorted(found - known)}")

    out = []
    missing = []

    def emit(section, rows):
        lines, miss = table(section, rows)
        out.extend(lines)
        missing.extend(miss)

    out += ["# Configuration reference", "",
            "Every field of an `EndpointPickerConfig` that holdback reads, with its default, its type",
            "and what the loader rejects, in the loader's own words. Generated from the loader:",
            "`scripts/dev/reference-config.py BUILD_DIR > docs/reference/configuration.md` rewrites it",
            "(defaults from `holdback validate --json`'s effective configuration of a file that names",
            "the type with no parameters; the last two columns from its errors for probe values);",
            "`ctest -R Docs.ConfigReference` fails when it is stale. How the file is read, how errors",
            "are reported and how to reload it: [configuration](../guide/configuration.md).", "",
            "A value the loader rejects is reported with its JSON path, together with every other",
            "problem of the file; nothing is loaded until all are fixed.", "",
            "The \"use\" column marks the keys most files set `common`; an `advanced` key is for",
            "the situation its meaning names, and its default suits every other. Keys that still",
            "load but are no longer documented (each with a warning, its value still honoured)",
            "are listed at the end, under [deprecated keys](#deprecated-keys).", "",
            "## The file", "",
            "| key | meaning |", "|---|---|",
            "| `apiVersion` | `llm-d.ai/v1alpha1` (the older `inference.networking.x-k8s.io/v1alpha1` loads with a warning) |",
            "| `kind` | `EndpointPickerConfig` |",
            "| `featureGates` | a list; `flowControl` turns the flow controller on (without it the block is checked and has no effect) |",
            "| `plugins` | a list of `{name, type, parameters}`; `name` defaults to `type`; the types below, plus the Go gateway's other types (accepted with a warning) |",
            "| `flowControl` | the block below |",
            "| `saturationDetector` | deprecated top-level spelling of `flowControl.saturationDetector` |",
            "| `schedulingProfiles`, `dataLayer`, `data`, `requestHandler`, `parser`, `metadata` | the Go gateway's; accepted with a warning, no effect |",
            "",
            "## `flowControl`", "",
            "The flow controller's block. `usageLimitPolicyPluginRef` and",
            "`saturationDetector.pluginRef` name the plugins below (defaults",
            "`static-usage-limit-policy` and `utilization-detector`, usable without declaring them).",
            ""]
    emit("flowControl", flow_rows())
    out += ["", "## Bands: `defaultPriorityBand`, `defaultNegativePriorityBand`, `priorityBands[]`", "",
            "The same fields in every band object; `priorityBands` lists bands by `priority` (each",
            "priority once), the two defaults are the templates for priorities without a band of",
            "their own (negative priorities use `defaultNegativePriorityBand` when it is set).", ""]
    emit("band", band_rows())
    groups = (("Usage limit policies", "policy", POLICIES,
               "`plugins[]` entries named by `flowControl.usageLimitPolicyPluginRef`; "
               "[policies](../guide/policies.md)."),
              ("Saturation detectors", "detector", DETECTORS,
               "`plugins[]` entries named by `flowControl.saturationDetector.pluginRef`; "
               "[detectors](../guide/detectors.md)."),
              ("Fairness policies", "fairness", FAIRNESS,
               "`plugins[]` entries named by a band's `fairnessPolicyRef` (a built-in type name "
               "works without declaring it); [flow controller](../guide/flow-controller.md)."),
              ("Ordering policies", "ordering", ORDERING,
               "`plugins[]` entries named by a band's `orderingPolicyRef`; "
               "[flow controller](../guide/flow-controller.md)."))
    for title, kind, types, intro in groups:
        out += ["", f"## {title}", "", intro]
        for type_name in types:
            out += ["", f"### `{type_name}`", ""]
            rows = plugin_section(kind, type_name)
            if rows:
                emit(type_name, rows)
            else:
                out.append("No parameters.")
    out += ["", "## Eviction plugins", "",
            "`sheddable-eviction-filter` and `priority-then-time-eviction-order-policy`: at most one",
            "of each in `plugins[]`, no parameters ([in-flight eviction](../guide/eviction.md))."]
    out += ["", "## Deprecated keys", "",
            "Keys that still load, each with a warning at its path: the value a file gives still",
            "applies, so a file behaves as it did; remove the key to get the default. They are",
            "experiment switches whose default is the measured choice (the simulator keeps them,",
            "[simulation](../simulation.md)), settings the Go reference keeps internal, or values",
            "the rest of the file now implies. Advice in the loader's own words:", "",
            "| where | key | what to do |", "|---|---|---|"]
    for where, key, advice in DEPRECATED:
        out.append(f"| {where} | `{key}` | {escape(advice)} |")
    if missing:
        raise SystemExit("fields without a meaning (give their field table row one):\n  " +
                         "\n  ".join(missing))
    print("\n".join(out))


if __name__ == "__main__":
    main()
