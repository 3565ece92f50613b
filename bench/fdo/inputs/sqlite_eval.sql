-- EVALUATION workload: window functions, LIKE/GLOB, recursive CTE, subqueries, string functions, sorting without index
PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;
CREATE TABLE p(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, v REAL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i<300000)
INSERT INTO p SELECT i, 'name' || (i*2654435761 % 100000), i%97, (i*37 % 1000)/7.0 FROM s;
SELECT grp, name, v, rank() OVER (PARTITION BY grp ORDER BY v DESC) AS r FROM p WHERE id % 500 = 0 ORDER BY grp, r LIMIT 10;
SELECT count(*) FROM p WHERE name LIKE '%12%';
SELECT count(*) FROM p WHERE name GLOB '*7?3*';
SELECT sum(v) OVER w FROM p WINDOW w AS (ORDER BY id ROWS BETWEEN 5 PRECEDING AND 5 FOLLOWING) LIMIT 3;
SELECT grp, (SELECT max(v) FROM p q WHERE q.grp = p.grp) FROM p WHERE id < 3000 GROUP BY grp LIMIT 5;
SELECT upper(replace(name, 'name', 'N')), instr(name, '9') FROM p ORDER BY name DESC LIMIT 5;
WITH RECURSIVE fib(n, a, b) AS (SELECT 0, 0, 1 UNION ALL SELECT n+1, b, (a+b) % 1000000007 FROM fib WHERE n < 300000) SELECT max(a) FROM fib;
SELECT count(*), total(length(group_concat_x)) FROM (SELECT grp, group_concat(name) AS group_concat_x FROM p GROUP BY grp);
