-- TRAINING workload: bulk insert, indexes, joins, aggregates, updates, deletes
PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
CREATE TABLE t1(a INTEGER PRIMARY KEY, b INTEGER, c TEXT);
CREATE TABLE t2(x INTEGER, y TEXT, z REAL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i<400000)
INSERT INTO t1 SELECT i, (i*7919)%10007, printf('row-%d-%x', i, i*13) FROM s;
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i<250000)
INSERT INTO t2 SELECT i%5000, hex(i*31), i/3.0 FROM s;
CREATE INDEX t1b ON t1(b);
CREATE INDEX t2x ON t2(x);
SELECT count(*), sum(b), max(length(c)) FROM t1;
SELECT b%10, count(*), avg(a) FROM t1 GROUP BY b%10 ORDER BY 1;
SELECT count(*) FROM t1 JOIN t2 ON t1.b = t2.x WHERE t1.a < 100000;
UPDATE t1 SET c = c || '-u' WHERE b % 3 = 0;
DELETE FROM t2 WHERE z > 60000;
SELECT x, count(*), sum(z) FROM t2 GROUP BY x HAVING count(*) > 7 ORDER BY 2 DESC LIMIT 5;
SELECT count(DISTINCT substr(c, 1, 6)) FROM t1;
