/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/store/clickhouse_query.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int ch_conn_open(struct ch_conn *c, const char *base_url, size_t base_len, const char *database,
		 char *err, size_t errlen)
{
	c->base_url = strndup(base_url, base_len);
	c->database = strdup(database);
	c->curl = curl_easy_init();
	if (!c->base_url || !c->database || !c->curl) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, 120000L);
	return 0;
}

void ch_conn_close(struct ch_conn *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base_url);
	free(c->database);
	*c = (struct ch_conn){0};
}

int ch_text_open(struct ch_text *t, char *err, size_t errlen)
{
	t->data = NULL;
	t->len = 0;
	if ((t->f = open_memstream(&t->data, &t->len)))
		return 0;
	snprintf(err, errlen, "out of memory");
	return -1;
}

int ch_text_close(struct ch_text *t, char *err, size_t errlen)
{
	int rc = t->f && fclose(t->f) == 0 && t->data ? 0 : -1;
	t->f = NULL;
	if (rc != 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

void ch_text_free(struct ch_text *t)
{
	if (t->f)
		fclose(t->f);
	free(t->data);
	*t = (struct ch_text){0};
}

void ch_sql_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (const char *p = s; *p; p++) {
		if (*p == '\'' || *p == '\\')
			fputc('\\', f);
		fputc(*p, f);
	}
	fputc('\'', f);
}

void ch_tsv_string(FILE *f, const char *s)
{
	for (const char *p = s ? s : ""; *p; p++) {
		switch (*p) {
		case '\t':
			fputs("\\t", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		default:
			fputc(*p, f);
		}
	}
}

/* Runs one statement. query goes in the URL (with the database) when body
 * carries data (INSERT ... FORMAT TabSeparated), else in the body. The
 * answer is returned in *out when out is not NULL. */
static int request(struct ch_conn *c, enum ch_scope scope, const char *query, const char *body,
		   size_t body_len, struct ep_http_body *out, char *err, size_t errlen)
{
	char *url = NULL;
	char *q = body ? curl_easy_escape(c->curl, query, 0) : NULL;
	char *db = scope == CH_DATABASE ? curl_easy_escape(c->curl, c->database, 0) : NULL;
	int n = asprintf(&url, "%s/?%s%s%s%s", c->base_url, db ? "database=" : "", db ? db : "",
			 q ? (db ? "&query=" : "query=") : "", q ? q : "");
	curl_free(q);
	curl_free(db);
	if (n < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct ep_http_body answer = {0};
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body ? body : query);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(body ? body_len : strlen(query)));
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, ep_http_body_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &answer);
	CURLcode cc = curl_easy_perform(c->curl);
	long status = 0;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	int rc = 0;
	if (cc != CURLE_OK) {
		snprintf(err, errlen, "clickhouse %s: %s", c->base_url, curl_easy_strerror(cc));
		rc = -1;
	} else if (status != 200) {
		snprintf(err, errlen, "clickhouse %s: HTTP %ld: %.300s", c->base_url, status,
			 answer.data ? answer.data : "");
		err[strcspn(err, "\n")] = '\0';
		rc = -1;
	}
	free(url);
	if (rc == 0 && out)
		*out = answer;
	else
		free(answer.data);
	return rc;
}

int ch_run(struct ch_conn *c, enum ch_scope scope, struct ch_text *q, struct ep_http_body *out,
	   char *err, size_t errlen)
{
	int rc = ch_text_close(q, err, errlen);
	if (rc == 0)
		rc = request(c, scope, q->data, NULL, 0, out, err, errlen);
	ch_text_free(q);
	return rc;
}

int ch_runf(struct ch_conn *c, enum ch_scope scope, struct ep_http_body *out, char *err,
	    size_t errlen, const char *fmt, ...)
{
	char *q = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&q, fmt, ap);
	va_end(ap);
	if (n < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = request(c, scope, q, NULL, 0, out, err, errlen);
	free(q);
	return rc;
}

int ch_insert(struct ch_conn *c, const char *insert, struct ch_text *rows, char *err, size_t errlen)
{
	int rc = ch_text_close(rows, err, errlen);
	if (rc == 0 && rows->len)
		rc = request(c, CH_DATABASE, insert, rows->data, rows->len, NULL, err, errlen);
	ch_text_free(rows);
	return rc;
}

int ch_next_row(char **cursor, char **fields, int max)
{
	char *p = *cursor;
	if (!p || !*p)
		return 0;
	char *end = strchr(p, '\n');
	if (end)
		*end = '\0';
	*cursor = end ? end + 1 : p + strlen(p);
	int n = 0;
	char *field = p, *w = p;
	for (;; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			*w++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p == '0' ? '\0' : *p;
			continue;
		}
		if (*p == '\t' || *p == '\0') {
			bool last = *p == '\0';
			*w = '\0';
			if (n < max)
				fields[n++] = field;
			if (last)
				break;
			field = w = p + 1;
			continue;
		}
		*w++ = *p;
	}
	return n;
}
