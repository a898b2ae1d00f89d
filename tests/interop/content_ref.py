#!/usr/bin/env python3
"""The Python reference printed in docs/CONTENT.md (extracted from the document at
run time, so the text itself is what is tested), as a filter:

  content_ref.py fingerprint [--seed S]
      reads one JSON list of [token, weight] pairs per line on stdin and prints the
      fingerprint of each (rule 1) as 16 hex digits.
  content_ref.py cluster-vectors
      checks the five tables of "Rule 5: cluster marks and a query" (and its
      revision 1) in
      docs/CONTENT.md with the references of docs/CONTENT.md (cluster_token,
      exposure_items, classify) and docs/FORMAT.md (positions, bits, the query);
      prints one line per row, exits 1 naming the first row that differs.
  content_ref.py index-vectors
      checks the two tables of "Index layout revision 2: table entries" with the
      reference's generation, oldest_generation and table_place; the same output.
"""
import argparse
import json
import os
import re
import sys

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs")
DOC = os.path.join(DOCS, "CONTENT.md")


def load_reference(name="CONTENT.md"):
    text = open(os.path.join(DOCS, name), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        raise SystemExit(f"content_ref: no ```python block in docs/{name}")
    ns = {}
    exec(compile(blocks[-1].split('\nif __name__ == "__main__":')[0],
                 f"docs/{name} (Python reference)", "exec"), ns)
    return ns


def table_rows(text, heading, nth):
    """The body rows (cells, trimmed) of table number nth (0-based) under heading."""
    section = text.split("\n" + heading + "\n", 1)[1].split("\n#", 1)[0]
    tables, rows, body = [], None, False
    for line in section.splitlines() + [""]:
        if not line.startswith("|"):
            if rows is not None:
                tables.append(rows)
            rows, body = None, False
            continue
        if rows is None:
            rows = []
        if line.startswith("|--"):
            body = True
        elif body:
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return tables[nth]


def quoted(cell):
    """`"story-1"` -> story-1; the dash (no cluster) -> None."""
    if cell == "\u2014":
        return None
    m = re.fullmatch(r'`"(.*)"`', cell)
    if not m:
        raise SystemExit(f"content_ref: cell {cell!r} is not a quoted item")
    return m.group(1)


def cluster_vectors():
    """Checks the tables of "Rule 5: cluster marks and a query" and "Rule 5,
    revision 1: cluster tokens and a query" (see above)."""
    ref, fmt = load_reference(), load_reference("FORMAT.md")
    text = open(DOC, encoding="utf-8").read()
    # The default layout's stage table (m 3345, k 12, seed 0); rule 9 positions.
    table = fmt["stage_table"](3345, 12, 2, 2, 8, fmt["design_fill_ppm"](3345, 12, 200))
    failed = []

    def check(what, got, want):
        print(f"{'ok' if got == want else 'DIFFERS'}: {what}: {got}")
        if got != want:
            failed.append(f"{what}: got {got}, the table says {want}")

    rev1 = "### Rule 5, revision 1: cluster tokens and a query"
    for cluster, token_hex, positions in table_rows(text, rev1, 0):
        token = ref["cluster_token"](quoted(cluster))
        check(f"token of {cluster}", f"`{token.hex()}`", token_hex)
        got = ", ".join(str(p) for p in fmt["stage_positions"](token, table[0], 0, 9))
        check(f"positions of token {cluster}", got, positions)
    # Revision 2 (founder_marks_from 0: no token read) and revision 1 (no field).
    for heading, first, revision, founder_marks_from in (
            ("### Rule 5: cluster marks and a query", 0, 2, 0), (rev1, 1, 1, None)):
        value = bytearray()
        for item, cluster, sets in table_rows(text, heading, first):
            written = ref["exposure_items"](quoted(item), quoted(cluster), revision)
            names = [f'token(`"{w[1:].decode()}"`)' if w[:1] == b"\xff" else f'`"{w.decode()}"`'
                     for w in written]
            check(f"revision {revision}: exposure {item} cluster {cluster} sets",
                  ", ".join(names), sets)
            for w in written:
                fmt["set_bits"](value, fmt["stage_positions"](w, table[0], 0, 9))

        def is_set(item, value=value):
            return fmt["seen_in_value"](bytes(value), table, item, 0, 9)

        tokens = ref["reads_tokens"](founder_marks_from, 0)
        for candidate, cluster, answer in table_rows(text, heading, first + 1):
            got = ref["classify"](quoted(candidate), quoted(cluster), is_set, tokens)
            check(f"revision {revision}: candidate {candidate} cluster {cluster}", got, answer)
    if failed:
        raise SystemExit("content_ref: docs/CONTENT.md rule 5 vectors: " + failed[0])


def index_vectors():
    """Checks the tables of "Index layout revision 2: table entries"."""
    ref = load_reference()
    text = open(DOC, encoding="utf-8").read()
    heading = "### Index layout revision 2: table entries"
    failed = []

    def check(what, got, want):
        print(f"{'ok' if got == want else 'DIFFERS'}: {what}: {got}")
        if got != want:
            failed.append(f"{what}: got {got}, the table says {want}")

    for now, r, gen, expires, oldest in table_rows(text, heading, 0):
        now, r = int(now), int(r)
        g = ref["generation"](now, r)
        check(f"generation at {now} retention {r}", str(g), gen)
        check(f"expiry of generation {g}", str((g + 1) * max(1, r // 2) + r), expires)
        check(f"oldest generation at {now}", str(ref["oldest_generation"](now, r)), oldest)
    for fp, table, gen, bits, key, score in table_rows(text, heading, 1):
        got = ref["table_place"]("ef:", int(fp.strip("`"), 16), int(table), int(gen), int(bits))
        check(f"place of {fp} table {table}", (f"`{got[0]}`", str(got[1])), (key, score))
    if failed:
        raise SystemExit("content_ref: docs/CONTENT.md index vectors: " + failed[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["fingerprint", "cluster-vectors", "index-vectors"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.mode == "cluster-vectors":
        cluster_vectors()
        return
    if a.mode == "index-vectors":
        index_vectors()
        return
    ref = load_reference()
    for n, line in enumerate(sys.stdin, 1):
        try:
            tokens = [(t, int(w)) for t, w in json.loads(line)]
        except (ValueError, TypeError) as e:
            raise SystemExit(f"content_ref: stdin line {n}: {e}")
        print(f"{ref['simhash'](tokens, a.seed):016x}")


if __name__ == "__main__":
    main()
