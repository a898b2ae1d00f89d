#!/usr/bin/env python3
"""The Python reference printed in docs/CONTENT.md (extracted from the document at
run time, so the text itself is what is tested), as a filter:

  content_ref.py fingerprint [--seed S]
      reads one JSON list of [token, weight] pairs per line on stdin and prints the
      fingerprint of each (rule 1) as 16 hex digits.
"""
import argparse
import json
import os
import re
import sys

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "CONTENT.md")


def load_reference():
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        raise SystemExit("content_ref: no ```python block in docs/CONTENT.md")
    ns = {}
    exec(compile(blocks[-1].split('\nif __name__ == "__main__":')[0],
                 "docs/CONTENT.md (Python reference)", "exec"), ns)
    return ns


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["fingerprint"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    ref = load_reference()
    for n, line in enumerate(sys.stdin, 1):
        try:
            tokens = [(t, int(w)) for t, w in json.loads(line)]
        except (ValueError, TypeError) as e:
            raise SystemExit(f"content_ref: stdin line {n}: {e}")
        print(f"{ref['simhash'](tokens, a.seed):016x}")


if __name__ == "__main__":
    main()
