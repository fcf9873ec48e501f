#!/usr/bin/env python3
"""cat.py TAG:NS_PER_FRAG ... : per-category ns/fragment from runs/TAG.perf.data (self samples)."""
import subprocess, sys, re
CATS = [
 ('AES-GCM open (ring)', lambda s,k: not k and (s.startswith('ring_core') or s.startswith('ring::'))),
 ('kernel: TCP recv copy', lambda s,k: k and any(x in s for x in ['_copy_to_iter','__check_object_size','__skb_datagram_iter','simple_copy_to_iter','__virt_addr_valid','check_heap_object','skb_copy_datagram'])),
 ('kernel: sched/wait', lambda s,k: k and any(x in s for x in ['finish_task_switch','__schedule','schedule','io_cqring_wait','native_write_msr','pick_next','update_curr','dequeue','enqueue','try_to_wake_up','_raw_spin_unlock_irqrestore'])),
 ('kernel: other', lambda s,k: k),
 ('hash tables (hashbrown, hashing)', lambda s,k: 'hashbrown' in s or 'core::hash' in s or 'sip::' in s or '::hash' in s),
 ('memmove/memcpy', lambda s,k: 'memmove' in s or 'memcpy' in s),
 ('malloc/free', lambda s,k: any(x in s for x in ['malloc','free','_int_','cfree','realloc'])),
 ('user: other', lambda s,k: True),
]
def load(path):
    out = subprocess.run(['perf','report','-i',path,'--stdio','-g','none','--no-children','--sort','sym'], capture_output=True, text=True).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r'\s*([\d.]+)%\s+\[(.)\]\s+(.*)$', line)
        if m: d[(m.group(3).strip(), m.group(2)=='k')] = d.get((m.group(3).strip(), m.group(2)=='k'),0)+float(m.group(1))
    return d
res = {}
for arg in sys.argv[1:]:
    tag, ns = arg.split(':'); ns = float(ns)
    c = {n:0.0 for n,_ in CATS}
    for (s,k),p in load(f'runs/{tag}.perf.data').items():
        for n,f in CATS:
            if f(s,k): c[n] += p*ns/100; break
    res[tag] = c
tags = list(res)
print('| category | ' + ' | '.join(tags) + ' |'); print('|---|' + '---|'*len(tags))
for n,_ in CATS: print(f'| {n} | ' + ' | '.join(f'{res[t][n]:.0f}' for t in tags) + ' |')
print('| total | ' + ' | '.join(f'{sum(res[t].values()):.0f}' for t in tags) + ' |')
