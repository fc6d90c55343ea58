#!/usr/bin/env python3
"""The power-cut test of the SQLite backend: the parent (tests/powercut/README.md).

For each cut: start the writer (writer.c) under the shim (shim.c), which kills it at a chosen
event; rebuild from the shim's records what a disk could hold after a power cut at that point;
open that store through the library and check it; check SQLite's integrity; write once more.

  powercut.py --lib LIB --writer BIN --shim SO --mode full|normal [--cuts N] [--seed S] ...

Exit status 0 when every cut passed (or, with --expect-failures, when at least one failed).
"""

import argparse
import ctypes
import json
import os
import random
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import time

# ---------------------------------------------------------------- the deterministic states
# Keep in step with writer.c.

POOL_LEN, PAYLOAD_LEN, BIG_LEN, WINDOW = 262144, 200, 120 * 1024, 64


def make_pool():
    alpha = "abcdefghijklmnopqrstuvwxyz0123456789"
    x = 0x12345678
    out = []
    for _ in range(POOL_LEN):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        out.append(alpha[(x >> 16) % 36])
    return "".join(out)


POOL = make_pool()


def payload(k):
    off = (k * 7919) % (2**32) % (POOL_LEN - PAYLOAD_LEN)
    return POOL[off:off + PAYLOAD_LEN]


def big(s):
    off = (s * 104729) % (2**32) % (POOL_LEN - BIG_LEN)
    return POOL[off:off + BIG_LEN]


def big_at(v):
    return v >= 1 and v % 120 >= 100


def state_of(v):
    """The state at version v (0: the initial state {})."""
    if v == 0:
        return {}
    s = {"v": v}
    for k in range(max(1, v - WINDOW + 1), v + 1):
        s["m%d" % k] = payload(k)
    if big_at(v):
        s["big"] = big(v // 10)
    return s


def patch_of(v):
    """The merge patch from state_of(v - 1) to state_of(v)."""
    p = {"v": v, "m%d" % v: payload(v)}
    if v > WINDOW:
        p["m%d" % (v - WINDOW)] = None
    if big_at(v) and v % 10 == 0:
        p["big"] = big(v // 10)
    elif not big_at(v) and big_at(v - 1):
        p["big"] = None
    return p


def differences(got, want):
    """A short description of how two states differ."""
    if not isinstance(got, dict):
        return "not an object"
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(k for k in set(got) & set(want) if got[k] != want[k])
    parts = []
    for what, keys in (("missing", missing), ("unexpected", extra), ("different", changed)):
        if keys:
            parts.append("%s %s%s" % (what, ", ".join(keys[:4]), ", ..." if len(keys) > 4 else ""))
    return "; ".join(parts)


# ---------------------------------------------------------------- the library, through its C ABI


class AgentBuffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t), ("owner", ctypes.c_void_p)]


class Library:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.agent_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
        lib.agent_close.argtypes = [ctypes.c_uint64]
        lib.agent_get_state_versioned.argtypes = [
            ctypes.c_uint64, ctypes.POINTER(AgentBuffer), ctypes.POINTER(ctypes.c_uint64)]
        lib.agent_set_state_if.argtypes = [
            ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t,
            ctypes.POINTER(AgentBuffer), ctypes.POINTER(ctypes.c_uint64)]
        lib.agent_buffer_free.argtypes = [ctypes.POINTER(AgentBuffer)]
        lib.agent_get_state_at.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(AgentBuffer)]
        lib.agent_changes_since.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(AgentBuffer)]
        lib.agent_last_error.restype = ctypes.c_char_p
        lib.agent_status_name.restype = ctypes.c_char_p
        lib.agent_status_name.argtypes = [ctypes.c_int32]
        lib.agent_version.restype = ctypes.c_char_p
        for f in ("agent_open", "agent_close", "agent_get_state_versioned", "agent_set_state_if",
                  "agent_get_state_at", "agent_changes_since"):
            getattr(lib, f).restype = ctypes.c_int32
        self.lib = lib
        self.version = lib.agent_version().decode()

    def error(self, what, status):
        return "%s: %s: %s" % (what, self.lib.agent_status_name(status).decode(),
                               self.lib.agent_last_error().decode(errors="replace"))

    def open(self, path, mode, keep=0):
        h = ctypes.c_uint64(0)
        opts = {"synchronous": mode}
        if keep:
            opts["change_log"] = {"keep_last": keep}
        opts = json.dumps(opts).encode()
        st = self.lib.agent_open(path.encode(), opts, ctypes.byref(h))
        if st != 0:
            raise Failure(self.error("agent_open", st))
        return h.value

    def close(self, h):
        st = self.lib.agent_close(h)
        if st != 0:
            raise Failure(self.error("agent_close", st))

    def read(self, h):
        buf, ver = AgentBuffer(), ctypes.c_uint64(0)
        st = self.lib.agent_get_state_versioned(h, ctypes.byref(buf), ctypes.byref(ver))
        if st != 0:
            raise Failure(self.error("agent_get_state_versioned", st))
        text = ctypes.string_at(buf.data, buf.len)
        self.lib.agent_buffer_free(ctypes.byref(buf))
        return json.loads(text), ver.value

    def _json_call(self, what, fn, h, arg):
        buf = AgentBuffer()
        st = fn(h, arg, ctypes.byref(buf))
        if st != 0:
            raise Failure(self.error(what, st))
        text = ctypes.string_at(buf.data, buf.len)
        self.lib.agent_buffer_free(ctypes.byref(buf))
        return json.loads(text)

    def state_at(self, h, version):
        return self._json_call("agent_get_state_at(%d)" % version, self.lib.agent_get_state_at, h, version)

    def changes_since(self, h, after):
        return self._json_call("agent_changes_since(%d)" % after, self.lib.agent_changes_since, h, after)

    def set_if(self, h, expected, patch):
        text = json.dumps(patch, separators=(",", ":")).encode()
        ver = ctypes.c_uint64(0)
        st = self.lib.agent_set_state_if(h, expected, text, len(text), None, ctypes.byref(ver))
        if st != 0:
            raise Failure(self.error("agent_set_state_if", st))
        return ver.value


class Failure(Exception):
    pass


# ---------------------------------------------------------------- the shim's records
# Keep in step with shim.c.

R_BASE, R_CREATE, R_WRITE, R_TRUNC, R_SYNC, R_DIRSYNC, R_UNLINK, R_RENAME, R_SYNCALL, R_EXTEND, \
    R_UNMODELLED, R_CUT = range(1, 13)
HDR = struct.Struct("<IIQQ")
SECTOR = 512


def read_records(path):
    data = open(path, "rb").read()
    pos, out = 0, []
    while pos + HDR.size <= len(data):
        typ, fid, off, ln = HDR.unpack_from(data, pos)
        pos += HDR.size
        if pos + ln > len(data):
            raise Failure("the shim's log ends inside a record")
        out.append((typ, fid, off, data[pos:pos + ln]))
        pos += ln
    if pos != len(data):
        raise Failure("the shim's log ends inside a record header")
    return out


def apply_op(buf, op):
    kind = op[0]
    if kind == "w":
        _, off, data = op
        end = off + len(data)
        if len(buf) < off:
            buf.extend(bytes(off - len(buf)))
        buf[off:end] = data
    elif kind == "t":
        size = op[1]
        if size < len(buf):
            del buf[size:]
        else:
            buf.extend(bytes(size - len(buf)))
    elif kind == "x":
        if op[1] > len(buf):
            buf.extend(bytes(op[1] - len(buf)))


class Inode:
    """A file's data: what is durable (as of its last sync) and what was issued since."""

    def __init__(self, content=b""):
        self.durable = bytearray(content)
        self.pending = []

    def sync(self):
        for op in self.pending:
            apply_op(self.durable, op)
        self.pending = []

    def current(self):
        buf = bytearray(self.durable)
        for op in self.pending:
            apply_op(buf, op)
        return buf


def apply_ns(ns, op):
    if op[0] == "create":
        ns[op[1]] = op[2]
    elif op[0] == "unlink":
        ns.pop(op[1], None)
    elif op[0] == "rename":
        if op[1] in ns:
            ns[op[2]] = ns.pop(op[1])


class Model:
    """The directory as a disk holds it: durable names and data, and what is not yet durable.

    A file's sync makes its data (every write and size change issued before it) durable; the
    directory's sync makes its entries (creations, removals, renames issued before it) durable.
    sync()/syncfs() make everything durable. Nothing else is: what was issued since the last
    sync is what a power cut may keep whole, in part, torn, or not at all (see `cut`).
    """

    def __init__(self, base):
        self.inodes = {}
        self.base = {name: Inode(data) for name, data in base.items()}
        self.durable_ns = dict(self.base)
        self.current_ns = dict(self.base)
        self.pending_ns = []
        self.unmodelled = []
        self.cut_at = None
        self.stats = {"writes": 0, "syncs": 0, "dirsyncs": 0}

    def replay(self, records):
        for typ, fid, off, data in records:
            if typ == R_BASE:
                name = data.decode()
                if name not in self.base:
                    raise Failure("the shim saw %s as an existing file, absent at the start" % name)
                self.inodes[fid] = self.base[name]
            elif typ == R_CREATE:
                ino = Inode()
                self.inodes[fid] = ino
                op = ("create", data.decode(), ino)
                self.pending_ns.append(op)
                apply_ns(self.current_ns, op)
            elif typ == R_WRITE:
                self.inodes[fid].pending.append(("w", off, data))
                self.stats["writes"] += 1
            elif typ == R_TRUNC:
                self.inodes[fid].pending.append(("t", off))
            elif typ == R_EXTEND:
                self.inodes[fid].pending.append(("x", off))
            elif typ == R_SYNC:
                self.inodes[fid].sync()
                self.stats["syncs"] += 1
            elif typ == R_DIRSYNC:
                for op in self.pending_ns:
                    apply_ns(self.durable_ns, op)
                self.pending_ns = []
                self.stats["dirsyncs"] += 1
            elif typ == R_SYNCALL:
                for ino in set(self.inodes.values()) | set(self.current_ns.values()):
                    ino.sync()
                for op in self.pending_ns:
                    apply_ns(self.durable_ns, op)
                self.pending_ns = []
            elif typ == R_UNLINK:
                op = ("unlink", data.decode())
                self.pending_ns.append(op)
                apply_ns(self.current_ns, op)
            elif typ == R_RENAME:
                a, b = data.split(b"\0", 1)
                op = ("rename", a.decode(), b.decode())
                self.pending_ns.append(op)
                apply_ns(self.current_ns, op)
            elif typ == R_UNMODELLED:
                self.unmodelled.append(data.decode(errors="replace"))
            elif typ == R_CUT:
                self.cut_at = off
            else:
                raise Failure("unknown record type %d in the shim's log" % typ)

    def cut(self, rng, how):
        """What the disk holds after the power cut: {name: bytes}.

        how: "durable" keeps nothing unsynced; "issued" keeps everything issued (as a process
        crash does); "prefix" keeps each file's unsynced operations up to a random point, the
        last write kept possibly torn at a 512-byte boundary; "sectors" keeps each unsynced
        512-byte sector piece of each write (and each size change) independently, as a disk
        that reorders writes, and may leave a file grown to its issued size with garbage where
        the data did not land (SQLite assumes "the file size is updated before the content").
        Directory entries: the durable ones, then a random prefix of those issued since the
        last directory sync. Bytes outside a write's range never change (SQLite's powersafe
        overwrite).
        """
        ns = dict(self.durable_ns)
        keep = rng.randint(0, len(self.pending_ns)) if how not in ("durable", "issued") else (
            0 if how == "durable" else len(self.pending_ns))
        for op in self.pending_ns[:keep]:
            apply_ns(ns, op)
        out, tears = {}, 0
        for name, ino in ns.items():
            buf = bytearray(ino.durable)
            ops = ino.pending
            if how == "issued":
                for op in ops:
                    apply_op(buf, op)
            elif how == "prefix" and ops:
                n = rng.randint(0, len(ops))
                for op in ops[:n]:
                    apply_op(buf, op)
                if n < len(ops) and ops[n][0] == "w" and rng.random() < 0.5:
                    _, off, data = ops[n]
                    cuts = [b for b in range((off // SECTOR + 1) * SECTOR, off + len(data), SECTOR)]
                    if cuts:
                        apply_op(buf, ("w", off, data[:rng.choice(cuts) - off]))
                        tears += 1
            elif how == "sectors" and ops:
                p = rng.choice((0.2, 0.5, 0.8))
                for op in ops:
                    if op[0] != "w":
                        if rng.random() < p:
                            apply_op(buf, op)
                        continue
                    _, off, data = op
                    start = off
                    while start < off + len(data):
                        end = min((start // SECTOR + 1) * SECTOR, off + len(data))
                        if rng.random() < p:
                            apply_op(buf, ("w", start, data[start - off:end - off]))
                        else:
                            tears += 1
                        start = end
                size = len(ino.current())
                if len(buf) < size and rng.random() < 0.5:
                    buf.extend(rng.randbytes(size - len(buf)))
            out[name] = bytes(buf)
        return out, tears

    def checkpoint_cut(self, db_name):
        """True when the cut came between a write to the database file and its sync (inside a
        checkpoint, in WAL mode)."""
        ino = self.current_ns.get(db_name)
        return bool(ino and any(op[0] == "w" for op in ino.pending))


# ---------------------------------------------------------------- one run


STORE = "STORE.db"
LOG_KEEP = 40  # keep_last of the change log, in the stores that have it on
HOWS = ["durable"] * 2 + ["issued"] + ["prefix"] * 3 + ["sectors"] * 3


#: The shared-memory files beside a store, which the model does not follow as files: SQLite's WAL
#: index and the library's watch ring (which agent each commit changed; it holds no state).
SHARED_MEMORY = ("-shm", "-watch")


def files_of(d):
    return {n: open(os.path.join(d, n), "rb").read()
            for n in sorted(os.listdir(d)) if not n.endswith(SHARED_MEMORY)}


def wipe(d):
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))


def write_files(d, files, shared):
    """The rebuilt files, and the shared-memory files kept (name to bytes)."""
    wipe(d)
    for n, data in list(files.items()) + list(shared.items()):
        with open(os.path.join(d, n), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(d, n), 0o600)


def open_fds_under(d):
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith(d + "/"):
            out.append(target)
    return out


def needs_recovery(files):
    wal = files.get(STORE + "-wal", b"")
    return len(wal) > 32 or len(files.get(STORE + "-journal", b"")) > 0


class Run:
    def __init__(self, args):
        self.args = args
        self.lib = Library(args.lib)
        self.work = args.work
        self.dirs = [os.path.join(self.work, "a"), os.path.join(self.work, "b")]
        for d in self.dirs:
            os.makedirs(d, exist_ok=True)
        self.log_path = os.path.join(self.work, "shim.log")
        self.counts = dict(cuts=0, acked=0, acked_lost=0, recoveries=0, failures=0, big_cuts=0,
                           checkpoint_cuts=0, creation_cuts=0, torn=0, resumed=0, stale_shm=0, stale_watch=0,
                           unacked_kept=0, events=0, log_cuts=0, log_states=0)
        self.keep = 0
        self.hows = {h: 0 for h in set(HOWS)}
        self.kinds = {}
        self.saved = 0

    def note_failure(self, i, cut_seed, msg, artifacts):
        self.counts["failures"] += 1
        line = "FAIL cut %d (cut seed %s): %s" % (i, cut_seed, msg)
        print(line, flush=True)
        kind = re.sub(r"/\S+", "PATH", re.sub(r"\d+", "N", msg))[:90]
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if self.saved < self.args.keep_failures and artifacts:
            self.saved += 1
            dest = os.path.join(self.args.failures_dir, "%s-cut%d" % (self.args.mode, i))
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            for sub, files in artifacts.items():
                if isinstance(files, dict):
                    os.makedirs(os.path.join(dest, sub))
                    for n, data in files.items():
                        open(os.path.join(dest, sub, n), "wb").write(data)
                else:
                    open(os.path.join(dest, sub), "wb").write(files)
            print("     kept in %s" % dest, flush=True)

    def run(self):
        a = self.args
        start = time.time()
        cur, base_version, expect_child_base = 0, 0, 0
        fresh = True
        for i in range(a.cuts):
            cut_seed = "%d:%s:%d" % (a.seed, a.mode, i)
            rng = random.Random(cut_seed)
            # A new store every --fresh-every cuts, after a failure, and at random one cut in
            # thirty (so that the store's creation is cut too); with the change log on or off.
            if fresh or (a.fresh_every and i % a.fresh_every == 0) or rng.random() < 1 / 30:
                for d in self.dirs:
                    wipe(d)
                cur, base_version, expect_child_base, fresh = 0, 0, 0, False
                self.keep = LOG_KEEP if rng.random() < 0.5 else 0
                self.counts["creation_cuts"] += 1
                new_store = True
            else:
                new_store = False
            d, other = self.dirs[cur], self.dirs[1 - cur]
            base = files_of(d)
            # Where to cut: half the cuts of a new store in its first 40 events (its creation);
            # else most cuts at a random event in 1..--events (from the open through a few to a
            # few dozen writes), one in ten further on (1..--long-events), and one in twelve at
            # one of the first 50 events on the database file itself, which in WAL mode is
            # written only by checkpoints (and when a store is created), with --long-events * 3
            # events as a cap.
            draw = rng.random()
            db_at = None
            if new_store and draw < 0.5:
                kill_at = rng.randint(1, 40)
            elif draw < 1 / 12:
                kill_at, db_at = a.long_events * 3, rng.randint(1, 50)
            elif draw < 1 / 12 + 0.1:
                kill_at = rng.randint(1, a.long_events)
            else:
                kill_at = rng.randint(1, a.events)
            env = dict(os.environ, LD_PRELOAD=a.shim, POWERCUT_DIR=d, POWERCUT_LOG=self.log_path,
                       POWERCUT_KILL_AT=str(kill_at))
            if db_at:
                env.update(POWERCUT_KILL_NAME=STORE, POWERCUT_KILL_NAME_AT=str(db_at))
            if a.sabotage:
                env["POWERCUT_SABOTAGE"] = a.sabotage
            if self.keep:
                self.counts["log_cuts"] += 1
            argv = [a.writer, a.lib, os.path.join(d, STORE), a.mode, str(self.keep)]
            try:
                proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      timeout=a.timeout)
            except subprocess.TimeoutExpired as e:  # run() has killed it
                proc = subprocess.CompletedProcess(argv, None, e.stdout or b"", e.stderr or b"")
            arts = {"base": base, "shim.log": open(self.log_path, "rb").read(),
                    "writer.out": proc.stdout, "writer.err": proc.stderr,
                    "cut.txt": ("cut %d, seed %s, event %d%s, change log %s\n" % (
                        i, cut_seed, kill_at, ", database event %d" % db_at if db_at else "",
                        self.keep or "off")).encode()}
            try:
                self.counts["cuts"] += 1
                if proc.returncode is None:
                    raise Failure("the writer was still running after %d s" % a.timeout)
                if proc.returncode != -9:
                    raise Failure("the writer exited with %s instead of being killed: %s" % (
                        proc.returncode, proc.stderr.decode(errors="replace").strip()))
                child_base, attempted, acked = None, [], []
                for line in proc.stdout.decode().splitlines():
                    tag, num = line.split()
                    if tag == "B":
                        child_base = int(num)
                    elif tag == "T":
                        attempted.append(int(num))
                    elif tag == "A":
                        acked.append(int(num))
                    else:
                        raise Failure("the writer said %r" % line)
                if child_base is not None and child_base != expect_child_base:
                    raise Failure("the writer found version %d at open, where the checker found %d "
                                  "in the same files" % (child_base, expect_child_base))
                if child_base is not None and needs_recovery(base):
                    self.counts["recoveries"] += 1
                model = Model(base)
                model.replay(read_records(self.log_path))
                if acked and not model.stats["writes"]:
                    raise Failure("writes were acknowledged, but the shim saw none: the library writes "
                                  "in a way the shim does not follow")
                if model.unmodelled:
                    raise Failure("the writer did what the model cannot follow: %s" % "; ".join(model.unmodelled))
                if model.cut_at is None or (not db_at and model.cut_at != kill_at):
                    raise Failure("the shim's log does not end with the cut at event %d" % kill_at)
                # The log, replayed in full, must give the files the killed writer left (what a
                # process crash leaves): else the shim missed something the library did.
                left = files_of(d)
                issued = {n: bytes(ino.current()) for n, ino in model.current_ns.items()}
                if left != issued:
                    raise Failure("the shim's record, replayed, differs from the files the writer left: %s" % ", ".join(
                        "%s (%s)" % (n, "%d bytes, replayed %s" % (len(left[n]), len(issued[n])) if n in left and n in issued
                                     else "only on disk" if n in left else "only replayed")
                        for n in sorted(set(left) | set(issued)) if left.get(n) != issued.get(n)))
                self.counts["events"] += model.cut_at
                how = rng.choice(HOWS)
                self.hows[how] += 1
                files, tears = model.cut(rng, how)
                self.counts["torn"] += tears
                if model.checkpoint_cut(STORE):
                    self.counts["checkpoint_cuts"] += 1
                last_tried = attempted[-1] if attempted else base_version
                if big_at(last_tried):
                    self.counts["big_cuts"] += 1
                # Each shared-memory file is gone or the killed writer's (stale, or ahead of
                # what the files kept).
                shared = {}
                for suffix in SHARED_MEMORY:
                    path = os.path.join(d, STORE + suffix)
                    if os.path.exists(path) and rng.random() < 0.5:
                        shared[STORE + suffix] = open(path, "rb").read()
                        self.counts["stale" + suffix.replace("-", "_")] += 1
                arts["cut"] = files
                write_files(d, files, shared)
                write_files(other, files, shared)
                self.counts["acked"] += len(acked)
                self.found = None
                try:
                    stored = self.check(other, files, base_version, attempted, acked, rng)
                finally:
                    if self.found is not None:
                        self.counts["acked_lost"] += sum(1 for v in acked if v > self.found)
                        if attempted and self.found == attempted[-1] and acked[-1:] != attempted[-1:]:
                            self.counts["unacked_kept"] += 1
                # The next cut starts from the store as the power cut left it (its first open
                # recovers it) or from the one the checker recovered and wrote to.
                if rng.random() < 0.5:
                    base_version = expect_child_base = stored
                    self.counts["resumed"] += 1
                else:
                    cur, base_version, expect_child_base = 1 - cur, stored + 1, stored + 1
            except Failure as e:
                after = {}
                try:
                    after = files_of(other)
                except OSError:
                    pass
                arts["after-check"] = after
                self.note_failure(i, cut_seed, str(e), arts)
                fresh = True
                if a.max_failures and self.counts["failures"] >= a.max_failures:
                    print("stopping after %d failures" % self.counts["failures"])
                    break
            if a.progress and (i + 1) % a.progress == 0:
                print("  %s: %d cuts, %d failures, %.1f s" % (a.mode, i + 1, self.counts["failures"],
                                                           time.time() - start), flush=True)
        self.elapsed = time.time() - start

    def check(self, d, files, base_version, attempted, acked, rng):
        """Opens the rebuilt store through the library and checks it; returns its version."""
        a = self.args
        path = os.path.join(d, STORE)
        if needs_recovery(files):
            self.counts["recoveries"] += 1
        h = self.lib.open(path, a.mode, self.keep)
        try:
            state, stored = self.lib.read(h)
            self.found = stored
            if self.keep and stored >= 1 and state == state_of(stored):
                self.check_log(h, stored, rng)
        finally:
            self.lib.close(h)
        last_tried = attempted[-1] if attempted else base_version
        expect = "full" if a.expect_full else a.mode
        if expect == "full":
            floor = acked[-1] if acked else base_version
            if stored < floor:
                raise Failure("synchronous=full lost acknowledged writes: version %d stored, %d "
                              "acknowledged (base %d)" % (stored, floor, base_version))
        if stored < base_version:
            raise Failure("version %d stored, below the %d the store held before the cut" % (stored, base_version))
        if stored > last_tried:
            raise Failure("version %d stored, above the last attempted write %d" % (stored, last_tried))
        if state != state_of(stored):
            raise Failure("the state at version %d is not the state written at that version (%s)" % (
                stored, differences(state, state_of(stored))))
        left = open_fds_under(d)
        if left:
            raise Failure("after agent_close the process still has %s open" % left)
        con = sqlite3.connect(path, isolation_level=None)
        try:
            verdict = [r[0] for r in con.execute("PRAGMA integrity_check")]
        finally:
            con.close()
        if verdict != ["ok"]:
            raise Failure("PRAGMA integrity_check: %s" % "; ".join(verdict[:5]))
        # A second writer: the store takes the next version.
        h = self.lib.open(path, a.mode, self.keep)
        try:
            got = self.lib.set_if(h, stored, patch_of(stored + 1))
            if got != stored + 1:
                raise Failure("the next write got version %d, expected %d" % (got, stored + 1))
            state, ver = self.lib.read(h)
            if ver != stored + 1 or state != state_of(stored + 1):
                raise Failure("after the next write: version %d, %s" % (
                    ver, differences(state, state_of(stored + 1)) or "the expected state"))
        finally:
            self.lib.close(h)
        return stored

    def check_log(self, h, stored, rng):
        """The change log keeps the last LOG_KEEP versions: a few of their states, and the last
        few changes with their patches."""
        lo = max(1, stored - self.keep + 1)
        for v in sorted({lo, stored} | {rng.randint(lo, stored) for _ in range(3)}):
            got = self.lib.state_at(h, v)
            if got != state_of(v):
                raise Failure("the change log's state at version %d is not the one written (%s)" % (
                    v, differences(got, state_of(v))))
            self.counts["log_states"] += 1
        after = max(lo - 1, stored - 5)
        changes = self.lib.changes_since(h, after)
        got = [c.get("version") for c in changes]
        if got != list(range(after + 1, stored + 1)):
            raise Failure("agent_changes_since(%d) gave versions %s, expected %d..%d" % (after, got, after + 1, stored))
        for c in changes:
            if c["patch"] != patch_of(c["version"]) or c["next"] != state_of(c["version"]):
                raise Failure("the change log's change %d is not the one written" % c["version"])

    def report(self):
        c, a = self.counts, self.args
        print("powercut %s: library %s (%s), seed %d, %.1f s" % (a.mode, self.lib.version, a.lib, a.seed, self.elapsed))
        print("  cuts %d (at %d events in all): %d of a new store, %d of a store a cut left (the writer's "
              "open recovers it), %d in a write of a 120 KiB state, %d while the database file had "
              "unsynced writes (a checkpoint)" % (
                  c["cuts"], c["events"], c["creation_cuts"], c["resumed"], c["big_cuts"], c["checkpoint_cuts"]))
        print("  %d cuts with the change log on (keep_last %d): %d of its states checked" % (
            c["log_cuts"], LOG_KEEP, c["log_states"]))
        print("  power-loss models: %s; %d sector pieces dropped or torn; %d stale -shm files and %d "
              "stale watch rings kept" % (
                  ", ".join("%s %d" % (k, v) for k, v in sorted(self.hows.items())), c["torn"], c["stale_shm"],
                  c["stale_watch"]))
        if a.mode == "full" or a.expect_full:
            acks = "%d acknowledged writes checked, %s" % (
                c["acked"], "%d lost" % c["acked_lost"] if c["acked_lost"] else "all durable")
        else:
            acks = "%d acknowledged writes checked, %d of them lost to the cut (allowed by normal)" % (
                c["acked"], c["acked_lost"])
        print("  %s; %d time%s the write in flight survived unacknowledged" % (
            acks, c["unacked_kept"], "" if c["unacked_kept"] == 1 else "s"))
        print("  %d recoveries (opens of a cut store with a WAL or journal to replay, by the checker or "
              "the next writer)" % c["recoveries"])
        print("  | %s | %d | %d | %d | %d |" % (a.mode, c["cuts"], c["acked"], c["recoveries"], c["failures"]))
        print("  failures: %d" % c["failures"])
        for kind, n in sorted(self.kinds.items(), key=lambda kv: -kv[1])[:6]:
            print("    %4d  %s" % (n, kind))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--writer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--mode", choices=("full", "normal"), required=True)
    ap.add_argument("--cuts", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--work", required=True, help="scratch directory (wiped)")
    ap.add_argument("--fresh-every", type=int, default=100, help="start from a new store every N cuts")
    ap.add_argument("--events", type=int, default=600, help="most cuts: at a random event in 1..N")
    ap.add_argument("--long-events", type=int, default=4000, help="one cut in ten: in 1..N")
    ap.add_argument("--failures-dir", default="target/powercut/failures")
    ap.add_argument("--keep-failures", type=int, default=3)
    ap.add_argument("--max-failures", type=int, default=0, help="stop after N failures (0: never)")
    ap.add_argument("--progress", type=int, default=0, help="print a line every N cuts")
    ap.add_argument("--timeout", type=int, default=120, help="seconds a writer may run before its cut")
    ap.add_argument("--sabotage", choices=("drop-sync",), help="self-test: the shim drops file syncs")
    ap.add_argument("--expect-full", action="store_true",
                    help="self-test: hold a normal store to full's promise")
    ap.add_argument("--expect-failures", action="store_true",
                    help="self-test: succeed only if some cut fails")
    a = ap.parse_args()
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    a.work = os.path.realpath(a.work)
    a.lib = os.path.realpath(a.lib)
    os.makedirs(a.work, exist_ok=True)
    print("powercut %s: %d cuts, seed %d (replay: --seed %d)" % (a.mode, a.cuts, a.seed, a.seed), flush=True)
    run = Run(a)
    run.run()
    run.report()
    if a.expect_failures:
        if run.counts["failures"] == 0:
            print("self-test FAILED: the sabotaged run found nothing wrong")
            return 1
        print("self-test ok: the sabotaged run was caught (%d failures)" % run.counts["failures"])
        return 0
    return 1 if run.counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
