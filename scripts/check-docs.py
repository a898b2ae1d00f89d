#!/usr/bin/env python3
"""Keeps the docs honest where a machine can check them (registered with ctest as
"unit: docs match the code"):

  1. every relative link in README.md, docs/*.md and redis-module/README.md names a
     file of the repository, and a `#anchor` names a heading of that file;
  2. every config key in the tables of docs/CONFIG.md and docs/EVENTS.md is one the
     binary prints with `config check`, with the same default (the `Default` column,
     where it is a single backticked value);
  3. every `--flag` written after `exposure-filter <command>` in those files is one
     that `exposure-filter <command> --help` lists;
  4. OPERATING.md's count of alerting rules is the count in config/alerts.yml;
  5. every `--flag` written after `scripts/<name>.sh` is one that the script's
     --help lists, and the packages README says the quick start installs
     (`scripts/install-deps.sh --demo`: the build packages and ...) are the ones
     `install-deps.sh --list demo` adds to `--list build`.

Usage: scripts/check-docs.py BINARY     (exit 0 when all pass; one line per finding)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "redis-module/README.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))

findings = []
checked = {"links": 0, "keys": 0, "defaults": 0, "flags": 0}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def without_code_blocks(text):
    """The text with fenced code blocks blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def slug(heading):
    """GitHub's anchor of a heading."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(rel):
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", read(rel), re.M)}


def check_links():
    for doc in DOCS:
        for n, line in enumerate(without_code_blocks(read(doc)), 1):
            for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", line):
                target = m.group(1)
                if re.match(r"[a-z]+:", target):
                    continue  # http:, https:, mailto:
                checked["links"] += 1
                path, _, anchor = target.partition("#")
                rel = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                where = f"{doc}:{n}: link {target}"
                if not os.path.exists(os.path.join(ROOT, rel)):
                    findings.append(f"{where}: no such file {rel}")
                elif rel.startswith(".."):
                    findings.append(f"{where}: outside the repository")
                elif anchor and rel.endswith(".md") and anchor not in anchors(rel):
                    findings.append(f"{where}: no heading #{anchor} in {rel}")


def dumped_config(binary):
    out = subprocess.run([binary, "config", "check"], capture_output=True, text=True, check=True)
    values, section, block = {}, None, None
    for line in out.stdout.split("\n"):
        m = re.match(r"^(\w+):\s*$", line)
        if m:
            section, block = m.group(1), None
            continue
        m = re.match(r"^  (\w+):\s*$", line)  # a block of keys (redis.tls)
        if m and section:
            block = f"{section}.{m.group(1)}"
            continue
        m = re.match(r"^    (\w+):\s*(.*)$", line)
        if m and block:
            values[f"{block}.{m.group(1)}"] = m.group(2).strip('"')
            continue
        m = re.match(r"^  (\w+):\s*(.*)$", line)
        if m and section:
            block = None
            values[f"{section}.{m.group(1)}"] = m.group(2).strip('"')
    return values


def check_config(binary):
    dumped = dumped_config(binary)
    for doc in ("docs/CONFIG.md", "docs/EVENTS.md"):
        for n, line in enumerate(read(doc).split("\n"), 1):
            m = re.match(r"^\|\s*`(\w+(?:\.\w+)+)`\s*\|(.*)$", line)
            if not m:
                continue
            key = m.group(1)
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
            checked["keys"] += 1
            if key not in dumped:
                if "Never printed by `config check`" not in line:
                    findings.append(f"{doc}:{n}: {key} is not a key the binary knows")
                continue
            # CONFIG.md: | key | type | default | ...; EVENTS.md: | key | default | ...
            default = cells[1] if doc.endswith("CONFIG.md") else cells[0]
            dm = re.fullmatch(r"`([^`]*)`", default)
            if not dm:
                continue  # prose, a dash, several values
            want = dm.group(1).strip('"')
            checked["defaults"] += 1
            if normal(want) != normal(dumped[key]):
                findings.append(f"{doc}:{n}: {key} default `{want}`, the binary's is `{dumped[key]}`")


def normal(value):
    """A duration in milliseconds (60s == 1m), anything else as written."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)", value)
    if not m:
        return value
    scale = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}[m.group(2)]
    return int(m.group(1)) * scale


def help_flags(binary, command):
    out = subprocess.run([binary] + command.split() + ["--help"], capture_output=True, text=True)
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout)), out.returncode == 0


def check_flags(binary):
    commands = {}
    for doc in DOCS:
        for n, line in enumerate(read(doc).split("\n"), 1):
            for m in re.finditer(r"exposure-filter ((?:config|layout) \w+|[a-z][a-z-]+)([^`|\n]*)",
                                 line):
                command, rest = m.group(1), m.group(2)
                if command not in commands:
                    commands[command] = help_flags(binary, command)
                flags, known = commands[command]
                if not known:
                    continue  # not a subcommand (prose such as "exposure-filter users")
                for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                    checked["flags"] += 1
                    if flag not in flags:
                        findings.append(f"{doc}:{n}: exposure-filter {command} has no {flag}")


def check_alert_count():
    rules = len(re.findall(r"^\s*- alert:", read("config/alerts.yml"), re.M))
    text = " ".join(read("docs/OPERATING.md").split())
    said = re.findall(r"lists (?:its )?(\d+) rules", text)
    if not said:
        findings.append("docs/OPERATING.md: no 'lists N rules' sentence to check")
    for n in said:
        if int(n) != rules:
            findings.append(f"docs/OPERATING.md: says {n} rules, config/alerts.yml has {rules}")


def check_scripts():
    helps = {}
    for doc in DOCS:
        for n, line in enumerate(read(doc).split("\n"), 1):
            for m in re.finditer(r"scripts/([a-z][a-z-]*\.sh)([^`|)#\n]*)", line):
                script, rest = m.group(1), m.group(2)
                flags = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)
                if not flags:
                    continue
                path = os.path.join(ROOT, "scripts", script)
                if not os.path.exists(path):
                    findings.append(f"{doc}:{n}: no such script scripts/{script}")
                    continue
                if script not in helps:
                    if "--help" not in read(os.path.join("scripts", script)):
                        helps[script] = None  # no --help to ask: never run it blind
                    else:
                        out = subprocess.run(["bash", path, "--help"], capture_output=True,
                                             text=True, timeout=30)
                        helps[script] = set(re.findall(r"(--[a-z][a-z0-9-]*)", out.stdout))
                for flag in flags:
                    checked["script flags"] = checked.get("script flags", 0) + 1
                    if helps[script] is None:
                        findings.append(f"{doc}:{n}: scripts/{script} {flag}: it has no --help")
                    elif flag not in helps[script]:
                        findings.append(f"{doc}:{n}: scripts/{script} has no {flag}")

    def listed(mode):
        out = subprocess.run(["bash", os.path.join(ROOT, "scripts/install-deps.sh"), "--list", mode],
                             capture_output=True, text=True, check=True)
        return set(out.stdout.split())

    text = " ".join(read("README.md").split())
    m = re.search(r"`scripts/install-deps\.sh --demo`: the build packages and ([^)]*)\)", text)
    if not m:
        findings.append("README.md: no '`scripts/install-deps.sh --demo`: the build packages and "
                        "...' to check")
        return
    said = set(re.findall(r"`([^`]+)`", m.group(1)))
    want = listed("demo") - listed("build")
    checked["script flags"] = checked.get("script flags", 0) + 1
    if said != want:
        findings.append(f"README.md: the quick start installs {sorted(want)} on top of the build "
                        f"packages (install-deps.sh --list demo), README says {sorted(said)}")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    binary = sys.argv[1]
    check_links()
    check_config(binary)
    check_flags(binary)
    check_alert_count()
    check_scripts()
    for f in findings:
        print(f"check-docs: {f}", file=sys.stderr)
    counts = ", ".join(f"{v} {k}" for k, v in checked.items())
    print(f"check-docs: {len(DOCS)} files ({counts} checked), {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
