/* SPDX-License-Identifier: Apache-2.0 */
#include "collector/server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "collector/api/api.h"
#include "collector/api/top.h"
#include "collector/binaries/binaries.h"
#include "collector/web/web.h"
#include "common/elf/elf_image.h"
#include "common/util/build_id.h"
#include "common/util/clock.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"
#include "common/util/secret.h"
#include "common/wire/wire.h"

/* The sanitizers' allocator keeps its own books (glibc's mallinfo2 sees
 * nothing of it); weak, so the plain build links without it. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

/* Bytes the process's heap has handed out and not had back: with RSS, what
 * tells a leak (this grows) from memory the allocator keeps (RSS grows,
 * this does not). */
static uint64_t heap_in_use_bytes(void)
{
	if (__sanitizer_get_current_allocated_bytes)
		return __sanitizer_get_current_allocated_bytes();
	struct mallinfo2 mi = mallinfo2();
	return (uint64_t)mi.uordblks + mi.hblkhd;
}

#define DEFAULT_MAX_BODY (16u << 20)
#define CONNECTION_LIMIT 512u
/* kept free for newcomers: past CONNECTION_LIMIT - ROOM open connections
 * one is closed, so MHD's limit is never what turns /healthz away */
#define ROOM			 8u
#define DEFAULT_HEADER_TIMEOUT_S 10u
#define DEFAULT_MAX_CLIENT_CONNS 32u
#define DEFAULT_IDLE_TIMEOUT_S	 15u
#define DEFAULT_MAX_TOKEN_CONNS	 16u
#define DEFAULT_MAX_BODIES	 (256u << 20)
#define DEFAULT_BODY_TIMEOUT_S	 30u
#define DEFAULT_BODY_MIN_RATE	 (64u << 10)
/* A body may get this far ahead of the minimum rate: a burst does not buy
 * minutes of stalling afterwards, and a newcomer finds a body that stopped
 * sending evictable within a second. */
#define BODY_AHEAD_NS 1000000000ULL
/* How long a body whose room is being made waits for the evicted bodies'
 * memory to be given back (their threads free it as they see the cut). */
#define BODY_ROOM_WAIT_NS 2000000000ULL

/* One open connection, as the admission rules see it. Entries live from
 * MHD's STARTED notice to its CLOSED notice, which MHD sends before it
 * closes the socket: so under conns_lock, fd is still this connection's and
 * shutdown() on it cannot hit another's. */
struct conn {
	struct conn *prev, *next; /* oldest first */
	int fd;
	struct sockaddr_storage addr;
	uint64_t waiting_since_ns; /* when its current wait for a header began */
	bool waiting;		   /* no complete request header yet */
	bool trusted;		   /* showed the bearer token: idle_timeout, not header_timeout */
	bool cut;		   /* shut down by us, closing */
	bool over_quota;	   /* its request is past max_token_conns: refused */
	bool in_body;		   /* its request's body is arriving */
	size_t body_held;	   /* bytes of body buffer it holds (of bodies_held) */
	/* its body has kept up with the minimum rate until then (monotonic):
	 * each byte moves it on by 1/body_min_rate s, at most BODY_AHEAD_NS
	 * past now; behind now it may be evicted, body_timeout_s behind it is */
	uint64_t credit_ns;
};

enum cut_reason {
	CUT_HEADER_TIMEOUT,
	CUT_PER_ADDRESS,
	CUT_EVICTED,
	CUT_IDLE_TIMEOUT,
	CUT_TOKEN_PER_ADDRESS,
	CUT_IDLE_EVICTED,
	CUT_BODY_TIMEOUT,
	CUT_BODY_EVICTED,
	NCUTS
};
static const char *const cut_names[NCUTS] = {"header_timeout", "per_address",	    "evicted",
					     "idle_timeout",   "token_per_address", "idle_evicted",
					     "body_timeout",   "body_evicted"};

/* edgeprof_http_requests_total{endpoint=...}: routes counted together */
enum endpoint {
	E_INGEST,
	E_BINARIES,
	E_PROFILE,
	E_SESSIONS,
	E_METRICS,
	E_HEALTH,
	E_IMAGES, /* binaries' code: uploads, and whether one is kept */
	E_UI,	  /* the web UI's pages (collector/web) */
	E_SIGNIN, /* the UI's sign-in with the token */
	E_OTHER,  /* no route */
	NENDPOINTS
};
static const char *const endpoint_names[NENDPOINTS] = {"ingest",  "binaries", "profile", "sessions",
						       "metrics", "health",   "images",	 "ui",
						       "signin",  "other"};

struct ep_server {
	struct ep_server_config cfg;
	struct MHD_Daemon *daemon;
	struct ep_store *store;
	struct ep_ingest *ingest;
	struct ep_sessions *sessions;
	char token[512];
	bool has_token;
	char upload_token[512]; /* CI's, for trusted images only (upload_token_file) */
	bool has_upload_token;
	char *cert_pem, *key_pem, *ca_pem;
	unsigned port;
	atomic_uint_fast64_t requests[NENDPOINTS];
	atomic_uint_fast64_t unauthorized, forbidden, too_large_bodies, bad_encoding, cross_site;

	/* admission (see struct ep_server_config) */
	pthread_mutex_t conns_lock;
	pthread_cond_t conns_stop;
	struct conn *oldest, *newest;
	size_t untrusted;     /* open, not trusted, not cut */
	size_t untrusted_cap; /* beyond this the oldest untrusted one goes */
	uint64_t header_timeout_ns;
	bool stopping, watchdog_started;
	pthread_t watchdog;
	atomic_uint_fast64_t cuts[NCUTS];
	size_t trusted; /* open, trusted, not cut */
	uint64_t idle_timeout_ns, body_timeout_ns;
	/* request bodies' buffers, all connections (cfg.max_bodies) */
	size_t bodies_held;
	pthread_cond_t bodies_freed;
	atomic_uint_fast64_t bodies_refused;
	/* refusals said in the log at most once per LOG_EVERY_NS each */
	atomic_uint_fast64_t said_ns[2], unsaid[2];
};

struct route;

struct request {
	const struct route *route; /* what serves it */
	struct conn *k;		   /* its connection's admission entry; NULL: untracked */
	uint8_t *body;
	size_t len, cap; /* cap: held, counted in bodies_held */
	size_t limit;	 /* body bytes accepted on this route */
	size_t declared; /* Content-Length; 0: none (chunked) */
	bool too_large;
};

/* Who may use a route (past the client certificate, when --client-ca asks
 * for one, and the cross-site check, which every method but GET and HEAD
 * passes first) */
enum access {
	OPEN,		 /* anyone */
	TOKEN,		 /* the bearer token or the UI's cookie holding it; else 401 */
	TOKEN_OR_UPLOAD, /* that, or the upload token (--upload-token-file); else 401 */
	SIGNED_IN,	 /* like TOKEN, but a browser is sent to /signin instead */
};

/* What a route's request body may be */
enum body {
	NO_BODY,    /* none: a request with one is refused, 400 */
	BATCH_BODY, /* up to --max-body */
	IMAGE_BODY, /* up to --max-binary-mib (--max-body when no binaries are kept) */
	FORM_BODY,  /* up to FORM_BODY_MAX: a form, the token at most */
};
#define FORM_BODY_MAX 4096

typedef enum MHD_Result (*route_fn)(struct ep_server *s, struct MHD_Connection *c, const char *url,
				    struct request *rq);

/* One line of the route table (routes[], before on_request); the
 * collector's endpoints in docs/collector.md are this table. */
struct route {
	const char *method; /* "GET" (HEAD too) or "POST" */
	const char *path;   /* the whole path, or a prefix when it ends in '/' */
	enum access access;
	enum body body;
	enum endpoint endpoint;
	route_fn handle;
};

/* A PEM file's most: a system's whole CA bundle is ~200 KiB */
#define PEM_MAX (16u << 20)

static char *read_pem(const char *path, char *err, size_t errlen)
{
	/* a FIFO would block the open for ever (--tls-cert FIFO hung) */
	char why[256];
	int fd = ep_open_regular(path, why, sizeof(why));
	FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, fd < 0 ? why : strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n, total = 0;
	while (m && total <= PEM_MAX && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		fwrite(chunk, 1, n, m);
		total += n;
	}
	fclose(f);
	if (m)
		fclose(m);
	if (total > PEM_MAX) {
		snprintf(err, errlen, "%s: more than %u MiB: not a PEM file", path, PEM_MAX >> 20);
		free(buf);
		return NULL;
	}
	if (!buf || len == 0 || !strstr(buf, "-----BEGIN")) {
		snprintf(err, errlen, "%s: not a PEM file", path);
		free(buf);
		return NULL;
	}
	return buf;
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, const char *type, char *body,
			       size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result respond_text(struct MHD_Connection *c, int status, const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&body, fmt, ap);
	va_end(ap);
	return respond(c, status, "text/plain", n < 0 ? NULL : body, n < 0 ? 0 : (size_t)n);
}

/* A refusal that passes with time: Retry-After says when to come back;
 * close: the connection goes too (the rest of its body is not read). */
static enum MHD_Result respond_retry(struct MHD_Connection *c, int status, unsigned retry_s,
				     bool close, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static enum MHD_Result respond_retry(struct MHD_Connection *c, int status, unsigned retry_s,
				     bool close, const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&body, fmt, ap);
	va_end(ap);
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(n < 0 ? 0 : (size_t)n, n < 0 ? (char *)"" : body,
					    n < 0 ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	char after[16];
	snprintf(after, sizeof(after), "%u", retry_s);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "Retry-After", after);
	if (close)
		MHD_add_response_header(r, "Connection", "close");
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return rc;
}

/* Compares without stopping at the first difference, so response times
 * do not tell how much of a guessed token was right. */
static bool token_matches(const char *expected, const char *given)
{
	size_t le = strlen(expected), lg = strlen(given);
	unsigned char diff = (unsigned char)(le != lg);
	for (size_t i = 0; i < le; i++)
		diff |= (unsigned char)(expected[i] ^ given[i < lg ? i : 0]);
	return diff == 0;
}

/* The bearer token, or the UI's sign-in cookie holding it (HttpOnly,
 * SameSite=Strict: a page of another site cannot send it along). */
static bool authorized(struct ep_server *s, struct MHD_Connection *c)
{
	if (!s->has_token)
		return true;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (h && strncmp(h, "Bearer ", 7) == 0 && token_matches(s->token, h + 7))
		return true;
	const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, EP_WEB_COOKIE);
	return cookie && token_matches(s->token, cookie);
}

/* The upload token as bearer: what makes an image trusted when there is
 * one (ep_server_config.upload_token_file). */
static bool upload_token_shown(struct ep_server *s, struct MHD_Connection *c)
{
	if (!s->has_upload_token)
		return false;
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	return h && strncmp(h, "Bearer ", 7) == 0 && token_matches(s->upload_token, h + 7);
}

static bool client_certified(struct ep_server *s, struct MHD_Connection *c)
{
	if (!s->ca_pem)
		return true;
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return false;
	gnutls_session_t session = (gnutls_session_t)ci->tls_session;
	unsigned n = 0;
	if (!gnutls_certificate_get_peers(session, &n) || n == 0)
		return false;
	unsigned status = 0;
	return gnutls_certificate_verify_peers2(session, &status) == 0 && status == 0;
}

/* Cross-site request forgery: a page of another site can make a browser
 * POST here (a form needs no script and no permission), and without a
 * token nothing else tells that request from the UI's own. Browsers say
 * where a request comes from: Sec-Fetch-Site (Fetch Metadata; every
 * current browser) or, older ones, Origin, which is compared with Host.
 * A request with neither is not a browser's (agents, the CLI, curl) or
 * comes from one too old to send Origin on a POST: it passes. The same
 * rule as OWASP's "verify origin with standard headers" and Go's
 * net/http CrossOriginProtection. */
static bool cross_site(struct MHD_Connection *c, const char **origin)
{
	const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
	*origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	if (site)
		return strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0;
	if (!*origin)
		return false;
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	const char *o = strstr(*origin, "://"); /* "null" (a sandboxed page) has none */
	return !o || !host || strcasecmp(o + 3, host) != 0;
}

static bool same_address(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return true;
}

/* Refusals that an attack repeats thousands of times a second are said
 * once per LOG_EVERY_NS each, with how many went unsaid since. */
#define LOG_EVERY_NS (10 * 1000000000ULL)
enum said { SAID_NO_ROOM, SAID_CROSS_SITE };

static void say_limited(struct ep_server *s, enum said which, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say_limited(struct ep_server *s, enum said which, const char *fmt, ...)
{
	uint64_t now = ep_mono_ns(), last = atomic_load(&s->said_ns[which]);
	if (last && now - last < LOG_EVERY_NS) {
		atomic_fetch_add(&s->unsaid[which], 1);
		return;
	}
	if (!atomic_compare_exchange_strong(&s->said_ns[which], &last, now)) {
		atomic_fetch_add(&s->unsaid[which], 1);
		return;
	}
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	uint64_t unsaid = atomic_exchange(&s->unsaid[which], 0);
	if (unsaid)
		ep_warn("%s (and %" PRIu64 " more like it in the last %llu s)", line, unsaid,
			LOG_EVERY_NS / 1000000000ULL);
	else
		ep_warn("%s", line);
}

/* Closes k's socket under the lock (MHD sees end of stream and closes the
 * connection, sending CLOSED); k no longer counts as open. Its body's
 * memory is given back when its thread sees the cut (on_completed). */
static void cut(struct ep_server *s, struct conn *k, enum cut_reason why)
{
	if (k->trusted)
		s->trusted--;
	else
		s->untrusted--;
	k->cut = true;
	shutdown(k->fd, SHUT_RDWR);
	atomic_fetch_add(&s->cuts[why], 1);
}

/* The longest idle connection that showed the token, of the address that
 * holds the most of them (so the largest holder pays, and an agent's one
 * connection is the last to go); NULL when none is idle. O(n^2) over at
 * most 512 connections, and only when the slots run short. Lock held. */
static struct conn *idle_of_largest_holder(struct ep_server *s)
{
	struct conn *best = NULL;
	size_t best_held = 0;
	for (struct conn *o = s->oldest; o; o = o->next) {
		if (!o->trusted || o->cut || !o->waiting)
			continue;
		size_t held = 0;
		for (struct conn *p = s->oldest; p; p = p->next)
			held += p->trusted && !p->cut && same_address(&p->addr, &o->addr);
		if (!best || held > best_held ||
		    (held == best_held && o->waiting_since_ns < best->waiting_since_ns)) {
			best = o;
			best_held = held;
		}
	}
	return best;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct ep_server *s = cls;
	struct conn *k = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!k)
			return;
		pthread_mutex_lock(&s->conns_lock);
		if (!k->cut) {
			if (k->trusted)
				s->trusted--;
			else
				s->untrusted--;
		}
		*(k->prev ? &k->prev->next : &s->oldest) = k->next;
		*(k->next ? &k->next->prev : &s->newest) = k->prev;
		pthread_mutex_unlock(&s->conns_lock);
		free(k);
		*socket_context = NULL;
		return;
	}
	const union MHD_ConnectionInfo *fd =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *addr =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!fd || !(k = calloc(1, sizeof(*k))))
		return; /* untracked: only MHD's own limits apply to it */
	k->fd = fd->connect_fd;
	if (addr && addr->client_addr)
		memcpy(&k->addr, addr->client_addr,
		       addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								: sizeof(struct sockaddr_in));
	k->waiting = true;
	k->waiting_since_ns = ep_mono_ns();
	pthread_mutex_lock(&s->conns_lock);
	k->prev = s->newest;
	*(s->newest ? &s->newest->next : &s->oldest) = k;
	s->newest = k;
	s->untrusted++;
	/* the oldest goes, of the address or of all: a client that just
	 * connected sends its header at once (an agent shows its token before
	 * its turn comes), and a client that leaves idle connections behind
	 * loses those, not the one it is using */
	size_t same = 0;
	struct conn *oldest_same = NULL, *oldest = NULL;
	for (struct conn *o = s->oldest; o; o = o->next) {
		if (o->trusted || o->cut)
			continue;
		if (!oldest)
			oldest = o;
		if (same_address(&o->addr, &k->addr) && !same++)
			oldest_same = o;
	}
	/* k itself is untrusted and listed: neither is NULL when counted */
	if (same > s->cfg.max_client_conns && oldest_same)
		cut(s, oldest_same, CUT_PER_ADDRESS);
	else if (s->untrusted > s->untrusted_cap && oldest)
		cut(s, oldest, CUT_EVICTED);
	else if (s->untrusted + s->trusted > CONNECTION_LIMIT - ROOM) {
		/* the slots run short with token holders' connections: an idle
		 * one goes (its client reconnects when it has a request), else
		 * the oldest still waiting for its header */
		struct conn *idle = idle_of_largest_holder(s);
		if (idle)
			cut(s, idle, CUT_IDLE_EVICTED);
		else if (oldest && oldest != k)
			cut(s, oldest, CUT_EVICTED);
	}
	pthread_mutex_unlock(&s->conns_lock);
	*socket_context = k;
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

/* A request's header is complete; with the token, the connection is an
 * agent's (or the CLI's) from now on, and counts against its address's
 * max_token_conns: past it that address's longest idle one goes, and when
 * none of them is idle this request is to be refused (over_quota). */
static void header_complete(struct ep_server *s, struct MHD_Connection *c, bool token_shown)
{
	struct conn *k = conn_of(c);
	if (!k)
		return;
	bool room = true;
	pthread_mutex_lock(&s->conns_lock);
	k->waiting = false;
	if (token_shown && !k->cut) {
		if (!k->trusted) {
			k->trusted = true;
			s->untrusted--;
			s->trusted++;
		}
		size_t same = 0;
		struct conn *idle = NULL;
		for (struct conn *o = s->oldest; o; o = o->next) {
			if (!o->trusted || o->cut || !same_address(&o->addr, &k->addr))
				continue;
			same++;
			if (o->waiting && (!idle || o->waiting_since_ns < idle->waiting_since_ns))
				idle = o;
		}
		if (same > s->cfg.max_token_conns) {
			if (idle)
				cut(s, idle, CUT_TOKEN_PER_ADDRESS);
			else
				room = false;
		}
	}
	k->over_quota = !room;
	pthread_mutex_unlock(&s->conns_lock);
	if (!room)
		atomic_fetch_add(&s->cuts[CUT_TOKEN_PER_ADDRESS], 1);
}

static bool over_token_quota(struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);
	return k && k->over_quota;
}

/* An answer went out: the connection's next header is due within the
 * deadline (header_timeout_s without the token, idle_timeout_s with it:
 * keep-alive must not become a way to hold a slot for free). */
static void request_done(struct ep_server *s, struct MHD_Connection *c)
{
	struct conn *k = conn_of(c);
	if (!k)
		return;
	pthread_mutex_lock(&s->conns_lock);
	k->waiting = true;
	k->in_body = false;
	k->waiting_since_ns = ep_mono_ns();
	pthread_mutex_unlock(&s->conns_lock);
}

/* A request with a body: its rate is followed from now, with a second's
 * grace before it counts as behind. */
static void body_begins(struct ep_server *s, struct conn *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&s->conns_lock);
	k->in_body = true;
	k->credit_ns = ep_mono_ns() + BODY_AHEAD_NS;
	pthread_mutex_unlock(&s->conns_lock);
}

/* n more bytes of k's body arrived (ended: all of it). */
static void body_arrived(struct ep_server *s, struct conn *k, size_t n, bool ended)
{
	if (!k)
		return;
	pthread_mutex_lock(&s->conns_lock);
	uint64_t now = ep_mono_ns();
	uint64_t earned = (uint64_t)((double)n * 1e9 / (double)s->cfg.body_min_rate);
	k->credit_ns = k->credit_ns + earned > now + BODY_AHEAD_NS ? now + BODY_AHEAD_NS
								   : k->credit_ns + earned;
	if (ended)
		k->in_body = false;
	pthread_mutex_unlock(&s->conns_lock);
}

/* Room for `more` bytes of body buffer (k's, or an untracked connection's):
 * 0 once counted in bodies_held, -1 when max_bodies has no room for it.
 * Past the bound, bodies that have fallen behind the minimum rate are cut,
 * the stalest first, and this one waits (up to BODY_ROOM_WAIT_NS) for
 * their threads to give their memory back; while every other body keeps
 * up, this one is refused: honest load gets back-pressure, a held body
 * gets no more than its share of a second. */
static int body_reserve(struct ep_server *s, struct conn *k, size_t more)
{
	pthread_mutex_lock(&s->conns_lock);
	uint64_t until = ep_mono_ns() + BODY_ROOM_WAIT_NS;
	int rc = -1;
	while (!(k && k->cut) && !s->stopping) {
		if (more <= s->cfg.max_bodies && s->bodies_held <= s->cfg.max_bodies - more) {
			rc = 0;
			break;
		}
		uint64_t now = ep_mono_ns();
		size_t coming = 0; /* what cut connections are giving back */
		for (struct conn *o = s->oldest; o; o = o->next)
			if (o->cut)
				coming += o->body_held;
		while (s->bodies_held - coming + more > s->cfg.max_bodies) {
			struct conn *stalest = NULL;
			for (struct conn *o = s->oldest; o; o = o->next)
				if (o != k && !o->cut && o->in_body && o->body_held &&
				    o->credit_ns < now &&
				    (!stalest || o->credit_ns < stalest->credit_ns))
					stalest = o;
			if (!stalest)
				break;
			coming += stalest->body_held;
			cut(s, stalest, CUT_BODY_EVICTED);
		}
		/* one thread serves every connection there: no one else can give
		 * memory back while this one waits */
		if (s->bodies_held - coming + more > s->cfg.max_bodies || s->cfg.one_thread ||
		    now >= until)
			break;
		struct timespec ts = ep_realtime_after(until - now);
		pthread_cond_timedwait(&s->bodies_freed, &s->conns_lock, &ts);
	}
	if (rc == 0) {
		s->bodies_held += more;
		if (k)
			k->body_held += more;
	}
	pthread_mutex_unlock(&s->conns_lock);
	return rc;
}

static void body_release(struct ep_server *s, struct conn *k, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&s->conns_lock);
	s->bodies_held -= n;
	if (k)
		k->body_held -= n;
	pthread_cond_broadcast(&s->bodies_freed);
	pthread_mutex_unlock(&s->conns_lock);
}

/* Cuts, checking every 250 ms, connections whose header is late (without
 * the token), that idled too long between requests (with it), and bodies
 * that fell body_timeout_s behind the minimum rate: MHD's own timeout is
 * an idle timeout, which one header line or body byte every few seconds
 * resets for ever. */
static void *watchdog_main(void *arg)
{
	struct ep_server *s = arg;
	uint64_t trimmed_ns = ep_mono_ns();
	pthread_mutex_lock(&s->conns_lock);
	while (!s->stopping) {
		struct timespec ts = ep_realtime_after(250000000ULL);
		pthread_cond_timedwait(&s->conns_stop, &s->conns_lock, &ts);
		uint64_t now = ep_mono_ns();
		for (struct conn *k = s->oldest; k; k = k->next) {
			if (k->cut)
				continue;
			if (k->waiting && !k->trusted &&
			    now - k->waiting_since_ns > s->header_timeout_ns)
				cut(s, k, CUT_HEADER_TIMEOUT);
			else if (k->waiting && k->trusted &&
				 now - k->waiting_since_ns > s->idle_timeout_ns)
				cut(s, k, CUT_IDLE_TIMEOUT);
			else if (k->in_body && now > k->credit_ns + s->body_timeout_ns)
				cut(s, k, CUT_BODY_TIMEOUT);
		}
		/* every connection has its thread, and the threads' malloc
		 * arenas kept what decoding batches freed: 500 agents left
		 * ~40 MiB free but resident (85 MiB RSS, 43 MiB once trimmed);
		 * giving it back every 10 s keeps RSS near what is in use */
		if (now - trimmed_ns >= 10 * 1000000000ULL) {
			trimmed_ns = now;
			pthread_mutex_unlock(&s->conns_lock);
			malloc_trim(0);
			pthread_mutex_lock(&s->conns_lock);
		}
	}
	pthread_mutex_unlock(&s->conns_lock);
	return NULL;
}

static int parse_time_arg(struct MHD_Connection *c, const char *name, int64_t *out)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	if (!v || !*v)
		return 0;
	char *end;
	long long x = strtoll(v, &end, 10);
	if (*end)
		return -1;
	*out = x;
	return 0;
}

static const char *query_arg(void *ctx, const char *name)
{
	return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

enum query { Q_BINARIES, Q_PROFILE, Q_TOP };

/* GET /v1/binaries, /v1/profile or /v1/top */
static enum MHD_Result handle_query(struct ep_server *s, struct MHD_Connection *c, enum query q)
{
	struct ep_store_filter f = {0};
	f.build_id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "build_id");
	if (f.build_id && !*f.build_id)
		f.build_id = NULL;
	char why[256];
	if (f.build_id && ep_build_id_check(f.build_id, why, sizeof(why)) != 0)
		return respond_text(c, 400, "build_id: %s\n", why);
	if (parse_time_arg(c, "from", &f.from_s) != 0 || parse_time_arg(c, "to", &f.to_s) != 0)
		return respond_text(c, 400, "from/to: unix seconds expected\n");
	f.container_id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "container_id");
	f.pod = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pod");
	f.namespace_ = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "namespace");
	f.cgroup = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cgroup");
	f.process = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "process");
	/* an on-demand session's counts, never mixed with the continuous ones */
	f.session_id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "session");
	/* prefix=1: label values are prefixes (the UI's export links say so) */
	const char *prefix = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "prefix");
	f.prefix = prefix && strcmp(prefix, "1") == 0;
	struct ep_api_response resp = {0};
	if (q == Q_TOP) {
		/* label values are prefixes: what the UI shows finds what it shows */
		f.prefix = true;
		f.build_id = NULL;
		size_t n =
		    ep_top_rows_arg(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "n"));
		if (!n)
			return respond_text(c, 400, "n: 1 to %d rows\n", EP_TOP_MAX);
		ep_api_top(s->store, &f, n, &resp);
		return respond(c, resp.status, resp.content_type, resp.body, resp.len);
	}
	struct ep_store_page page;
	if (ep_api_page(&s->cfg.api, query_arg, c, &page, &resp) != 0)
		return respond(c, resp.status, resp.content_type, resp.body, resp.len);
	if (q == Q_BINARIES)
		ep_api_binaries(s->store, &f, &page, &resp);
	else
		ep_api_profile(s->store, &f, &page,
			       MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "format"),
			       &resp);
	if (!resp.next)
		return respond(c, resp.status, resp.content_type, resp.body, resp.len);
	/* a profile of every binary is one page of them: where the next starts */
	struct MHD_Response *mr = MHD_create_response_from_buffer(
	    resp.len, resp.body ? resp.body : (char *)"",
	    resp.body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!mr) {
		free(resp.body);
		free(resp.next);
		return MHD_NO;
	}
	MHD_add_response_header(mr, "Content-Type", resp.content_type);
	MHD_add_response_header(mr, "Edgeprof-Next-Cursor", resp.next);
	free(resp.next);
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)resp.status, mr);
	MHD_destroy_response(mr);
	return rc;
}

/* /metrics, by part: batches, rows and the store */
static void metrics_ingest(struct ep_server *s, FILE *m)
{
	struct ep_ingest_counters ic;
	ep_ingest_counters(s->ingest, &ic);
	ep_elf_image_metrics(m);
	fprintf(m, "# HELP edgeprof_ingest_batches_total Batches received, by outcome.\n"
		   "# TYPE edgeprof_ingest_batches_total counter\n");
	const struct {
		const char *name;
		uint64_t v;
	} results[] = {{"stored", ic.stored},
		       {"duplicate", ic.duplicate},
		       {"bad_request", ic.bad_request},
		       {"too_large", ic.too_large + atomic_load(&s->too_large_bodies)},
		       {"store_error", ic.store_error},
		       {"unsupported_encoding", atomic_load(&s->bad_encoding)}};
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		fprintf(m, "edgeprof_ingest_batches_total{result=\"%s\"} %" PRIu64 "\n",
			results[i].name, results[i].v);
	fprintf(m,
		"# HELP edgeprof_http_cross_site_refused_total Requests that would change state "
		"refused (403) because a browser sent them from another site's page.\n"
		"# TYPE edgeprof_http_cross_site_refused_total counter\n"
		"edgeprof_http_cross_site_refused_total %" PRIu64 "\n",
		(uint64_t)atomic_load(&s->cross_site));
	fprintf(
	    m,
	    "# HELP edgeprof_ingest_rows_total Rows received in stored batches, before merging.\n"
	    "# TYPE edgeprof_ingest_rows_total counter\n"
	    "edgeprof_ingest_rows_total{kind=\"edges\"} %" PRIu64 "\n"
	    "edgeprof_ingest_rows_total{kind=\"ranges\"} %" PRIu64 "\n"
	    "edgeprof_ingest_rows_total{kind=\"ips\"} %" PRIu64 "\n"
	    "# HELP edgeprof_ingest_counts_out_of_range_total Batches refused (of bad_request) "
	    "because a count is more than their samples allow.\n"
	    "# TYPE edgeprof_ingest_counts_out_of_range_total counter\n"
	    "edgeprof_ingest_counts_out_of_range_total %" PRIu64 "\n"
	    "# HELP edgeprof_ingest_pending_rows Merged rows waiting for the next commit.\n"
	    "# TYPE edgeprof_ingest_pending_rows gauge\n"
	    "edgeprof_ingest_pending_rows %" PRIu64 "\n"
	    "# HELP edgeprof_store_commits_total Store writes (group commits).\n"
	    "# TYPE edgeprof_store_commits_total counter\n"
	    "edgeprof_store_commits_total %" PRIu64 "\n"
	    "# HELP edgeprof_store_commit_failures_total Store writes that failed; their batches "
	    "were not acknowledged.\n"
	    "# TYPE edgeprof_store_commit_failures_total counter\n"
	    "edgeprof_store_commit_failures_total %" PRIu64 "\n"
	    "# HELP edgeprof_store_write_failing 1 from a failed store write (disk full, "
	    "read-only) until one succeeds: ingest answers 503 meanwhile.\n"
	    "# TYPE edgeprof_store_write_failing gauge\n"
	    "edgeprof_store_write_failing %" PRIu64 "\n"
	    "# HELP edgeprof_store_memory_bytes Heap the store's library holds (SQLite: its "
	    "page cache, up to 64 MiB as the store grows, and statements; 0 for ClickHouse).\n"
	    "# TYPE edgeprof_store_memory_bytes gauge\n"
	    "edgeprof_store_memory_bytes %" PRIu64 "\n"
	    "# HELP edgeprof_process_heap_bytes Bytes the collector's heap has handed out and not "
	    "had back (SQLite's included).\n"
	    "# TYPE edgeprof_process_heap_bytes gauge\n"
	    "edgeprof_process_heap_bytes %" PRIu64 "\n"
	    "# HELP edgeprof_store_rows_written_total Rows written after merging.\n"
	    "# TYPE edgeprof_store_rows_written_total counter\n"
	    "edgeprof_store_rows_written_total %" PRIu64 "\n"
	    "# HELP edgeprof_store_commit_seconds_total Time spent in store writes.\n"
	    "# TYPE edgeprof_store_commit_seconds_total counter\n"
	    "edgeprof_store_commit_seconds_total %.6f\n"
	    "# HELP edgeprof_http_unauthorized_total Requests without the bearer token.\n"
	    "# TYPE edgeprof_http_unauthorized_total counter\n"
	    "edgeprof_http_unauthorized_total %" PRIu64 "\n"
	    "# HELP edgeprof_http_forbidden_total Requests without a valid client certificate.\n"
	    "# TYPE edgeprof_http_forbidden_total counter\n"
	    "edgeprof_http_forbidden_total %" PRIu64 "\n"
	    "# HELP edgeprof_http_requests_total Requests by endpoint.\n"
	    "# TYPE edgeprof_http_requests_total counter\n",
	    ic.edges, ic.ranges, ic.ips, ic.counts_out_of_range, ic.pending_rows, ic.commits,
	    ic.commit_failures, ic.store_failing, ep_store_memory_bytes(s->store),
	    heap_in_use_bytes(), ic.rows_written, ic.commit_seconds,
	    (uint64_t)atomic_load(&s->unauthorized), (uint64_t)atomic_load(&s->forbidden));
	ep_ingest_metrics(s->ingest, m);
}

static void metrics_sessions(struct ep_server *s, FILE *m)
{
	if (!s->sessions)
		return;
	struct ep_sessions_counters sc;
	ep_sessions_counters(s->sessions, &sc);
	fprintf(m,
		"# HELP edgeprof_sessions_open On-demand sessions pending or running "
		"(at most edgeprof_sessions_open_max, --max-sessions).\n"
		"# TYPE edgeprof_sessions_open gauge\n"
		"edgeprof_sessions_open %" PRIu64 "\n"
		"# TYPE edgeprof_sessions_open_max gauge\n"
		"edgeprof_sessions_open_max %" PRIu64 "\n"
		"# HELP edgeprof_sessions_refused_total Session requests refused (429) "
		"because --max-sessions were pending or running.\n"
		"# TYPE edgeprof_sessions_refused_total counter\n"
		"edgeprof_sessions_refused_total{reason=\"too_many\"} %" PRIu64 "\n"
		"# HELP edgeprof_nodes Nodes this collector lists (at most edgeprof_nodes_max, "
		"--max-nodes).\n"
		"# TYPE edgeprof_nodes gauge\n"
		"edgeprof_nodes %" PRIu64 "\n"
		"# TYPE edgeprof_nodes_max gauge\n"
		"edgeprof_nodes_max %" PRIu64 "\n"
		"# HELP edgeprof_nodes_untracked_batches_total Batches stored from nodes past "
		"--max-nodes, which are not listed.\n"
		"# TYPE edgeprof_nodes_untracked_batches_total counter\n"
		"edgeprof_nodes_untracked_batches_total %" PRIu64 "\n",
		sc.open, sc.max_open, sc.refused_full, sc.nodes, sc.max_nodes, sc.nodes_untracked);
}

/* requests, connections and bodies */
static void metrics_http(struct ep_server *s, FILE *m)
{
	for (int i = 0; i < NENDPOINTS; i++)
		fprintf(m, "edgeprof_http_requests_total{endpoint=\"%s\"} %" PRIu64 "\n",
			endpoint_names[i], (uint64_t)atomic_load(&s->requests[i]));
	fprintf(m, "# HELP edgeprof_http_connections_closed_total Connections the collector "
		   "closed: header not complete in time, too many from one address without the "
		   "token, oldest without the token closed to make room; with the token: idle "
		   "too long, too many from one address, idle one closed to make room; a body "
		   "too far behind the minimum rate, or behind it when room was needed.\n"
		   "# TYPE edgeprof_http_connections_closed_total counter\n");
	for (int i = 0; i < NCUTS; i++)
		fprintf(m, "edgeprof_http_connections_closed_total{reason=\"%s\"} %" PRIu64 "\n",
			cut_names[i], (uint64_t)atomic_load(&s->cuts[i]));
	size_t open = 0, untrusted, bodies;
	pthread_mutex_lock(&s->conns_lock);
	for (struct conn *k = s->oldest; k; k = k->next)
		open += !k->cut;
	untrusted = s->untrusted;
	bodies = s->bodies_held;
	pthread_mutex_unlock(&s->conns_lock);
	fprintf(m,
		"# HELP edgeprof_http_body_bytes Request body bytes held now, all connections "
		"together (at most edgeprof_http_body_bytes_max).\n"
		"# TYPE edgeprof_http_body_bytes gauge\n"
		"edgeprof_http_body_bytes %zu\n"
		"# HELP edgeprof_http_body_bytes_max The bound on them (--max-bodies-mib).\n"
		"# TYPE edgeprof_http_body_bytes_max gauge\n"
		"edgeprof_http_body_bytes_max %zu\n"
		"# HELP edgeprof_http_bodies_refused_total Requests answered 503 because request "
		"bodies held all the room and every one was arriving in time.\n"
		"# TYPE edgeprof_http_bodies_refused_total counter\n"
		"edgeprof_http_bodies_refused_total %" PRIu64 "\n",
		bodies, s->cfg.max_bodies, (uint64_t)atomic_load(&s->bodies_refused));
	fprintf(m,
		"# HELP edgeprof_http_connections Open connections, by whether they showed the "
		"token.\n"
		"# TYPE edgeprof_http_connections gauge\n"
		"edgeprof_http_connections{token=\"yes\"} %zu\n"
		"edgeprof_http_connections{token=\"no\"} %zu\n",
		open - untrusted, untrusted);
}

static enum MHD_Result handle_metrics(struct ep_server *s, struct MHD_Connection *c,
				      const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	char *body = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&body, &len);
	if (!m)
		return respond_text(c, 500, "out of memory\n");
	metrics_ingest(s, m);
	metrics_sessions(s, m);
	metrics_http(s, m);
	if (s->cfg.binaries)
		ep_binaries_metrics(s->cfg.binaries, m);
	fclose(m);
	return respond(c, 200, "text/plain; version=0.0.4", body, len);
}

static enum MHD_Result handle_ingest(struct ep_server *s, struct MHD_Connection *c, const char *url,
				     struct request *rq)
{
	(void)url;
	if (rq->too_large) {
		atomic_fetch_add(&s->too_large_bodies, 1);
		return respond_text(c, 413, "body larger than %zu bytes\n", s->cfg.max_body);
	}
	/* only zstd: its frame's checksum is what tells a batch damaged in an
	 * agent's spool from another batch (common/wire/wire.c); an identity
	 * body carries nothing that would */
	const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
	if (!enc || strcmp(enc, "zstd") != 0) {
		atomic_fetch_add(&s->bad_encoding, 1);
		return respond_text(c, 415,
				    "Content-Encoding %s: expected zstd (one frame with a content "
				    "checksum, as agents send)\n",
				    enc ? enc : "(none)");
	}
	char why[512] = "";
	uint64_t seq = 0;
	Edgeprof__V1__Batch *batch = NULL;
	enum ep_ingest_result r =
	    ep_ingest_batch(s->ingest, rq->body, rq->len, true, &seq, why, sizeof(why), &batch);
	switch (r) {
	case EP_INGEST_STORED:
	case EP_INGEST_DUPLICATE: {
		Edgeprof__V1__IngestResponse resp = EDGEPROF__V1__INGEST_RESPONSE__INIT;
		resp.status = r == EP_INGEST_STORED
				  ? EDGEPROF__V1__INGEST_RESPONSE__STATUS__STORED
				  : EDGEPROF__V1__INGEST_RESPONSE__STATUS__DUPLICATE;
		resp.sequence = seq;
		resp.wire_version = EP_WIRE_VERSION;
		/* the batch's session reports are applied only now that its
		 * counts are durable: a session is done once its counts are in */
		if (s->sessions && batch)
			ep_sessions_on_batch(s->sessions, batch, &resp);
		ep_wire_free(batch);
		size_t len = edgeprof__v1__ingest_response__get_packed_size(&resp);
		char *body = malloc(len ? len : 1);
		if (body)
			edgeprof__v1__ingest_response__pack(&resp, (uint8_t *)body);
		ep_sessions_response_free(&resp);
		if (!body)
			return respond_text(c, 500, "out of memory\n");
		return respond(c, 200, "application/x-protobuf", body, len);
	}
	case EP_INGEST_BAD_REQUEST:
		ep_debug("ingest: refused a batch: %s", why);
		return respond_text(c, 400, "%s\n", why);
	case EP_INGEST_TOO_LARGE:
		return respond_text(c, 413, "%s\n", why);
	case EP_INGEST_STORE_ERROR:
	default:
		return respond_text(c, 503, "%s\n", why);
	}
}

static const char *arg(struct MHD_Connection *c, const char *name)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	return v ? v : "";
}

/* "30", "30s", "2m": seconds, *out in milliseconds; -1 when it is none of
 * those, -2 when it is one but its milliseconds do not fit 64 bits (a
 * wrapped product once passed the maximum-duration check as a short
 * session). Digits only: strtoull would also take " 5", "+5" and "-5". */
static int parse_duration_ms(const char *v, uint64_t *out)
{
	if (*v < '0' || *v > '9')
		return -1;
	uint64_t x = 0;
	bool over = false;
	for (; *v >= '0' && *v <= '9'; v++) {
		unsigned d = (unsigned)(*v - '0');
		if (x > (UINT64_MAX - d) / 10)
			over = true;
		else
			x = x * 10 + d;
	}
	uint64_t unit_ms = 1000;
	if (*v == 's')
		v++;
	else if (*v == 'm') {
		unit_ms = 60000;
		v++;
	}
	if (*v)
		return -1;
	if (over || x > UINT64_MAX / unit_ms)
		return -2;
	*out = x * unit_ms;
	return 0;
}

static enum MHD_Result no_sessions(struct MHD_Connection *c)
{
	return respond_text(c, 404, "this collector runs no on-demand sessions\n");
}

/* GET /v1/nodes */
static enum MHD_Result handle_nodes(struct ep_server *s, struct MHD_Connection *c, const char *url,
				    struct request *rq)
{
	(void)url;
	(void)rq;
	if (!s->sessions)
		return no_sessions(c);
	struct ep_api_response bad = {0};
	struct ep_store_page page;
	if (ep_api_page(&s->cfg.api, query_arg, c, &page, &bad) != 0)
		return respond(c, bad.status, bad.content_type, bad.body, bad.len);
	size_t len = 0;
	char *body = ep_sessions_nodes_page_json(s->sessions, page.after, page.limit, &len);
	return body ? respond(c, 200, "application/json", body, len)
		    : respond_text(c, 500, "out of memory\n");
}

/* GET /v1/sessions/ID */
static enum MHD_Result handle_session_get(struct ep_server *s, struct MHD_Connection *c,
					  const char *url, struct request *rq)
{
	(void)rq;
	if (!s->sessions)
		return no_sessions(c);
	const char *id = url + strlen("/v1/sessions/");
	struct ep_api_response resp = {0};
	char why[512] = "";
	Edgeprof__V1__Session *got = ep_sessions_get(s->sessions, id, why, sizeof(why));
	if (!got)
		return why[0] ? respond_text(c, 503, "%s\n", why)
			      : respond_text(c, 404, "session %s: no such session\n", id);
	ep_api_session(got, arg(c, "format"), 200, &resp);
	ep_store_free_session(got);
	return respond(c, resp.status, resp.content_type, resp.body, resp.len);
}

/* POST /v1/sessions?pid=|container_id=|cgroup=|pod=&duration_s=... */
static enum MHD_Result handle_session_new(struct ep_server *s, struct MHD_Connection *c,
					  const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	if (!s->sessions)
		return no_sessions(c);
	struct ep_api_response resp = {0};
	char why[512] = "";
	Edgeprof__V1__Session req = EDGEPROF__V1__SESSION__INIT;
	req.container_id = (char *)arg(c, "container_id");
	req.cgroup = (char *)arg(c, "cgroup");
	req.pod = (char *)arg(c, "pod");
	req.node = (char *)arg(c, "node");
	req.mode = (char *)arg(c, "mode");
	const char *cycles = arg(c, "cycles");
	if (*cycles && strcmp(cycles, "0") != 0 && strcmp(cycles, "1") != 0)
		return respond_text(c, 400, "cycles '%s': expected 1 or 0\n", cycles);
	req.cycles = strcmp(cycles, "1") == 0;
	uint64_t duration_ms = 0;
	int parsed = parse_duration_ms(arg(c, "duration_s"), &duration_ms);
	char *end;
	unsigned long long pid = strtoull(arg(c, "pid"), &end, 10);
	if (*end || pid > UINT32_MAX)
		return respond_text(c, 400, "pid '%s': not a process id\n", arg(c, "pid"));
	req.pid = (uint32_t)pid;
	req.period = strtoull(arg(c, "period"), &end, 10);
	if (*end || strchr(arg(c, "period"), '-')) /* strtoull takes "-1" as 2^64-1 */
		return respond_text(c, 400, "period '%s': not a number of events\n",
				    arg(c, "period"));
	if (parsed == -1)
		return respond_text(c, 400, "duration_s '%s': expected seconds (30, 30s, 2m)\n",
				    arg(c, "duration_s"));
	if (parsed == -2)
		return respond_text(c, 400,
				    "duration_s '%s' is over this collector's maximum of %u s "
				    "(--max-session-s)\n",
				    arg(c, "duration_s"), ep_sessions_max_duration_s(s->sessions));
	req.duration_ms = duration_ms;
	Edgeprof__V1__Session *created = NULL;
	int status = ep_sessions_create(s->sessions, &req, &created, why, sizeof(why));
	if (status == 429)
		return respond_retry(c, 429, ep_sessions_retry_s(s->sessions), false, "%s\n", why);
	if (status != 0)
		return respond_text(c, (unsigned)status, "%s\n", why);
	ep_api_session(created, arg(c, "format"), 201, &resp);
	ep_store_free_session(created);
	return respond(c, resp.status, resp.content_type, resp.body, resp.len);
}

static enum MHD_Result no_binaries(struct MHD_Connection *c)
{
	return respond_text(c, 404, "this collector keeps no binaries\n");
}

/* GET /v1/images/ID: 200 when its code is kept, 404 when not. */
static enum MHD_Result handle_image_has(struct ep_server *s, struct MHD_Connection *c,
					const char *url, struct request *rq)
{
	(void)rq;
	if (!s->cfg.binaries)
		return no_binaries(c);
	const char *id = url + strlen("/v1/images/");
	char msg[512];
	if (ep_build_id_check(id, msg, sizeof(msg)) != 0)
		return respond_text(c, 400, "%s\n", msg);
	int r = ep_binaries_has(s->cfg.binaries, id, msg, sizeof(msg));
	if (r < 0)
		return respond_text(c, 503, "store: %s\n", msg);
	/* `edgeprof upload` sends code in place of a provisional image */
	return r ? respond_text(c, 200, "%s: kept, %s\n", id,
				r == EP_IMAGE_TRUSTED ? "trusted" : "provisional")
		 : respond_text(c, 404, "%s: not here\n", id);
}

/* POST /v1/images?build_id=&path=&source= with the ELF file as body */
static enum MHD_Result handle_image_upload(struct ep_server *s, struct MHD_Connection *c,
					   const char *url, struct request *rq)
{
	(void)url;
	if (!s->cfg.binaries)
		return no_binaries(c);
	char msg[512];
	if (rq->too_large) {
		ep_binaries_count(s->cfg.binaries, EP_IMAGE_TOO_LARGE);
		return respond_text(c, 413, "body larger than %zu bytes (--max-binary-mib)\n",
				    ep_binaries_max_file(s->cfg.binaries));
	}
	/* Trust: an agent sends what a process it profiles mapped, so its
	 * images are provisional whatever it says. source=upload (trusted)
	 * needs the upload token when there is one, else the fleet token
	 * already checked; the agent never says it. */
	struct ep_image_claim claim = {.build_id = arg(c, "build_id"),
				       .arch = arg(c, "arch"),
				       .path = arg(c, "path"),
				       .source = EP_IMAGE_FROM_AGENT};
	const char *source = arg(c, "source");
	bool uploader = upload_token_shown(s, c);
	if (strcmp(source, "upload") == 0 || (!*source && uploader)) {
		if (s->has_upload_token && !uploader) {
			ep_binaries_count(s->cfg.binaries, EP_IMAGE_FORBIDDEN);
			return respond_text(
			    c, 403,
			    "source=upload needs this collector's upload token "
			    "(--upload-token-file); the fleet token sends provisional "
			    "images only (source=agent)\n");
		}
		claim.source = EP_IMAGE_FROM_UPLOAD;
	} else if (*source && strcmp(source, "agent") != 0) {
		ep_binaries_count(s->cfg.binaries, EP_IMAGE_REFUSED);
		return respond_text(c, 400, "source '%.32s': expected upload or agent\n", source);
	}
	if (*arg(c, "build_id") && ep_build_id_check(arg(c, "build_id"), msg, sizeof(msg)) != 0)
		return respond_text(c, 400, "refused: %s\n", msg);
	int status =
	    ep_binaries_upload(s->cfg.binaries, rq->body, rq->len, &claim, msg, sizeof(msg));
	if (status >= 400)
		ep_warn("binary upload%s%s: %s", *arg(c, "path") ? " of " : "", arg(c, "path"),
			msg);
	return respond_text(c, (unsigned)status, "%s\n", msg);
}

static const char *web_arg(void *ctx, const char *name)
{
	return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result respond_web(struct MHD_Connection *c, struct ep_api_response *resp,
				   const char *set_cookie, const char *location)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    resp->len, resp->body ? resp->body : (char *)"",
	    resp->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		free(resp->body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", resp->content_type);
	/* the pages load nothing from elsewhere, and are not to be framed */
	MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'self'; style-src 'self' 'unsafe-inline'; "
				"img-src 'self' data:; frame-ancestors 'none'");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (set_cookie)
		MHD_add_response_header(r, "Set-Cookie", set_cookie);
	if (location)
		MHD_add_response_header(r, "Location", location);
	enum MHD_Result rc = MHD_queue_response(c, (unsigned)resp->status, r);
	MHD_destroy_response(r);
	return rc;
}

/* /signout (GET or POST): the cookie dropped */
static enum MHD_Result handle_signout(struct ep_server *s, struct MHD_Connection *c,
				      const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	struct ep_api_response resp = {0};
	char cookie[256];
	snprintf(cookie, sizeof(cookie),
		 EP_WEB_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0%s",
		 s->cert_pem ? "; Secure" : "");
	ep_web_redirect("/signin", &resp);
	return respond_web(c, &resp, cookie, "/signin");
}

/* GET /signin: the form */
static enum MHD_Result handle_signin_form(struct ep_server *s, struct MHD_Connection *c,
					  const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	struct ep_api_response resp = {0};
	ep_web_signin_page(s->has_token, NULL, &resp);
	return respond_web(c, &resp, NULL, NULL);
}

/* POST /signin: token=... (a form body, so it is never in a URL or a
 * log), checked, kept in an HttpOnly cookie */
static enum MHD_Result handle_signin(struct ep_server *s, struct MHD_Connection *c, const char *url,
				     struct request *rq)
{
	(void)url;
	struct ep_api_response resp = {0};
	const char *secure = s->cert_pem ? "; Secure" : "";
	char cookie[1024];
	char given[sizeof(s->token)];
	if (!s->has_token ||
	    !ep_web_form_value((const char *)rq->body, rq->len, "token", given, sizeof(given)) ||
	    !token_matches(s->token, given)) {
		atomic_fetch_add(&s->unauthorized, 1);
		ep_web_signin_page(s->has_token, "That is not this collector's token.", &resp);
		resp.status = 401;
		return respond_web(c, &resp, NULL, NULL);
	}
	snprintf(cookie, sizeof(cookie), EP_WEB_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict%s",
		 given, secure);
	explicit_bzero(given, sizeof(given));
	ep_web_redirect("/", &resp);
	enum MHD_Result rc = respond_web(c, &resp, cookie, "/");
	explicit_bzero(cookie, sizeof(cookie));
	return rc;
}

static struct ep_web_ctx web_ctx(const struct ep_server *s)
{
	return (struct ep_web_ctx){.store = s->store,
				   .binaries = s->cfg.binaries,
				   .sessions = s->sessions,
				   .signed_in = s->has_token};
}

/* GET of one of the UI's pages */
static enum MHD_Result handle_page(struct ep_server *s, struct MHD_Connection *c, const char *url,
				   struct request *rq)
{
	(void)rq;
	struct ep_api_response resp = {0};
	struct ep_web_ctx w = web_ctx(s);
	ep_web_page(&w, url, web_arg, c, &resp);
	return respond_web(c, &resp, NULL, NULL);
}

/* POST of one of the UI's forms */
static enum MHD_Result handle_form(struct ep_server *s, struct MHD_Connection *c, const char *url,
				   struct request *rq)
{
	struct ep_api_response resp = {0};
	struct ep_web_ctx w = web_ctx(s);
	char location[512];
	ep_web_form(&w, url, (const char *)rq->body, rq->len, &resp, location, sizeof(location));
	return respond_web(c, &resp, NULL, location[0] ? location : NULL);
}

static enum MHD_Result handle_binaries(struct ep_server *s, struct MHD_Connection *c,
				       const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	return handle_query(s, c, Q_BINARIES);
}

static enum MHD_Result handle_profile(struct ep_server *s, struct MHD_Connection *c,
				      const char *url, struct request *rq)
{
	(void)url;
	(void)rq;
	return handle_query(s, c, Q_PROFILE);
}

static enum MHD_Result handle_top(struct ep_server *s, struct MHD_Connection *c, const char *url,
				  struct request *rq)
{
	(void)url;
	(void)rq;
	return handle_query(s, c, Q_TOP);
}

static enum MHD_Result handle_healthz(struct ep_server *s, struct MHD_Connection *c,
				      const char *url, struct request *rq)
{
	(void)s;
	(void)url;
	(void)rq;
	return respond_text(c, 200, "ok\n");
}

static enum MHD_Result handle_readyz(struct ep_server *s, struct MHD_Connection *c, const char *url,
				     struct request *rq)
{
	(void)url;
	(void)rq;
	char err[512];
	if (ep_store_has_batch(s->store, "readyz", 0, err, sizeof(err)) < 0)
		return respond_text(c, 503, "store: %s\n", err);
	return respond_text(c, 200, "ok\n");
}

/* Bodies' buffers are mapped, not malloc'd: unmapped, their memory goes
 * back at once. From malloc, a freed 16 MiB buffer raised glibc's mmap
 * threshold and stayed in a thread's arena: 72 held 16 MiB bodies took
 * the collector to 502 MiB with 256 MiB of bodies held. */
static uint8_t *body_map(uint8_t *old, size_t old_cap, size_t cap)
{
	void *p = old ? mremap(old, old_cap, cap, MREMAP_MAYMOVE)
		      : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The body's buffer unmapped and its room given back. */
static void drop_body(struct ep_server *s, struct request *rq)
{
	if (rq->body) {
		explicit_bzero(rq->body, rq->len); /* a sign-in's token */
		munmap(rq->body, rq->cap);
	}
	body_release(s, rq->k, rq->cap);
	rq->body = NULL;
	rq->len = rq->cap = 0;
}

/* Room for a request's body, or its refusal: room for more than its
 * first 64 KiB is taken as the bytes arrive (take_body), so a client
 * holds no more memory than it has sent. */
static bool body_room(struct ep_server *s, struct request *rq, size_t want)
{
	if (body_reserve(s, rq->k, want) != 0) {
		atomic_fetch_add(&s->bodies_refused, 1);
		say_limited(s, SAID_NO_ROOM,
			    "a request body (%zu bytes of %zu declared) found no room: bodies "
			    "being received hold at most %zu bytes (--max-bodies-mib); %s",
			    rq->len + want, rq->declared, s->cfg.max_bodies,
			    rq->len ? "connection closed" : "503");
		return false;
	}
	return true;
}

/* The bytes of body rt takes */
static size_t body_limit(const struct ep_server *s, const struct route *rt)
{
	switch (rt->body) {
	case NO_BODY:
		return 0;
	case FORM_BODY:
		return FORM_BODY_MAX;
	case IMAGE_BODY:
		if (s->cfg.binaries)
			return ep_binaries_max_file(s->cfg.binaries);
		break;
	case BATCH_BODY:
		break;
	}
	return s->cfg.max_body;
}

/* The header is in: the body's declared size checked against the bounds
 * before any of it is read, its first room taken. */
static enum MHD_Result begin_body(struct ep_server *s, struct MHD_Connection *c, const char *method,
				  const struct route *rt, void **con_cls)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
	unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
	bool has_body = declared > 0 || te;
	size_t limit = body_limit(s, rt);
	if (has_body && rt->body == NO_BODY)
		return respond_text(c, 400, "a %s request carries no body here\n", method);
	if (declared > limit) {
		bool image = rt->body == IMAGE_BODY && s->cfg.binaries;
		if (image)
			ep_binaries_count(s->cfg.binaries, EP_IMAGE_TOO_LARGE);
		else
			atomic_fetch_add(&s->too_large_bodies, 1);
		return respond_text(c, 413, "body larger than %zu bytes%s\n", limit,
				    image ? " (--max-binary-mib)" : "");
	}
	if (declared > s->cfg.max_bodies) {
		atomic_fetch_add(&s->too_large_bodies, 1);
		return respond_text(c, 413,
				    "body of %llu bytes: more than all request bodies together may "
				    "hold (%zu bytes, --max-bodies-mib)\n",
				    declared, s->cfg.max_bodies);
	}
	struct request *rq = calloc(1, sizeof(*rq));
	if (!rq)
		return MHD_NO;
	rq->route = rt;
	rq->k = conn_of(c);
	rq->limit = limit;
	rq->declared = (size_t)declared;
	*con_cls = rq;
	if (!has_body)
		return MHD_YES;
	body_begins(s, rq->k);
	size_t first = declared && declared < 65536 ? (size_t)declared : 65536;
	if (first > limit)
		first = limit;
	if (!body_room(s, rq, first)) {
		body_arrived(s, rq->k, 0, true);
		return respond_retry(c, 503, 1, true,
				     "no room for a request body now: bodies being received hold "
				     "%zu bytes at most (--max-bodies-mib), and every one is "
				     "arriving at %u bytes/s or more (--body-min-rate); retry\n",
				     s->cfg.max_bodies, s->cfg.body_min_rate);
	}
	rq->cap = first;
	if (first && !(rq->body = body_map(NULL, 0, first))) {
		drop_body(s, rq);
		return MHD_NO;
	}
	return MHD_YES;
}

/* n more bytes of body: kept while the route's limit and the room for
 * bodies allow. */
static enum MHD_Result take_body(struct ep_server *s, struct request *rq, const char *upload,
				 size_t n)
{
	body_arrived(s, rq->k, n, false);
	if (rq->too_large)
		return MHD_YES;
	if (rq->len + n > rq->limit) {
		rq->too_large = true;
		drop_body(s, rq);
		return MHD_YES;
	}
	if (rq->len + n > rq->cap) {
		size_t cap = rq->cap ? rq->cap : 65536;
		while (cap < rq->len + n)
			cap *= 2;
		/* the declared size is what it ends at: no doubling past it */
		if (rq->declared && cap > rq->declared)
			cap = rq->declared;
		if (cap > rq->limit)
			cap = rq->limit;
		/* MHD cannot answer in the middle of a body: the connection
		 * is closed, which an agent retries like a 503 */
		if (!body_room(s, rq, cap - rq->cap))
			return MHD_NO;
		uint8_t *b = body_map(rq->body, rq->cap, cap);
		if (!b) {
			body_release(s, rq->k, cap - rq->cap);
			return MHD_NO;
		}
		rq->body = b;
		rq->cap = cap;
	}
	memcpy(rq->body + rq->len, upload, n);
	rq->len += n;
	return MHD_YES;
}

/* Every endpoint: the one place that says who may use it, with what body,
 * and what serves it (docs/collector.md's endpoint table is this one;
 * tests/integration/test_routes.sh holds them to each other). */
static const struct route routes[] = {
    {"POST", "/v1/ingest", TOKEN, BATCH_BODY, E_INGEST, handle_ingest},
    {"GET", "/v1/binaries", TOKEN, NO_BODY, E_BINARIES, handle_binaries},
    {"GET", "/v1/profile", TOKEN, NO_BODY, E_PROFILE, handle_profile},
    {"GET", "/v1/top", TOKEN, NO_BODY, E_PROFILE, handle_top},
    {"POST", "/v1/sessions", TOKEN, NO_BODY, E_SESSIONS, handle_session_new},
    {"GET", "/v1/sessions/", TOKEN, NO_BODY, E_SESSIONS, handle_session_get},
    {"GET", "/v1/nodes", TOKEN, NO_BODY, E_SESSIONS, handle_nodes},
    {"POST", "/v1/images", TOKEN_OR_UPLOAD, IMAGE_BODY, E_IMAGES, handle_image_upload},
    {"GET", "/v1/images/", TOKEN_OR_UPLOAD, NO_BODY, E_IMAGES, handle_image_has},
    {"GET", "/metrics", OPEN, NO_BODY, E_METRICS, handle_metrics},
    {"GET", "/healthz", OPEN, NO_BODY, E_HEALTH, handle_healthz},
    {"GET", "/readyz", OPEN, NO_BODY, E_HEALTH, handle_readyz},
    {"GET", "/signin", OPEN, NO_BODY, E_SIGNIN, handle_signin_form},
    {"POST", "/signin", OPEN, FORM_BODY, E_SIGNIN, handle_signin},
    {"GET", "/signout", OPEN, NO_BODY, E_SIGNIN, handle_signout},
    {"POST", "/signout", OPEN, FORM_BODY, E_SIGNIN, handle_signout},
    {"GET", "/", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"GET", "/top", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"GET", "/binary", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"GET", "/function", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"GET", "/diff", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"GET", "/fleet", SIGNED_IN, NO_BODY, E_UI, handle_page},
    {"POST", "/fleet/start", SIGNED_IN, FORM_BODY, E_UI, handle_form},
    {"GET", "/ui/style.css", OPEN, NO_BODY, E_UI, handle_page},
};

static bool path_matches(const struct route *rt, const char *url)
{
	size_t n = strlen(rt->path);
	return rt->path[n - 1] == '/' && n > 1 ? strncmp(url, rt->path, n) == 0
					       : strcmp(url, rt->path) == 0;
}

/* The route for method and url, or NULL; *at: a route of url's path
 * whatever the method (NULL: no such path). */
static const struct route *route_of(const char *method, const char *url, const struct route **at)
{
	bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	*at = NULL;
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *rt = &routes[i];
		if (!path_matches(rt, url))
			continue;
		if (!*at)
			*at = rt;
		if (strcmp(rt->method, method) == 0 || (get && strcmp(rt->method, "GET") == 0))
			return rt;
	}
	return NULL;
}

/* Refused before anything else is read: a browser's request from another
 * site, a client without the certificate asked for. */
static bool refused_early(struct ep_server *s, struct MHD_Connection *c, const char *method,
			  const char *url, enum MHD_Result *answer)
{
	bool safe = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	const char *origin = NULL;
	if (!safe && cross_site(c, &origin)) {
		atomic_fetch_add(&s->cross_site, 1);
		say_limited(s, SAID_CROSS_SITE, "%s %s from another site (Origin %.200s) refused",
			    method, url, origin ? origin : "not sent");
		*answer = respond_text(c, 403,
				       "%s %s: cross-site request refused (Origin %.200s): "
				       "this collector takes requests that change state only "
				       "from its own pages or from clients that are not browsers\n",
				       method, url, origin ? origin : "not sent");
		return true;
	}
	if (!client_certified(s, c)) {
		atomic_fetch_add(&s->forbidden, 1);
		*answer = respond_text(c, 403,
				       "a client certificate signed by the collector's "
				       "client CA is required\n");
		return true;
	}
	return false;
}

/* The first call for a request: its header only. Refused before reading
 * any body, or its body's room taken. */
static enum MHD_Result on_header(struct ep_server *s, struct MHD_Connection *c, const char *url,
				 const char *method, void **con_cls)
{
	const struct route *at;
	const struct route *rt = route_of(method, url, &at);
	atomic_fetch_add(&s->requests[at ? at->endpoint : E_OTHER], 1);
	enum MHD_Result answer;
	if (refused_early(s, c, method, url, &answer))
		return answer;
	enum access access = at ? at->access : OPEN;
	bool allowed = authorized(s, c);
	/* the upload token opens /v1/images and nothing else */
	bool uploader = access == TOKEN_OR_UPLOAD && upload_token_shown(s, c);
	header_complete(s, c, (s->has_token && allowed) || uploader);
	if ((access == TOKEN || access == TOKEN_OR_UPLOAD) && !allowed && !uploader) {
		atomic_fetch_add(&s->unauthorized, 1);
		return respond_text(c, 401, "missing or wrong bearer token\n");
	}
	if (over_token_quota(c))
		return respond_retry(c, 429, 1, true,
				     "too many connections with the token from this address: "
				     "at most %u, none of them idle (--max-token-conns)\n",
				     s->cfg.max_token_conns);
	if (!at)
		return respond_text(c, 404, "%s: no such endpoint\n", url);
	if (access == SIGNED_IN && !allowed) {
		struct ep_api_response resp = {0};
		ep_web_redirect("/signin", &resp);
		return respond_web(c, &resp, NULL, "/signin");
	}
	if (!rt)
		return respond_text(c, 405, "%s: method %s not allowed\n", url, method);
	return begin_body(s, c, method, rt, con_cls);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	(void)version;
	struct ep_server *s = cls;
	struct request *rq = *con_cls;
	if (!rq)
		return on_header(s, c, url, method, con_cls);
	if (*upload_size) {
		size_t n = *upload_size;
		*upload_size = 0;
		return take_body(s, rq, upload, n);
	}
	body_arrived(s, rq->k, 0, true);
	return rq->route->handle(s, c, url, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)toe;
	request_done(cls, c);
	struct request *rq = *con_cls;
	if (rq) {
		drop_body(cls, rq);
		free(rq);
		*con_cls = NULL;
	}
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	ep_debug("http: %s", line);
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, char *err, size_t errlen)
{
	memset(ss, 0, sizeof(*ss));
	const char *colon = strrchr(listen, ':');
	if (!colon) {
		snprintf(err, errlen, "--listen '%s': expected HOST:PORT", listen);
		return -1;
	}
	char host[128];
	size_t hl = (size_t)(colon - listen);
	if (hl >= sizeof(host)) {
		snprintf(err, errlen, "--listen '%s': host too long", listen);
		return -1;
	}
	memcpy(host, listen, hl);
	host[hl] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port > 65535) {
		snprintf(err, errlen, "--listen '%s': bad port", listen);
		return -1;
	}
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1) {
			snprintf(err, errlen, "--listen '%s': bad IPv6 address", listen);
			return -1;
		}
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (!host[0] || strcmp(host, "0.0.0.0") == 0)
		a->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (strcmp(host, "localhost") == 0)
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
		snprintf(err, errlen, "--listen '%s': '%s' is not an IPv4 address", listen, host);
		return -1;
	}
	return 0;
}

struct ep_server *ep_server_start(const struct ep_server_config *cfg, struct ep_store *store,
				  struct ep_ingest *ingest, struct ep_sessions *sessions, char *err,
				  size_t errlen)
{
	struct ep_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	if (!s->cfg.max_body)
		s->cfg.max_body = DEFAULT_MAX_BODY;
	s->store = store;
	s->ingest = ingest;
	s->sessions = sessions;
	if (!s->cfg.header_timeout_s)
		s->cfg.header_timeout_s = DEFAULT_HEADER_TIMEOUT_S;
	if (!s->cfg.max_client_conns)
		s->cfg.max_client_conns = DEFAULT_MAX_CLIENT_CONNS;
	s->header_timeout_ns = (uint64_t)s->cfg.header_timeout_s * 1000000000ULL;
	if (!s->cfg.idle_timeout_s)
		s->cfg.idle_timeout_s = DEFAULT_IDLE_TIMEOUT_S;
	if (!s->cfg.max_token_conns)
		s->cfg.max_token_conns = DEFAULT_MAX_TOKEN_CONNS;
	if (!s->cfg.max_bodies)
		s->cfg.max_bodies = DEFAULT_MAX_BODIES;
	if (!s->cfg.body_timeout_s)
		s->cfg.body_timeout_s = DEFAULT_BODY_TIMEOUT_S;
	if (!s->cfg.body_min_rate)
		s->cfg.body_min_rate = DEFAULT_BODY_MIN_RATE;
	s->idle_timeout_ns = (uint64_t)s->cfg.idle_timeout_s * 1000000000ULL;
	s->body_timeout_ns = (uint64_t)s->cfg.body_timeout_s * 1000000000ULL;
	size_t biggest = s->cfg.max_body;
	if (cfg->binaries && ep_binaries_max_file(cfg->binaries) > biggest)
		biggest = ep_binaries_max_file(cfg->binaries);
	if (biggest > s->cfg.max_bodies)
		ep_warn(
		    "request bodies of up to %zu bytes are taken (--max-body, --max-binary-mib), "
		    "but all bodies together hold at most %zu (--max-bodies-mib): larger ones "
		    "get 413",
		    biggest, s->cfg.max_bodies);
	pthread_mutex_init(&s->conns_lock, NULL);
	pthread_cond_init(&s->conns_stop, NULL);
	pthread_cond_init(&s->bodies_freed, NULL);
	struct sockaddr_storage ss;
	if (parse_listen(cfg->listen, &ss, err, errlen) != 0)
		goto fail;
	if (cfg->token_file) {
		if (ep_read_token_file(cfg->token_file, s->token, sizeof(s->token), err, errlen) !=
		    0)
			goto fail;
		s->has_token = true;
	}
	if (cfg->upload_token_file) {
		if (ep_read_token_file(cfg->upload_token_file, s->upload_token,
				       sizeof(s->upload_token), err, errlen) != 0)
			goto fail;
		s->has_upload_token = true;
	}
	/* without a token nothing tells an agent from anyone else: every slot
	 * is theirs (one kept free so MHD admits the newcomer that evicts) */
	s->untrusted_cap = s->has_token ? CONNECTION_LIMIT / 4 * 3 : CONNECTION_LIMIT - 1;
	if (!cfg->tls_cert != !cfg->tls_key) {
		snprintf(err, errlen, "--tls-cert and --tls-key go together");
		goto fail;
	}
	if (cfg->client_ca && !cfg->tls_cert) {
		snprintf(err, errlen, "--client-ca needs --tls-cert and --tls-key");
		goto fail;
	}
	if (cfg->tls_cert && (!(s->cert_pem = read_pem(cfg->tls_cert, err, errlen)) ||
			      !(s->key_pem = read_pem(cfg->tls_key, err, errlen))))
		goto fail;
	if (cfg->client_ca && !(s->ca_pem = read_pem(cfg->client_ca, err, errlen)))
		goto fail;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	/* poll, not epoll: libmicrohttpd's epoll loop missed a client's
	 * half-close after its request (every fuzz input then waited for the
	 * header timeout, 10 s) */
	flags |= cfg->one_thread ? MHD_USE_POLL : MHD_USE_THREAD_PER_CONNECTION;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (s->cert_pem)
		flags |= MHD_USE_TLS;
	struct MHD_OptionItem tls_opts[] = {
	    {s->cert_pem ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->cert_pem},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, s->key_pem},
	    {s->ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0, s->ca_pem},
	    {MHD_OPTION_END, 0, NULL},
	};
	s->daemon = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
	    on_connection, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
	    MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_CONNECTION_LIMIT, CONNECTION_LIMIT,
	    MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
	if (!s->daemon) {
		snprintf(err, errlen, "cannot listen on %s (address in use, or bad TLS files?)",
			 cfg->listen);
		goto fail;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : 0;
	if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
		snprintf(err, errlen, "cannot start the connection watchdog");
		MHD_stop_daemon(s->daemon);
		goto fail;
	}
	s->watchdog_started = true;
	return s;
fail:
	pthread_cond_destroy(&s->bodies_freed);
	pthread_cond_destroy(&s->conns_stop);
	pthread_mutex_destroy(&s->conns_lock);
	free(s->cert_pem);
	free(s->key_pem);
	free(s->ca_pem);
	free(s);
	return NULL;
}

unsigned ep_server_port(const struct ep_server *s)
{
	return s->port;
}

void ep_server_stop(struct ep_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->conns_lock);
	s->stopping = true;
	pthread_cond_signal(&s->conns_stop);
	pthread_cond_broadcast(&s->bodies_freed);
	pthread_mutex_unlock(&s->conns_lock);
	if (s->watchdog_started)
		pthread_join(s->watchdog, NULL);
	/* closes every connection: the CLOSED notices empty the list */
	MHD_stop_daemon(s->daemon);
	pthread_cond_destroy(&s->bodies_freed);
	pthread_cond_destroy(&s->conns_stop);
	pthread_mutex_destroy(&s->conns_lock);
	free(s->cert_pem);
	free(s->key_pem);
	free(s->ca_pem);
	free(s);
}
