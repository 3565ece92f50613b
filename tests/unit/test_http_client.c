/* SPDX-License-Identifier: Apache-2.0 */
/* The one HTTP client set-up (common/util/http_client.c) that the agent's
 * streamer and uploader, its Kubernetes pod lister and the CLI's collector
 * queries share: the bearer token and headers sent, the answer held up to
 * its bound whatever the server sends, http(s) only. Against a server on
 * loopback, in a thread, that answers what each test tells it to. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

#include "common/util/http_client.h"

enum answer { ANSWER_HELLO, ANSWER_LONG, ANSWER_ENDLESS };

struct server {
	int fd;
	int port;
	enum answer answer;
	int requests;	    /* served before the thread ends */
	char request[8192]; /* the last request's head */
	pthread_t thread;
};

static void send_all(int fd, const char *p, size_t n, bool *gone)
{
	while (n && !*gone) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0) {
			*gone = true;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Sends 16 MiB under a Content-Length, or chunks until the client leaves:
 * either way more than any bound a test sets. */
static void send_answer(struct server *s, int c)
{
	static char chunk[65536];
	bool gone = false;
	char head[256];
	if (s->answer == ANSWER_HELLO) {
		const char *a =
		    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
		send_all(c, a, strlen(a), &gone);
		return;
	}
	memset(chunk, 'x', sizeof(chunk));
	if (s->answer == ANSWER_LONG) {
		snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
			 16 << 20);
		send_all(c, head, strlen(head), &gone);
		for (int i = 0; i < 256 && !gone; i++)
			send_all(c, chunk, sizeof(chunk), &gone);
		return;
	}
	const char *h = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	send_all(c, h, strlen(h), &gone);
	snprintf(head, sizeof(head), "%zx\r\n", sizeof(chunk));
	while (!gone) {
		send_all(c, head, strlen(head), &gone);
		send_all(c, chunk, sizeof(chunk), &gone);
		send_all(c, "\r\n", 2, &gone);
	}
}

static void *serve(void *arg)
{
	struct server *s = arg;
	for (int i = 0; i < s->requests; i++) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			break;
		size_t n = 0;
		while (n < sizeof(s->request) - 1) {
			ssize_t r = recv(c, s->request + n, sizeof(s->request) - 1 - n, 0);
			if (r <= 0)
				break;
			n += (size_t)r;
			s->request[n] = '\0';
			if (strstr(s->request, "\r\n\r\n"))
				break;
		}
		s->request[n] = '\0';
		send_answer(s, c);
		close(c);
	}
	return NULL;
}

static void start(struct server *s, enum answer answer, int requests)
{
	memset(s, 0, sizeof(*s));
	s->answer = answer;
	s->requests = requests;
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s->fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->fd, 4), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void stop(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->fd);
}

static const struct ep_http_config base = {
    .connect_timeout_ms = 60000, .timeout_ms = 600000, .max_answer = 64 * 1024};

static CURLcode get(const struct server *s, CURL *h, const struct ep_http_config *c,
		    const char *const *headers, struct ep_http_body *answer, long *status,
		    char *why, size_t whylen)
{
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/x", s->port);
	return ep_http_perform(h, c, url, headers, answer, status, why, whylen);
}

/* The token as a bearer header, the caller's headers after it; a second
 * request on the same handle (a kept connection) carries only its own. */
static void test_token_and_headers(void **state)
{
	(void)state;
	struct server s;
	start(&s, ANSWER_HELLO, 2);
	struct ep_http_config c = base;
	c.token = "s3cret";
	CURL *h = ep_http_open(&c);
	assert_non_null(h);
	static const char *const first[] = {"X-First: 1", NULL};
	struct ep_http_body answer;
	long status;
	char why[256] = "";
	assert_int_equal(get(&s, h, &c, first, &answer, &status, why, sizeof(why)), CURLE_OK);
	assert_int_equal(status, 200);
	assert_string_equal(answer.data, "hello");
	free(answer.data);
	assert_non_null(strstr(s.request, "\r\nAuthorization: Bearer s3cret\r\n"));
	assert_non_null(strstr(s.request, "\r\nX-First: 1\r\n"));
	struct ep_http_config anonymous = base;
	assert_int_equal(get(&s, h, &anonymous, NULL, &answer, &status, why, sizeof(why)),
			 CURLE_OK);
	free(answer.data);
	stop(&s);
	assert_null(strstr(s.request, "Authorization"));
	assert_null(strstr(s.request, "X-First"));
	curl_easy_cleanup(h);
}

/* Issue 32's bounds on answers (the agent's ingest answers, 1 MiB; its
 * upload answers, 64 KiB; the API server's pod list, 64 MiB) held here for
 * every user: a 16 MiB answer and an endless chunked one are cut at the
 * bound, named in why, and no more than the bound was held. */
static void check_cut(enum answer kind)
{
	struct server s;
	start(&s, kind, 1);
	CURL *h = ep_http_open(&base);
	assert_non_null(h);
	struct ep_http_body answer;
	long status;
	char why[256] = "";
	CURLcode cc = get(&s, h, &base, NULL, &answer, &status, why, sizeof(why));
	curl_easy_cleanup(h);
	stop(&s);
	assert_int_equal(cc, CURLE_WRITE_ERROR);
	assert_string_equal(why, "answer over 64 KiB");
	assert_true(answer.over);
	assert_true(answer.len <= base.max_answer);
	free(answer.data);
}

static void test_long_answer_cut(void **state)
{
	(void)state;
	check_cut(ANSWER_LONG);
}

static void test_endless_answer_cut(void **state)
{
	(void)state;
	check_cut(ANSWER_ENDLESS);
}

/* A URL option that names a file (or any scheme but http and https) reads
 * nothing: the token would otherwise go wherever such a URL leads. */
static void test_http_only(void **state)
{
	(void)state;
	CURL *h = ep_http_open(&base);
	assert_non_null(h);
	struct ep_http_body answer;
	long status;
	char why[256] = "";
	assert_int_equal(ep_http_perform(h, &base, "file:///etc/hostname", NULL, &answer, &status,
					 why, sizeof(why)),
			 CURLE_UNSUPPORTED_PROTOCOL);
	assert_null(answer.data);
	assert_int_equal(status, 0);
	assert_true(why[0] != '\0');
	curl_easy_cleanup(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token_and_headers),
	    cmocka_unit_test(test_long_answer_cut),
	    cmocka_unit_test(test_endless_answer_cut),
	    cmocka_unit_test(test_http_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
