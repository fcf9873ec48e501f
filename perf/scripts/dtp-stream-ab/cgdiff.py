#!/usr/bin/env python3
"""cgdiff.py A.json NA B.json NB : self Ir/fragment side by side, names shortened (crate paths moved between the two)."""
import json, sys, re, collections
def short(f):
    f = re.sub(r'<[^<>]*>', '', f); f = re.sub(r'<[^<>]*>', '', f); f = re.sub(r'<[^<>]*>', '', f)
    parts = f.split('::'); return '::'.join(parts[-2:]) if len(parts) > 1 else f
def load(p, n):
    j = json.load(open(p)); s = collections.Counter(); c = collections.Counter()
    for f, v in j['self'].items(): s[short(f)] += v / n
    for f, v in j['calls'].items(): c[short(f)] += v / n
    return j['total'] / n, s, c
ta, a, ca = load(sys.argv[1], float(sys.argv[2])); tb, b, cb = load(sys.argv[3], float(sys.argv[4]))
print(f'total Ir/fragment: before {ta:,.0f}  after {tb:,.0f}  ({(tb/ta-1)*100:+.1f} %)')
for k in ['malloc', 'free', 'realloc', '__memcpy_avx_unaligned_erms', '__memmove_avx_unaligned_erms', 'epoll_wait', 'recv', 'send', 'sendmsg', 'read', 'write', 'writev', 'readv']:
    print(f'calls/fragment {k:32} before {ca.get(k,0):.3f}  after {cb.get(k,0):.3f}   self Ir/frag {a.get(k,0):.0f} / {b.get(k,0):.0f}')
print('| function (self) | before Ir/frag | after Ir/frag | diff |'); print('|---|---|---|---|')
keys = sorted(set(a) | set(b), key=lambda k: -max(a.get(k,0), b.get(k,0)))[:int(sys.argv[5]) if len(sys.argv) > 5 else 30]
for k in keys: print(f'| {k[:80]} | {a.get(k,0):.0f} | {b.get(k,0):.0f} | {b.get(k,0)-a.get(k,0):+.0f} |')
