#!/usr/bin/env python3
"""Keeps the alerts' runbooks runnable (registered with ctest as "unit: runbooks
match the alerts and the binary (scripts/check-runbooks.py)"):

  1. every alert of config/alerts.yml has a `runbook_url` annotation, all of them
     `<one prefix>#<anchor>` with the prefix ending in docs/RUNBOOKS.md and the
     anchor the alert's name as a heading of docs/RUNBOOKS.md (GitHub's slug), and
     every `## ExposureFilter...` section of docs/RUNBOOKS.md is an alert's;
  2. every `exposure-filter ...` command in docs/RUNBOOKS.md and docs/OPERATING.md
     (code spans and shell blocks; `sudo`, `sh -c '...'` and `kubectl exec ... --`
     in front are looked through) and in config/alerts.yml's annotations (code
     spans) names a subcommand the binary has, and every option it uses is in
     that subcommand's `--help`; under `kubectl exec deploy/NAME [-c CONTAINER] --` the Deployment
     and the container are ones of deploy/kubernetes/base;
  3. every `-c PATH` / `--config PATH` is the path the config is installed at: the
     `-c` of ExecStart in config/exposure-filter*.service and of the containers'
     args in deploy/kubernetes/base/*-deployment.yaml (each checked to lie in a
     mounted config volume holding that file name), which must all be one path;
  4. every `--set KEY=VALUE` names a key the binary knows (`config check --set`
     does not answer "unknown key");
  5. the `sed` line docs/OPERATING.md gives to point the runbook_urls at another
     base rewrites every runbook_url of config/alerts.yml and of the generated
     PrometheusRule, and nothing else.

Usage: scripts/check-runbooks.py BINARY     (exit 0 when all pass; one line per finding)
No Python packages beyond the standard library (YAML read with patterns: the files
are ours and regular; promtool checks them as YAML in check-ops-files.sh).
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALERTS = "config/alerts.yml"
RUNBOOKS = "docs/RUNBOOKS.md"
OPERATING = "docs/OPERATING.md"
RULE = "deploy/kubernetes/components/prometheus-operator/prometheusrule.yaml"

findings = []
checked = {"alerts": 0, "commands": 0, "options": 0, "config paths": 0, "set keys": 0,
           "kubectl targets": 0}


def read(rel):
    try:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        findings.append(f"{rel}: missing")
        return ""


def slug(heading):
    """GitHub's anchor of a heading (as scripts/check-docs.py computes it)."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


# ---- config/alerts.yml, read with patterns ---------------------------------------

def alerts():
    """[(line, name, {annotation: text})]; folded (>-) values joined as YAML does."""
    lines = read(ALERTS).split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)- alert:\s*(\S+)\s*$", line)
        if not m:
            continue
        rule_indent = len(m.group(1))
        annotations = {}
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*- (alert|record|name):", lines[j]) \
                and not re.match(r"^\S", lines[j]):
            a = re.match(r"^(\s*)annotations:\s*$", lines[j])
            if a and len(a.group(1)) > rule_indent:
                ind = None
                j += 1
                while j < len(lines):
                    kv = re.match(r"^(\s*)([\w]+):\s*(.*)$", lines[j])
                    if not lines[j].strip():
                        j += 1
                        continue
                    cur = len(lines[j]) - len(lines[j].lstrip())
                    if ind is None:
                        ind = cur
                    if cur < ind or not kv or cur != ind:
                        break
                    key, value = kv.group(2), kv.group(3)
                    j += 1
                    if value in (">-", ">", "|", "|-"):
                        body = []
                        while j < len(lines) and (not lines[j].strip() or
                                                  len(lines[j]) - len(lines[j].lstrip()) > ind):
                            body.append(lines[j].strip())
                            j += 1
                        value = " ".join(b for b in body if b)
                    elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                        value = value[1:-1]
                    annotations[key] = value
                continue
            j += 1
        out.append((i + 1, m.group(2), annotations))
    return out


def check_runbook_urls(rules):
    headings = {}
    for n, line in enumerate(read(RUNBOOKS).split("\n"), 1):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m:
            headings.setdefault(slug(m.group(2)), (n, len(m.group(1)), m.group(2)))
    prefixes = set()
    names = set()
    for n, name, ann in rules:
        checked["alerts"] += 1
        names.add(name)
        where = f"{ALERTS}:{n}: {name}"
        url = ann.get("runbook_url")
        if not url:
            findings.append(f"{where}: no runbook_url annotation")
            continue
        prefix, _, anchor = url.partition("#")
        prefixes.add(prefix)
        if not prefix.endswith(RUNBOOKS):
            findings.append(f"{where}: runbook_url {url} does not point into {RUNBOOKS}")
        if anchor != slug(name):
            findings.append(f"{where}: runbook_url anchor #{anchor}, its own section is "
                            f"#{slug(name)}")
        elif anchor not in headings:
            findings.append(f"{where}: no heading #{anchor} in {RUNBOOKS}")
        for key in ann:
            if key not in ("summary", "description", "runbook_url"):
                findings.append(f"{where}: annotation {key} (summary, description and "
                                f"runbook_url only)")
    if len(prefixes) > 1:
        findings.append(f"{ALERTS}: runbook_urls with {len(prefixes)} different bases "
                        f"{sorted(prefixes)}: one sed must rewrite them all")
    for a, (n, level, text) in headings.items():
        if level == 2 and text.startswith("ExposureFilter") and text not in names:
            findings.append(f"{RUNBOOKS}:{n}: section {text} is no alert of {ALERTS}")


def check_rewrite(rules):
    """The sed line of OPERATING.md rewrites every runbook_url and nothing else."""
    text = read(OPERATING)
    lines = [l for l in text.split("\n") if re.match(r"^\s*sed\b.*runbook_url", l)]
    if len(lines) != 1:
        findings.append(f"{OPERATING}: {len(lines)} lines 'sed ... runbook_url ...' (want 1: "
                        "the rewrite of the runbook base)")
        return
    base = "https://docs.invalid/exposure-filter/v0"
    for rel in (ALERTS, RULE):
        before = read(rel)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, os.path.basename(rel))
            with open(path, "w", encoding="utf-8") as f:
                f.write(before)
            cmd = re.sub(r"\S*(alerts\.yml|prometheusrule\.yaml)\S*", shlex.quote(path),
                         lines[0].split(" #")[0])
            r = subprocess.run(["sh", "-c", cmd], env=dict(os.environ, DOCS_BASE=base),
                               capture_output=True, text=True)
            if r.returncode != 0:
                findings.append(f"{OPERATING}: `{lines[0].strip()}` on {rel}: exit "
                                f"{r.returncode} {r.stderr.strip()}")
                continue
            after = open(path, encoding="utf-8").read()
        old, new = before.split("\n"), after.split("\n")
        changed = [(a, b) for a, b in zip(old, new) if a != b]
        want = len(rules)
        good = [b for a, b in changed
                if re.search(r"runbook_url: " + re.escape(base) + r"/docs/RUNBOOKS\.md#\w+$", b)]
        if len(old) != len(new) or len(changed) != want or len(good) != want:
            findings.append(f"{OPERATING}: its sed line on {rel} changed {len(changed)} lines, "
                            f"{len(good)} into {base}/docs/RUNBOOKS.md#..., want {want}")


# ---- where the config is installed -----------------------------------------------

def config_arg(tokens):
    for i, t in enumerate(tokens):
        if t in ("-c", "--config") and i + 1 < len(tokens):
            return tokens[i + 1]
        if t.startswith("--config="):
            return t.split("=", 1)[1]
    return None


def installed_paths():
    paths = {}
    for unit in sorted(glob.glob(os.path.join(ROOT, "config", "exposure-filter*.service"))):
        rel = os.path.relpath(unit, ROOT)
        for line in read(rel).split("\n"):
            if line.startswith("ExecStart="):
                p = config_arg(shlex.split(line[len("ExecStart="):]))
                if p:
                    paths.setdefault(p, []).append(rel)
    base = "deploy/kubernetes/base"
    generated = set(re.findall(r"^\s*-\s*([\w.-]+)=", read(f"{base}/kustomization.yaml"), re.M))
    for dep in sorted(glob.glob(os.path.join(ROOT, base, "*-deployment.yaml"))):
        rel = os.path.relpath(dep, ROOT)
        text = read(rel)
        for container, body in containers(text):
            m = re.search(r"^\s*args:\s*\n((?:\s+- .*\n)+)", body, re.M)
            args = [a.strip().strip("'\"") for a in re.findall(r"^\s+- (.*)$", m.group(1), re.M)] \
                if m else []
            p = config_arg(args)
            if not p:
                continue
            mounts = re.findall(r"mountPath:\s*(\S+)", body)
            if not any(p.startswith(mp.rstrip("/") + "/") for mp in mounts):
                findings.append(f"{rel}: container {container} reads {p}, no volumeMount "
                                f"provides it (mounts {mounts})")
            elif os.path.basename(p) not in generated:
                findings.append(f"{rel}: container {container} reads {p}, the config map "
                                f"has {sorted(generated)}")
            paths.setdefault(p, []).append(f"{rel} ({container})")
    if not paths:
        findings.append("no installed config path found in config/*.service or "
                        f"{base}/*-deployment.yaml")
    if len(paths) > 1:  # docs/RUNBOOKS.md says they use one path
        findings.append("the units and the manifests read the config from different paths: " +
                        "; ".join(f"{p} ({', '.join(v)})" for p, v in sorted(paths.items())))
    return paths


def containers(text):
    """[(container name, its text)] of a Deployment's containers: list."""
    m = re.search(r"^(\s*)containers:\s*\n", text, re.M)
    if not m:
        return []
    out, item = [], None
    for line in text[m.end():].split("\n"):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if item is None and not line.lstrip().startswith("- "):
            break
        if item is None:
            item_indent = indent
        if indent < item_indent or (indent == item_indent and not line.lstrip().startswith("- ")):
            break
        if indent == item_indent:
            item = [line]
            out.append(item)
        else:
            item.append(line)
    result = []
    for lines in out:
        n = re.match(r"^\s*- name:\s*(\S+)", lines[0]) or next(
            (re.match(r"^\s*name:\s*(\S+)", l) for l in lines
             if len(l) - len(l.lstrip()) == item_indent + 2 and re.match(r"^\s*name:", l)), None)
        result.append((n.group(1) if n else "?", "\n".join(lines) + "\n"))
    return result


def deployments():
    """{Deployment name: [container names]} of deploy/kubernetes/base."""
    out = {}
    for dep in sorted(glob.glob(os.path.join(ROOT, "deploy/kubernetes/base/*-deployment.yaml"))):
        text = read(os.path.relpath(dep, ROOT))
        m = re.search(r"^metadata:\s*\n\s+name:\s*(\S+)", text, re.M)
        if m:
            out[m.group(1)] = [c for c, _ in containers(text)]
    return out


# ---- the commands ----------------------------------------------------------------

def markdown_snippets(rel):
    """(line, text) of every code span outside fences and every line of a shell
    block (continuation lines joined)."""
    out, fence, pending = [], None, ""
    for n, line in enumerate(read(rel).split("\n"), 1):
        m = re.match(r"^\s*```(\w*)", line)
        if m:
            fence = None if fence is not None else m.group(1)
            continue
        if fence is not None:
            if fence in ("", "sh", "bash", "shell", "console"):
                if line.rstrip().endswith("\\"):
                    pending += line.rstrip()[:-1] + " "
                    continue
                out.append((n, pending + line))
                pending = ""
            continue
        for span in re.findall(r"`([^`]+)`", line):
            out.append((n, span))
    return out


def alert_snippets(rules):
    out = []
    for n, name, ann in rules:
        for key, value in ann.items():
            for span in re.findall(r"`([^`]+)`", value):
                out.append((n, span))
    return out


def commands(snippet):
    """[(tokens after the binary, kubectl tokens or None)] of one snippet."""
    text = re.sub(r"^\s*\$\s+", "", snippet)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        words = text.split()
    pieces, piece = [], []
    for w in words:
        if w and set(w) <= set(";&|"):
            pieces.append(piece)
            piece = []
        else:
            piece.append(w)
    pieces.append(piece)
    out = []
    for tokens in pieces:
        for i, t in enumerate(tokens):
            if t in ("sh", "bash") and tokens[i + 1:i + 2] == ["-c"] and i + 2 < len(tokens):
                out += commands(tokens[i + 2])  # sudo sh -c '...; exec exposure-filter ...'
                break
            if t != "exposure-filter" and not t.endswith("/exposure-filter"):
                continue
            before = tokens[:i]
            if before and before[0] == "kubectl" and before[-1] == "--":
                out.append((tokens[i + 1:], before))
            elif all(b in ("sudo", "exec") or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", b) for b in before):
                out.append((tokens[i + 1:], None))
            else:
                continue  # a name, not the command: `systemctl status exposure-filter`, deploy/...
            break
    return out


class Binary:
    def __init__(self, path):
        self.path = path
        self.helps = {}
        self.sets = {}

    def help(self, words):
        key = tuple(words)
        if key not in self.helps:
            r = subprocess.run([self.path] + words + ["--help"], capture_output=True, text=True,
                               timeout=30)
            self.helps[key] = r.stdout if r.returncode == 0 else None
        return self.helps[key]

    def subcommands(self, words):
        text = self.help(words) or ""
        m = re.search(r"^Subcommands:\n((?:  .*\n)+)", text, re.M)
        return set(re.findall(r"^  (\S+)", m.group(1), re.M)) if m else set()

    def unknown_key(self, assignment):
        if assignment not in self.sets:
            r = subprocess.run([self.path, "config", "check", "--set", assignment],
                               capture_output=True, text=True, timeout=30)
            self.sets[assignment] = "unknown key" in r.stderr
        return self.sets[assignment]


def check_command(binary, where, tokens, kubectl, paths, deps):
    if not tokens or tokens[0].startswith("-"):
        return  # the bare name (`exposure-filter`), or --help/--version
    shown = "exposure-filter " + " ".join(tokens)
    words = [tokens[0]]
    if words[0] not in binary.subcommands([]):
        findings.append(f"{where}: `{shown}`: no subcommand {words[0]}")
        return
    rest = tokens[1:]
    subs = binary.subcommands(words)
    if subs:
        if not rest or rest[0] not in subs:
            findings.append(f"{where}: `{shown}`: {words[0]} needs one of {sorted(subs)}")
            return
        words.append(rest[0])
        rest = rest[1:]
    checked["commands"] += 1
    text = binary.help(words) or ""
    for i, t in enumerate(rest):
        if not t.startswith("-") or t == "-" or re.fullmatch(r"-\d.*", t):
            continue
        name = t.split("=", 1)[0]
        checked["options"] += 1
        if not re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", text):
            findings.append(f"{where}: `{shown}`: {' '.join(words)} --help lists no {name}")
        value = t.split("=", 1)[1] if "=" in t else (rest[i + 1] if i + 1 < len(rest) else None)
        if name in ("-c", "--config"):
            checked["config paths"] += 1
            if value not in paths:
                findings.append(f"{where}: `{shown}`: config {value} is not where it is "
                                f"installed ({' or '.join(sorted(paths))})")
        if name == "--set":
            checked["set keys"] += 1
            if not value or "=" not in value:
                findings.append(f"{where}: `{shown}`: --set without KEY=VALUE")
            elif binary.unknown_key(value):
                findings.append(f"{where}: `{shown}`: --set {value.split('=')[0]}: unknown key")
    if kubectl is not None:
        checked["kubectl targets"] += 1
        target = next((t for t in kubectl if re.match(r"(deploy|deployment|deployments)/", t)), None)
        container = config_arg([("-c" if t in ("-c", "--container") else t) for t in kubectl])
        if kubectl[:2] != ["kubectl", "exec"] or not target:
            findings.append(f"{where}: `{' '.join(kubectl)}`: want kubectl exec deploy/NAME")
            return
        name = target.split("/", 1)[1]
        if name not in deps:
            findings.append(f"{where}: `{' '.join(kubectl)}`: no Deployment {name} in "
                            f"deploy/kubernetes/base ({sorted(deps)})")
        elif container and container not in deps[name]:
            findings.append(f"{where}: `{' '.join(kubectl)}`: Deployment {name} has no "
                            f"container {container} ({deps[name]})")
        elif not container and len(deps[name]) != 1:
            findings.append(f"{where}: `{' '.join(kubectl)}`: Deployment {name} has "
                            f"{len(deps[name])} containers: name one with -c")


def main():
    if len(sys.argv) != 2:
        print("usage: scripts/check-runbooks.py BINARY", file=sys.stderr)
        return 2
    binary = Binary(sys.argv[1])
    if not binary.subcommands([]):
        print(f"check-runbooks: {sys.argv[1]} --help lists no subcommands", file=sys.stderr)
        return 2
    rules = alerts()
    if not rules:
        findings.append(f"{ALERTS}: no alerts found")
    check_runbook_urls(rules)
    check_rewrite(rules)
    paths = installed_paths()
    deps = deployments()
    snippets = [(f"{doc}:{n}", s) for doc in (RUNBOOKS, OPERATING)
                for n, s in markdown_snippets(doc)] + \
               [(f"{ALERTS}:{n}", s) for n, s in alert_snippets(rules)]
    for where, s in snippets:
        for tokens, kubectl in commands(s):
            check_command(binary, where, tokens, kubectl, paths, deps)
    if checked["commands"] == 0:
        findings.append(f"no exposure-filter commands found in {RUNBOOKS} or {ALERTS}")
    for f in dict.fromkeys(findings):
        print(f"check-runbooks: {f}", file=sys.stderr)
    counts = ", ".join(f"{v} {k}" for k, v in checked.items())
    where = "; ".join(f"{p} ({', '.join(v)})" for p, v in sorted(paths.items()))
    print(f"check-runbooks: config installed at {where}")
    print(f"check-runbooks: {counts} checked; {len(dict.fromkeys(findings))} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
