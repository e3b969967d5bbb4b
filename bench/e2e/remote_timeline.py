#!/usr/bin/python3
"""bench/e2e/remote_timeline.py: a remote stream's timeline from the stderr of one run under
SLUICE_LOG=debug (the "remote timeline" lines of stages/remote/http_transport.cpp and
stages/source/read_file.cpp), e.g.

    SLUICE_LOG=debug sluice bench --shards URL --epochs 1 ... 2>err   (one epoch: every read is epoch 0's)
    bench/e2e/remote_timeline.py err

Prints, in ms from the stream's first shard request: each shard's request, first body byte and
end, the transfers in flight when it was requested, and its first and last read; then how many
reads waited for their bytes, their summed wait, the wall time during which at least one read
waited, and the stream thread's CPU. Reads before the stream's first request (build()'s probes)
and index files (.sluice-idx) are left out; reads are those of the first stream (epoch 0's).
"""
import sys

events = []
for line in open(sys.argv[1]):
    if not line.startswith("sluice: remote timeline "):
        continue
    f = line.split()
    events.append((float(f[3]), f[4], f[5], f[6:]))

requests = [e for e in events if e[1] == "request" and not e[2].endswith(".sluice-idx")]
if not requests:
    sys.exit("no shard request in the timeline (SLUICE_LOG=debug, a streamed remote source?)")
t0 = requests[0][0]
shards = {}
for t, what, name, rest in events:
    if name.endswith(".sluice-idx") or t < t0:
        continue
    if what in ("request", "first_byte", "done"):
        s = shards.setdefault(name, {})
        s.setdefault(what, t - t0)
        if what == "request":
            s.setdefault("in_flight", rest[0].split("=")[1])
    elif what == "read":
        shard = name.rsplit(":", 1)[0]
        s = shards.setdefault(shard, {})
        s.setdefault("first_read", t - t0)
        s["last_read"] = t - t0
        s.setdefault("reads", []).append((t - t0, float(rest[0].split("=")[1])))

cell = lambda s, k: f"{s[k]:8.1f}" if k in s else f"{'-':>8s}"
print(f"{'shard':>14s} {'request':>8s} {'1st byte':>8s} {'done':>8s} {'flight':>6s} {'1st read':>8s} {'last rd':>8s}")
waits = []
for name, s in shards.items():
    print(f"{name.rsplit('/', 1)[-1][-14:]:>14s} {cell(s, 'request')} {cell(s, 'first_byte')} {cell(s, 'done')}"
          f" {s.get('in_flight', '-'):>6s} {cell(s, 'first_read')} {cell(s, 'last_read')}")
    waits += s.get("reads", [])
waited = sorted((t - w, t) for t, w in waits if w > 0.5)
wall, span = 0.0, None
for a, b in waited:
    if span is None or a > span[1]:
        wall += span[1] - span[0] if span else 0.0
        span = [a, b]
    else:
        span[1] = max(span[1], b)
wall += span[1] - span[0] if span else 0.0
print(f"reads {len(waits)}, {len(waited)} waited over 0.5 ms, {sum(w for _, w in waits):.1f} ms summed;"
      f" wall time with a read waiting {wall:.1f} ms")
for t, what, name, rest in events:
    if what == "stream_thread_cpu":
        print("stream thread cpu:", " ".join(rest))
