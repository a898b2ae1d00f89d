#!/usr/bin/env python3
"""Checks the include arrows of src/ against the rows of docs/ARCHITECTURE.md
(registered with ctest as "unit: include arrows run down the rows of
docs/ARCHITECTURE.md"):

  1. every folder of src/ is on exactly one row of the ```layers block;
  2. a file includes headers of its own room or of rooms on lower rows only;
  3. a third-party library is included only by the room that wraps it
     (THIRD_PARTY below).

Usage: scripts/check-layers.py [--graph]   (exit 0 when all pass; one line per
finding; --graph also prints the room-to-room arrows with their counts)
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
THIRD_PARTY = {"librdkafka/": "kafka", "hiredis/": "redis", "openssl/": "redis", "yaml-cpp/": "config",
               "CLI/": "app", "xxhash.h": "content", "unicode/": "content"}


def rows():
    text = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    m = re.search(r"^```layers\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit("docs/ARCHITECTURE.md: no ```layers block")
    level = {}
    for line in m.group(1).splitlines():
        parts = line.split()
        if not parts:
            continue
        for room in parts[1:]:
            if room in level:
                print(f"docs/ARCHITECTURE.md: room {room} is on two rows")
            level[room] = int(parts[0])
    return level


def main():
    level = rows()
    findings = []
    rooms = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
    for room in rooms:
        if room not in level:
            findings.append(f"src/{room}/: not on any row of docs/ARCHITECTURE.md")
    for room in level:
        if room not in rooms:
            findings.append(f"docs/ARCHITECTURE.md: row names {room}, which src/ does not have")
    arrows = collections.Counter()
    files = 0
    for room in rooms:
        for dirpath, _, names in os.walk(os.path.join(SRC, room)):
            for name in sorted(names):
                if not name.endswith((".h", ".cc")):
                    continue
                files += 1
                path = os.path.relpath(os.path.join(dirpath, name), ROOT)
                for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1):
                    m = re.match(r'\s*#\s*include\s+"([A-Za-z_]+)/', line)
                    if m and m.group(1) in level and m.group(1) != room:
                        to = m.group(1)
                        arrows[(room, to)] += 1
                        if room in level and level[to] >= level[room]:
                            findings.append(
                                f"{path}:{n}: {room}/ (row {level[room]}) includes "
                                f"{line.split(chr(34))[1]} (row {level[to]}): an arrow that "
                                "does not run down")
                    m = re.match(r"\s*#\s*include\s+<([^>]+)>", line)
                    if m:
                        for prefix, owner in THIRD_PARTY.items():
                            if m.group(1).startswith(prefix) and room != owner:
                                findings.append(f"{path}:{n}: <{m.group(1)}> outside {owner}/")
    if "--graph" in sys.argv:
        for (a, b), count in sorted(arrows.items(), key=lambda x: (-level.get(x[0][0], 0), x[0])):
            print(f"{a} -> {b}  ({count})")
    for f in findings:
        print(f)
    print(f"check-layers: {files} files, {len(rooms)} rooms, {sum(arrows.values())} includes "
          f"across rooms, {len(findings)} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
