#!/usr/bin/env python3
"""Checks that every function of src/, include/ and redis-module/ stays readable
(registered with ctest as "unit: function complexity within
scripts/check-complexity.py's limits"):

  1. cyclomatic complexity at most MAX_COMPLEXITY (pmccabe's traditional McCabe
     figure: one plus each if, loop, case, && and ||, ?:);
  2. at most MAX_LINES lines, from the line of the name to the closing brace;
  3. pmccabe parses every file (a parse error can hide or merge functions).

A function above a limit fails the check unless EXCEPTIONS names it with its
reason; an exception that no longer matches a function above the limits fails
too, so the table shrinks as functions are split (issue 51).

pmccabe (a Debian package, scripts/install-deps.sh) predates C++11: the files
are handed to it with what it misreads blanked out, line numbers kept
(`override`/`final`, digit separators, __attribute__((...)), trailing return types).

Usage: scripts/check-complexity.py [--all]   (exit 0 when all pass; one line per
finding; --all also prints every function above the limits, excepted or not)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ("src", "include", "redis-module")
SUFFIXES = (".cc", ".h", ".c")

# The limits, in one place.
MAX_COMPLEXITY = 25
MAX_LINES = 100

# "path function" (as pmccabe names it) -> why it may exceed the limits.
EXCEPTIONS = {
    "src/metrics/ingest_metrics.cc ef::IngestMetrics::IngestMetrics":
        "a table: one registration per metric family, no branches",
}


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def balanced_attribute(text):
    """Blanks each __attribute__((...)), nested parentheses included."""
    out, i = [], 0
    for m in re.finditer(r"__attribute__\s*\(", text):
        if m.start() < i:
            continue
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(text[i:m.start()])
        out.append(re.sub(r"[^\n]", " ", text[m.start():j]))
        i = j
    out.append(text[i:])
    return "".join(out)


def sanitize(text):
    text = balanced_attribute(text)
    text = re.sub(r"\b(override|final)\b", blank, text)
    text = re.sub(r"(?<=[0-9A-Fa-f])'(?=[0-9A-Fa-f])", "0", text)  # 1'000'000
    text = re.sub(r"(?<=\))\s*->\s*[\w:<>,*& ]+?(?=\s*\{)", blank, text)  # ) -> T {
    return text


def sources():
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def measure(paths):
    """[(complexity, lines, path, line, name)] and pmccabe's complaints."""
    if not shutil.which("pmccabe"):
        sys.exit("check-complexity: pmccabe not found (apt-get install pmccabe, "
                 "scripts/install-deps.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        for p in paths:
            os.makedirs(os.path.join(tmp, os.path.dirname(p)), exist_ok=True)
            with open(os.path.join(ROOT, p), encoding="utf-8") as src, \
                    open(os.path.join(tmp, p), "w", encoding="utf-8") as dst:
                dst.write(sanitize(src.read()))
        run = subprocess.run(["pmccabe", *paths], cwd=tmp, capture_output=True, text=True)
    rows = []
    for line in run.stdout.splitlines():
        # modified, traditional complexity, statements, first line, lines, "path(line): name"
        m = re.match(r"\d+\t(\d+)\t\d+\t\d+\t(\d+)\t(.+)\((\d+)\): (.+)$", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)),
                         m.group(5)))
    return rows, [l for l in run.stderr.splitlines() if l.strip()]


def main():
    rows, complaints = measure(sorted(sources()))
    findings = [f"pmccabe: {c}" for c in complaints]
    matched = set()
    over = 0
    for complexity, lines, path, line, name in sorted(rows, key=lambda r: (-r[0], -r[1])):
        too = []
        if complexity > MAX_COMPLEXITY:
            too.append(f"complexity {complexity} > {MAX_COMPLEXITY}")
        if lines > MAX_LINES:
            too.append(f"{lines} lines > {MAX_LINES}")
        if not too:
            continue
        over += 1
        key = f"{path} {name}"
        where = f"{path}:{line}: {name}: {', '.join(too)}"
        if key in EXCEPTIONS:
            matched.add(key)
            if "--all" in sys.argv:
                print(f"{where} (excepted: {EXCEPTIONS[key]})")
        else:
            findings.append(f"{where}: split it into steps, or name it in EXCEPTIONS "
                            "with the reason")
    for key in sorted(set(EXCEPTIONS) - matched):
        findings.append(f"scripts/check-complexity.py: exception '{key}' is within the "
                        "limits now (or gone): remove it")
    for f in findings:
        print(f)
    print(f"check-complexity: {len(rows)} functions, {over} above complexity "
          f"{MAX_COMPLEXITY} or {MAX_LINES} lines, {len(EXCEPTIONS)} exceptions, "
          f"{len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
