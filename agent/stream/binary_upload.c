/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/stream/binary_upload.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util/arch.h"
#include "common/util/clock.h"
#include "common/util/collector_list.h"
#include "common/util/http_client.h"
#include "common/util/log.h"
#include "common/util/regular_file.h"
#include "common/util/secret.h"

#define RETRY_AFTER_NS (60ULL * 1000000000ULL)
#define MAX_QUEUE      256

/* An answer is one line; a binary is sent in its own time, up to 5 min. */
static struct ep_http_config http_config(const struct ep_upload_target *t)
{
	return (struct ep_http_config){.token = t->token,
				       .ca_file = t->ca_file,
				       .cert_file = t->cert_file,
				       .key_file = t->key_file,
				       .connect_timeout_ms = 5000,
				       .timeout_ms = 300000,
				       .max_answer = 64 * 1024};
}

/* The file to send, at most max bytes: its descriptor and size, or -1
 * with why. */
static int open_file(const char *path, uint64_t max, uint64_t *size, bool *too_large, char *why,
		     size_t whylen)
{
	*too_large = false;
	int fd = ep_open_regular(path, why, whylen);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "stat: %s", strerror(errno));
	} else if ((uint64_t)st.st_size > max) {
		*too_large = true;
		snprintf(why, whylen, "%lld bytes, over the upload limit of %llu",
			 (long long)st.st_size, (unsigned long long)max);
	} else {
		*size = (uint64_t)st.st_size;
		return fd;
	}
	close(fd);
	return -1;
}

/* The body, read from the file as curl sends it: an upload holds curl's
 * buffer, never the file (up to --upload-max-mib, which may be more than
 * the agent's whole memory budget). */
struct file_body {
	int fd;
	uint64_t left;
	int error; /* errno, or EIO: the file shrank while it was sent */
};

static size_t read_body(char *buf, size_t size, size_t n, void *arg)
{
	struct file_body *f = arg;
	size_t want = size * n < f->left ? size * n : (size_t)f->left;
	if (want == 0)
		return 0;
	ssize_t got;
	do
		got = read(f->fd, buf, want);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		f->error = got < 0 ? errno : EIO;
		return CURL_READFUNC_ABORT;
	}
	f->left -= (uint64_t)got;
	return (size_t)got;
}

/* The HTTP status of one request to base + path, a POST of file's len
 * bytes when file is not NULL, else a GET (0: no answer, msg says why;
 * else msg is the answer's first line). */
static long perform(const struct ep_upload_target *t, const char *base, const char *path,
		    struct file_body *file, uint64_t len, char *msg, size_t msglen)
{
	/* no "Expect: 100-continue" wait before a body of over 1 MiB */
	static const char *const post_headers[] = {"Content-Type: application/octet-stream",
						   "Expect:", NULL};
	struct ep_http_config c = http_config(t);
	char *url = NULL;
	CURL *curl = ep_http_open(&c);
	if (!curl || asprintf(&url, "%s%s", base, path) < 0) {
		curl_easy_cleanup(curl);
		snprintf(msg, msglen, "out of memory");
		return 0;
	}
	if (file) {
		curl_easy_setopt(curl, CURLOPT_POST, 1L);
		curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
		curl_easy_setopt(curl, CURLOPT_READDATA, file);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	struct ep_http_body body;
	long status;
	CURLcode cc =
	    ep_http_perform(curl, &c, url, file ? post_headers : NULL, &body, &status, msg, msglen);
	free(url);
	curl_easy_cleanup(curl);
	if (cc == CURLE_OK)
		snprintf(msg, msglen, "%s", body.data ? strtok(body.data, "\n") : "");
	free(body.data);
	return cc == CURLE_OK ? status : 0;
}

/* ep_upload_file to the collector at base. */
static enum ep_upload_result upload_to(const struct ep_upload_target *t, const char *base,
				       const char *path, const char *build_id, const char *arch,
				       const char *source, uint64_t max_bytes, char *msg,
				       size_t msglen)
{
	bool trusted = strcmp(source, "upload") == 0;
	char *req = NULL;
	if (build_id && *build_id) {
		if (asprintf(&req, "/v1/images/%s", build_id) < 0)
			return EP_UPLOAD_FAILED;
		long status = perform(t, base, req, NULL, 0, msg, msglen);
		free(req);
		/* an agent's code is provisional there: an upload replaces it */
		if (status == 200 && !(trusted && strstr(msg, ": kept, provisional"))) {
			snprintf(msg, msglen, "the collector has %s already", build_id);
			return EP_UPLOAD_HAD;
		}
		if (status != 404 && status != 200) {
			if (status)
				snprintf(msg + strlen(msg), msglen - strlen(msg), " (HTTP %ld)",
					 status);
			return EP_UPLOAD_FAILED;
		}
	}
	uint64_t len = 0;
	bool too_large;
	char why[512];
	int fd = open_file(path, max_bytes, &len, &too_large, why, sizeof(why));
	if (fd < 0) {
		snprintf(msg, msglen, "%s", why);
		return too_large ? EP_UPLOAD_TOO_LARGE : EP_UPLOAD_UNREADABLE;
	}
	char *esc_path = curl_easy_escape(NULL, path, 0);
	bool known_arch = arch && ep_arch_from_name(arch) != EP_ARCH_UNKNOWN;
	if (!esc_path ||
	    asprintf(&req, "/v1/images?build_id=%s&arch=%s&source=%s&path=%s",
		     build_id ? build_id : "", known_arch ? arch : "", source, esc_path) < 0) {
		curl_free(esc_path);
		close(fd);
		snprintf(msg, msglen, "out of memory");
		return EP_UPLOAD_FAILED;
	}
	curl_free(esc_path);
	struct file_body file = {.fd = fd, .left = len};
	long status = perform(t, base, req, &file, len, msg, msglen);
	free(req);
	close(fd);
	if (file.error) {
		snprintf(msg, msglen, "read: %s",
			 file.error == EIO ? "the file shrank while it was sent"
					   : strerror(file.error));
		return EP_UPLOAD_UNREADABLE;
	}
	switch (status) {
	case 201:
		return EP_UPLOAD_SENT;
	case 200:
		return EP_UPLOAD_HAD;
	case 400:
	case 403: /* source=upload without the collector's upload token */
		return EP_UPLOAD_REFUSED;
	case 413:
		return EP_UPLOAD_TOO_LARGE;
	default:
		if (status)
			snprintf(msg + strlen(msg), msglen - strlen(msg), " (HTTP %ld)", status);
		return EP_UPLOAD_FAILED;
	}
}

enum ep_upload_result ep_upload_file(const struct ep_upload_target *t, const char *path,
				     const char *build_id, const char *arch, const char *source,
				     uint64_t max_bytes, char *msg, size_t msglen)
{
	/* replicas share one store: one that fails is as good as any other
	 * to try next, and the first to answer settles it */
	size_t n = ep_collector_list_count(t->collectors);
	enum ep_upload_result r = EP_UPLOAD_FAILED;
	for (size_t tries = 0; tries < n && r == EP_UPLOAD_FAILED; tries++) {
		size_t at = ep_collector_list_pick(t->collectors);
		const char *base = ep_collector_list_url(t->collectors, at);
		char one[512] = "";
		r = upload_to(t, base, path, build_id, arch, source, max_bytes, one, sizeof(one));
		if (r == EP_UPLOAD_FAILED) {
			ep_collector_list_failed(t->collectors, at);
			if (n > 1)
				ep_debug("binary %s: collector %s: %s", path, base, one);
		}
		snprintf(msg, msglen, "%s%s%s", n > 1 && r == EP_UPLOAD_FAILED ? base : "",
			 n > 1 && r == EP_UPLOAD_FAILED ? ": " : "", one);
	}
	return r;
}

/* ---- the agent's uploader ---- */

struct offered {
	char build_id[129];
	uint64_t retry_ns; /* 0: settled; else offered again after this */
};

struct job {
	char build_id[129];
	char arch[16];
	char *path;
};

struct ep_uploader {
	struct ep_upload_target target;
	char token[512];
	char *ca_file, *cert_file, *key_file;
	uint64_t max_bytes;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake, idle;
	struct job queue[MAX_QUEUE];
	size_t head, count;
	bool busy, stopping;
	/* the latest EP_UPLOADER_REMEMBERED build-ids offered, the oldest
	 * overwritten first: any container can make the node run binaries of
	 * as many build-ids as it likes */
	struct offered offered[EP_UPLOADER_REMEMBERED];
	size_t noffered, next_offered;
	struct ep_upload_counters counters;
};

static struct offered *find_offered(struct ep_uploader *u, const char *build_id)
{
	for (size_t i = 0; i < u->noffered; i++)
		if (strcmp(u->offered[i].build_id, build_id) == 0)
			return &u->offered[i];
	return NULL;
}

/* What an uploader holds once its thread is gone (or never started). */
static void release(struct ep_uploader *u)
{
	pthread_cond_destroy(&u->idle);
	pthread_cond_destroy(&u->wake);
	pthread_mutex_destroy(&u->lock);
	free(u->ca_file);
	free(u->cert_file);
	free(u->key_file);
	explicit_bzero(u->token, sizeof(u->token));
	free(u);
}

static void *uploader_main(void *arg)
{
	struct ep_uploader *u = arg;
	pthread_mutex_lock(&u->lock);
	for (;;) {
		while (!u->count && !u->stopping)
			pthread_cond_wait(&u->wake, &u->lock);
		if (!u->count)
			break;
		struct job j = u->queue[u->head];
		u->head = (u->head + 1) % MAX_QUEUE;
		u->count--;
		u->busy = true;
		pthread_mutex_unlock(&u->lock);
		char msg[512] = "";
		enum ep_upload_result r = ep_upload_file(&u->target, j.path, j.build_id, j.arch,
							 "agent", u->max_bytes, msg, sizeof(msg));
		pthread_mutex_lock(&u->lock);
		struct offered *o = find_offered(u, j.build_id);
		switch (r) {
		case EP_UPLOAD_SENT:
			u->counters.sent++;
			ep_debug("binary %s (%s) sent to the collector for its UI", j.build_id,
				 j.path);
			break;
		case EP_UPLOAD_HAD:
			u->counters.had++;
			break;
		case EP_UPLOAD_REFUSED:
			u->counters.refused++;
			ep_warn("binary %s (%s): the collector refused it: %s", j.build_id, j.path,
				msg);
			break;
		case EP_UPLOAD_TOO_LARGE:
			u->counters.too_large++;
			ep_debug("binary %s (%s) not sent: %s", j.build_id, j.path, msg);
			break;
		case EP_UPLOAD_UNREADABLE:
			u->counters.unreadable++;
			ep_debug("binary %s (%s) not sent: %s", j.build_id, j.path, msg);
			break;
		case EP_UPLOAD_FAILED:
			u->counters.failed++;
			ep_debug("binary %s (%s) not sent, tried again later: %s", j.build_id,
				 j.path, msg);
			if (o)
				o->retry_ns = ep_mono_ns() + RETRY_AFTER_NS;
			break;
		}
		if (o && r != EP_UPLOAD_FAILED)
			o->retry_ns = 0;
		free(j.path);
		u->busy = false;
		pthread_cond_broadcast(&u->idle);
	}
	u->busy = false;
	pthread_cond_broadcast(&u->idle);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

struct ep_uploader *ep_uploader_start(const struct ep_streamer_config *cfg,
				      struct ep_collector_list *collectors, uint64_t max_bytes,
				      char *err, size_t errlen)
{
	struct ep_uploader *u = calloc(1, sizeof(*u));
	if (!u) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (cfg->token_file &&
	    ep_read_token_file(cfg->token_file, u->token, sizeof(u->token), err, errlen) != 0) {
		free(u);
		return NULL;
	}
	u->ca_file = cfg->ca_file ? strdup(cfg->ca_file) : NULL;
	u->cert_file = cfg->cert_file ? strdup(cfg->cert_file) : NULL;
	u->key_file = cfg->key_file ? strdup(cfg->key_file) : NULL;
	u->target = (struct ep_upload_target){.collectors = collectors,
					      .token = cfg->token_file ? u->token : NULL,
					      .ca_file = u->ca_file,
					      .cert_file = u->cert_file,
					      .key_file = u->key_file};
	u->max_bytes = max_bytes;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->wake, NULL);
	pthread_cond_init(&u->idle, NULL);
	if (pthread_create(&u->thread, NULL, uploader_main, u) != 0) {
		snprintf(err, errlen, "cannot start the binary uploader");
		release(u);
		return NULL;
	}
	return u;
}

void ep_uploader_offer(struct ep_uploader *u, const char *build_id, const char *arch,
		       const char *path)
{
	if (!u || !build_id || !*build_id || strlen(build_id) > 128 || !path)
		return;
	pthread_mutex_lock(&u->lock);
	struct offered *o = find_offered(u, build_id);
	uint64_t now = ep_mono_ns();
	if ((o && (o->retry_ns == 0 || now < o->retry_ns)) || u->count == MAX_QUEUE ||
	    u->stopping) {
		pthread_mutex_unlock(&u->lock);
		return;
	}
	if (!o) {
		/* one in flight that is overwritten is simply not marked
		 * settled (the uploader finds no entry) */
		if (u->noffered == EP_UPLOADER_REMEMBERED)
			u->counters.forgotten++;
		else
			u->noffered++;
		o = &u->offered[u->next_offered];
		u->next_offered = (u->next_offered + 1) % EP_UPLOADER_REMEMBERED;
		snprintf(o->build_id, sizeof(o->build_id), "%s", build_id);
	}
	/* in flight: offered again only if this attempt fails */
	o->retry_ns = UINT64_MAX;
	char *copy = strdup(path);
	if (copy) {
		struct job *j = &u->queue[(u->head + u->count) % MAX_QUEUE];
		snprintf(j->build_id, sizeof(j->build_id), "%s", build_id);
		snprintf(j->arch, sizeof(j->arch), "%s", arch ? arch : "");
		j->path = copy;
		u->count++;
		pthread_cond_signal(&u->wake);
	}
	pthread_mutex_unlock(&u->lock);
}

void ep_uploader_finish(struct ep_uploader *u, unsigned timeout_ms)
{
	if (!u)
		return;
	struct timespec ts = ep_realtime_after((uint64_t)timeout_ms * 1000000ULL);
	pthread_mutex_lock(&u->lock);
	while ((u->count || u->busy) &&
	       pthread_cond_timedwait(&u->idle, &u->lock, &ts) != ETIMEDOUT)
		;
	/* what is left is dropped: the next agent offers it again */
	while (u->count) {
		free(u->queue[u->head].path);
		u->head = (u->head + 1) % MAX_QUEUE;
		u->count--;
	}
	bool join = !u->stopping;
	u->stopping = true;
	pthread_cond_signal(&u->wake);
	pthread_mutex_unlock(&u->lock);
	if (join)
		pthread_join(u->thread, NULL);
}

void ep_uploader_free(struct ep_uploader *u)
{
	if (!u)
		return;
	ep_uploader_finish(u, 0);
	release(u);
}

void ep_uploader_counters(struct ep_uploader *u, struct ep_upload_counters *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->counters;
	pthread_mutex_unlock(&u->lock);
}
