"""The price of erasure (a deleted agent's bytes overwritten, not left in the file): a bare
SQLite update of one row in a WAL file with synchronous=NORMAL, with `secure_delete` off and on
(what agent_state's writing connections use), in alternating runs, medians. Standard library
only:

    python3 bench/secure_delete.py
"""

import os
import sqlite3
import statistics
import tempfile
import time


def run(secure_delete: str, size: int, n: int = 3000) -> float:
    """Microseconds per committed update of a `size`-byte value."""
    d = tempfile.mkdtemp()
    db = sqlite3.connect(os.path.join(d, "x.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(f"PRAGMA secure_delete={secure_delete}")
    db.execute("CREATE TABLE s(agent TEXT PRIMARY KEY, value BLOB, version INT, w INT)")
    db.execute("INSERT INTO s VALUES('a', ?, 1, 0)", (b"x" * size,))
    t = time.perf_counter()
    for i in range(n):
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "UPDATE s SET value=?, version=?, w=? WHERE agent='a'", (bytes([i % 256]) * size, i, i)
        )
        db.execute("COMMIT")
    us = (time.perf_counter() - t) / n * 1e6
    db.close()
    for name in os.listdir(d):
        os.remove(os.path.join(d, name))
    os.rmdir(d)
    return us


for size in (1024, 16384):
    off, on = [], []
    for _ in range(5):
        off.append(run("OFF", size))
        on.append(run("ON", size))
    a, b = statistics.median(off), statistics.median(on)
    print(f"{size} B: secure_delete off {a:.1f} µs, on {b:.1f} µs, on/off {b / a:.2f}")
