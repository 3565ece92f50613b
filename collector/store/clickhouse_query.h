/* SPDX-License-Identifier: Apache-2.0 */
/* How the ClickHouse store talks to the server: every statement is written
 * into memory (a ch_text), with outside strings quoted by ch_sql_string or
 * ch_tsv_string, and sent over HTTP by ch_run or ch_insert; answers are
 * read back a TabSeparated row at a time. Only store_clickhouse.c uses it. */
#ifndef EP_CLICKHOUSE_QUERY_H
#define EP_CLICKHOUSE_QUERY_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/util/http_body.h"

struct ch_conn {
	CURL *curl;
	char *base_url; /* http://host:port */
	char *database;
};

/* A connection to base_url (a copy) for database (a copy): 0, or -1 with
 * err. ch_conn_close frees it, also a half-opened one. */
int ch_conn_open(struct ch_conn *c, const char *base_url, size_t base_len, const char *database,
		 char *err, size_t errlen);
void ch_conn_close(struct ch_conn *c);

/* A statement, or an INSERT's rows, being written: fprintf into f. */
struct ch_text {
	FILE *f;
	char *data;
	size_t len;
};

/* 0, or -1 with "out of memory". */
int ch_text_open(struct ch_text *t, char *err, size_t errlen);
/* Ends the writing (data and len are then the text); 0, or -1 with err. */
int ch_text_close(struct ch_text *t, char *err, size_t errlen);
void ch_text_free(struct ch_text *t);

/* Quoted for a statement: a SQL string literal. */
void ch_sql_string(FILE *f, const char *s);
/* Escaped for TabSeparated rows, so paths with tabs survive. */
void ch_tsv_string(FILE *f, const char *s);

/* Where a statement runs: in the store's database, or on the server (the
 * database's creation, system tables). */
enum ch_scope { CH_SERVER, CH_DATABASE };

/* Runs the statement in q and frees it; the answer goes to *out when out
 * is not NULL (free out->data). 0, or -1 with err. */
int ch_run(struct ch_conn *c, enum ch_scope scope, struct ch_text *q, struct ep_http_body *out,
	   char *err, size_t errlen);
/* Runs the statement printf(fmt, ...) would write: for statements that take
 * no strings from outside (numbers, table names, the checked database). */
int ch_runf(struct ch_conn *c, enum ch_scope scope, struct ep_http_body *out, char *err,
	    size_t errlen, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* insert ("INSERT INTO ... FORMAT TabSeparated") with the rows written in
 * rows, which is freed; nothing is sent when there are none. */
int ch_insert(struct ch_conn *c, const char *insert, struct ch_text *rows, char *err,
	      size_t errlen);

/* Splits the next line of a TabSeparated answer at *cursor into at most
 * max fields, unescaping in place. Returns the field count, 0 at the end. */
int ch_next_row(char **cursor, char **fields, int max);

#endif
