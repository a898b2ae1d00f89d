#!/usr/bin/env python3
"""An independent implementation of the bit-layout contract for interop tests:
the Python reference printed in docs/FORMAT.md (extracted from the document at
run time, so the text itself is what is tested) plus a minimal RESP client.

  format_ref.py write --port P [--prefix ef:] --user U --ts-ms T --stage S ITEM...
      sets each ITEM's positions in stage S of the user's key for time T (the
      layout from <prefix>meta; the position rule of that key's bucket: rule 9
      from a version-3 meta's v3_from on, else rule 2) with SETBIT, and its
      EXPIREAT. Prints the key.
  format_ref.py check --port P [--prefix ef:] --user U --now S ITEM...
      prints "seen ITEM" or "unseen ITEM" per item: rule 6 (the live buckets and
      the next one, from one MGET, each key tested with its own bucket's rule)
      and rule 8 (every stage present).
  format_ref.py served --port P [--prefix ef:] --user U ITEM...
      prints "served ITEM" or "unserved ITEM" per item: rule 10, the user's
      served ring read with GET (the layout's seed from <prefix>meta).
  format_ref.py mark --port P [--prefix ef:] --user U --capacity C --width W
                --ttl-ms T ITEM...
      appends the items to the user's served ring (rule 10's apply_served) with
      GET, SET and PEXPIRE: not atomic (a real writer uses one script), which a
      test with one writer does not need. Prints the ring's filled count.
  format_ref.py meta-vectors
      checks the reference's read_meta against every row of FORMAT.md's table
      "Meta hash: accept or refuse"; prints one line per row, exits 1 on a mismatch.
  format_ref.py class-vectors
      checks the reference's choose_class against every row of FORMAT.md's two
      class-rule tables (section "Version 4: size classes, a value, the class
      rule"; the default version-4 meta): estimate -> class, and estimate and the
      previous key's class -> class. One line per row, exits 1 on a mismatch.
"""
import argparse
import os
import re
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "..", "docs", "FORMAT.md")


def load_reference():
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        raise SystemExit("format_ref: no ```python block in docs/FORMAT.md")
    code = blocks[-1].split('\nif __name__ == "__main__":')[0]
    ns = {}
    exec(compile(code, "docs/FORMAT.md (Python reference)", "exec"), ns)
    return ns


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("format_ref: connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SystemExit("format_ref: connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise SystemExit(f"format_ref: redis error: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise SystemExit(f"format_ref: bad reply {line!r}")

    def command(self, *args):
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        msg = b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        self.sock.sendall(msg)
        return self._reply()


def layout(ref, r, prefix):
    """The stored meta (read_meta: versions 1 to 4) and its stage table (of the
    buckets before v4_from; check takes each version-4 key's from its header)."""
    fields = r.command("HGETALL", prefix + "meta")
    meta = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
    if not meta:
        raise SystemExit(f"format_ref: no {prefix}meta")
    try:
        meta = ref["read_meta"](meta)
    except ValueError as e:
        raise SystemExit(f"format_ref: {prefix}meta refused: {e}")
    return meta, ref["meta_table"](meta)


DEFAULT_V2_META = ("version 2 m 3345 k 12 seed 0 prefix ef: bucket_seconds 86400 "
                   "window_seconds 2592000 growth 2 k_step 2 stages 8 fill_ppm 512024")


def meta_vectors():
    """The rows of FORMAT.md's table "Meta hash: accept or refuse":
    [(change text, fields, None or the refused name)]."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("### Meta hash: accept or refuse", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("change", "") or set(cells[0]) <= set("-"):
            continue
        words = DEFAULT_V2_META.split()
        fields = dict(zip(words[::2], words[1::2]))
        for change in re.findall(r"`([^`]*)`", cells[0]):
            if change.startswith("-"):
                fields.pop(change[1:])
            else:
                name, value = change.split("=", 1)
                fields[name] = value
        refused = re.fullmatch(r"refuses `([^`]*)`", cells[1])
        if cells[1] != "accepts" and not refused:
            raise SystemExit(f"format_ref: meta vector row not understood: {line}")
        rows.append((cells[0], fields, refused.group(1) if refused else None))
    if not rows:
        raise SystemExit("format_ref: no rows under 'Meta hash: accept or refuse'")
    return rows


def check_meta_vectors(ref):
    bad = 0
    for change, fields, refused in meta_vectors():
        try:
            ref["read_meta"](fields)
            got = None
        except ValueError as e:
            got = str(e)
        ok = got is None if refused is None else (got or "").startswith(refused + " ") or \
            (got or "").startswith(refused + ":")
        bad += not ok
        print(("ok   " if ok else "FAIL ") + change + " -> " + (got or "accepted"))
    return bad


def class_vectors():
    """The rows of FORMAT.md's class-rule tables: [(estimate, previous or None, class)]."""
    text = open(DOC, encoding="utf-8").read()
    section = text.split("### Version 4: size classes, a value, the class rule", 1)[1]
    section = section.split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or not all(re.fullmatch(r"[0-9]+", c) for c in cells):
            continue
        if len(cells) == 2:
            rows.append((float(cells[0]), None, int(cells[1])))
        elif len(cells) == 3:
            rows.append((float(cells[0]), int(cells[1]), int(cells[2])))
    if len(rows) < 10:
        raise SystemExit("format_ref: fewer than 10 class-rule rows in FORMAT.md")
    return rows


def check_class_vectors(ref):
    words = (DEFAULT_V2_META.replace("version 2", "version 4") + " v3_from 0 v4_from 0").split()
    meta = ref["read_meta"](dict(zip(words[::2], words[1::2])))
    bad = 0
    for estimate, previous, want in class_vectors():
        got = ref["choose_class"](meta, estimate, previous)
        bad += got != want
        print(("ok   " if got == want else "FAIL ") +
              f"estimate {estimate:g}, previous {previous} -> {got} (FORMAT.md: {want})")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["write", "check", "served", "mark", "meta-vectors",
                                         "class-vectors"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--prefix", default="ef:")
    ap.add_argument("--user")
    ap.add_argument("--ts-ms", type=int)
    ap.add_argument("--now", type=int)
    ap.add_argument("--stage", type=int, default=0)
    ap.add_argument("--capacity", type=int)
    ap.add_argument("--width", type=int)
    ap.add_argument("--ttl-ms", type=int)
    ap.add_argument("items", nargs="*")
    a = ap.parse_intermixed_args()
    ref = load_reference()
    if a.mode == "meta-vectors":
        sys.exit(1 if check_meta_vectors(ref) else 0)
    if a.mode == "class-vectors":
        sys.exit(1 if check_class_vectors(ref) else 0)
    if a.port is None or a.user is None or not a.items:
        raise SystemExit(f"format_ref: {a.mode} needs --port, --user and at least one ITEM")
    r = Redis(a.port)
    meta, table = layout(ref, r, a.prefix)
    seed = meta["seed"]
    bucket_s, window_s = meta["bucket_seconds"], meta["window_seconds"]
    if a.mode in ("served", "mark"):
        key = ref["served_key"](a.prefix, a.user)
        value = r.command("GET", key) or b""
        if a.mode == "served":
            for item in a.items:
                print(("served " if ref["served"](value, item, seed) else "unserved ") + item)
            return
        if None in (a.capacity, a.width, a.ttl_ms):
            raise SystemExit("format_ref: mark needs --capacity, --width and --ttl-ms")
        value = ref["apply_served"](value, a.capacity, a.width, a.items, seed)
        r.command("SET", key, value)
        r.command("PEXPIRE", key, a.ttl_ms)
        print(ref["served_header"](value)[3])
        return
    if a.mode == "write":
        if a.ts_ms is None:
            raise SystemExit("format_ref: write needs --ts-ms")
        if not 0 <= a.stage < len(table):
            raise SystemExit(f"format_ref: --stage {a.stage}: the layout has {len(table)}")
        start = ref["write_bucket"](a.ts_ms, a.ts_ms, bucket_s)
        key = ref["key"](a.prefix, a.user, start, bucket_s)
        rule = ref["rule_for"](meta, start)  # the rule of this key's bucket
        if meta["version"] == 4 and start >= meta["v4_from"]:
            raise SystemExit("format_ref: write into a key with a size class (version 4, "
                             "rule 11) is not implemented here")
        for item in a.items:
            for p in ref["stage_positions"](item, table[a.stage], seed, rule):
                r.command("SETBIT", key, p, 1)
        r.command("EXPIREAT", key, ref["expire_at"](start, bucket_s, window_s))
        print(key)
        return
    if a.now is None:
        raise SystemExit("format_ref: check needs --now")
    starts = ref["read_buckets"](a.now, window_s, bucket_s)
    got = r.command("MGET", *[ref["key"](a.prefix, a.user, s, bucket_s) for s in starts])
    values = {s: v or b"" for s, v in zip(starts, got)}  # bucket start -> value
    for item in a.items:
        print(("seen " if ref["seen"](meta, values, item) else "unseen ") + item)


if __name__ == "__main__":
    main()
