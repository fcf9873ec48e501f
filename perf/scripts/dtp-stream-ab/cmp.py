#!/usr/bin/env python3
"""cmp.py A.perf.data A_NS_PER_FRAG B.perf.data B_NS_PER_FRAG [children] : per-symbol ns/fragment, A vs B."""
import subprocess, sys, re
def load(path, children):
    args = ['perf','report','-i',path,'--stdio','-g','none','--sort','sym','--percent-limit','0.05']
    args.append('--children' if children else '--no-children')
    out = subprocess.run(args, capture_output=True, text=True).stdout
    d = {}
    for line in out.splitlines():
        if line.startswith('#') or not line.strip(): continue
        m = re.match(r'\s*([\d.]+)%\s+(?:([\d.]+)%\s+)?\[(.)\]\s+(.*)$', line)
        if not m: continue
        pct = float(m.group(1)); sym = ('[k] ' if m.group(3)=='k' else '') + m.group(4).strip()
        d[sym] = d.get(sym, 0) + pct
    return d
ch = len(sys.argv) > 5
a = load(sys.argv[1], ch); na = float(sys.argv[2]); b = load(sys.argv[3], ch); nb = float(sys.argv[4])
rows = []
for s in set(a) | set(b):
    x = a.get(s, 0)*na/100; y = b.get(s, 0)*nb/100
    rows.append((y-x, x, y, s))
print(f"| {'symbol':70} | before ns/frag | after ns/frag | diff |")
print('|---|---|---|---|')
key = (lambda r: -max(r[1], r[2])) if ch else (lambda r: -abs(r[0]))
for d, x, y, s in sorted(rows, key=key)[:int(sys.argv[6]) if len(sys.argv)>6 else 45]:
    print(f"| {s[:70]:70} | {x:8.0f} | {y:8.0f} | {d:+6.0f} |")
