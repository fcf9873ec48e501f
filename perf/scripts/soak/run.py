#!/usr/bin/env python3
"""Soak: many DTP sessions held with heartbeats against `dtp serve`.

Each connection is a Fay that completes the CAP handshake, is granted a
session on a resource of its own and keeps it alive with a heartbeat every
HEARTBEAT_MS (`dtp load --dtp --control idle`). The connections are held
for HOLD seconds after a ramp allowance of RAMP seconds; every SAMPLE
seconds the script records, per server process, VmRSS (/proc/PID/status),
CPU time (/proc/PID/stat) and the /metrics gauges dtp_connections,
dtp_heap_bytes, dtp_process_resident_bytes and dtp_pool_bytes_*.

    python3 run.py BIN [--connections N] [--servers S] [--hold SECONDS]
                       [--ramp SECONDS] [--heartbeat-ms MS] [--sources A-B]
                       [--out DIR]

A process holds one descriptor per connection, so one `dtp serve` holds at
most the open-file limit's worth. The script raises its soft limit to the
hard one and splits the connections over as many server processes (and as
many load generators, one per server) as that limit asks for; with
`--servers 1` and a hard limit above N, one server holds them all. The load
generators' connections come from the loopback addresses of `--sources` in
turn (one address reaches one server port from at most the ephemeral port
range).

Prints one JSON object: the machine's limits, the ramp time, the servers'
RSS summed (before the clients came, at the start of the hold, min, max
and end of the hold, drift in per cent of the start) and per process, bytes
per connection, server-side connections (least during the hold), sessions
lost, heartbeats sent and answered, the servers' CPU over the hold, and
what else ran on the machine. The samples go to DIR/samples.jsonl.

Loopback only; every process it started is stopped at the end.
"""

import argparse, json, math, os, re, resource, signal, subprocess, sys, tempfile, time, urllib.request

PORT0 = 17900  # server i listens on PORT0 + i, its admin port on ADMIN0 + i
ADMIN0 = 18900
# Descriptors a process needs besides its connections (listeners, rings,
# eventfds, the admin port, logs), with room to spare.
FD_MARGIN = 256
GAUGES = ("dtp_connections", "dtp_heap_bytes", "dtp_process_resident_bytes",
          "dtp_pool_bytes_used", "dtp_pool_bytes_reserved", "dtp_pool_bytes_high_water")


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except OSError:
        return None


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_s(pid):
    """User + system CPU seconds of a process (all threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def metrics(admin_port):
    """The gauges of GAUGES, summed over their label sets."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    out = {g: 0 for g in GAUGES}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([0-9.e+]+)$", line)
        if m and m.group(1) in out:
            out[m.group(1)] += int(float(m.group(3)))
    return out


def busy_processes():
    """Other processes using a share of a CPU (the fuzzer, builds), by name and niceness."""
    out = subprocess.run(["ps", "-eo", "pid,ni,pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines()[1:]:
        pid, ni, pcpu, comm = line.split(None, 3)
        if float(pcpu) >= 20.0 and int(pid) != os.getpid():
            rows.append(f"{comm} (nice {ni}, {pcpu}% CPU)")
    return rows[:6]


def sources(spec):
    a, _, b = spec.partition("-")
    a4 = [int(x) for x in a.split(".")]
    b4 = [int(x) for x in (b or a).split(".")]
    lo = a4[0] << 24 | a4[1] << 16 | a4[2] << 8 | a4[3]
    hi = b4[0] << 24 | b4[1] << 16 | b4[2] << 8 | b4[3]
    return hi - lo + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--connections", type=int, default=200_000)
    ap.add_argument("--servers", type=int, default=0, help="server processes (0: as the open-file limit needs)")
    ap.add_argument("--hold", type=float, default=600.0)
    ap.add_argument("--ramp", type=float, default=180.0, help="seconds allowed for the ramp; the hold starts then")
    ap.add_argument("--sample", type=float, default=10.0)
    ap.add_argument("--heartbeat-ms", type=int, default=10_000)
    ap.add_argument("--max-opening", type=int, default=32, help="handshakes in flight per load generator")
    ap.add_argument("--sources", default="127.0.0.2-127.0.0.9")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    per_process = nofile - FD_MARGIN
    servers = a.servers or math.ceil(a.connections / per_process)
    share = [a.connections // servers + (1 if i < a.connections % servers else 0) for i in range(servers)]
    if max(share) > per_process:
        sys.exit(f"{max(share)} connections per process exceed the open-file limit {nofile}; use more --servers")
    ports = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
    port_range = int(ports[1]) - int(ports[0]) + 1
    per_source = math.ceil(max(share) / sources(a.sources))
    if per_source > port_range:
        sys.exit(f"{per_source} connections per source address exceed the ephemeral range {port_range}; add --sources")
    machine = {
        "nofile_soft_hard_before": [soft, hard], "nofile": nofile,
        "nr_open": read_int("/proc/sys/fs/nr_open"), "file_max": read_int("/proc/sys/fs/file-max"),
        "ip_local_port_range": [int(p) for p in ports], "somaxconn": read_int("/proc/sys/net/core/somaxconn"),
        "cores": os.cpu_count(), "busy_at_start": busy_processes(),
    }

    out_dir = a.out or tempfile.mkdtemp(prefix="dtp-soak-")
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="dtp-soak-keys-")
    run = lambda *args: subprocess.run([a.bin, *args], cwd=work, check=True, capture_output=True)
    run("cred", "issuer-key", "--out", "issuer.key")
    run("cred", "noise-key", "--out", "terminal.key")

    procs = []  # (kind, index, Popen)

    def stop_all():
        for _, _, p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, _, p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()

    try:
        server_pids = []
        for i, n in enumerate(share):
            resources = "".join(f'[[terminal.control.resources]]\nresource_id = "soak-{k}"\n\n' for k in range(n))
            cfg = os.path.join(work, f"serve-{i}.toml")
            with open(cfg, "w") as f:
                f.write(f"""[engine]
listen = ["127.0.0.1:{PORT0 + i}"]
shards = 1
pin = false

[io]
max_connections = {n + FD_MARGIN}

[admin]
listen = "127.0.0.1:{ADMIN0 + i}"

[dtp]
enabled = true
terminal_key = "{work}/terminal.key"
trust = ["{work}/issuer.key.pub"]

[terminal.control]
terminal_id = "soak-{i}"

[terminal.control.liveness]
heartbeat_interval_ms = {a.heartbeat_ms}
heartbeat_timeout_ms = {3 * a.heartbeat_ms}

[terminal.control.limits]
per_terminal = {n + 64}
per_fay = 4

{resources}""")
            log = open(os.path.join(out_dir, f"serve-{i}.log"), "w")
            p = subprocess.Popen([a.bin, "serve", "--no-realtime", "--config", cfg],
                                 stdout=log, stderr=subprocess.STDOUT)
            procs.append(("serve", i, p))
            server_pids.append(p.pid)
        for i in range(servers):
            for _ in range(300):
                if metrics(ADMIN0 + i) is not None:
                    break
                if procs[i][2].poll() is not None:
                    sys.exit(f"server {i} exited: see {out_dir}/serve-{i}.log")
                time.sleep(0.2)
        time.sleep(1.0)
        rss_before = [rss_kib(p) for p in server_pids]

        t0 = time.time()
        loads = []
        for i, n in enumerate(share):
            args = [a.bin, "load", "--dtp", "--control", "idle", "--target", f"127.0.0.1:{PORT0 + i}",
                    "--connections", str(n), "--shards", "1", "--issuer-key", f"{work}/issuer.key",
                    "--pin-terminal", f"{work}/terminal.key.pub", "--resource-prefix", "soak-",
                    "--heartbeat-ms", str(a.heartbeat_ms), "--max-opening", str(a.max_opening),
                    "--source", a.sources, "--warmup", str(a.ramp), "--duration", str(a.hold),
                    "--json", os.path.join(out_dir, f"load-{i}.json")]
            log = open(os.path.join(out_dir, f"load-{i}.log"), "w")
            p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
            procs.append(("load", i, p))
            loads.append(p)

        samples = []
        ramp_s = None
        k = 0  # sample k is taken at t0 + k * SAMPLE (RAMP is a multiple of it)
        with open(os.path.join(out_dir, "samples.jsonl"), "w") as jl:
            while k * a.sample <= a.ramp + a.hold:
                now = time.time()
                if ramp_s is None:
                    conns = sum((metrics(ADMIN0 + i) or {}).get("dtp_connections", 0) for i in range(servers))
                    if conns >= a.connections:
                        ramp_s = now - t0
                if now >= t0 + k * a.sample:
                    k += 1
                    per = []
                    for i, pid in enumerate(server_pids):
                        m = metrics(ADMIN0 + i) or {}
                        per.append({"rss_kib": rss_kib(pid), "cpu_s": cpu_s(pid), **m})
                    lp = [{"rss_kib": rss_kib(p.pid), "cpu_s": cpu_s(p.pid)} for p in loads]
                    s = {"t": round(now - t0, 1), "servers": per, "loads": lp,
                         "rss_kib": sum(x["rss_kib"] or 0 for x in per),
                         "connections": sum(x.get("dtp_connections", 0) for x in per),
                         "cpu_s": round(sum(x["cpu_s"] or 0 for x in per), 2)}
                    samples.append(s)
                    jl.write(json.dumps(s) + "\n")
                    jl.flush()
                    print(f"{s['t']:7.1f} s  {s['connections']} connections  RSS {s['rss_kib'] / 1024:.1f} MiB  "
                          f"CPU {s['cpu_s']:.1f} s", file=sys.stderr)
                if any(p.poll() is not None for p in loads):
                    print("a load generator ended early", file=sys.stderr)
                    break
                time.sleep(0.25)
        for p in loads:
            try:
                p.wait(a.ramp + 120)
            except subprocess.TimeoutExpired:
                p.kill()
        results = []
        for i in range(servers):
            try:
                with open(os.path.join(out_dir, f"load-{i}.json")) as f:
                    results.append(json.load(f))
            except (OSError, ValueError):
                results.append(None)

        hold = [s for s in samples if s["t"] >= a.ramp - 1.0]
        start, end = hold[0], hold[-1]
        rss = [s["rss_kib"] for s in hold]
        mib = lambda kib: round(kib / 1024, 1)
        c = [r["control"] for r in results if r]
        per_server = []
        for i in range(servers):
            r = [s["servers"][i]["rss_kib"] for s in hold]
            per_server.append({"connections": share[i], "rss_before_mib": mib(rss_before[i]),
                               "rss_start_mib": mib(r[0]), "rss_min_mib": mib(min(r)),
                               "rss_max_mib": mib(max(r)), "rss_end_mib": mib(r[-1]),
                               "drift_pct": [round(100 * (min(r) - r[0]) / r[0], 2), round(100 * (max(r) - r[0]) / r[0], 2)]})
        report = {
            "bin": a.bin, "connections": a.connections, "servers": servers, "per_server": share,
            "hold_s": a.hold, "ramp_allowance_s": a.ramp, "heartbeat_ms": a.heartbeat_ms,
            "sources": a.sources, "machine": machine, "busy_at_end": busy_processes(),
            "ramp_s": None if ramp_s is None else round(ramp_s, 1),
            "rss_before_mib": mib(sum(rss_before)),
            "rss_start_mib": mib(start["rss_kib"]), "rss_min_mib": mib(min(rss)),
            "rss_max_mib": mib(max(rss)), "rss_end_mib": mib(end["rss_kib"]),
            "drift_pct": [round(100 * (min(rss) - start["rss_kib"]) / start["rss_kib"], 2),
                          round(100 * (max(rss) - start["rss_kib"]) / start["rss_kib"], 2)],
            "bytes_per_connection": round((start["rss_kib"] - sum(rss_before)) * 1024 / a.connections),
            "heap_start_mib": mib(sum(x.get("dtp_heap_bytes", 0) for x in start["servers"]) / 1024),
            "heap_end_mib": mib(sum(x.get("dtp_heap_bytes", 0) for x in end["servers"]) / 1024),
            "pool_used_start_mib": mib(sum(x.get("dtp_pool_bytes_used", 0) for x in start["servers"]) / 1024),
            "pool_used_end_mib": mib(sum(x.get("dtp_pool_bytes_used", 0) for x in end["servers"]) / 1024),
            "server_connections_min_during_hold": min(s["connections"] for s in hold),
            "server_connections_end": end["connections"],
            "server_cpu_hold_s": round(end["cpu_s"] - start["cpu_s"], 1),
            "load_reports": len(c),
            "granted": sum(x["granted"] for x in c), "held_at_end": sum(x["held_at_end"] for x in c),
            "lost": sum(x["lost"] for x in c), "ended": sum(x["ended"] for x in c),
            "failed_flows": sum(x["failed_flows"] for x in c),
            "heartbeats_sent": sum(x["heartbeats_sent"] for x in c),
            "heartbeats_answered": sum(x["heartbeats_answered"] for x in c),
            "heartbeat_p99_us_worst": max((x["heartbeat_latency_us"]["p99"] for x in c), default=None),
            "heartbeat_max_us_worst": max((x["heartbeat_latency_us"]["max"] for x in c), default=None),
            "per_server_detail": per_server, "samples": os.path.join(out_dir, "samples.jsonl"),
        }
        print(json.dumps(report))
    finally:
        stop_all()


if __name__ == "__main__":
    main()
