"""A Python workload for the C allocator (run with PYTHONMALLOC=malloc so every object goes through it).

Threads build dicts, lists, sets and strings, pass them between threads through a queue, and reduce them to
checksums; the main thread checks each result against a value computed a second, independent way (plain
arithmetic). Prints the results; the Rust test compares the output with the same script run without the
preload and checks the arithmetic lines itself. Exit status 1 on any mismatch.
"""

import hashlib
import json
import queue
import sys
import threading

N_THREADS = 6
ITEMS = 20000


def build(tid, n):
    """Dicts keyed by strings, lists of tuples, sets, joined strings: many small objects of many sizes."""
    d = {}
    for i in range(n):
        key = "k%d-%d-%s" % (tid, i, "x" * (i % 37))
        d[key] = [i, str(i * tid), (i, tid), {"n": i}]
    total = 0
    for key, value in d.items():
        total += value[0] + len(key) + len(value[1])
    squares = sorted({(i * i) % 1009 for i in range(n)})
    text = ",".join(str(i) for i in range(n))
    # Delete half (frees) and grow again (reuse).
    for i in range(0, n, 2):
        del d["k%d-%d-%s" % (tid, i, "x" * (i % 37))]
    for i in range(n // 2):
        d["new%d" % i] = bytearray(i % 300)
    return total, len(squares), len(text), len(d)


def expected(tid, n):
    """The same four figures by arithmetic, without building anything."""
    total = 0
    for i in range(n):
        key_len = len("k%d-%d-" % (tid, i)) + i % 37
        total += i + key_len + len(str(i * tid))
    squares = len({(i * i) % 1009 for i in range(n)})
    text = sum(len(str(i)) for i in range(n)) + (n - 1)
    remaining = n - (n + 1) // 2 + n // 2
    return total, squares, text, remaining


def worker(tid, inbox, outbox):
    result = build(tid, ITEMS)
    outbox.put((tid, result))
    # Objects made by another thread, consumed (and freed) here.
    while True:
        item = inbox.get()
        if item is None:
            break
        outbox.put(("echo", tid, hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()))


def main():
    inbox = queue.Queue()
    outbox = queue.Queue()
    threads = [threading.Thread(target=worker, args=(t, inbox, outbox)) for t in range(N_THREADS)]
    for t in threads:
        t.start()
    docs = []
    for i in range(300):
        doc = {"id": i, "tags": ["t%d" % (i % 7)] * (i % 11), "body": "lorem " * (i % 50), "nested": {"a": list(range(i % 20))}}
        docs.append(doc)
        inbox.put(doc)
    for _ in threads:
        inbox.put(None)
    for t in threads:
        t.join()
    results = {}
    echoes = []
    while not outbox.empty():
        item = outbox.get()
        if item[0] == "echo":
            echoes.append(item[2])
        else:
            results[item[0]] = item[1]
    ok = True
    for tid in range(N_THREADS):
        want = expected(tid, ITEMS)
        got = results.get(tid)
        print("thread %d: %s %s" % (tid, got, "ok" if got == want else "MISMATCH want %s" % (want,)))
        ok = ok and got == want
    want_echoes = sorted(hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest() for d in docs)
    print("documents hashed across threads: %d %s" % (len(echoes), "ok" if sorted(echoes) == want_echoes else "MISMATCH"))
    ok = ok and sorted(echoes) == want_echoes
    # Big strings and lists: large blocks, realloc of growing lists.
    big = []
    for i in range(200000):
        big.append(i)
    s = "".join(chr(65 + i % 26) for i in range(1 << 20))
    print("big list sum %d, big string %d bytes, count of A %d" % (sum(big), len(s), s.count("A")))
    ok = ok and sum(big) == 199999 * 200000 // 2 and s.count("A") == ((1 << 20) + 25) // 26
    print("workload: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
