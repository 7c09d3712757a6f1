import gc, hashlib, json, queue, random, sys, threading

scale = int(sys.argv[1])
rng = random.Random(20261123)
letters = "abcdefghijklmnopqrstuvwxyz"
vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randrange(2, 12))) for _ in range(5000)]
results = {}

def word():
    return vocabulary[rng.randrange(len(vocabulary))]

# Records: dicts holding lists, strings, numbers, nested dicts; through JSON and back.
records = []
for i in range(12000 * scale):
    records.append({
        "id": i,
        "name": word() + " " + word(),
        "tags": [word() for _ in range(rng.randrange(1, 9))],
        "score": rng.random(),
        "nested": {"a": i % 97, "b": [i, i * 2, str(i)], "c": {"d": word()}},
    })
text = json.dumps(records)
back = json.loads(text)
assert back == records
results["json"] = [len(text), hashlib.sha256(text.encode()).hexdigest()]
pretty = json.dumps(back[: 2000 * scale], indent=2, sort_keys=True)
results["pretty"] = hashlib.sha256(pretty.encode()).hexdigest()
del back, text, pretty

# Strings: counting, joining, splitting, formatting.
counts = {}
for r in records:
    for t in r["tags"]:
        counts[t] = counts.get(t, 0) + 1
results["top"] = ["%s=%d" % kv for kv in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
doc = "\n".join(" ".join(r["tags"]) for r in records)
results["doc"] = [len(doc.split()), hashlib.sha256(doc.upper().replace("A", "aa").encode()).hexdigest()]
lines = [f"{r['id']:08d}|{r['name']:<30}|{r['score']:.6f}" for r in records]
lines.sort(key=lambda l: l[9:])
results["lines"] = hashlib.sha256("".join(lines).encode()).hexdigest()
del doc, lines

# Objects with reference cycles: trees built, half cut off, rebuilt; the collector frees cycles.
class Node:
    def __init__(self, key, parent):
        self.key = key
        self.parent = parent
        self.children = []
        self.label = "node-%d" % key

total = 0
for rnd in range(8 * scale):
    root = Node(0, None)
    frontier = [root]
    key = 1
    while key < 20000:
        parent = frontier[rng.randrange(len(frontier))]
        child = Node(key, parent)
        parent.children.append(child)
        frontier.append(child)
        key += 1
    for n in frontier[::2]:
        n.children = n.children[: len(n.children) // 2]
    stack, seen = [root], 0
    while stack:
        n = stack.pop()
        seen += n.key % 1000
        stack.extend(n.children)
    total += seen
    del root, frontier, stack
    gc.collect()
results["trees"] = total

# Big buffers and long lists (beyond 32 KiB), grown, sliced and dropped.
digest = hashlib.sha256()
keep = []
for i in range(400 * scale):
    size = 32768 + rng.randrange(0, 400000)
    b = bytearray(size)
    b[::4097] = bytes([i % 251]) * len(b[::4097])
    digest.update(bytes(b[:64]))
    lst = list(range(size // 64))
    lst.extend(lst[: len(lst) // 3])
    keep.append((b, lst))
    if len(keep) > 20:
        keep.pop(rng.randrange(len(keep)))
results["buffers"] = [digest.hexdigest(), sum(len(b) for b, _ in keep)]
del keep

# A producer thread builds batches; the main thread consumes and drops them (cross-thread frees).
q = queue.Queue(maxsize=64)
def produce(seed, n):
    prng = random.Random(seed)
    for i in range(n):
        q.put([{"k": prng.randrange(1000), "v": "x" * prng.randrange(1, 300)} for _ in range(200)])
    q.put(None)
producer = threading.Thread(target=produce, args=(7, 600 * scale))
producer.start()
acc = 0
while True:
    batch = q.get()
    if batch is None:
        break
    acc += sum(d["k"] + len(d["v"]) for d in batch)
producer.join()
results["threads"] = acc

print(json.dumps(results, sort_keys=True))
