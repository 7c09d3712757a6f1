-- Bulk inserts, indexes and queries against an in-memory database (sqlite3 :memory: < bulk.sql).
-- The Rust test computes the first three results by arithmetic and compares the whole output with the
-- same script run without the preload.
PRAGMA cache_size = -65536;
CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, payload BLOB, score REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO items SELECT i, i % 97, 'item-' || i || '-' || substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26),
                         zeroblob(i % 700), (i % 1000) / 10.0 FROM n;
SELECT 'count_sum', count(*), sum(id) FROM items;
SELECT 'group_7', count(*), sum(id) FROM items WHERE grp = 7;
SELECT 'blob_bytes', sum(length(payload)) FROM items;
CREATE INDEX items_grp ON items(grp, score);
CREATE INDEX items_name ON items(name);
CREATE UNIQUE INDEX items_name_id ON items(name, id);
SELECT 'by_name', id, grp FROM items WHERE name = 'item-123456-' || substr('abcdefghijklmnopqrstuvwxyz', 1 + 123456 % 26);
SELECT 'top_groups', grp, count(*), round(avg(score), 4) FROM items GROUP BY grp ORDER BY sum(score) DESC, grp LIMIT 5;
SELECT 'like', count(*) FROM items WHERE name LIKE 'item-99%';
-- Big text values: large allocations inside sqlite.
CREATE TABLE docs(id INTEGER PRIMARY KEY, body TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
INSERT INTO docs SELECT i, printf('%.*c', i * 3000, 'x') || i FROM n;
SELECT 'docs', count(*), sum(length(body)), max(length(body)) FROM docs;
-- Join, update, delete, reindex.
SELECT 'join', count(*), sum(d.id) FROM items i JOIN docs d ON d.id = i.grp + 1 WHERE i.id % 10 = 0;
UPDATE items SET name = name || '-updated', score = score + 1 WHERE id % 3 = 0;
DELETE FROM items WHERE id % 5 = 0;
SELECT 'after_update', count(*), sum(id), round(sum(score), 1) FROM items;
REINDEX;
SELECT 'distinct_names', count(DISTINCT name) FROM items;
SELECT 'window', id, running FROM (SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS running FROM items) WHERE id IN (1, 2, 3, 199999);
PRAGMA integrity_check;
