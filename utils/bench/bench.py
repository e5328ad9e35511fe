#!/usr/bin/python3
"""The benchmark suite: the workloads of ../shared/workloads.md (W1-W5, W7) and
our own W8 (BGSAVE under load), run against our server and the unpatched
reference, one fresh server at a time.

Started by utils/bench/run (which installs the Debian packages first):

    utils/bench/run quick|full [--server NAME=PATH]... [--only W1,W8] [--pairs N] [--ours PATH]

See utils/bench/README.md for what each workload does and where results go.
"""
import argparse
import contextlib
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
LIBVALKEY = BUILD / "valkey" / "deps" / "libvalkey"
ZLOAD_SRC = ROOT / "utils" / "bench" / "zload.c"
ZLOAD = BUILD / "bench" / "zload"
DOCS = ROOT / "docs"

SERVER_CPU = "0"
CLIENT_CPU = "1"
PORTS = range(21000, 22000)

# Sizes. `full` is the published size of every workload, except where a note
# says otherwise; `quick` keeps each workload's shape at a size that lets the
# whole run finish within five minutes on two cores.
SIZES = {
    "quick": dict(
        w1_n=2_000_000, w1_sample=100_000, w1_pipeline=250_000, w1_pairs=3,
        w2_n=500_000, w2_cluster=False,
        w6_n=1_000_000,
        w9_n=200_000,
        w10_n=200_000, w10_zn=1_000_000, w10_rounds=1, w10_requests=200_000, w10_rl_keys=10_000,
        w10_rl_requests=200_000, w10_exp_keys=100, w10_exp_members=10_000, w10_exp_spread=10,
        w3_n=10_000, w3_rounds=1,
        w4_keys={"listpack": 20_000, "big": 16_000}, w4_pairs=3, w4_query_s=1.0, w4_warmup_s=0.2,
        w4_one_n=500_000,
        w5_n=1_000_000, w5_seconds=0.4, w5_warmup=0.1, w5_pairs=3,
        w7_n=200_000, w7_seconds=0.4, w7_warmup=0.1, w7_bulk_seconds=1.0, w7_pairs=3,
        w7_stall_n=5_000_000, w7_stall_sample=250_000,
        w8_rounds=1, w8_a=(20_000, 200), w8_a_delay=100, w8_b=(500, 20_000), w8_b_delay=6000, w8_b_rate=20_000,
        w8_sweep_delays=(2000, 6000), w8_sweep_rates=(5000, 20_000, 50_000), w8_c_n=1_000_000,
    ),
    "full": dict(
        w1_n=50_000_000, w1_sample=1_000_000, w1_pipeline=250_000, w1_pairs=3,
        w2_n=10_000_000, w2_cluster=True,
        w6_n=10_000_000,
        w9_n=2_000_000,
        w10_n=1_000_000, w10_zn=50_000_000, w10_rounds=3, w10_requests=1_000_000, w10_rl_keys=10_000,
        w10_rl_requests=1_000_000, w10_exp_keys=1000, w10_exp_members=10_000, w10_exp_spread=60,
        w3_n=10_000, w3_rounds=3,
        w4_keys={"listpack": 1_000_000, "big": 800_000}, w4_pairs=3, w4_query_s=3, w4_warmup_s=0.5,
        w4_one_n=5_000_000,
        w5_n=1_000_000, w5_seconds=1, w5_warmup=0.2, w5_pairs=7,
        w7_n=1_000_000, w7_seconds=1, w7_warmup=0.2, w7_bulk_seconds=2, w7_pairs=3,
        w7_stall_n=50_000_000, w7_stall_sample=1_000_000,
        w8_rounds=1, w8_a=(20_000, 200), w8_a_delay=100, w8_b=(500, 20_000), w8_b_delay=6000, w8_b_rate=20_000,
        w8_sweep_delays=(2000, 6000, 12_000), w8_sweep_rates=(5000, 20_000, 50_000), w8_c_n=5_000_000,
    ),
    # A few seconds: checks that the suite works, measures nothing.
    "smoke": dict(
        w1_n=200_000, w1_sample=50_000, w1_pipeline=250_000, w1_pairs=2,
        w2_n=20_000, w2_cluster=True,
        w6_n=20_000,
        w9_n=5_000,
        w10_n=5_000, w10_zn=5_000, w10_rounds=1, w10_requests=5_000, w10_rl_keys=100,
        w10_rl_requests=5_000, w10_exp_keys=10, w10_exp_members=100, w10_exp_spread=1,
        w3_n=300, w3_rounds=2,
        w4_keys={"listpack": 1_000, "big": 800}, w4_pairs=2, w4_query_s=0.2, w4_warmup_s=0.05,
        w4_one_n=20_000,
        w5_n=20_000, w5_seconds=0.1, w5_warmup=0.05, w5_pairs=2,
        w7_n=5_000, w7_seconds=0.1, w7_warmup=0.05, w7_bulk_seconds=0.2, w7_pairs=2,
        w7_stall_n=200_000, w7_stall_sample=50_000,
        w8_rounds=1, w8_a=(500, 200), w8_a_delay=100, w8_b=(20, 2000), w8_b_delay=5000, w8_b_rate=20_000,
        w8_sweep_delays=(1000, 5000), w8_sweep_rates=(5000, 20_000), w8_c_n=50_000,
    ),
}
# Published sizes, to say in the report where a run was scaled down.
PUBLISHED = dict(w1_n=50_000_000, w2_n=10_000_000, w6_n=10_000_000, w9_n=2_000_000, w10_zn=50_000_000,
                 w10_exp_keys=1000, w4_keys={"listpack": 1_000_000, "big": 800_000},
                 w4_one_n=5_000_000, w5_n=1_000_000, w7_n=1_000_000, w7_stall_n=50_000_000)

W4_PROFILES = {"listpack": (10, 128), "big": (129, 200)}
W4_CONNS = 50
W3_TYPES = ["set", "hash", "zset", "zset-rand"]
W3_LABEL = {"set": "SET (SADD)", "hash": "HASH (HSET f 1)", "zset": "ZSET (score 1)",
            "zset-rand": "ZSET (random score)"}
W5_OPS = [  # (zload op, label); zpopmin last: it replaces members
    ("zscore", "ZSCORE"), ("zrank", "ZRANK"), ("zrevrank", "ZREVRANK"),
    ("zrange10", "ZRANGE 10 by rank"), ("zrange100", "ZRANGE 100 by rank"),
    ("zrangebyscore", "ZRANGEBYSCORE LIMIT 10"), ("zadd", "ZADD update"), ("zincrby", "ZINCRBY"),
    ("churn", "ZREM+ZADD churn (pair)"), ("zpopmin", "ZPOPMIN+ZADD refill (pair)"),
]
W5_SHORT = {"zscore": "ZSCORE", "zrank": "ZRANK", "zrevrank": "ZREVRANK", "zrange10": "ZRANGE\n10 by rank",
            "zrange100": "ZRANGE\n100 by rank", "zrangebyscore": "ZRANGE-\nBYSCORE\nLIMIT 10",
            "zadd": "ZADD\nupdate", "zincrby": "ZINCRBY", "churn": "ZREM+ZADD\n(pair)",
            "zpopmin": "ZPOPMIN+\nZADD (pair)"}
W5_PIPELINES = [1, 16]
SETTLE_SECONDS = 0.3   # a settle round's lookups (P16: some 150,000 on the reference)
SETTLE_TRIES = 5
W5_CONNS = 50
# W3: the targets of issue #19 for the SET (ours): never above the HASH of the same members,
# at N members ≤ 0.6× the reference's SET, no single insert adding more than 16 KiB.
W3_TARGETS = {"W3.set_over_hash": ("value", 1.0), "W3.set.atN": ("ref", 0.6), "W3.set.jump": ("value", 16384)}
# W7: big sets. Shapes (zload --shape), each in its own key: a, distinct random integers below
# 10^8; b, the integers 0 … N−1; c, distinct random 24-character lowercase strings.
# W6: short English texts, the quotes of Debian's fortunes packages (fortunes-min and fortunes,
# installed by utils/install-deps.sh bench) with their white space folded, 20 to 140 bytes
# (about 9,000 distinct, 74 bytes on average); keys KEY:<n>, n spread over 0 … 10^9.
W6_CORPUS = Path("/usr/share/games/fortunes")
W6_TEXT_LEN = (20, 140)
W6_TTL = 86400
W6_TARGETS = {"W6.ttl_cost": ("value", 4.0), "W6.ex.bpo": ("ref", 0.87), "W6.ex.bpo.compressed": ("ref", 0.6)}
# W9: JSON documents of 0.5-2 KB (utils/bench/w9docs.py: profiles, product records, events whose texts
# come from fortunes and iso-codes), each with a TTL. Issue #46's target: ≤ 0.3× the reference's memory.
W9_TTL = 86400
W9_TARGETS = {"W9.bpo": ("ref", 0.3), "W9.bpo.compressed": ("ref", 0.3)}
# W10: members that expire (utils/bench/member-ttl-rounds runs it; issue #47's targets).
W10_TARGETS = {"W10.set.cost": ("value", 8.0), "W10.zset.cost": ("value", 8.0), "W10.set.bpm": ("value", 37.0),
               "W10.zset.bpm": ("value", 31.0), "W10.rl.ops": ("ref", 1.5), "W10.rl.mem": ("ref", 0.5),
               "W10.exp.SADDEX": ("value", 10.0), "W10.exp.ZADDEX": ("value", 10.0)}
W7_SHAPES = [("int", "a"), ("seq", "b"), ("str", "c")]
W7_SHAPE_TEXT = {"int": "distinct random integers below 10^8", "seq": "consecutive integers from 0",
                 "str": "distinct random 24-character strings"}
W7_MEM_TARGETS = {"int": 4, "seq": 1, "str": 33}   # bytes per member, ours (issue #19)
# The load of many integers into one set, as W1 loads a sorted set (issue #19): no interval below
# 0.7 of the median one, used_memory never more than 5% over its final value.
W7_STALL_TARGETS = {"W7.stall.min_iv": ("value", 0.7), "W7.stall.peak": ("value", 1.05)}
W7_OPS_SHAPES = ["int", "str"]   # the operations run on shapes a and c
W7_KEY2 = "int2"   # SINTER's second set: N random integers, half of them also in shape a's set
W7_OPS = [  # (zload op, label, whole-set operation, shapes); writes last, sadd (the set grows) at the end
    ("sismember", "SISMEMBER (half hits)", False, ("int", "str")),
    ("smismember", "SMISMEMBER of 5 (half hits)", False, ("int", "str")),
    ("srandmember", "SRANDMEMBER", False, ("int", "str")),
    ("sscan", "SSCAN COUNT 100, members/s", False, ("int", "str")),
    ("smembers", "SMEMBERS, calls/s", True, ("int", "str")),
    ("sinter", f"SINTER with {W7_KEY2}, calls/s", True, ("int",)),
    ("sintercard", f"SINTERCARD with {W7_KEY2}, calls/s", True, ("int",)),
    ("srem", "SREM + SADD back (pair)", False, ("int", "str")),
    ("spop", "SPOP + SADD back (pair)", False, ("int", "str")),
    ("sadd", "SADD of a new member", False, ("int", "str")),
]
W7_SPEED_TARGETS = {"sinter": 2.0, "sintercard": 2.0}   # ours ≥ r × the reference; the others 1.0
W7_CONNS = W5_CONNS
# Whole-set operations: one connection. With two, the first pipeline of the second waits for the
# first's, a start the short window would count at twice the steady pace.
W7_BULK_CONNS = 1
# W8: the scenarios, and the targets its table judges ours by: ("ref", r) means
# ours ≤ r × the reference's figure, ("value", v) ours' own figure ≤ v.
W8_SCENARIOS = ("a", "b", "c", "d")
# The targets apply to the figures from rdb_last_cow_size and alike to those from the copied
# bytes sampled in /proc (suffix _s).
W8_TARGETS = {"W8.a.cow": ("ref", 1.1), "W8.b.frac": ("value", 0.8), "W8.b.peak": ("ref", 0.33),
              "W8.c.cow_per_op": ("ref", 0.5), "W8.c.peak": ("ref", 0.45)}
W8_TARGETS.update({k + "_s": v for k, v in W8_TARGETS.items()})
W8_PIPELINE = 64          # closed-loop loads (a, c): operations per round trip
W8_PACED_PIPELINE = 1000  # paced load (b): at most this many operations per batch
W8_WARMUP = 0.5           # seconds of load before the BGSAVE
W8_MIN_SAVE = 3.0         # a and b: the save should last at least this long
W8_LABEL = {
    "a": lambda c: f"a: read-only, {human(c['w8_a'][0])} keys × {c['w8_a'][1]} members, ZSCORE pipelined",
    "b": lambda c: f"b: {human(c['w8_b'][0])} keys × {human(c['w8_b'][1])} members, ZINCRBY {c['w8_b_rate']:,}/s",
    "c": lambda c: f"c: one key of {human(c['w8_c_n'])} members, ZINCRBY pipelined",
    "d": lambda c: f"d: one key of {human(c['w8_c_n'])} members, ZADD of new scores pipelined",
}


def load_tool(name):
    """A tool of utils/bench as a module, its name with or without `.py`."""
    import importlib.machinery as ilm
    import importlib.util as ilu
    loader = ilm.SourceFileLoader(name.replace("-", "_").removesuffix(".py"), str(Path(__file__).resolve().parent / name))
    mod = ilu.module_from_spec(ilu.spec_from_loader(loader.name, loader))
    loader.exec_module(mod)
    return mod


def log(msg):
    print(msg, flush=True)


def die(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


# ---------------------------------------------------------------- RESP client

class RespError(Exception):
    pass


def resp_command(*args):
    """A command as RESP2 bytes (arguments as bytes, or anything str() takes)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Resp:
    """A minimal blocking RESP2 client for control commands."""

    def __init__(self, port, timeout=120):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.rf = self.sock.makefile("rb")

    def close(self):
        with contextlib.suppress(OSError):
            self.rf.close()
            self.sock.close()

    def __call__(self, *args):
        self.sock.sendall(resp_command(*args))
        return self._read()

    def _read(self, raw=False):
        """One reply; with raw, bulk strings stay bytes (DUMP payloads)."""
        line = self.rf.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rf.read(n + 2)[:-2]
            return data if raw else data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read(raw) for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    def info(self, *sections):
        d = {}
        for ln in self("INFO", *sections).splitlines():
            if ":" in ln and not ln.startswith("#"):
                k, v = ln.split(":", 1)
                d[k] = v
        return d


def info_num(info, key):
    return float(info[key])


# ---------------------------------------------------------------- servers

class ServerSpec:
    def __init__(self, name, path, extra=()):
        self.name, self.path = name, Path(path)
        self.origin = self.path   # where the binary came from; path is the run's copy
        self.extra = list(extra)  # configuration given on its command line

    def with_config(self, *extra):
        """The same binary, started with these arguments too."""
        spec = ServerSpec(self.name, self.path, self.extra + list(extra))
        spec.origin = self.origin
        return spec

    def version(self):
        try:
            return subprocess.run([str(self.path), "--version"], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except OSError as e:
            return f"? ({e})"


_running = {}   # pid -> Popen of servers we started
_next_port = [PORTS.start]


def free_port(exclude=()):
    for _ in range(len(PORTS)):
        p = _next_port[0]
        _next_port[0] = PORTS.start + (p + 1 - PORTS.start) % len(PORTS)
        if p in exclude:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        return p
    die("no free port in 21000-21999")


def stop_all_servers():
    for pid, proc in list(_running.items()):
        with contextlib.suppress(Exception):
            proc.kill()
            proc.wait(timeout=10)
        _running.pop(pid, None)


class Server:
    """One fresh server: loopback, persistence off, pinned to SERVER_CPU."""

    def __init__(self, spec, workdir, pin, cluster=False):
        self.spec, self.cluster, self.pin = spec, cluster, pin
        self.port = free_port()
        self.dir = workdir / f"{spec.name}-{self.port}-{int(time.time() * 1000) % 100000}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = None

    def start(self):
        args = [str(self.spec.path), "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--dir", str(self.dir), "--logfile", "server.log",
                "--enable-debug-command", "local"] + self.spec.extra   # DEBUG: settle_keys, SWEEP
        if self.cluster:
            bus = free_port(exclude={self.port})
            args += ["--cluster-enabled", "yes", "--cluster-port", str(bus),
                     "--cluster-config-file", "nodes.conf", "--cluster-announce-ip", "127.0.0.1"]
        if self.pin:
            args = ["taskset", "-c", SERVER_CPU] + args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, cwd=self.dir)
        _running[self.proc.pid] = self.proc
        deadline = time.time() + 20
        while True:
            if self.proc.poll() is not None:
                die(f"{self.spec.name} exited at start (rc {self.proc.returncode}); log:\n{self.log_tail()}")
            try:
                c = Resp(self.port, timeout=2)
                try:
                    if c("PING") == "PONG":
                        break
                finally:
                    c.close()
            except (OSError, RespError):
                pass
            if time.time() > deadline:
                self.stop()
                die(f"{self.spec.name} did not answer on port {self.port}")
            time.sleep(0.05)
        if self.cluster:
            c = self.conn()
            c("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            deadline = time.time() + 20
            while "cluster_state:ok" not in c("CLUSTER", "INFO"):
                if time.time() > deadline:
                    die("single-node cluster did not reach cluster_state:ok")
                time.sleep(0.1)
            c.close()
        return self

    def conn(self):
        return Resp(self.port)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=30):
        try:
            return "".join((self.dir / "server.log").read_text(errors="replace").splitlines(True)[-n:])
        except OSError:
            return "(no log)"

    def settle(self, timeout=15):
        """Waits until no database hash table is rehashing, so that
        used_memory is not read with two tables allocated."""
        c = self.conn()
        deadline = time.time() + timeout
        try:
            while time.time() < deadline:
                st = c("MEMORY", "STATS")
                d = dict(zip(st[::2], st[1::2]))
                if int(d.get("db.dict.rehashing.count", 0) or 0) == 0:
                    break
                time.sleep(0.1)
            self.settle_compression(c, deadline)
        finally:
            c.close()

    @staticmethod
    def settle_compression(c, deadline):
        """On a server that holds strings compressed (ours: strcomp.c), waits for its table and
        runs the background pass to its end (DEBUG STRCOMP SWEEP), so that used_memory is what
        the server settles at, not what the load left before the pass reached it."""
        info = c.info("memory")
        if "string_compression_current_table" not in info:
            return
        train = int(c("CONFIG", "GET", "string-compression-train-values")[1])
        if c("CONFIG", "GET", "string-compression")[1] != "yes" or c("DBSIZE") < train:
            return
        if not any(c("TYPE", c("RANDOMKEY")) == "string" for _ in range(20)):
            return
        while int(c.info("memory")["string_compression_current_table"]) < 0 and time.time() < deadline:
            time.sleep(0.1)
        if int(c.info("memory")["string_compression_current_table"]) >= 0:
            c("DEBUG", "STRCOMP", "SWEEP")

    def used_memory(self):
        c = self.conn()
        try:
            return info_num(c.info("memory"), "used_memory")
        finally:
            c.close()

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                c = Resp(self.port, timeout=5)
                with contextlib.suppress(Exception):
                    c("SHUTDOWN", "NOSAVE")
                c.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        _running.pop(self.proc.pid, None)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- figures

UNITS = {
    # unit: (formatter, suffix shown in the table)
    "bytes": (lambda v: f"{v / 1e6:,.1f}", "MB"),
    "B/member": (lambda v: f"{v:,.1f}", "B/member"),
    "B/key": (lambda v: f"{v:,.1f}", "B/key"),
    "B/object": (lambda v: f"{v:,.1f}", "B/object"),
    "B/doc": (lambda v: f"{v:,.1f}", "B/document"),
    "B": (lambda v: f"{v:,.0f}", "B"),
    "ops/s": (lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.3g}", "ops/s"),
    "members/s": (lambda v: f"{v:,.0f}", "members/s"),
    "inserts/s": (lambda v: f"{v:,.0f}", "inserts/s"),
    "us": (lambda v: f"{v:,.1f}", "µs"),
    "us/op": (lambda v: f"{v:.3f}", "µs CPU/op"),
    "s": (lambda v: f"{v:,.2f}", "s"),
    "count": (lambda v: f"{v:,.0f}", ""),
    "x": (lambda v: f"{v:.3f}", "×"),
    "of used": (lambda v: f"{v:.3f}", "× used_memory"),
}


class Figure:
    def __init__(self, key, workload, label, unit, better, paired, target=None):
        self.key, self.workload, self.label, self.unit = key, workload, label, unit
        self.better, self.paired = better, paired   # better: lower|higher|info
        # None, ("ref", r): ≤ r × the reference's, ("value", v): ≤ v; ≥ for a figure where higher is better
        self.target = target
        self.values = {}   # server -> {round: value}

    def add(self, server, rnd, value):
        self.values.setdefault(server, {})[rnd] = float(value)

    def median(self, server):
        v = self.values.get(server)
        return statistics.median(v.values()) if v else None

    def ratio(self, server, ref="reference"):
        """(median ratio, min, max, n) of server against ref; per round when paired."""
        a, b = self.values.get(server), self.values.get(ref)
        if not a or not b:
            return None
        rounds = sorted(set(a) & set(b))
        if self.paired and len(rounds) > 1:
            rs = [a[r] / b[r] for r in rounds if b[r]]
            if not rs:
                return None
            return statistics.median(rs), min(rs), max(rs), len(rs)
        mb = self.median(ref)
        if not mb:
            return None
        r = self.median(server) / mb
        return r, r, r, 1

    def verdict(self, server, ref="reference"):
        rt = self.ratio(server, ref)
        if rt is None or self.better == "info":
            return ""
        r, lo, hi, n = rt
        if abs(r - 1) < 0.01 or (n > 1 and lo <= 1 <= hi):
            return "same"
        good = r < 1 if self.better == "lower" else r > 1
        return "better" if good else "worse"

    def target_text(self):
        if not self.target:
            return ""
        kind, limit = self.target
        cmp = "≥" if self.better == "higher" else "≤"
        return f"{cmp} {limit:g}× ref" if kind == "ref" else f"{cmp} {limit:g} {UNITS[self.unit][1]}".rstrip()

    def target_met(self, server, ref="reference"):
        """True or False when the figure has a target and server has a value; else None."""
        if not self.target:
            return None
        kind, limit = self.target
        if kind == "ref":
            rt = self.ratio(server, ref)
            v = None if rt is None else rt[0]
        else:
            v = self.median(server)
        if v is None:
            return None
        return v >= limit if self.better == "higher" else v <= limit

    def target_verdict(self, server, ref="reference"):
        met = self.target_met(server, ref)
        return "" if met is None else f"{'met' if met else 'missed'} ({self.target_text()})"

    def fmt(self, v):
        return "—" if v is None else UNITS[self.unit][0](v)


class Results:
    def __init__(self):
        self.figures = {}

    def fig(self, key, workload, label, unit, better, paired=False, target=None):
        if key not in self.figures:
            self.figures[key] = Figure(key, workload, label, unit, better, paired, target)
        return self.figures[key]

    def add(self, key, workload, label, unit, better, server, rnd, value, paired=False, target=None):
        if value is None:
            return
        self.fig(key, workload, label, unit, better, paired, target).add(server, rnd, value)


# ---------------------------------------------------------------- the run

class Bench:
    def __init__(self, args):
        self.size = args.size
        self.cfg = dict(SIZES[args.size])
        if args.pairs:
            for k in ("w1_pairs", "w3_rounds", "w4_pairs", "w5_pairs", "w7_pairs", "w8_rounds"):
                self.cfg[k] = args.pairs
        self.only = {w.strip().upper() for w in args.only.split(",")} if args.only else None
        self.w7_only_ops = {o.strip() for o in args.w7_ops.split(",")} if args.w7_ops else None
        self.servers = [ServerSpec("ours", Path(args.ours).resolve() if args.ours
                                   else BUILD / "valkey" / "src" / "valkey-server"),
                        ServerSpec("reference", BUILD / "upstream" / "src" / "valkey-server")]
        for s in args.server:
            if "=" not in s:
                die(f"--server wants NAME=PATH, got {s!r}")
            name, path = s.split("=", 1)
            if name in ("ours", "reference") or any(x.name == name for x in self.servers):
                die(f"server name {name!r} is taken")
            self.servers.append(ServerSpec(name, Path(path).resolve()))
        for s in self.servers:
            if not os.access(s.path, os.X_OK):
                hint = {"ours": " (run make)", "reference": " (run make upstream)"}.get(s.name, "")
                die(f"{s.name}: no server at {s.path}{hint}")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.out = Path(args.out).resolve() if args.out else BUILD / "bench" / f"{stamp}-{self.size}"
        self.out.mkdir(parents=True, exist_ok=True)
        self.srvdir = self.out / "servers"
        # Every round runs the same binaries even if a build replaces them meanwhile.
        bindir = self.out / "bin"
        bindir.mkdir(exist_ok=True)
        for s in self.servers:
            copy = bindir / f"{s.name}-valkey-server"
            shutil.copy2(s.path, copy)
            s.path = copy
        self.write_docs = self.size == "full" and not args.no_docs and self.only is None
        self.pin = (os.cpu_count() or 1) >= 2
        self.results = Results()
        self.timings = {}
        self.interference = {}  # workload -> CPUs other processes used on average
        self.notes = []
        self.tool = BUILD / "upstream" / "src" / "valkey-benchmark"
        if not os.access(self.tool, os.X_OK):
            self.tool = BUILD / "valkey" / "src" / "valkey-benchmark"
        self.w1_runs = {}       # server -> [(elapsed, round, rows)]
        self.w3_rows = {}       # (server, type) -> [(n, bytes)]
        self.w5_runs = []       # dicts
        self.w7_runs = []       # dicts: memory (one per server and shape), ops (one per turn and server)
        self.w8_runs = []       # dicts, one per BGSAVE

    # -- helpers

    def server(self, spec, cluster=False):
        return Server(spec, self.srvdir, self.pin, cluster=cluster)

    def client(self, argv):
        return (["taskset", "-c", CLIENT_CPU] if self.pin else []) + [str(a) for a in argv]

    def load_and_count(self, srv, spec, argv, what, stdin=None):
        """Runs a load client against srv (stdin from a file if given); returns its seconds, then
        DBSIZE and used_memory once no table rehashes."""
        t0 = time.time()
        with open(stdin, "rb") if stdin else contextlib.nullcontext() as f:
            p = subprocess.run(self.client(argv), stdin=f, capture_output=True, text=True, timeout=7200)
        if p.returncode != 0 or not srv.alive():
            die(f"{what} failed against {spec.name}: {p.stderr.strip()} {p.stdout[-500:]}")
        took = time.time() - t0
        srv.settle()
        cl = srv.conn()
        keys = cl("DBSIZE")
        used = info_num(cl.info("memory"), "used_memory")
        cl.close()
        return took, keys, used

    def zload(self, srv, mode, **opts):
        return self.zload_many([(srv, mode, opts)])[0]

    def zload_many(self, jobs):
        """Runs one zload per (server, mode, options) at the same time; returns
        their JSON results in the same order."""
        procs = []
        for srv, mode, opts in jobs:
            argv = [ZLOAD, mode, "--port", srv.port]
            for k, v in opts.items():
                argv += ["--" + k.replace("_", "-"), v]
            procs.append(subprocess.Popen(self.client(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        outs = [p.communicate(timeout=7200) for p in procs]
        results = []
        for (srv, mode, _), p, (out, err) in zip(jobs, procs, outs):
            if p.returncode != 0 or not srv.alive():
                msg = err.strip()
                if not srv.alive():
                    msg += f"\nthe server ({srv.spec.name}) died; log tail:\n{srv.log_tail()}"
                srv.stop()
                die(f"zload {mode} failed against {srv.spec.name}: {msg}")
            out = out.strip()
            results.append(json.loads(out.splitlines()[-1]) if out else {})
        return results

    def rehashing(self, srv, key):
        """Whether the server's hashtable for key is still moving buckets to a new table
        (upstream's; ours has none and says so)."""
        cl = srv.conn()
        try:
            out = cl("DEBUG", "HTSTATS-KEY", key)
        except RespError:   # a server without the command: nothing to wait for
            return False
        finally:
            cl.close()
        return any(int(m) >= 0 for m in re.findall(r"rehashing index: (-?\d+)", out or ""))

    def settle_keys(self, srvs, keys, n):
        """Upstream's hashtable is still moving buckets to its new table when a load ends
        (1M members loaded one at a time: rehashing index 82,495 of the old table's 131,072
        buckets), and each operation on the key moves one more. A turn run then catches the
        reference paying for its load: SADD of a new member on 1M strings at P=1 measured
        1.085x right after the load, 0.960x once the table had settled. So, before the turns,
        lookups on each key (P16, not measured) on every server whose table for it is still
        rehashing, until none is. keys: (key, zload op, shape or None)."""
        for tries in range(SETTLE_TRIES + 1):
            busy = [(srv, key, op, shape) for srv in srvs for key, op, shape in keys if self.rehashing(srv, key)]
            if not busy:
                if tries:
                    log(f"  settled {', '.join(k for k, _, _ in keys)} in {tries} round{'s' if tries > 1 else ''} "
                        f"of lookups")
                return
            if tries == SETTLE_TRIES:
                break
            jobs = []
            for srv, key, op, shape in busy:
                o = dict(op=op, key=key, n=n, conns=W5_CONNS, pipeline=16, seconds=SETTLE_SECONDS, warmup=0, seed=7)
                if shape:
                    o["shape"] = shape
                jobs.append((srv, "bench", o))
            self.zload_many(jobs)
        self.notes.append("settle_keys: " + ", ".join(f"{srv.spec.name} {key}" for srv, key, _, _ in busy)
                          + f" still rehashing after {SETTLE_TRIES} rounds of lookups")

    def wanted(self, w):
        return self.only is None or w in self.only

    def add(self, *a, **kw):
        self.results.add(*a, **kw)

    # -- W1: 50 million sorted-set inserts

    def w1(self):
        c = self.cfg
        n, sample = c["w1_n"], c["w1_sample"]
        early = n // 5 // sample * sample
        for rnd in range(1, c["w1_pairs"] + 1):
            for spec in self.servers:
                with self.server(spec) as srv:
                    path = self.out / f"w1_{spec.name}_r{rnd}.csv"
                    r = self.zload(srv, "zadd1", key="key", n=n, pipeline=c["w1_pipeline"], sample=sample,
                                   csv=path, order="seq", mlen=0)
                rows = read_rows(path)
                self.w1_runs.setdefault(spec.name, []).append((r["elapsed_s"], rnd, rows))
                ivals = [row["interval_rate"] for row in rows if row["inserts"] > 0]
                at = {int(row["inserts"]): row for row in rows}
                nm = human(n)
                add = lambda k, label, unit, better, v, paired=False: self.add(
                    "W1." + k, "W1", label, unit, better, spec.name, rnd, v, paired=paired)
                add("mem", f"used_memory at {nm}", "bytes", "lower", r["used_memory"])
                if early and early in at:
                    add("mem_early", f"used_memory at {human(early)}", "bytes", "lower",
                        at[early]["used_memory"])
                add("rss", f"used_memory_rss at {nm}", "bytes", "lower", r["used_memory_rss"])
                add("bpm", f"bytes per member at {nm} (used_memory / members)", "B/member", "lower",
                    r["used_memory"] / n)
                add("time", f"whole run, {nm} inserts", "s", "lower", r["elapsed_s"], True)
                add("rate", "inserts/s, whole run", "inserts/s", "higher", r["rate"], True)
                add("last", f"inserts/s, last {human(sample)}", "inserts/s", "higher", ivals[-1], True)
                add("median_iv", f"inserts/s, median {human(sample)} interval", "inserts/s", "higher",
                    statistics.median(ivals), True)
                add("min_iv", f"inserts/s, slowest {human(sample)} interval (resize stall)", "inserts/s",
                    "higher", min(ivals), True)
                add("cpu", "server CPU per insert", "us/op", "lower", r["cpu_s"] * 1e6 / n, True)
                log(f"  W1 {spec.name} round {rnd}: {n:,} inserts in {r['elapsed_s']:.1f} s "
                    f"({r['rate']:,.0f}/s), used_memory {r['used_memory'] / 1e6:,.1f} MB, "
                    f"slowest interval {min(ivals):,.0f}/s")

    # -- W2: small string keys

    def w2(self):
        c = self.cfg
        n = c["w2_n"]
        # standalone_ex: the same keys and values, each with a TTL (issue #45), as the same
        # command valkey-benchmark's `-t set` sends with EX 86400 after it.
        per_key = {}
        modes = [("standalone", False), ("standalone_ex", False)] + ([("cluster", True)] if c["w2_cluster"] else [])
        for mode, cluster in modes:
            for spec in self.servers:
                with self.server(spec, cluster=cluster) as srv:
                    base = srv.used_memory()
                    # Not --cluster: that mode puts a random slot tag into every key, so nearly every
                    # request makes a new key. The one node owns all slots and takes the plain keys.
                    argv = [self.tool, "-h", "127.0.0.1", "-p", srv.port, "-n", n, "-r", n, "--seed", 1, "-q"]
                    argv += (["SET", "key:__rand_int__", "x" * 16, "EX", 86400] if mode.endswith("_ex")
                             else ["-t", "set", "-d", 16])
                    took, keys, used = self.load_and_count(srv, spec, argv, "valkey-benchmark")
                add = lambda k, label, unit, better, v: self.add(
                    f"W2.{mode}.{k}", "W2", f"{mode}: {label}", unit, better, spec.name, 1, v)
                add("keys", "keys (DBSIZE)", "count", "info", keys)
                add("mem", "used_memory", "bytes", "lower", used)
                add("bpk", "bytes per key ((used_memory − empty) / keys)", "B/key", "lower", (used - base) / keys)
                log(f"  W2 {mode} {spec.name}: {keys:,} keys, used_memory {used / 1e6:,.1f} MB "
                    f"({(used - base) / keys:.1f} B/key), load {took:.1f} s")
                per_key[(spec.name, mode)] = (used - base) / keys
        for spec in self.servers:
            self.add("W2.ttl_cost", "W2", "standalone: a TTL, `EX 86400` on every key minus without", "B/key",
                     "lower", spec.name, 1, per_key[(spec.name, "standalone_ex")] - per_key[(spec.name, "standalone")],
                     target=("value", 4.0))

    # -- W6: short texts, with and without a TTL

    @staticmethod
    def w6_texts():
        texts = set()
        for f in sorted(W6_CORPUS.iterdir()) if W6_CORPUS.is_dir() else ():
            if "." in f.name or not f.is_file():
                continue
            for q in f.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
                t = " ".join(q.split())
                if W6_TEXT_LEN[0] <= len(t.encode()) <= W6_TEXT_LEN[1]:
                    texts.add(t)
        if len(texts) < 1000:
            die(f"W6 needs the fortunes corpus in {W6_CORPUS} (utils/install-deps.sh bench installs it)")
        return sorted(texts)

    def w6_stream(self, path, n, texts, ttl):
        """Writes the load as RESP, once for every server: SET KEY:<k> <text> [EX ttl], k = i × 2654435761
        mod 10^9 (distinct for i < 10^9), texts taken in a fixed scattered order."""
        tail = f"$2\r\nEX\r\n${len(str(ttl))}\r\n{ttl}\r\n".encode() if ttl else b""
        head = b"*5\r\n$3\r\nSET\r\n" if ttl else b"*3\r\n$3\r\nSET\r\n"
        enc = [t.encode() for t in texts]
        vals = [b"$%d\r\n%s\r\n" % (len(t), t) for t in enc]
        with open(path, "wb") as f:
            buf = []
            for i in range(n):
                k = b"KEY:%d" % (i * 2654435761 % 1_000_000_000)
                buf.append(head + b"$%d\r\n%s\r\n" % (len(k), k) + vals[(i * 7919) % len(vals)] + tail)
                if len(buf) == 100_000:
                    f.write(b"".join(buf))
                    buf = []
            f.write(b"".join(buf))
        return sum(len(enc[(i * 7919) % len(enc)]) for i in range(min(n, 1_000_000))) / min(n, 1_000_000)

    def pipe_load_bytes(self, spec, path, what):
        """Sends a RESP file to a fresh server with valkey-cli --pipe; returns the load's seconds,
        DBSIZE, used_memory and the bytes a key takes ((used_memory − empty) / keys)."""
        cli = BUILD / "valkey" / "src" / "valkey-cli"
        with self.server(spec) as srv:
            base = srv.used_memory()
            took, keys, used = self.load_and_count(
                srv, spec, [cli, "-h", "127.0.0.1", "-p", srv.port, "--pipe"], what, stdin=path)
        return took, keys, used, (used - base) / keys

    def compressed_rows(self, workload, key, label, unit, path, per_key, mode, target):
        """The row of ours with `string-compression yes` (off by default; issue #46's targets are
        for it), beside the reference's figure of the same load."""
        ours = next((s for s in self.servers if s.name == "ours"), None)
        if ours is None or ("reference", mode) not in per_key:
            return
        took, keys, used, bpo = self.pipe_load_bytes(ours.with_config("--string-compression", "yes"), path,
                                                     f"{workload} load")
        label += ", ours with `string-compression yes` (values coded, the pass run to its end)"
        self.add(key, workload, label, unit, "lower", "ours", 1, bpo, target=target)
        self.add(key, workload, label, unit, "lower", "reference", 1, per_key[("reference", mode)], target=target)
        log(f"  {workload} {mode} ours with string-compression: {keys:,} keys, used_memory {used / 1e6:,.1f} MB "
            f"({bpo:.1f} {unit}), load {took:.1f} s")

    def w6(self):
        n = self.cfg["w6_n"]
        texts = self.w6_texts()
        per_key = {}
        for mode, ttl in (("plain", 0), ("ex", W6_TTL)):
            path = self.out / f"w6_{mode}.resp"
            avg = self.w6_stream(path, n, texts, ttl)
            label = f"`SET k v EX {W6_TTL}`" if ttl else "`SET k v`"
            for spec in self.servers:
                took, keys, used, bpo = self.pipe_load_bytes(spec, path, "W6 load")
                per_key[(spec.name, mode)] = bpo
                self.add(f"W6.{mode}.bpo", "W6", f"{label}: bytes per object ((used_memory − empty) / keys)",
                         "B/object", "lower", spec.name, 1, bpo, target=W6_TARGETS.get(f"W6.{mode}.bpo"))
                log(f"  W6 {mode} {spec.name}: {keys:,} keys, texts {avg:.1f} B on average, used_memory "
                    f"{used / 1e6:,.1f} MB ({bpo:.1f} B/object), load {took:.1f} s")
            self.compressed_rows("W6", f"W6.{mode}.bpo.compressed", f"{label}: bytes per object", "B/object",
                                 path, per_key, mode, W6_TARGETS.get(f"W6.{mode}.bpo.compressed"))
            path.unlink()
        for spec in self.servers:
            self.add("W6.ttl_cost", "W6", f"a TTL: `EX {W6_TTL}` minus without, per key", "B/key", "lower",
                     spec.name, 1, per_key[(spec.name, "ex")] - per_key[(spec.name, "plain")],
                     target=W6_TARGETS["W6.ttl_cost"])

    # -- W9: JSON documents with a TTL

    def w9(self):
        w9docs = load_tool("w9docs.py")
        n = self.cfg["w9_n"]
        path = self.out / "w9.resp"
        total = 0
        with open(path, "wb") as f:
            buf = []
            for i, d in enumerate(w9docs.documents(n)):
                b = d.encode()
                total += len(b)
                buf.append(resp_command("SET", "doc:%d" % i, b, "EX", W9_TTL))
                if len(buf) == 10_000:
                    f.write(b"".join(buf))
                    buf = []
            f.write(b"".join(buf))
        per_doc = {}
        for spec_ in self.servers:
            took, keys, used, bpo = self.pipe_load_bytes(spec_, path, "W9 load")
            per_doc[(spec_.name, "ex")] = bpo
            self.add("W9.bpo", "W9", f"`SET doc:<n> <json> EX {W9_TTL}`: bytes per document "
                     "((used_memory − empty) / keys)", "B/doc", "lower", spec_.name, 1, bpo,
                     target=W9_TARGETS["W9.bpo"])
            log(f"  W9 {spec_.name}: {keys:,} documents of {total / n:.1f} B on average, used_memory "
                f"{used / 1e6:,.1f} MB ({bpo:.1f} B/document), load {took:.1f} s")
        self.compressed_rows("W9", "W9.bpo.compressed", f"`SET doc:<n> <json> EX {W9_TTL}`: bytes per document",
                             "B/doc", path, per_doc, "ex", W9_TARGETS["W9.bpo.compressed"])
        path.unlink()

    # -- W10: members that expire (member-ttl-rounds, at the suite's sizes)

    def w10(self):
        import types
        mtr = load_tool("member-ttl-rounds")
        c = self.cfg
        mtr.tr.OURS = next(s.path for s in self.servers if s.name == "ours")
        mtr.tr.REF = next(s.path for s in self.servers if s.name == "reference")
        a = types.SimpleNamespace(rounds=1, n=c["w10_n"], zn=c["w10_zn"], requests=c["w10_requests"],
                                  keys=None, members=c["w10_exp_members"], spread=c["w10_exp_spread"],
                                  window=60_000)
        res = {}
        tmp = self.out / "w10"
        tmp.mkdir(exist_ok=True)
        mtr.part_memory(a, tmp, res)
        a.rounds = c["w10_rounds"]
        mtr.part_speed(a, tmp, res)
        a.keys, a.requests = c["w10_rl_keys"], c["w10_rl_requests"]
        mtr.part_ratelimit(a, tmp, res)
        a.rounds, a.keys = 1, c["w10_exp_keys"]
        mtr.part_expiry(a, tmp, res)
        shutil.rmtree(tmp, ignore_errors=True)

        def rows(key, label, unit, better, src, scale=1.0, servers=("ours", "reference"), paired=False):
            for name in servers:
                for rnd, v in enumerate(res.get(src, {}).get(name, [])):
                    self.add(key, "W10", label, unit, better, name, rnd, v * scale, paired=paired,
                             target=W10_TARGETS.get(key))
        rows("W10.set.plain", "W7 c `SADD`: bytes per member (MEMORY USAGE / members)", "B/member", "lower",
             ("W7 c SADD", "B/member"))
        rows("W10.set.bpm", "W7 c `SADDEX EX`: bytes per member", "B/member", "lower",
             ("W7 c SADDEX EX", "B/member"))
        rows("W10.set.cost", "W7 c: a member's time, `SADDEX EX` minus `SADD`", "B/member", "lower",
             ("W7 c SADDEX EX minus W7 c SADD", "B/member"))
        rows("W10.zset.plain", "W1 `ZADD`: bytes per member (MEMORY USAGE / members)", "B/member", "lower",
             ("W1 ZADD", "B/member"))
        rows("W10.zset.bpm", "W1 `ZADDEX PX`: bytes per member", "B/member", "lower", ("W1 ZADDEX PX", "B/member"))
        rows("W10.zset.cost", "W1: a member's time, `ZADDEX PX` minus `ZADD`", "B/member", "lower",
             ("W1 ZADDEX PX minus W1 ZADD", "B/member"))
        for pl in (1, 16):
            for timed, plain, target in (("SADDEX EX", "SADD", 0.9), ("ZADDEX EX", "ZADD", 0.9),
                                         ("SISMEMBER, 1 in 10 with a time", "SISMEMBER, no times", 0.97),
                                         ("ZSCORE, 1 in 10 with a time", "ZSCORE, no times", 0.97)):
                key = f"W10.{timed.split()[0].rstrip(',').lower()}.{pl}"
                W10_TARGETS[key] = ("value", target)
                rows(key, f"`{timed}` / `{plain}`, P={pl}: ops/s with times / without", "x", "higher",
                     (f"{timed} / {plain} P{pl}", "ratio"), servers=("ours",))
                rows(f"{key}.cpu", f"`{timed}` / `{plain}`, P={pl}: server CPU per op, without / with", "x",
                     "higher", (f"{timed} / {plain} P{pl}, by server CPU", "ratio"), servers=("ours",))
        rows("W10.rl.ops", "rate limiter: requests/s", "ops/s", "higher", ("rate limiter", "requests/s"),
             paired=True)
        rows("W10.rl.mem", "rate limiter: used_memory at the end", "bytes", "lower",
             ("rate limiter: used_memory", "MB"), scale=1e6, paired=True)
        for cmd in ("SADDEX", "ZADDEX"):
            for name, src in (("ours", cmd), ("reference", "HSETEX")):
                for rnd, v in enumerate(res.get((f"{src}: s after the last due", "s"), {}).get(name, [])):
                    self.add(f"W10.exp.{cmd}", "W10", f"active expiry, ours `{cmd}`, the reference `HSETEX`: "
                             "seconds after the last due until all are gone", "s", "lower", name, rnd, v,
                             target=W10_TARGETS.get(f"W10.exp.{cmd}"))
                for rnd, v in enumerate(res.get((f"{src}: server CPU from load end", "s"), {}).get(name, [])):
                    self.add(f"W10.exp.{cmd}.cpu", "W10", f"active expiry, ours `{cmd}`, the reference "
                             "`HSETEX`: server CPU from the load's end", "s", "lower", name, rnd, v)

    # -- W3: SET vs HASH vs ZSET, MEMORY USAGE after every insert

    def w3(self):
        n = self.cfg["w3_n"]
        # The hash tables' seed is random per server start, so bucket chaining (and with it
        # MEMORY USAGE) varies a little from start to start: several rounds, paired.
        for rnd in range(1, self.cfg["w3_rounds"] + 1):
            for spec in self.servers:
                with self.server(spec) as srv:
                    # The first use of a command allocates its latency histogram (about 24 KB), the
                    # first key the keyspace's table: keep them out of the used_memory deltas below.
                    for t in W3_TYPES:
                        self.zload(srv, "w3", type=t, n=1, key=f"w3:warm-up:{t}", csv=self.out / "w3_warmup.csv")
                    srv.used_memory()
                    for t in W3_TYPES:
                        path = self.out / f"w3_{spec.name}_{t}.csv"
                        before = srv.used_memory()
                        self.zload(srv, "w3", type=t, n=n, key=f"w3:{t}", csv=path, seed=3)
                        delta = srv.used_memory() - before
                        rows = [(int(r["n"]), int(r["bytes"])) for r in read_rows(path)]
                        path.unlink()
                        if rnd == 1:
                            self.w3_rows[(spec.name, t)] = rows
                        by_n = dict(rows)
                        jumps = [(rows[i][1] - rows[i - 1][1], rows[i][0]) for i in range(1, len(rows))]
                        jump, at_n = max(jumps)
                        lab = W3_LABEL[t]
                        add = lambda k, label, unit, better, v: self.add(
                            f"W3.{t}.{k}", "W3", f"{lab}: {label}", unit, better, spec.name, rnd, v, paired=True,
                            target=W3_TARGETS.get(f"W3.{t}.{'atN' if k == f'at{n}' else k}"))
                        for m in (1000, n):
                            if m in by_n:
                                add(f"at{m}", f"MEMORY USAGE at {m:,}", "B", "lower", by_n[m])
                        add("bpm", f"bytes per member at {n:,}", "B/member", "lower", by_n[n] / n)
                        add("delta", f"used_memory delta per member at {n:,} (cross-check)", "B/member", "lower",
                            delta / n)
                        add("jump", "largest single-insert jump (cliff)", "B", "lower", jump)
                        add("jump_n", "… at member count", "count", "info", at_n)
                        add("worst", "worst bytes per member, 100…N", "B/member", "lower",
                            max(b / k for k, b in rows if k >= 100))
                        log(f"  W3 {spec.name} round {rnd} {t}: MEMORY USAGE "
                            f"{by_n[n]:,} B at {n:,} (used_memory delta {delta:,.0f}), "
                            f"largest jump {jump:,} B at {at_n}")
                        if t == "set":
                            set_rows = by_n
                        if t == "hash" and 1000 in by_n:
                            self.add("W3.set_vs_hash", "W3", "SET ÷ HASH, MEMORY USAGE at 1,000", "x", "lower",
                                     spec.name, rnd, set_rows[1000] / by_n[1000], paired=True)
                        if t == "hash":   # the SET against the HASH of the same members, at every size
                            worst, worst_n = max((set_rows[k] / b, k) for k, b in by_n.items() if k in set_rows)
                            self.add("W3.set_over_hash", "W3", f"SET ÷ HASH, MEMORY USAGE, largest over 1…{n:,}",
                                     "x", "lower", spec.name, rnd, worst, paired=True,
                                     target=W3_TARGETS["W3.set_over_hash"])
                            self.add("W3.set_over_hash_n", "W3", "… at member count", "count", "info",
                                     spec.name, rnd, worst_n, paired=True)
        (self.out / "w3_warmup.csv").unlink(missing_ok=True)
        self.write_w3_csv()

    def write_w3_csv(self):
        cols = [(s.name, t) for s in self.servers for t in W3_TYPES if (s.name, t) in self.w3_rows]
        data = [dict(self.w3_rows[c]) for c in cols]
        with open(self.out / "w3_memory_usage.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["n"] + [f"{s}:{t}" for s, t in cols])
            for k in range(1, self.cfg["w3_n"] + 1):
                w.writerow([k] + [d.get(k, "") for d in data])

    # -- W4: many sorted sets of 10-200 members

    def w4(self):
        c = self.cfg
        rows = []
        for rnd in range(1, c["w4_pairs"] + 1):
            for spec in self.servers:
                for prof, (lo, hi) in W4_PROFILES.items():
                    keys = c["w4_keys"][prof]
                    with self.server(spec) as srv:
                        ld = self.zload(srv, "zsets", keys=keys, min=lo, max=hi, mlen=10, pipeline=1000, seed=4)
                        srv.settle()
                        used = srv.used_memory()
                        q = self.zload(srv, "bench", op="keys-rangebyscore", keys=keys, conns=W4_CONNS,
                                       pipeline=1, seconds=c["w4_query_s"], warmup=c["w4_warmup_s"],
                                       seed=40 + rnd)
                    bpm = (used - ld["used_memory_before"]) / ld["members"]
                    tag = f"{prof} ({lo}–{hi} members, {human(keys)} keys)"
                    add = lambda k, label, unit, better, v, paired=False: self.add(
                        f"W4.{prof}.{k}", "W4", f"{tag}: {label}", unit, better, spec.name, rnd, v, paired)
                    add("bpm", "bytes per member (used_memory delta / members)", "B/member", "lower", bpm)
                    add("mem", "used_memory", "bytes", "lower", used)
                    add("load", "load, members/s", "ops/s", "higher", ld["members"] / ld["elapsed_s"], True)
                    add("qps", f"ZRANGEBYSCORE ops/s, {W4_CONNS} conns", "ops/s", "higher", q["ops_per_sec"], True)
                    add("p50", "ZRANGEBYSCORE p50", "us", "lower", q["p50_us"], True)
                    add("p99", "ZRANGEBYSCORE p99", "us", "lower", q["p99_us"], True)
                    add("cpu", "ZRANGEBYSCORE server CPU per op", "us/op", "lower", q["cpu_us_per_op"], True)
                    rows.append(dict(server=spec.name, round=rnd, profile=prof, keys=keys, members=ld["members"],
                                     load_s=round(ld["elapsed_s"], 3), used_memory=int(used),
                                     bytes_per_member=round(bpm, 2), qps=q["ops_per_sec"], p50_us=q["p50_us"],
                                     p99_us=q["p99_us"], cpu_us_per_op=q["cpu_us_per_op"],
                                     server_util=q["server_util"]))
                    log(f"  W4 {spec.name} round {rnd} {prof}: {ld['members']:,} members in {ld['elapsed_s']:.1f} s, "
                        f"{bpm:.1f} B/member; ZRANGEBYSCORE {q['ops_per_sec']:,.0f}/s "
                        f"(server busy {q['server_util']:.0%})")
                if rnd == 1:   # one key, 20-byte members: memory only, deterministic
                    n = c["w4_one_n"]
                    for order in ("seq", "rand"):
                        with self.server(spec) as srv:
                            ld = self.zload(srv, "zadd1", key="one", n=n, pipeline=250_000, order=order,
                                            mlen=20, seed=5)
                        bpm = (ld["used_memory"] - ld["used_memory_before"]) / n
                        word = "sequential" if order == "seq" else "random"
                        self.add(f"W4.one.{order}", "W4",
                                 f"one key, {human(n)} 20-byte members, {word} order: bytes per member",
                                 "B/member", "lower", spec.name, rnd, bpm)
                        log(f"  W4 {spec.name} one key {order}: {bpm:.1f} B/member ({ld['elapsed_s']:.1f} s)")
        write_rows(self.out / "w4_runs.csv", rows)

    # -- W5: latency and throughput on one sorted set of 1M members

    def w5(self):
        """Every figure is measured in turns that take all servers together,
        each with a client of its own: they share CPU 0, so the ratio of their
        throughputs is that of their CPU time per operation, and a burst of
        steal time from the host hits all of them at once. Turns that
        alternated between the servers spread the ZSCORE ratio at P=16 over
        0.83-1.22 from one pair of turns to the next on this machine;
        together, over 0.98-1.05. What is left is where each server lies in
        memory, which moves its figures steadily for as long as it runs:
        two builds that differ in one prefetch measured a ZSCORE ratio of
        1.015, then 0.965 after both were started again. So each round
        starts the servers afresh (and loads the set again): the median of
        the rounds is over as many placements. It holds while the
        servers, not the clients, are the bottleneck: a note says when the
        servers left CPU 0 idle."""
        c = self.cfg
        n = c["w5_n"]
        for rnd in range(1, c["w5_pairs"] + 1):
            with contextlib.ExitStack() as stack:
                srvs = [stack.enter_context(self.server(spec)) for spec in self.servers]
                for srv in srvs:
                    self.zload(srv, "zadd1", key="z", n=n, pipeline=250_000, order="rand", mlen=0, seed=6)
                self.settle_keys(srvs, [("z", "zscore", None)], n)
                for op, label in W5_OPS:
                    for pi, pl in enumerate(W5_PIPELINES):
                        self.w5_turn(srvs, op, label, pl, rnd, seed=100 * rnd + pi,
                                     offset=100_000_000 * pi + 1_000_000 * rnd)
                for srv in srvs:
                    cl = srv.conn()
                    card = cl("ZCARD", "z")
                    cl.close()
                    if card != n:
                        self.notes.append(f"W5: {srv.spec.name} ended round {rnd} with ZCARD {card:,}, not {n:,}.")
            got = {(r["op"], r["pipeline"], r["server"]): r["ops_per_sec"] for r in self.w5_runs if r["round"] == rnd}
            log(f"  W5 round {rnd}, ours/reference: " + ", ".join(
                f"{op}/P{pl} {got[op, pl, 'ours'] / got[op, pl, 'reference']:.2f}"
                for op, _ in W5_OPS for pl in W5_PIPELINES))
        for op, label in W5_OPS:
            for pl in W5_PIPELINES:
                self.check_bound("W5", label, pl, [r for r in self.w5_runs if r["op"] == op and r["pipeline"] == pl])
        write_rows(self.out / "w5_runs.csv", self.w5_runs)

    def w5_turn(self, srvs, op, label, pl, rnd, seed, offset):
        c = self.cfg
        opts = dict(op=op, key="z", n=c["w5_n"], conns=W5_CONNS, pipeline=pl, seconds=c["w5_seconds"],
                    warmup=c["w5_warmup"], seed=seed, offset=offset)
        tag = f"{label}, P={pl}"
        for srv, q in zip(srvs, self.zload_many([(srv, "bench", opts) for srv in srvs])):
            name = srv.spec.name
            for k, lab, unit, better, v in (("ops", "ops/s", "ops/s", "higher", q["ops_per_sec"]),
                                            ("p50", "p50", "us", "lower", q["p50_us"]),
                                            ("p99", "p99", "us", "lower", q["p99_us"]),
                                            ("cpu", "server CPU per op", "us/op", "lower", q["cpu_us_per_op"])):
                self.add(f"W5.{op}.{pl}.{k}", "W5", f"{tag}: {lab}", unit, better, name, rnd, v, True)
            self.w5_runs.append(dict(server=name, round=rnd, op=op, pipeline=pl,
                                     conns=W5_CONNS, ops_per_sec=q["ops_per_sec"],
                                     p50_us=q["p50_us"], p99_us=q["p99_us"],
                                     p999_us=q["p999_us"], cpu_us_per_op=q["cpu_us_per_op"],
                                     server_util=q["server_util"], nils=q["nils"]))

    def check_bound(self, w, label, pl, runs):
        """Notes an operation whose servers left CPU 0 idle: their clients,
        not they, set the pace, and the ratio says less than it seems (W5, W7)."""
        if not self.pin:
            return
        per_round = {}
        for r in runs:
            per_round[r["round"]] = per_round.get(r["round"], 0.0) + r["server_util"]
        busy = statistics.median(per_round.values())
        if busy < 0.9:
            self.notes.append(f"{w} {label}, P={pl}: the servers together kept CPU 0 only {busy:.0%} busy "
                              "(median of the rounds); the clients may have set the pace.")

    # -- W7: big sets

    def w7(self):
        if self.w7_only_ops:   # --w7-ops: only these operations' turns (a quick A/B of a few)
            self.w7_ops()
            write_rows(self.out / "w7_runs.csv", self.w7_runs)
            return
        self.w7_memory()
        self.w7_stall()
        self.w7_ops()
        self.w7_doubling()
        write_rows(self.out / "w7_runs.csv", self.w7_runs)

    def w7_runs_op(self, op):
        return not self.w7_only_ops or op in self.w7_only_ops

    def w7_label(self, shape):
        return f"{dict(W7_SHAPES)[shape]}: {human(self.cfg['w7_n'])} {W7_SHAPE_TEXT[shape]}"

    def w7_load(self, srv, shape, key, offset=0):
        return self.zload(srv, "sadd", key=key, shape=shape, n=self.cfg["w7_n"], offset=offset, chunk=1000,
                          pipeline=100)

    def w7_memory(self):
        """Each shape in a fresh server of its own: used_memory before and after the load, and
        MEMORY USAGE of the key, over the members."""
        n = self.cfg["w7_n"]
        for spec in self.servers:
            for shape, _ in W7_SHAPES:
                with self.server(spec) as srv:
                    cl = srv.conn()
                    # The first SADD allocates its latency histogram, the first key the keyspace's table,
                    # the first INFO its histogram: keep them out of the used_memory delta.
                    cl("SADD", "w7:warm-up", "x")
                    srv.used_memory()
                    ld = self.w7_load(srv, shape, shape)
                    self.settle_keys([srv], [(shape, "sismember", shape)], n)   # upstream's old table freed
                    srv.settle()
                    used = srv.used_memory()
                    usage, card, enc = cl("MEMORY", "USAGE", shape, "SAMPLES", 0), cl("SCARD", shape), \
                        cl("OBJECT", "ENCODING", shape)
                    cl.close()
                if card != n or ld["added"] != n:
                    self.notes.append(f"W7 {shape}: {spec.name} holds {card:,} members after adding "
                                      f"{ld['added']:,} of {n:,}.")
                delta = (used - ld["used_memory_before"]) / n
                tag = self.w7_label(shape)
                add = lambda k, label, unit, better, v, target=None: self.add(
                    f"W7.mem.{shape}.{k}", "W7", f"{tag}: {label}", unit, better, spec.name, 1, v, target=target)
                limit = ("value", W7_MEM_TARGETS[shape])
                add("bpm", "bytes per member (used_memory delta / members)", "B/member", "lower", delta, limit)
                add("usage", "bytes per member (MEMORY USAGE SAMPLES 0 / members)", "B/member", "lower", usage / n,
                    limit)
                add("load", "SADD load (1,000 members a command)", "members/s", "higher",
                    n / ld["elapsed_s"])
                self.w7_runs.append(dict(part="memory", server=spec.name, round=1, shape=shape, op="", pipeline="",
                                         conns="", members=card, encoding=enc,
                                         used_memory_before=int(ld["used_memory_before"]), used_memory=int(used),
                                         memory_usage=usage, load_s=round(ld["elapsed_s"], 3)))
                log(f"  W7 {spec.name} {shape}: {card:,} members ({enc}), {delta:.2f} B/member by used_memory, "
                    f"{usage / n:.2f} by MEMORY USAGE; loaded in {ld['elapsed_s']:.2f} s")

    def w7_stall(self):
        """W1's load for a set: the integers 0 … N−1, one SADD each, in pipelines of 250,000, with
        used_memory and the rate sampled every w7_stall_sample inserts. The slowest interval over
        the median one shows a stall (a table that doubles); the highest used_memory over the final
        one, a transient peak."""
        n, sample = self.cfg["w7_stall_n"], self.cfg["w7_stall_sample"]
        for spec in self.servers:
            with self.server(spec) as srv:
                path = self.out / f"w7_stall_{spec.name}.csv"
                r = self.zload(srv, "zadd1", key="s", op="sadd", n=n, pipeline=250_000, sample=sample, csv=path,
                               order="seq")
            rows = read_rows(path)
            ivals = [row["interval_rate"] for row in rows if row["inserts"] > 0]
            peak = max(row["used_memory"] for row in rows)
            tag = f"{human(n)} consecutive integers into one set, 250,000 SADD a pipeline"
            add = lambda k, label, unit, better, v, paired=False: self.add(
                f"W7.stall.{k}", "W7", f"{tag}: {label}", unit, better, spec.name, 1, v, paired=paired,
                target=W7_STALL_TARGETS.get(f"W7.stall.{k}"))
            add("rate", "inserts/s, whole run", "inserts/s", "higher", r["rate"])
            add("min_iv", f"slowest {human(sample)} interval ÷ median interval", "x", "higher",
                min(ivals) / statistics.median(ivals))
            add("peak", "highest used_memory sampled ÷ final used_memory", "x", "lower",
                max(peak, r["used_memory"]) / r["used_memory"])
            # Without the clients' buffers: a pipeline of 250,000 queries is megabytes, more than a
            # whole set of consecutive integers in the integer form.
            last = rows[-1]
            data = [row["used_memory"] - row["mem_clients"] for row in rows if row["inserts"] > 0]
            add("peak_data", "the same without the clients' buffers (mem_clients_normal)", "x", "lower",
                max(data) / (last["used_memory"] - last["mem_clients"]))
            add("bpm", "bytes per member at the end (used_memory / members)", "B/member", "lower",
                r["used_memory"] / n)
            log(f"  W7 stall {spec.name}: {n:,} SADD in {r['elapsed_s']:.1f} s ({r['rate']:,.0f}/s), "
                f"slowest interval {min(ivals) / statistics.median(ivals):.2f} of the median, peak "
                f"{max(peak, r['used_memory']) / r['used_memory']:.3f} of final used_memory")

    def w7_ops(self):
        """As W5: each round starts all servers afresh, loads shapes a and c (and the second
        integer set for SINTER) into each, and measures every operation in turns that run all of
        them together, each with its own client. Whole-set operations run on W7_BULK_CONNS
        connection, for w7_bulk_seconds: a call takes many milliseconds (a batch at P16,
        seconds), and a batch counts for the part of it inside the window; so the clients of a
        turn keep their servers loaded until every one has its counted batches back (--sync),
        lest a server run its last batch alone. The server's CPU time comes from /proc (--pid):
        an INFO would wait behind those calls."""
        c = self.cfg
        n = c["w7_n"]
        for rnd in range(1, c["w7_pairs"] + 1):
            with contextlib.ExitStack() as stack:
                srvs = self.w7_servers(stack, key2=True)
                cursors = {}
                for srv in srvs:   # one whole SSCAN each, alone: its cursors spread the bench's scans
                    for shape in W7_OPS_SHAPES:
                        path = self.out / f"w7_cursors_{srv.spec.name}_{shape}.txt"
                        r = self.zload(srv, "scan", key=shape, csv=path)
                        cursors[srv.spec.name, shape] = path
                        self.add(f"W7.{shape}.wholescan", "W7",
                                 f"{self.w7_label(shape)}: one whole SSCAN COUNT 100 on one connection, alone",
                                 "s", "lower", srv.spec.name, rnd, r["scan_s"], paired=True)
                        if r["members"] < n:
                            self.notes.append(f"W7 {shape}: {srv.spec.name}'s whole SSCAN returned "
                                              f"{r['members']:,} members of {n:,}.")
                for shape in W7_OPS_SHAPES:
                    for op, label, bulk, shapes in W7_OPS:
                        if shape not in shapes or not self.w7_runs_op(op):
                            continue
                        for pi, pl in enumerate(W5_PIPELINES):
                            self.w7_turn(srvs, shape, op, label, bulk, pl, rnd, cursors, seed=100 * rnd + pi,
                                         offset=10 * n * pi)
                        if op == "spop":   # every popped member is back
                            for srv in srvs:
                                self.w7_check_card(srv, shape, n, f"SPOP + SADD in round {rnd}")
                for path in cursors.values():
                    path.unlink(missing_ok=True)
            got = {(r["shape"], r["op"], r["pipeline"], r["server"]): r["ops_per_sec"]
                   for r in self.w7_runs if r["part"] == "ops" and r["round"] == rnd}
            log(f"  W7 round {rnd}, ours/reference: " + ", ".join(
                f"{shape}:{op}/P{pl} {got[shape, op, pl, 'ours'] / got[shape, op, pl, 'reference']:.2f}"
                for shape in W7_OPS_SHAPES for op, _, _, shapes in W7_OPS if shape in shapes
                for pl in W5_PIPELINES if got.get((shape, op, pl, "reference"))))
        for shape in W7_OPS_SHAPES:
            for op, label, _, shapes in W7_OPS:
                if shape in shapes and self.w7_runs_op(op):
                    for pl in W5_PIPELINES:
                        self.check_bound("W7", f"{shape} {label}", pl,
                                         [r for r in self.w7_runs if r["part"] == "ops" and r["shape"] == shape
                                          and r["op"] == op and r["pipeline"] == pl])

    def w7_servers(self, stack, key2=False):
        """All servers started afresh (closed with the stack), shapes a and c loaded into each,
        and with key2 the second integer set, half of it in shape a's set (SINTER's)."""
        srvs = [stack.enter_context(self.server(spec)) for spec in self.servers]
        for srv in srvs:
            for shape in W7_OPS_SHAPES:
                self.w7_load(srv, shape, shape)
            if key2:
                self.w7_load(srv, "int", W7_KEY2, offset=self.cfg["w7_n"] // 2)
        keys = [(shape, "sismember", shape) for shape in W7_OPS_SHAPES]
        self.settle_keys(srvs, keys + ([(W7_KEY2, "sismember", "int")] if key2 else []), self.cfg["w7_n"])
        return srvs

    def w7_check_card(self, srv, shape, want, after):
        """A note when the set does not hold `want` members after a turn that should leave it so."""
        cl = srv.conn()
        card = cl("SCARD", shape)
        cl.close()
        if card != want:
            self.notes.append(f"W7 {shape}: {srv.spec.name} holds {card:,} members after {after}, not {want:,}.")

    def w7_doubling(self):
        """SADD of new members until the set has doubled (N -> 2N), all servers at once, each with
        its own client, and the server's CPU time per insert over the whole of it (zload bench
        --limit). The operations' short windows catch a set at one size; a set that keeps
        growing also pays for its structure's growth: upstream's hashtable doubles its table at
        some size between N and 2N and then moves every member into it, one bucket a write. A
        doubling holds one such step of any structure that grows by doubling, wherever it falls.
        Servers that finish first run no more, so only CPU per insert compares (not ops/s)."""
        c = self.cfg
        n = c["w7_n"]
        for rnd in range(1, c["w7_pairs"] + 1):
            for pi, pl in enumerate(W5_PIPELINES):
                with contextlib.ExitStack() as stack:
                    srvs = self.w7_servers(stack)
                    for shape in W7_OPS_SHAPES:
                        opts = dict(op="sadd", key=shape, shape=shape, n=n, conns=W7_CONNS, pipeline=pl, limit=n,
                                    seed=300 + 10 * rnd + pi)
                        jobs = [(srv, "bench", dict(opts, pid=srv.proc.pid)) for srv in srvs]
                        got = {}
                        for srv, q in zip(srvs, self.zload_many(jobs)):
                            self.w7_check_card(srv, shape, 2 * n, f"the doubling SADDs of round {rnd}")
                            got[srv.spec.name] = q["cpu_us_per_op"]
                            self.add(f"W7.{shape}.double.{pl}.cpu", "W7",
                                     f"{self.w7_label(shape)}: SADD of {human(n)} new members as the set doubles "
                                     f"({human(n)} → {human(2 * n)}), P={pl}: server CPU per insert", "us/op",
                                     "lower", srv.spec.name, rnd, q["cpu_us_per_op"], True)
                            self.w7_runs.append(dict(part="double", server=srv.spec.name, round=rnd, shape=shape,
                                                     op="sadd", pipeline=pl, conns=W7_CONNS,
                                                     ops_per_sec=q["ops_per_sec"], cpu_us_per_op=q["cpu_us_per_op"],
                                                     server_util=q["server_util"]))
                        if got.get("reference"):
                            log(f"  W7 doubling round {rnd}, {shape} P{pl}: CPU per insert ours/reference "
                                f"{got['ours'] / got['reference']:.3f}")

    def w7_turn(self, srvs, shape, op, label, bulk, pl, rnd, cursors, seed, offset):
        c = self.cfg
        opts = dict(op=op, key=shape, key2=W7_KEY2, shape=shape, n=c["w7_n"], conns=W7_BULK_CONNS if bulk else W7_CONNS,
                    pipeline=pl, seconds=c["w7_bulk_seconds"] if bulk else c["w7_seconds"], warmup=c["w7_warmup"],
                    seed=seed, offset=offset)
        sync = self.out / "w7_sync"
        shutil.rmtree(sync, ignore_errors=True)
        sync.mkdir()
        jobs = []
        for srv in srvs:
            o = dict(opts, pid=srv.proc.pid, sync=sync, parties=len(srvs))
            if op == "sscan":
                o["cursors"] = cursors[srv.spec.name, shape]
            jobs.append((srv, "bench", o))
        tag = f"{self.w7_label(shape)}: {label}, P={pl}"
        for srv, q in zip(srvs, self.zload_many(jobs)):
            name = srv.spec.name
            # SSCAN: members returned per second (COUNT is a hint; calls return more or fewer)
            v, unit = (q["elements_per_sec"], "members/s") if op == "sscan" else (q["ops_per_sec"], "ops/s")
            target = ("ref", W7_SPEED_TARGETS.get(op, 1.0))
            lat = q["p50_us"] > 0   # no pipeline returned inside the window (SINTER at P16): no latency
            for k, lab, un, better, val, tg in (("ops", unit, unit, "higher", v, target),
                                                ("p50", "p50", "us", "lower", q["p50_us"] if lat else None, None),
                                                ("p99", "p99", "us", "lower", q["p99_us"] if lat else None, None),
                                                ("cpu", "server CPU per op", "us/op", "lower", q["cpu_us_per_op"],
                                                 None)):
                self.add(f"W7.{shape}.{op}.{pl}.{k}", "W7", f"{tag}: {lab}", un, better, name, rnd, val, True, tg)
            self.w7_runs.append(dict(part="ops", server=name, round=rnd, shape=shape, op=op, pipeline=pl,
                                     conns=opts["conns"], ops_per_sec=v, p50_us=q["p50_us"], p99_us=q["p99_us"],
                                     p999_us=q["p999_us"], cpu_us_per_op=q["cpu_us_per_op"],
                                     server_util=q["server_util"], members_per_sec=q["elements_per_sec"]))
        shutil.rmtree(sync, ignore_errors=True)

    # -- W8: BGSAVE under load, the memory copied by copy-on-write

    def w8(self):
        """Each scenario loads a fresh server, runs a load on it and, after
        W8_WARMUP seconds of that load, a BGSAVE (zload bgsave): the load goes
        on until the child has written the RDB file, then stops, and once the
        parent has reaped the child rdb_last_cow_size is read. The fork child
        inherits the server's pinning to CPU 0: it shares that CPU with the
        server, as it would on a machine with one core per server."""
        for rnd in range(1, self.cfg["w8_rounds"] + 1):
            for spec in self.servers:
                for scen in W8_SCENARIOS:
                    with self.server(spec) as srv:
                        cl = srv.conn()
                        cl("CONFIG", "SET", "zset-max-listpack-entries", 128)
                        cl.close()
                        getattr(self, "w8_" + scen)(srv, rnd)
        write_rows(self.out / "w8_runs.csv", self.w8_runs)

    def w8_a(self, srv, rnd):
        c = self.cfg
        keys, n = c["w8_a"]
        self.zload(srv, "zkeys", keys=keys, n=n, chunk=0, pipeline=100, seed=8)
        srv.settle()
        r = self.w8_save(srv, c["w8_a_delay"], op="keys-zscore", keys=keys, n=n, pipeline=W8_PIPELINE,
                         warmup=W8_WARMUP, seed=80 + rnd)
        self.w8_record("a", srv, rnd, r, keys=keys, members=keys * n, delay=c["w8_a_delay"], rate=0)

    def w8_b(self, srv, rnd):
        c = self.cfg
        keys, n = c["w8_b"]
        d0, r0 = c["w8_b_delay"], c["w8_b_rate"]
        self.zload(srv, "zkeys", keys=keys, n=n, chunk=1000, pipeline=20, seed=9)
        srv.settle()
        # The main point first, on the freshly loaded set; then the side table's other points on
        # the same server (each BGSAVE starts from the state the previous one's writes left).
        points = [(d0, r0)] + [(d, r0) for d in c["w8_sweep_delays"] if d != d0] \
            + [(d0, r) for r in c["w8_sweep_rates"] if r != r0]
        for i, (delay, rate) in enumerate(points):
            r = self.w8_save(srv, delay, op="keys-zincrby", keys=keys, n=n, pipeline=W8_PACED_PIPELINE,
                             rate=rate, warmup=W8_WARMUP, seed=90 + 10 * rnd + i)
            self.w8_record("b", srv, rnd, r, keys=keys, members=keys * n, delay=delay, rate=rate, main=i == 0)

    def w8_c(self, srv, rnd):
        n = self.cfg["w8_c_n"]
        self.zload(srv, "zadd1", key="z", n=n, pipeline=250_000, order="rand", mlen=0, seed=10)
        r = self.w8_save(srv, 0, op="zincrby", key="z", n=n, pipeline=W8_PIPELINE, warmup=W8_WARMUP,
                         seed=100 + rnd)
        self.w8_record("c", srv, rnd, r, keys=1, members=n, delay=0, rate=0)
        # The same with a fixed, small number of writes: copied bytes per write fall as more writes
        # hit pages already copied, so a server whose save takes longer (more writes) looks better
        # per write; and the closed loop's count moves with other work on the machine. N/500 writes
        # (10,000 at 5M) fit in every save measured here, and far from every page being copied.
        limit = n // 500
        r = self.w8_save(srv, 0, op="zincrby", key="z", n=n, pipeline=W8_PIPELINE, warmup=W8_WARMUP,
                         seed=200 + rnd, limit=limit)
        self.w8_record("c", srv, rnd, r, keys=1, members=n, delay=0, rate=0, main=False, limit=limit)

    def w8_d(self, srv, rnd):
        """c's set, written as a leaderboard whose scores change: every ZADD gives a member a new
        random score, so it moves in the order (c's ZINCRBY by 1 mostly keeps its place)."""
        n = self.cfg["w8_c_n"]
        self.zload(srv, "zadd1", key="z", n=n, pipeline=250_000, order="rand", mlen=0, seed=10)
        r = self.w8_save(srv, 0, op="zadd", key="z", n=n, pipeline=W8_PIPELINE, warmup=W8_WARMUP,
                         seed=300 + rnd)
        self.w8_record("d", srv, rnd, r, keys=1, members=n, delay=0, rate=0)

    def w8_save(self, srv, delay, **opts):
        """One BGSAVE under the load opts (zload bgsave) with rdb-key-save-delay = delay µs per key;
        the RDB file is deleted afterwards."""
        cl = srv.conn()
        cl("CONFIG", "SET", "rdb-key-save-delay", delay)
        cl.close()
        rdb = srv.dir / "dump.rdb"
        rdb.unlink(missing_ok=True)
        try:
            return self.zload(srv, "bgsave", rdb=rdb, pid=srv.proc.pid, **opts)
        finally:
            for f in [rdb, *srv.dir.glob("temp-*.rdb")]:
                f.unlink(missing_ok=True)

    def w8_record(self, scen, srv, rnd, r, keys, members, delay, rate, main=True, limit=0):
        name = srv.spec.name
        used, cow, ops, save_s = r["used_memory_before"], r["cow"], r["ops_save"], r["save_s"]
        peak = r["used_memory_max"] + cow
        per_op = cow / ops if ops else None
        # The child's Private_Dirty as sampled from /proc: the child reads it itself only every
        # 1024 keys (at most once a second) and at its end, after it may have handed pages back.
        sampled = r["proc_samples"] > 0
        cow_s = max(r["proc_cow_max"], cow) if sampled else None
        peak_s = r["used_memory_max"] + cow_s if sampled else None
        per_op_s = cow_s / ops if sampled and ops else None
        if not sampled and self.pin and self.size != "smoke":
            self.notes.append(f"W8 {scen}: no /proc sample of {srv.spec.name}'s fork child (save of {save_s:.2f} s).")
        word = "reads" if scen == "a" else "writes"
        self.w8_runs.append(dict(
            scenario=scen, server=name, round=rnd, main=int(main), keys=keys, members=members, delay_us=delay,
            rate=rate, limit=limit, op=r["op"], ops_save=ops, save_s=round(save_s, 3),
            bgsave_s=round(r["bgsave_s"], 3), rate_save=round(r["rate_save"]), used_memory=int(used),
            used_memory_max=int(r["used_memory_max"]), cow=int(cow), peak=int(peak), cow_frac=round(cow / used, 4),
            cow_per_op=round(per_op, 1) if per_op is not None else "", proc_samples=r["proc_samples"],
            cow_sampled=int(cow_s) if sampled else "", peak_sampled=int(peak_s) if sampled else "",
            rss_child_max=int(r["proc_total_max"]) if sampled else "", fork_us=int(r["fork_us"]),
            max_rtt_ms=r["max_rtt_ms"], nils=r["nils"]))
        pace = f"{rate:,}/s" if rate else "closed loop"
        log(f"  W8 {name} round {rnd} {scen} (delay {delay} µs, {pace}{f', limit {limit:,}' if limit else ''}): "
            f"used {used / 1e6:,.1f} MB, copied {cow / 1e6:,.1f} MB ({cow / used:.1%}"
            + (f"; sampled peak {cow_s / 1e6:,.1f} MB" if sampled else "") + f"), {ops:,} {word} in a "
            f"{save_s:.2f} s save" + (f", {per_op:,.0f} B copied per write" if scen != "a" and per_op else ""))
        if r["nils"]:
            self.notes.append(f"W8 {scen}: {name} answered {r['nils']:,} nil replies (members missing).")
        if rate and r["rate_save"] < 0.95 * rate and self.size != "smoke":
            self.notes.append(f"W8 {scen}: {name} took {r['rate_save']:,.0f} writes/s during its save at "
                              f"rdb-key-save-delay {delay} µs, not the {rate:,} asked for: it fell behind.")
        if main and scen in ("a", "b") and save_s < W8_MIN_SAVE and self.size != "smoke":
            self.notes.append(f"W8 {scen}: {name}'s save took {save_s:.2f} s, under {W8_MIN_SAVE:g} s "
                              "(raise its rdb-key-save-delay).")
        if scen == "b" and not main:
            return
        if scen == "c" and limit:
            tag = f"{W8_LABEL['c'](self.cfg)}, only the first {limit:,} writes of the save"
            add = lambda k, label, unit, better, v: self.add(
                f"W8.c.eq.{k}", "W8", f"{tag}: {label}", unit, better, name, rnd, v)
            add("ops", "writes during the save", "count", "info", ops)
            add("cow", "copied (rdb_last_cow_size)", "bytes", "lower", cow)
            add("cow_s", "copied, sampled peak", "bytes", "lower", cow_s)
            add("cow_per_op", "copied per write", "B", "lower", per_op)
            add("cow_per_op_s", "copied per write, sampled peak", "B", "lower", per_op_s)
            return
        tag = W8_LABEL[scen](self.cfg)
        add = lambda k, label, unit, better, v: self.add(
            f"W8.{scen}.{k}", "W8", f"{tag}: {label}", unit, better, name, rnd, v,
            target=W8_TARGETS.get(f"W8.{scen}.{k}"))
        add("used", "used_memory before the save", "bytes", "lower", used)
        add("cow", "copied (rdb_last_cow_size)", "bytes", "lower", cow)
        add("cow_s", "copied, sampled peak (child's Private_Dirty, /proc, every 20 ms)", "bytes", "lower", cow_s)
        add("peak", "used + copied (peak)", "bytes", "lower", peak)
        add("peak_s", "used + copied, sampled peak", "bytes", "lower", peak_s)
        add("rss", "server RSS + child's private memory, sampled peak", "bytes", "lower",
            r["proc_total_max"] if sampled else None)
        add("frac", "copied / used_memory", "of used", "lower", cow / used)
        add("frac_s", "copied, sampled peak / used_memory", "of used", "lower", cow_s / used if sampled else None)
        add("ops", f"{word} during the save", "count", "info", ops)
        if scen != "a":
            add("cow_per_op", "copied per write", "B", "lower", per_op)
            add("cow_per_op_s", "copied per write, sampled peak", "B", "lower", per_op_s)
        add("save", "save duration (BGSAVE to the RDB file)", "s", "info", save_s)
        add("fork", "fork (latest_fork_usec)", "us", "lower", r["fork_us"])

    def w8_sweep_table(self):
        """Scenario b at other rdb-key-save-delay values and write rates (first round)."""
        runs = [r for r in self.w8_runs if r["scenario"] == "b" and r["round"] == 1]
        if not runs:
            return ""
        c = self.cfg
        d0, r0 = c["w8_b_delay"], c["w8_b_rate"]
        points = sorted({(r["delay_us"], r["rate"]) for r in runs}, key=lambda p: (p[1] != r0, p[1], p[0]))
        by = {(r["delay_us"], r["rate"], r["server"]): r for r in runs}
        head = ["rdb-key-save-delay", "writes/s", "server", "save s", "writes (per s)", "used MB", "copied MB",
                "copied, sampled peak MB", "copied / used", "used + copied MB", "B copied per write", "copied ÷ ref",
                "used + copied ÷ ref", "sampled: copied ÷ ref", "sampled: used + copied ÷ ref"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for delay, rate in points:
            ref = by.get((delay, rate, "reference"))
            for s in self.servers:
                r = by.get((delay, rate, s.name))
                if not r:
                    continue
                main = " (main)" if (delay, rate) == (d0, r0) else ""
                rc = f"{r['cow'] / ref['cow']:.3f}" if ref and ref["cow"] and s.name != "reference" else ""
                rp = f"{r['peak'] / ref['peak']:.3f}" if ref and s.name != "reference" else ""
                both = ref and s.name != "reference" and r["cow_sampled"] != "" and ref["cow_sampled"] != ""
                rcs = f"{r['cow_sampled'] / ref['cow_sampled']:.3f}" if both and ref["cow_sampled"] else ""
                rps = f"{r['peak_sampled'] / ref['peak_sampled']:.3f}" if both else ""
                lines.append("| " + " | ".join([
                    f"{delay:,} µs{main}", f"{rate:,}", s.name, f"{r['save_s']:.2f}",
                    f"{r['ops_save']:,} ({r['rate_save']:,})",
                    f"{r['used_memory'] / 1e6:,.1f}", f"{r['cow'] / 1e6:,.1f}",
                    f"{r['cow_sampled'] / 1e6:,.1f}" if r["cow_sampled"] != "" else "—", f"{r['cow_frac']:.3f}",
                    f"{r['peak'] / 1e6:,.1f}", f"{r['cow_per_op']:,.0f}" if r["cow_per_op"] != "" else "—",
                    rc, rp, rcs, rps]) + " |")
        return "\n".join(lines)

    # -- orchestration

    def run(self):
        t_all = time.time()
        self.monitor = Interference()
        self.monitor.start()
        log(f"bench {self.size}: results in {self.out}")
        log("servers: " + ", ".join(f"{s.name}={s.origin}" for s in self.servers))
        if not self.pin:
            log("warning: fewer than 2 CPUs; server and client are not pinned")
        for w, fn in (("W1", self.w1), ("W2", self.w2), ("W3", self.w3), ("W4", self.w4), ("W5", self.w5),
                      ("W6", self.w6), ("W7", self.w7), ("W8", self.w8), ("W9", self.w9), ("W10", self.w10)):
            if not self.wanted(w):
                continue
            busy = cpu_busy()
            log(f"{w} ... (CPUs {busy:.0%} busy before it starts)")
            if busy > 0.15:
                log(f"warning: the machine is {busy:.0%} busy with other work; throughput figures will be noisy")
            t0, o0 = time.time(), self.monitor.cpu_seconds()
            fn()
            self.timings[w] = time.time() - t0
            other = (self.monitor.cpu_seconds() - o0) / self.timings[w]
            self.interference[w] = other
            log(f"{w} done in {self.timings[w]:.0f} s; other processes used {other:.2f} CPUs meanwhile")
            if other > 0.1:
                self.notes.append(f"{w}: other processes on the machine used {other:.2f} CPUs on average while it "
                                  f"ran (of {os.cpu_count()}); its throughput and latency figures are disturbed.")
        self.timings["total"] = time.time() - t_all
        self.report()
        log(f"\nwall time {self.timings['total']:.0f} s; results in {self.out}")

    # -- output

    def table(self, workload=None, keys=None):
        """One row per figure; a `target` column (ours, and each extra server) when
        some figure shown has a target (W8)."""
        extras = [s.name for s in self.servers[2:]]
        figs = self.results.figures
        chosen = [figs[k] for k in keys if k in figs] if keys else list(figs.values())
        chosen = [f for f in chosen if not workload or f.workload == workload]
        targets = any(f.target for f in chosen)
        head = ["Figure", "Unit", "ours", "reference", "ours/ref (min–max)", "ours is"] + (["target"] if targets else [])
        for e in extras:
            head += [e, f"{e}/ref"] + ([f"{e}: target"] if targets else [])
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for f in chosen:
            row = [f"{f.workload} {f.label}", UNITS[f.unit][1], f.fmt(f.median("ours")), f.fmt(f.median("reference")),
                   fmt_ratio(f.ratio("ours")), f.verdict("ours")] + ([f.target_verdict("ours")] if targets else [])
            for e in extras:
                row += [f.fmt(f.median(e)), fmt_ratio(f.ratio(e))] + ([f.target_verdict(e)] if targets else [])
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)

    def w5_table(self):
        """W5 in one row per operation and pipeline depth (every figure is in summary.csv)."""
        extras = [s.name for s in self.servers[2:]]
        figs = self.results.figures
        head = ["Operation", "P", "ours ops/s", "reference ops/s", "ours/ref (min–max)", "ours is"]
        for e in extras:
            head += [f"{e} ops/s", f"{e}/ref"]
        head += ["p50 µs ours / ref", "p99 µs ours / ref", "CPU µs/op ours / ref"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for op, label in W5_OPS:
            for pl in W5_PIPELINES:
                f = figs.get(f"W5.{op}.{pl}.ops")
                if not f:
                    continue
                row = [label, str(pl), f.fmt(f.median("ours")), f.fmt(f.median("reference")),
                       fmt_ratio(f.ratio("ours")), f.verdict("ours")]
                for e in extras:
                    row += [f.fmt(f.median(e)), fmt_ratio(f.ratio(e))]
                for k in ("p50", "p99", "cpu"):
                    g = figs.get(f"W5.{op}.{pl}.{k}")
                    rt = g.ratio("ours") if g else None
                    row.append(f"{g.fmt(g.median('ours'))} / {g.fmt(g.median('reference'))}"
                               + (f" ({rt[0]:.2f})" if rt else "") if g else "—")
                lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)

    def w7_table(self):
        """W7's operations in one row per shape, operation and pipeline depth, with the target;
        its memory figures (and the rest) in the usual table before it."""
        extras = [s.name for s in self.servers[2:]]
        figs = self.results.figures
        head = ["Set", "Operation", "P", "ours", "reference", "ours/ref (min–max)", "ours is", "target"]
        for e in extras:
            head += [e, f"{e}/ref", f"{e}: target"]
        head += ["p50 µs ours / ref", "p99 µs ours / ref", "CPU µs/op ours / ref"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        shown = set()
        for shape in W7_OPS_SHAPES:
            for op, label, _, _ in W7_OPS:
                for pl in W5_PIPELINES:
                    f = figs.get(f"W7.{shape}.{op}.{pl}.ops")
                    if not f:
                        continue
                    row = [self.w7_label(shape), label, str(pl), f.fmt(f.median("ours")), f.fmt(f.median("reference")),
                           fmt_ratio(f.ratio("ours")), f.verdict("ours"), f.target_verdict("ours")]
                    for e in extras:
                        row += [f.fmt(f.median(e)), fmt_ratio(f.ratio(e)), f.target_verdict(e)]
                    for k in ("p50", "p99", "cpu"):
                        g = figs.get(f"W7.{shape}.{op}.{pl}.{k}")
                        rt = g.ratio("ours") if g else None
                        row.append(f"{g.fmt(g.median('ours'))} / {g.fmt(g.median('reference'))}"
                                   + (f" ({rt[0]:.2f})" if rt else "") if g else "—")
                    lines.append("| " + " | ".join(row) + " |")
                    shown.update(f"W7.{shape}.{op}.{pl}.{k}" for k in ("ops", "p50", "p99", "cpu"))
        rest = [k for k, f in figs.items() if f.workload == "W7" and k not in shown]
        parts = [self.table(keys=rest)] if rest else []
        if len(lines) > 2:
            parts.append("\n".join(lines))
        return "\n\n".join(parts)

    def workload_table(self, w):
        return {"W5": self.w5_table, "W7": self.w7_table}.get(w, lambda: self.table(w))()


    def write_summary_csv(self, path):
        names = [s.name for s in self.servers]
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["figure", "workload", "label", "unit", "better", "paired"]
                       + names + [f"{s}/ref" for s in names if s != "reference"]
                       + ["ours/ref_min", "ours/ref_max", "verdict", "target", "target_met"])
            for f in self.results.figures.values():
                rt = f.ratio("ours")
                met = f.target_met("ours")
                w.writerow([f.key, f.workload, f.label, f.unit, f.better, int(f.paired)]
                           + [_num(f.median(s)) for s in names]
                           + [_num((f.ratio(s) or (None,))[0]) for s in names if s != "reference"]
                           + [_num(rt[1] if rt else None), _num(rt[2] if rt else None), f.verdict("ours"),
                              f.target_text(), "" if met is None else int(met)])
        with open(path.with_name("figures_all_runs.csv"), "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["figure", "unit", "server", "round", "value"])
            for f in self.results.figures.values():
                for s, vals in f.values.items():
                    for r, v in sorted(vals.items()):
                        w.writerow([f.key, f.unit, s, r, _num(v)])

    def report(self):
        self.write_summary_csv(self.out / "summary.csv")
        charts = self.charts()
        md = self.markdown(charts, docs=False)
        (self.out / "results.md").write_text(md)
        for w in ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10"):
            if any(f.workload == w for f in self.results.figures.values()):
                log("\n" + self.workload_table(w))
        if self.w8_sweep_table():
            log("\nW8 b at other rdb-key-save-delay values and write rates:\n" + self.w8_sweep_table())
        for n in self.notes:
            log("note: " + n)
        if self.write_docs:
            self.publish(charts)

    def charts(self):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.notes.append("matplotlib is missing: no charts (utils/install-deps.sh bench installs it)")
            return []
        made = []
        colors = {s.name: c for s, c in zip(self.servers, ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"])}
        # Servers that store the same thing draw the same line: earlier ones wider, so all stay visible.
        width = {s.name: 1.2 + 2.4 * (len(self.servers) - 1 - i) / max(1, len(self.servers) - 1)
                 for i, s in enumerate(self.servers)}
        if self.w1_runs:
            fig, ax = plt.subplots(figsize=(8, 5))
            for s, rows in self.w1_best().items():
                x = [r["inserts"] / 1e6 for r in rows]
                ax.plot(x, [r["used_memory"] / 1e9 for r in rows], label=f"{s} used_memory", color=colors[s],
                        lw=width[s], alpha=0.85)
                ax.plot(x, [r["used_memory_rss"] / 1e9 for r in rows], label=f"{s} used_memory_rss",
                        color=colors[s], lw=1, ls="--")
            ax.set_xlabel("members inserted (millions)")
            ax.set_ylabel("GB (10⁹ bytes)")
            ax.set_title(f"W1: ZADD m:{{i}} into one sorted set, pipelines of {self.cfg['w1_pipeline']:,}")
            ax.grid(alpha=0.3)
            ax.legend()
            made.append(save(fig, self.out / "w1_memory.png"))
            fig, ax = plt.subplots(figsize=(8, 4))
            for s, rows in self.w1_best().items():
                rows = [r for r in rows if r["inserts"] > 0]
                ax.plot([r["inserts"] / 1e6 for r in rows], [r["interval_rate"] / 1e3 for r in rows],
                        label=s, color=colors[s], lw=width[s], alpha=0.85, marker=".")
            ax.set_xlabel("members inserted (millions)")
            ax.set_ylabel(f"inserts/s over the last {human(self.cfg['w1_sample'])} (thousands)")
            ax.set_title("W1: insert rate per sample interval (fastest round of each server)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend()
            made.append(save(fig, self.out / "w1_rate.png"))
        if self.w3_rows:
            fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
            for ax, t in zip(axes.flat, W3_TYPES):
                for s in self.servers:
                    rows = self.w3_rows.get((s.name, t))
                    if rows:
                        ax.plot([k for k, _ in rows], [b / k for k, b in rows], label=s.name, color=colors[s.name],
                                lw=width[s.name], alpha=0.85)
                ax.set_xscale("log")
                ax.set_title(W3_LABEL[t])
                ax.set_ylim(0, 200)
                ax.grid(alpha=0.3, which="both")
                ax.set_ylabel("MEMORY USAGE / members (bytes)")
                ax.legend()
            for ax in axes[1]:
                ax.set_xlabel("members (24-byte random strings)")
            fig.suptitle("W3: bytes per member after each insert")
            made.append(save(fig, self.out / "w3_bytes_per_member.png"))
        if self.w5_runs:
            fig, axes = plt.subplots(len(W5_PIPELINES), 1, figsize=(11, 4 * len(W5_PIPELINES)))
            bw = 0.8 / len(self.servers)
            for ax, pl in zip(axes, W5_PIPELINES):
                for si, s in enumerate(self.servers):
                    meds, los, his = [], [], []
                    for op, _ in W5_OPS:
                        v = [r["ops_per_sec"] / 1e3 for r in self.w5_runs
                             if r["server"] == s.name and r["op"] == op and r["pipeline"] == pl]
                        m = statistics.median(v) if v else 0
                        meds.append(m)
                        los.append(m - min(v) if v else 0)
                        his.append(max(v) - m if v else 0)
                    xs = [i + (si - (len(self.servers) - 1) / 2) * bw for i in range(len(W5_OPS))]
                    ax.bar(xs, meds, bw, yerr=[los, his], capsize=2, label=s.name, color=colors[s.name],
                           error_kw=dict(ecolor="#444", lw=1))
                ax.set_xticks(range(len(W5_OPS)))
                ax.set_xticklabels([W5_SHORT[op] for op, _ in W5_OPS], fontsize=8)
                ax.set_ylabel("thousand ops/s")
                ax.set_title(f"W5: one sorted set of {self.cfg['w5_n']:,} members, {W5_CONNS} connections, "
                             f"pipeline {pl} (median of {self.cfg['w5_pairs']}, bars: min–max)")
                ax.grid(alpha=0.3, axis="y")
                ax.legend()
            fig.tight_layout()
            made.append(save(fig, self.out / "w5_ops.png"))
        return made

    def w1_best(self):
        """Each server's W1 samples from its fastest round: the one least disturbed."""
        return {s: min(runs, key=lambda x: x[0])[2] for s, runs in self.w1_runs.items()}

    def w1_best_csv(self):
        return [f"w1_{s}_r{min(runs, key=lambda x: x[0])[1]}.csv" for s, runs in self.w1_runs.items()]

    def markdown(self, charts, docs):
        c = self.cfg
        commit = git_commit()
        mach = machine()
        chart_dir = "bench/" if docs else ""
        L = []
        L.append("# Benchmarks" if docs else f"# Benchmark results ({self.size})")
        L.append("")
        if docs:
            L.append("Generated by `make bench-full` (`utils/bench/run full`); do not edit by hand. The workloads "
                     "are those of `../shared/workloads.md`; `utils/bench/README.md` says how each is run.")
            L.append("")
        L.append(f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M %Z').strip()}")
        L.append(f"- Git commit: {commit}")
        L.append(f"- Machine: {mach['nproc']} CPUs ({mach['cpu']}), {mach['mem']}, kernel {mach['kernel']}")
        for s in self.servers:
            rel = os.path.relpath(s.origin, ROOT) if str(s.origin).startswith(str(ROOT)) else s.origin
            L.append(f"- Server `{s.name}`: `{rel}` — {s.version()}")
        tot = self.timings.get("total", 0)
        L.append("- Wall time: " + ", ".join(f"{w} {t / 60:.1f} min" for w, t in self.timings.items()
                                             if w != "total") + f"; total {tot / 60:.1f} min")
        if self.interference:
            L.append("- Other processes on the machine during the run (average CPUs busy): "
                     + ", ".join(f"{w} {v:.2f}" for w, v in self.interference.items()))
        L.append("")
        head = [k for k in HEADLINES if k in self.results.figures]
        if head:
            L.append("## Headlines")
            L.append("")
            L.append(self.table(keys=head))
            L.append("")
        L.append("## Method")
        L.append("")
        L.append(
            "Each measurement of W1-W4 starts a fresh server (loopback, `--save '' --appendonly no`, default "
            "configuration otherwise) and kills it afterwards; only one server runs at a time. "
            "W5 starts all servers at once, loads the same set into each and measures every figure in "
            "short turns that run all of them at the same time, each with a client of its own: sharing one "
            "CPU, their throughputs compare as their CPU time per operation does. Each W5 round starts the "
            "servers afresh: where a server lies in memory moved a ratio by up to 5% from one start to the "
            "next. W7's operations are measured the same way. "
            + ("Servers are pinned to CPU 0 and the clients to CPU 1 (`taskset`). " if self.pin else "")
            + f"W1 and W4 throughput figures alternate the servers (ours, reference, ours, reference, …) for "
            f"{c['w1_pairs']} (W1) and {c['w4_pairs']} (W4) rounds, W5 {c['w5_pairs']} rounds; the table shows each "
            "server's median and the median of the per-round ratios ours/reference with their min–max. "
            "Memory figures are deterministic (fixed seeds) and come from the same rounds. `ours is` says "
            "better or worse when the ratio is off 1 by at least 1% and, for paired figures, the min–max "
            "range does not include 1; otherwise `same`. Server CPU per operation is the change of "
            "`used_cpu_user + used_cpu_sys` over the measured window divided by the operations in it. "
            "W8 starts a fresh server per scenario, like W1–W4; its `target` column judges ours against "
            "the targets set for it.")
        L.append("")
        L.append("Load generator: `utils/bench/zload.c` on the bundled libvalkey (streaming pipelines, replies "
                 "parsed as they arrive); W2 uses `valkey-benchmark` from the reference build.")
        L.append("")
        L.append("## Sizes")
        L.append("")
        L.extend(self.size_notes())
        L.append("")
        for w, title in (("W1", "W1 — sorted-set inserts into one key"), ("W2", "W2 — small string keys"),
                         ("W3", "W3 — SET vs HASH vs ZSET of 24-byte strings"),
                         ("W4", "W4 — many sorted sets of 10–200 members"),
                         ("W5", "W5 — operations on one sorted set of 1M members"),
                         ("W6", "W6 — short texts, with and without a TTL"),
                         ("W7", "W7 — big sets"),
                         ("W8", "W8 — BGSAVE under load: memory copied by copy-on-write"),
                         ("W9", "W9 — JSON documents with a TTL"),
                         ("W10", "W10 — members that expire")):
            if not any(f.workload == w for f in self.results.figures.values()):
                continue
            L.append(f"## {title}")
            L.append("")
            L.append(W_TEXT[w])
            L.append("")
            L.append(self.workload_table(w))
            L.append("")
            if w == "W8" and self.w8_sweep_table():
                L.append(W8_SWEEP_TEXT)
                L.append("")
                L.append(self.w8_sweep_table())
                L.append("")
            for ch in charts:
                if ch.name.startswith(w.lower() + "_"):
                    L.append(f"![{ch.stem}]({chart_dir}{ch.name})")
                    L.append("")
        if self.notes:
            L.append("## Notes")
            L.append("")
            L.extend(f"- {n}" for n in self.notes)
            L.append("")
        L.append("## Files")
        L.append("")
        L.append(f"CSV files{' in `docs/bench/`' if docs else ''}: `summary.csv` (one row per figure), "
                 "`figures_all_runs.csv` (every round), `w1_<server>_r<round>.csv` (W1 samples of the "
                 "server's fastest round, the one the charts show), "
                 "`w3_memory_usage.csv` (MEMORY USAGE after each insert), `w4_runs.csv`, `w5_runs.csv`, "
                 "`w7_runs.csv` (one row per set loaded for memory and per operation turn), "
                 "`w8_runs.csv` (one row per BGSAVE).")
        L.append("")
        return "\n".join(L)

    def size_notes(self):
        c, L = self.cfg, []
        L.append(f"- W1: {c['w1_n']:,} inserts, sample every {c['w1_sample']:,}, pipelines of "
                 f"{c['w1_pipeline']:,}" + scaled(c["w1_n"], PUBLISHED["w1_n"]))
        L.append(f"- W2: `valkey-benchmark -t set -n {c['w2_n']} -r {c['w2_n']} -d 16 --seed 1`, "
                 + ("standalone and single-node cluster" if c["w2_cluster"] else "standalone only")
                 + scaled(c["w2_n"], PUBLISHED["w2_n"]))
        L.append(f"- W3: {c['w3_n']:,} inserts per type")
        L.append(f"- W6: {c['w6_n']:,} keys, without and with a TTL" + scaled(c["w6_n"], PUBLISHED["w6_n"]))
        L.append(f"- W9: {c['w9_n']:,} documents with a TTL" + scaled(c["w9_n"], PUBLISHED["w9_n"]))
        L.append(f"- W10: W7 c of {c['w10_n']:,} members and W1 of {c['w10_zn']:,}"
                 + scaled(c["w10_zn"], PUBLISHED["w10_zn"]) + f"; speed over {c['w10_n']:,} members, "
                 f"{c['w10_requests']:,} requests a turn at P16 (a quarter at P1), {c['w10_rounds']} round(s); "
                 f"rate limiter over {c['w10_rl_keys']:,} keys, {c['w10_rl_requests']:,} requests, a 60 s window; "
                 f"active expiry of {c['w10_exp_keys']:,} keys × {c['w10_exp_members']:,} members over "
                 f"{c['w10_exp_spread']} s" + scaled(c["w10_exp_keys"], PUBLISHED["w10_exp_keys"]))
        k = c["w4_keys"]
        L.append(f"- W4: {k['listpack']:,} keys (listpack profile) and {k['big']:,} keys (big profile), one ZADD "
                 f"each; ZRANGEBYSCORE for {c['w4_query_s']:g} s from {W4_CONNS} connections; one key of "
                 f"{c['w4_one_n']:,} 20-byte members"
                 + scaled(k["listpack"], PUBLISHED["w4_keys"]["listpack"]))
        L.append(f"- W5: {c['w5_n']:,} members; each operation for {c['w5_seconds']:g} s after "
                 f"{c['w5_warmup']:g} s warm-up, {W5_CONNS} connections")
        L.append(f"- W7: sets of {c['w7_n']:,} members" + scaled(c["w7_n"], PUBLISHED["w7_n"])
                 + f"; each operation for {c['w7_seconds']:g} s after {c['w7_warmup']:g} s warm-up, "
                 f"{W7_CONNS} connections (whole-set operations {c['w7_bulk_seconds']:g} s, {W7_BULK_CONNS} "
                 f"connection{'s' if W7_BULK_CONNS > 1 else ''}); {c['w7_pairs']} rounds")
        ka, na = c["w8_a"]
        kb, nb = c["w8_b"]
        L.append(f"- W8: a {ka:,} keys × {na} members, rdb-key-save-delay {c['w8_a_delay']} µs; b {kb:,} keys × "
                 f"{nb:,} members, rdb-key-save-delay {c['w8_b_delay']:,} µs, ZINCRBY at {c['w8_b_rate']:,}/s "
                 f"(side table: delays {', '.join(f'{d:,}' for d in c['w8_sweep_delays'])} µs, rates "
                 f"{', '.join(f'{r:,}' for r in c['w8_sweep_rates'])}/s); c one key of {c['w8_c_n']:,} members"
                 + ("" if c["w8_c_n"] >= 5_000_000 else " (full: 5,000,000)")
                 + f"; {c['w8_rounds']} round(s)")
        L.extend(f"- {n}" for n in getattr(self, "size_extra", []))
        return L

    def publish(self, charts):
        dst = DOCS / "bench"
        dst.mkdir(parents=True, exist_ok=True)
        for old in dst.iterdir():
            if old.suffix in (".png", ".csv"):
                old.unlink()
        for ch in charts:
            shutil.copy2(ch, dst / ch.name)
        for name in ["summary.csv", "figures_all_runs.csv", "w3_memory_usage.csv", "w4_runs.csv",
                     "w5_runs.csv", "w7_runs.csv", "w8_runs.csv"] + self.w1_best_csv():
            if (self.out / name).exists():
                shutil.copy2(self.out / name, dst / name)
        (DOCS / "benchmarks.md").write_text(self.markdown(charts, docs=True))
        log(f"wrote {DOCS / 'benchmarks.md'} and {dst}/")


# The figures the Headlines table at the top of the report repeats.
HEADLINES = [
    "W1.bpm", "W1.mem", "W1.rate", "W1.min_iv", "W2.standalone.bpk", "W2.cluster.bpk",
    "W3.set.at1000", "W3.hash.at1000", "W3.zset.at1000", "W4.listpack.bpm", "W4.big.bpm", "W4.one.seq",
    "W4.one.rand", "W4.listpack.qps", "W4.big.qps", "W5.zscore.1.ops", "W5.zscore.16.ops", "W5.zrank.16.ops",
    "W5.zrange10.16.ops", "W5.zadd.16.ops", "W6.ex.bpo", "W6.ttl_cost", "W9.bpo", "W10.set.cost",
    "W10.zset.bpm", "W10.rl.ops", "W10.rl.mem", "W7.mem.int.bpm", "W7.mem.seq.bpm", "W7.mem.str.bpm",
    "W7.int.sismember.16.ops", "W7.str.sismember.16.ops", "W7.int.sintercard.1.ops", "W8.a.cow", "W8.b.peak", "W8.b.peak_s", "W8.c.cow_per_op",
    "W8.c.peak", "W8.c.peak_s",
]

W_TEXT = {
    "W10": "Members of sets and sorted sets with times of their own (`utils/bench/member-ttl-rounds`, which "
           "the suite runs with its sizes). Memory: one key loaded in commands of 1,000 members, W7 c with "
           "`SADD` and, on ours, `SADDEX … EX 86400`; W1's members with `ZADD` and `ZADDEX … PX 86400000`; "
           "`MEMORY USAGE key SAMPLES 0` / members. Speed, ours only: each command with times against the "
           "same without, one key of N members each, at P1 and P16 (valkey-benchmark, 50 connections; "
           "writes of random members `x:{r}`, r < 1M, so most of a turn's writes give a member a new "
           "time; reads of a key where one member in ten has a time, none due). Rate limiter: the "
           "reference runs the sliding window users run today (`ZADD key now id`, `ZREMRANGEBYSCORE key "
           "-inf now-60000`, `ZCARD key`, pipelined per request), ours `ZADDEX key PX 60000 MEMBERS 1 now "
           "id` + `ZCARD key`; requests/s and used_memory at the end. Active expiry: keys whose members' "
           "times fall within the spread, never read; ours with `SADDEX` and `ZADDEX`, the reference with "
           "`HSETEX` (its hash fields, the same shape); seconds from the last one due until the keys are "
           "gone (an upper bound: the load's end plus the spread plus 1 s), and server CPU from the "
           "load's end. Targets (issue #47): a time costs ≤ 8 B a member; W7 c with times ≤ 37 and W1 "
           "with times ≤ 31 B/member; writes with times ≥ 0.9× and reads ≥ 0.97× the same without; the "
           "rate limiter ≥ 1.5× the reference's requests/s at ≤ 0.5× its memory; all gone ≤ 10 s after "
           "the last is due.",
    "W9": "`SET doc:<n> <json> EX 86400` for 0.5–2 KB documents of three schemas in turn (profiles, product "
          "records, events; `utils/bench/w9docs.py`), their texts fortunes quotes and names and iso-codes' "
          "countries, regions, currencies and languages, their ids, numbers and times random; sent with "
          "`valkey-cli --pipe`. Ours holds them compressed only with `string-compression yes`, which is off "
          "by default: the first row is without it, the second with it, the background pass run to its end "
          "before used_memory is read, against the reference's figure of the first. Target (issue #46): "
          "≤ 0.3× the reference's bytes per document.",
    "W1": "One sorted set; `ZADD key i m:{i}` for i = 0 … N−1 in pipelines of 250,000 commands; "
          "`INFO memory cpu` rides in the stream after every sample interval. Published (Graviton4): "
          "Valkey 8.1 3.77 GB at 50M (≈ 75 bytes per member), 8.0 4.83 GB.",
    "W2": "`valkey-benchmark -t set -n N -r N -d 16` (≈ 63% of N distinct keys, 16-byte values). "
          "Published (cluster mode, 6,318,941 keys): Valkey 8.0 550.56 MB (≈ 91 bytes per key).",
    "W6": "`SET KEY:<n> <text>` and, on a fresh server, `SET KEY:<n> <text> EX 86400`, sent with "
          "`valkey-cli --pipe`; n spread over 0 … 10^9, the texts the quotes of Debian's fortunes packages "
          "(20–140 bytes, ≈ 74 on average). Published (Memcarrot's membench, Sentiment140 tweets with a TTL): "
          "Redis 7.2.5 ≈ 202 B/object, Memcached ≈ 164, Memcarrot ≈ 51. Targets (issue #45): a TTL costs "
          "≤ 4 B/key, and `EX` ≤ 0.87× the reference's bytes per object. The rows of ours with "
          "`string-compression yes` (off by default) load the same texts into a server with it on and run "
          "its background pass to its end; target (issue #46): `EX` ≤ 0.6× the reference's.",
    "W3": "Random 24-character lowercase strings added one at a time to a SET (`SADD`), as fields of a "
          "HASH (`HSET key field 1`) and to sorted sets (`ZADD key 1 member`, and with random scores); "
          "`MEMORY USAGE key SAMPLES 0` after each insert. Published (old Redis, 1,000 entries): SET 32,920 "
          "bytes, HASH 14,403 bytes. The `target` column judges our SET against issue #19's targets: never "
          "above the HASH at any size, at N members ≤ 0.6× the reference's SET, no single insert adding more "
          "than 16 KiB.",
    "W4": "Keys `zk:{i}`, each made by one `ZADD` of 10–128 (listpack profile) or 129–200 (big profile) "
          "random 10-byte members with random integer scores; bytes per member = used_memory delta / "
          "members (includes the per-key cost). Then `ZRANGEBYSCORE zk:{random} lo lo+range/8` (about 1/8 of "
          "the members) from 50 connections, pipeline 1. Last rows: one key of 20-byte random members "
          "inserted with increasing scores (sequential) and with random scores.",
    "W5": "One sorted set `z` of members `m:{i}` with random integer scores, loaded into each server; the servers run at the same time and are measured together in short turns, each with its own client, and are started afresh for each round. "
          "Each operation runs on 50 connections at pipeline 1 and 16 (closed loop); latency is the round "
          "trip of one pipeline. Random members for ZSCORE/ZRANK/ZREVRANK/ZADD/ZINCRBY; ZRANGE by rank of "
          "10 and 100 members at a random start; `ZRANGEBYSCORE z lo +inf LIMIT 0 10`; churn is ZREM of a "
          "random member then ZADD of it with a new score; ZPOPMIN is followed by a ZADD of a new "
          "highest member so the set keeps its size. For the two pair operations one op = both commands.",
    "W7": "Big sets (issue #19). Memory: one set per shape in a fresh server, built by pipelined `SADD`s of 1,000 "
          "members: a, distinct random integers below 10^8; b, the integers 0 … N−1; c, distinct random "
          "24-character lowercase strings; bytes per member from used_memory before and after the load and from "
          "`MEMORY USAGE key SAMPLES 0`, read once upstream's hashtable has settled (a load of 1M members, "
          "1,000 a command, leaves it moving buckets to its new table with the old one still allocated; "
          "lookups on the key, not measured, finish that first): upstream 9.1.2 then takes 33.4, 25.5 and 49.5 "
          "bytes per member at 1M (42.8, 34.9 and 58.9 right after the load, the figures issue #19 quotes). "
          "Operations: as W5, all servers at once, started afresh and loaded with sets a and c (and a second set "
          "of random integers, half of them in a) each round, upstream's tables settled as above, measured "
          "together in short turns, each with its own client, 50 connections at pipeline 1 and 16. SISMEMBER "
          "and SMISMEMBER (5 members) look up members of which half are in the set; SREM takes a random "
          "member out and SADDs it back, SPOP's popped member is SADDed back with the connection's next "
          "pipeline (one op = the pair); SADD adds a "
          "member never added before (run last: the set grows). SSCAN runs many scans at once, started at "
          "cursors spread over one whole scan, and counts members returned per second; one whole scan on one "
          "connection alone is timed as well. SMEMBERS, SINTER and SINTERCARD (of a and the second set) run on "
          "one connection: a call takes tens to hundreds of milliseconds, a pipeline of 16 seconds, and a "
          "pipeline counts for the part of it inside the measured window (the clients keep every server "
          "loaded until all have their counted pipelines back). Server CPU time from /proc; CPU per op over "
          "whole pipelines. The `target` column judges ours against the issue's targets. SADD's short window "
          "catches the set between 1M and about 1.6M members, where upstream's hashtable (which doubles its "
          "table past 1,835,008 members and then moves every member, one bucket a write) does not grow; so "
          "the doubling rows time SADD of 1M new members taking each set from 1M to 2M members, all servers "
          "at once as above (fresh servers, sets a and c loaded, 50 connections), and give the server's CPU "
          "time per insert over all of it: one growth step of either structure, the cost a set that keeps "
          "growing pays. A server that finishes first runs no more, so its ops/s would not compare.",
    "W8": "The memory a fork child's RDB save copies (copy-on-write) while clients keep using the server: "
          "`rdb_last_cow_size` from INFO persistence, read once the parent has reaped the child. Each "
          "scenario loads a fresh server (`zset-max-listpack-entries 128`, every set past its listpack), runs "
          "its load on one connection for 0.5 s, sends BGSAVE and keeps the load going until the child has "
          "written the RDB file; `rdb-key-save-delay` (µs of sleep per key in the child) stretches the save. "
          "a: keys `zk:{i}` of 200 members `m:{j}` with random scores, random `ZSCORE` at pipeline 64, "
          "closed loop. b: keys of 20,000 members, random `ZINCRBY zk:{i} 1 m:{j}` paced at 20,000/s. c: one "
          "key `z` of members `m:{i}` with random scores, random `ZINCRBY z 1 m:{i}` at pipeline 64, closed "
          "loop (no delay: one key). d: c's set, with `ZADD z <random score> m:{i}` instead, pipeline 64, "
          "closed loop: every write moves its member in the order, as a leaderboard's score changes do. "
          "used_memory is read just before the BGSAVE; used + copied is the largest "
          "used_memory seen during the save plus the copied bytes. rdb_last_cow_size is the child's Private_Dirty "
          "as the child reads it every 1,024 keys (at most once a second) and at its end, after it has handed "
          "back (dismissObject) the pages of the keys it saved: pages copied and then handed back are not in "
          "it. So the load generator also reads the child's Private_Dirty from `/proc/<child>/smaps_rollup` "
          "every 20 ms: the sampled figures use its peak (and the server's RSS plus the child's private "
          "memory, the machine's real peak). Writes are those sent between the BGSAVE's "
          "reply and the RDB file's appearance. The servers' saves do not last equally long, so they take "
          "different numbers of writes; and the later writes of a save land more often on pages already "
          "copied, so the bytes copied per write fall as the writes grow: the c row with a fixed number of "
          "writes compares that figure at equal counts. The fork child inherits the server's pinning to "
          "CPU 0.",
}

W8_SWEEP_TEXT = ("Scenario b on the same loaded server at other `rdb-key-save-delay` values (at the main write "
                 "rate) and other write rates (at the main delay), one BGSAVE per row, each after the previous "
                 "one's writes:")


def cpu_busy(interval=0.5):
    """Fraction of all CPUs busy over interval seconds (nothing of ours runs then)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v[:8])   # idle + iowait, total without guest time
    try:
        i0, t0 = sample()
        time.sleep(interval)
        i1, t1 = sample()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1 - (i1 - i0) / max(1, t1 - t0)


def human(n):
    """1000000 -> 1M, 800000 -> 800k, 20000 -> 20k."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1e6:g}M"
    if n >= 1000 and n % 100 == 0:
        return f"{n / 1e3:g}k"
    return f"{n:,}"


class Interference(threading.Thread):
    """Measures the CPU time that processes other than this run (bench.py and its children:
    servers, clients) take while the run goes on: on this shared machine it is what makes a
    throughput figure untrustworthy. Sampled every second from /proc."""

    def __init__(self):
        super().__init__(daemon=True)
        self.me = os.getpid()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.lock = threading.Lock()
        self.other = 0.0          # CPU seconds used by others so far
        self.stop_evt = threading.Event()

    @staticmethod
    def _busy():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v[:8]) - v[3] - v[4]

    def _ours(self):
        procs = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:
                continue
            rest = st[st.rindex(")") + 2:].split()
            procs[int(d)] = (int(rest[1]), int(rest[11]) + int(rest[12]))   # ppid, utime + stime
        ours, todo = {}, [self.me]
        children = {}
        for pid, (ppid, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        while todo:
            pid = todo.pop()
            if pid in procs:
                ours[pid] = procs[pid][1]
                todo.extend(children.get(pid, []))
        return ours

    def _reaped(self):
        """CPU ticks of the children this run has waited for (and theirs)."""
        t = os.times()
        return (t.children_user + t.children_system) * self.tick

    def run(self):
        try:
            busy0, ours0, reaped0 = self._busy(), self._ours(), self._reaped()
            while not self.stop_evt.wait(1.0):
                busy1, ours1, reaped1 = self._busy(), self._ours(), self._reaped()
                mine = sum(t - ours0.get(pid, 0) for pid, t in ours1.items())
                # A client that ended since the last sample (W5 runs short
                # ones side by side): its whole time is now among the reaped,
                # less what the last sample already counted.
                gone = sum(t for pid, t in ours0.items() if pid not in ours1)
                mine += max(0.0, reaped1 - reaped0 - gone)
                with self.lock:
                    self.other += max(0, busy1 - busy0 - mine) / self.tick
                busy0, ours0, reaped0 = busy1, ours1, reaped1
        except (OSError, ValueError, IndexError):
            return

    def cpu_seconds(self):
        with self.lock:
            return self.other


def scaled(size, published):
    if size >= published:
        return " (published size)"
    return f" (scaled down from the published {published:,})"


def fmt_ratio(rt):
    if rt is None:
        return "—"
    r, lo, hi, n = rt
    if n > 1:
        return f"{r:.3f} ({lo:.3f}–{hi:.3f})"
    return f"{r:.3f}"


def _num(v):
    if v is None:
        return ""
    return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"


def read_rows(path):
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def write_rows(path, rows):
    """Rows of dicts; a column missing from a row stays empty (W7's rows are of two kinds)."""
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
        w.writeheader()
        w.writerows(rows)


def save(fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def git_commit():
    try:
        h = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
        # docs/ is what this run writes: it does not make the measured code dirty.
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":!docs"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    if not h:
        return "none (no commit yet)"
    return h + (" with uncommitted changes" if dirty else "")


def machine():
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for ln in open("/proc/cpuinfo"):
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError):
        for ln in open("/proc/meminfo"):
            if ln.startswith("MemTotal"):
                mem = f"{int(ln.split()[1]) / 1024 / 1024:.0f} GiB RAM"
    return dict(nproc=os.cpu_count(), cpu=cpu, mem=mem, kernel=platform.release())


# Since 9.0 the bundled client library (libvalkey) uses the server's own sds
# and dict, as valkey-cli and valkey-benchmark do: zload links those objects
# of the build, and the jemalloc they allocate through.
ZLOAD_SERVER_OBJS = ["sds.o", "dict.o", "zmalloc.o", "siphash.o", "serverassert.o", "mt19937-64.o",
                     "monotonic.o", "util.o", "strl.o"]


def build_zload():
    lib = LIBVALKEY / "lib" / "libvalkey.a"
    src = BUILD / "valkey" / "src"
    deps = [lib, BUILD / "valkey" / "deps" / "jemalloc" / "lib" / "libjemalloc.a"]
    deps += [src / o for o in ZLOAD_SERVER_OBJS]
    for d in deps:
        if not d.exists():
            die(f"{d} is missing: run make first")
    ZLOAD.parent.mkdir(parents=True, exist_ok=True)
    if ZLOAD.exists() and ZLOAD.stat().st_mtime > max(p.stat().st_mtime for p in [ZLOAD_SRC] + deps):
        return
    cmd = ["cc", "-O2", "-g", "-Wall", "-Wextra", "-std=gnu11", f"-I{LIBVALKEY / 'include'}", "-o", str(ZLOAD),
           str(ZLOAD_SRC), str(lib)] + [str(src / o) for o in ZLOAD_SERVER_OBJS] + [str(deps[1]), "-lm", "-ldl", "-pthread"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        die("cannot compile zload:\n" + p.stderr)


def main():
    ap = argparse.ArgumentParser(prog="utils/bench/run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size", choices=sorted(SIZES), help="quick (≤ 5 minutes), full (published sizes) or smoke (a self-check)")
    ap.add_argument("--server", action="append", default=[], metavar="NAME=PATH",
                    help="another valkey-server binary to measure; gets its own column (repeatable)")
    ap.add_argument("--only", help="run only these workloads, e.g. W1,W5 (does not write docs/)")
    ap.add_argument("--pairs", type=int, help="rounds of the alternating throughput runs (default 3)")
    ap.add_argument("--out", help="results directory (default build/bench/<timestamp>-<size>)")
    ap.add_argument("--no-docs", action="store_true", help="full: do not write docs/benchmarks.md")
    ap.add_argument("--w7-ops", metavar="OPS",
                    help="W7: run only these operations' turns, e.g. sadd,srem (no memory, stall or doubling rows)")
    ap.add_argument("--ours", metavar="PATH",
                    help="the server measured as `ours` (default build/valkey/src/valkey-server)")
    args = ap.parse_args()
    if args.pairs is not None and args.pairs < 1:
        die("--pairs must be at least 1")

    def on_signal(sig, _frame):
        stop_all_servers()
        sys.exit(128 + sig)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        build_zload()
        b = Bench(args)
        if b.pin:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {int(CLIENT_CPU)})
        b.run()
    finally:
        stop_all_servers()


if __name__ == "__main__":
    main()
