#!/usr/bin/env python3
"""Model of layout v4's memory against v3 (issue 53; docs/DESIGN.md, "Layout version 4").

Simulates, bit by bit, the keys of a population over several daily buckets, with
the writer's stage rule of docs/FORMAT.md rule 8 and independent positions (rule 9):
v3 (stage 0 of m bits for every key) against v4 (stage 0 sized per key by a class
chosen from the user's previous buckets). Prints filter bytes over the Bloom optimum
(at the per-key rate p_b that the layout promises a 1x user), the jemalloc size
class each value would occupy, and the expected false-positive rate per key over p_b.
Defaults: items_per_bucket 200, fpr 0.01, 30-day window (m 3345, k 12), growth 2,
k_step 2, 8 stages; the issue's population (600 users at 0.5x, 250 at 1x, 100 at
4x, 40 at 16x, 10 at 64x), each day's count +-10% around the user's activity.
--keep 1 adds the class rule's hysteresis (yesterday's class kept when at most one
above the estimate's); --window W also prints the read's shape over the last W
buckets (distinct classes per user, and the stages a read probes: per class, the
most any of its keys holds). Pure Python, no dependencies: about a minute per run
(--scale 0.1 for long runs).
"""
import argparse
import math, random, sys
M, K, G, KS, STAGES, FPPM = 3345, 12, 2, 2, 8, 512024
N0 = 200
F = FPPM / 1e6
PB = 0.000324151834
OPT_BITS = -math.log(PB) / math.log(2)**2   # bits per item at the Bloom optimum

def table(m0, hdr_bits):
    t, off = [], hdr_bits
    for s in range(STAGES):
        ks = K + s * KS
        ms = -(-m0 * G**s * ks // K)
        t.append((ms, ks, off, -(-ms * FPPM // 10**6)))
        off += 8 * (-(-ms // 8))
    return t

def classes(kind):
    out = []
    if kind == 'jemalloc':
        for c in range(60):
            S = (4 + c % 4) << (c // 4 + 4)
            out.append(8 * (S - 16 - 1))
    elif kind.startswith('prop'):
        per = int(kind[4:])
        for c in range(100):
            out.append(math.ceil(M * 2 ** ((c - 3 * per) / per)))
    return out

def cap(m0):
    return -(m0 / K) * math.log(1 - F)

def fill_key(rng, tab, n):
    """Writes n distinct items into a key by the writer's rule; returns [X_s] per stage used."""
    s = 0
    bits = bytearray(tab[0][0])
    X = [0]
    for _ in range(n):
        ms, ks, off, fs = tab[s]
        if X[s] >= fs and s < STAGES - 1:
            s += 1
            ms, ks, off, fs = tab[s]
            bits = bytearray(ms)
            X.append(0)
        elif X[s] >= fs:
            continue  # past the limit
        rr = rng.randrange
        for _ in range(ks):
            q = rr(ms)
            if not bits[q]:
                bits[q] = 1
                X[s] += 1
    return X

def value_bytes(tab, X, hdr):
    S = len(X)
    ms, ks, off, fs = tab[S - 1]
    return (off + ms + 7) // 8

def estimate(tab, X):
    n = 0.0
    for s, x in enumerate(X):
        ms, ks = tab[s][0], tab[s][1]
        if x >= ms: x = ms - 1
        n += -(ms / ks) * math.log(1 - x / ms)
    return n

def fpr(tab, X):
    q = 1.0
    for s, x in enumerate(X):
        ms, ks = tab[s][0], tab[s][1]
        q *= 1 - (x / ms) ** ks
    return 1 - q

def jemalloc_bin(n):
    if n <= 128: return -(-n // 16) * 16
    o = n.bit_length() - 1
    if (1 << o) == n: return n
    step = 1 << (o - 2)
    return -(-n // step) * step

def sds(n):
    return n + (4 if n < 256 else 6 if n < 65536 else 10)

def run(kind, h, shuffle, seed=1, mix=((0.5, 600), (1, 250), (4, 100), (16, 40), (64, 10)), days=3, look=1, split=1.0, keep=0, window=0):
    rng = random.Random(seed + 1000)
    r = random.Random(seed)
    cl = classes(kind) if kind != 'v3' else None
    v3tab = table(M, 0)
    base = [a for a, n in mix for _ in range(n)]
    default_c = None
    if cl:
        default_c = min(c for c, m0 in enumerate(cl) if m0 >= M)
    hist = [[] for _ in base]   # [(tab, X)] newest last
    rows = []
    reads = []
    for d in range(days):
        act = list(base)
        if shuffle:
            r.shuffle(act)
        for u, a in enumerate(act):
            n = max(1, round(a * N0 * r.uniform(0.9, 1.1)))
            if cl is None:
                tab, hdr = v3tab, 0
            else:
                if not hist[u]:
                    c = default_c
                else:
                    est = min(estimate(p[0], p[1]) for p in hist[u][-look:])
                    c = next(c for c, m0 in enumerate(cl) if cap(m0) >= h * est / split)
                    p = hist[u][-1][2]   # hysteresis: keep yesterday's class if at most `keep` above
                    if p is not None and c <= p <= c + keep:
                        c = p
                tab, hdr = table(cl[c], 8), 8
            c_now = None if cl is None else c
            X = fill_key(rng, tab, n)
            hist[u].append((tab, X, c_now))
            if window and d == days - 1:
                keys = hist[u][-window:]
                groups = {}
                for t, x, cc in keys:
                    groups[cc] = max(groups.get(cc, 0), len(x))
                reads.append((a, len(groups), sum(groups.values())))
            if d == days - 1:
                vb = value_bytes(tab, X, hdr)
                rows.append((a, n, vb, fpr(tab, X), len(X), jemalloc_bin(sds(vb))))
    if window:
        for a in sorted(set(r[0] for r in reads)):
            rs = [r for r in reads if r[0] == a]
            print(f"   read {a:>5}x tables/user {sum(r[1] for r in rs)/len(rs):.2f} (max {max(r[1] for r in rs)}) table-stages/user {sum(r[2] for r in rs)/len(rs):.2f}")
    return rows

def report(rows, label):
    tot_b = sum(r[2] for r in rows); tot_o = sum(r[1] * OPT_BITS / 8 for r in rows)
    tot_j = sum(r[5] for r in rows)
    print(f"{label}: bytes {tot_b} opt {tot_o:.0f} ratio {tot_b/tot_o:.3f}  jemalloc {tot_j} ({tot_j/tot_o:.3f})")
    for a in sorted(set(r[0] for r in rows)):
        rs = [r for r in rows if r[0] == a]
        b = sum(r[2] for r in rs); o = sum(r[1] * OPT_BITS / 8 for r in rs)
        f = sum(r[3] for r in rs) / len(rs)
        print(f"   {a:>5}x users {len(rs):4d} B/key {b/len(rs):9.0f} x opt {b/o:.3f} FPR/pb {f/PB:.2f} max stages {max(r[4] for r in rs)}")
    return tot_b

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--classes", default="jemalloc", help="jemalloc (4 per octave, S_c - 16 bytes) or propN (N per octave, proportional to m)")
    ap.add_argument("--headroom", type=float, default=1.25, help="class capacity over the estimate (default 1.25)")
    ap.add_argument("--shuffle", action="store_true", help="activity does not persist: users shuffled between classes every day")
    ap.add_argument("--days", type=int, default=3, help="buckets simulated; the last is today's (default 3)")
    ap.add_argument("--look", type=int, default=2, help="previous buckets the class rule takes the minimum over (default 2)")
    ap.add_argument("--split", type=float, default=1.0, help="size stage 0 for 1/split of the class capacity (3: stages 0 and 1 together hold it, with growth 2); default 1")
    ap.add_argument("--keep", type=int, default=0, help="hysteresis: keep the previous key's class when it is at most this many classes above the rule's (default 0: none)")
    ap.add_argument("--window", type=int, default=0, help="also print the read's shape over the last this many buckets: distinct classes and sum of stages held per class, per user")
    ap.add_argument("--scale", type=float, default=1.0, help="population scale (default 1: the issue's 1,000 users)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    kind, h, shuffle, days, look = a.classes, a.headroom, a.shuffle, a.days, a.look
    mix = tuple((x, max(1, round(n * a.scale))) for x, n in ((0.5, 600), (1, 250), (4, 100), (16, 40), (64, 10)))
    v3 = report(run('v3', 1, shuffle, seed=a.seed, days=days, mix=mix, window=a.window), f"v3 shuffle={shuffle} days={days}")
    b = report(run(kind, h, shuffle, seed=a.seed, days=days, look=look, split=a.split, mix=mix, keep=a.keep, window=a.window), f"{kind} h={h} split={a.split} shuffle={shuffle} days={days} look={look} keep={a.keep}")
    print(f"   vs v3 {b/v3:.3f}")
