#!/usr/bin/env python3
"""cgparse.py FILE FRAGMENTS : self and inclusive Ir per fragment by function (callgrind format, line positions)."""
import sys, re, collections, json
names = {'fn': {}, 'cfn': {}}
selfc = collections.Counter(); callc = collections.Counter(); calls = collections.Counter()
fn = None; pending = None
def name(kind, s):
    m = re.match(r'\((\d+)\)(?: (.*))?', s)
    if not m: return s
    i, n = m.group(1), m.group(2)
    if n: names['fn'][i] = n
    return names['fn'].get(i, i)
for line in open(sys.argv[1]):
    line = line.rstrip('\n')
    if line.startswith('fn='): fn = name('fn', line[3:]); continue
    if line.startswith('cfn='): cfn = name('fn', line[4:]); continue
    if line.startswith('calls='): pending = (cfn, int(line[6:].split()[0])); continue
    if line and (line[0].isdigit() or line[0] in '+-*'):
        parts = line.split()
        if len(parts) < 2: continue
        c = int(parts[1])
        if pending:
            callc[(fn, pending[0])] += c; calls[pending[0]] += pending[1]; pending = None
        else:
            selfc[fn] += c
total = sum(selfc.values())
incl = collections.Counter(selfc)
for (f, g), c in callc.items():
    if f != g: incl[f] += c
json.dump({'total': total, 'self': selfc, 'incl': incl, 'calls': calls}, open(sys.argv[1] + '.json', 'w'))
n = float(sys.argv[2])
print(f'total {total:,} Ir, {total/n:,.0f} Ir/fragment')
for f, c in selfc.most_common(25): print(f'{c/n:10.0f} self  {calls[f]/n:8.3f} calls/frag  {f[:110]}')
