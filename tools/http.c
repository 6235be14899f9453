/* gpuguard command: `gpuguard metrics --listen`, the metrics served over
 * HTTP from one single-threaded poll loop:
 * every socket non-blocking, every connection with a size limit and a
 * deadline, and a cap on open connections past which a new one closes the
 * oldest unanswered one, so neither a slow client nor a crowd of idle ones
 * can stall a scrape. The region is re-read for every request. */
#define _GNU_SOURCE /* memmem, ppoll, accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "live.h"

#define HTTP_MAX_REQUEST 8192 /* request line and headers */
#define HTTP_LINGER_MS 1000   /* reading what a refused client still sends */
#define HTTP_ACCEPT_BATCH 64  /* accepts per turn of the loop, then reads get their turn */
#define HTTP_SPARE_FDS 32     /* descriptors kept for the region file, stdio and the listener */

enum conn_state { C_FREE, C_READ, C_WRITE, C_DRAIN };

struct conn {
	int fd;
	enum conn_state state;
	uint64_t deadline; /* CLOCK_MONOTONIC ms */
	uint64_t seq;      /* accept order: the oldest is evicted first */
	size_t inlen, outlen, outoff;
	char *out;
	char in[HTTP_MAX_REQUEST];
};

struct server {
	const char *path;
	uint64_t timeout_ms;
	struct conn *conns; /* max of them; C_FREE ones have fd -1 */
	int max, busy;
	uint64_t seq;
	struct pollfd *pfd; /* max + 1: the connections and the listener */
	int *map;
	char last_err[GG_REGION_ERR]; /* said once on stderr */
};

static volatile sig_atomic_t stop_serving;

static void on_stop(int sig)
{
	(void)sig;
	stop_serving = 1;
}

/* ADDR:PORT with ADDR an IPv4 literal, [IPv6 literal] or localhost. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[64];
	const char *colon;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof host)
			return -1;
		memcpy(host, s + 1, (size_t)(close - s - 1));
		host[close - s - 1] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || (size_t)(colon - s) >= sizeof host)
			return -1;
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
	}
	char *end;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || port > 65535 || colon[1] == '-' || colon[1] == '+')
		return -1;
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (s[0] == '[' && inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		*sl = sizeof *v6;
		return 0;
	}
	if (s[0] != '[' && (inet_pton(AF_INET, host, &v4->sin_addr) == 1 || !strcmp(host, "localhost"))) {
		if (!strcmp(host, "localhost"))
			v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		*sl = sizeof *v4;
		return 0;
	}
	return -1;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->state = C_FREE;
}

/* Every connection closes through here, so the count of busy ones holds. */
static void sv_close(struct server *sv, struct conn *c)
{
	if (c->state != C_FREE)
		sv->busy--;
	conn_close(c);
}

/* Queues the whole response; the poll loop writes it out. */
static void respond(struct conn *c, int code, const char *reason, const char *type, const char *extra, const char *body,
                    size_t bodylen, int head_only, uint64_t now, uint64_t timeout_ms)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof hdr,
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
	                 code, reason, type, bodylen, extra ? extra : "");
	size_t hl = (size_t)n < sizeof hdr ? (size_t)n : sizeof hdr - 1;
	size_t bl = head_only ? 0 : bodylen;
	free(c->out);
	c->out = malloc(hl + bl);
	if (!c->out) {
		conn_close(c);
		return;
	}
	memcpy(c->out, hdr, hl);
	if (bl)
		memcpy(c->out + hl, body, bl);
	c->outlen = hl + bl;
	c->outoff = 0;
	c->state = C_WRITE;
	c->deadline = now + timeout_ms;
}

static void respond_text(struct conn *c, int code, const char *reason, const char *extra, const char *msg,
                         int head_only, uint64_t now, uint64_t timeout_ms)
{
	respond(c, code, reason, "text/plain; charset=utf-8", extra, msg, strlen(msg), head_only, now, timeout_ms);
}

const char *gg_metrics_discover_root;

/* What cannot be read (the region, or --discover's directory): 200 with
 * gpuguard_up 0 and gpuguard_region_error{reason} from a closed set (the
 * label's values must stay few: never the message, which names a path), never
 * 503, so the target is up from the pod's start and an alert can fire on
 * gpuguard_up == 0. The message itself is said once on stderr. */
static void serve_down(struct server *sv, struct conn *c, const char *err, enum gg_read_why why, int head_only,
                       uint64_t now)
{
	if (strcmp(err, sv->last_err))
		gg_warning("%s (answering gpuguard_up 0 until it is readable)", err);
	snprintf(sv->last_err, sizeof sv->last_err, "%s", err);
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
		return;
	}
	family(m, "gpuguard_up", "gauge", UP_HELP);
	fputs("gpuguard_up 0\n", m);
	family(m, "gpuguard_region_error", "gauge",
	       "Why the pod region could not be read (gpuguard_up 0): missing, permission, symlink, not_regular, "
	       "invalid, io or other; the message is on the exporter's stderr.");
	fprintf(m, "gpuguard_region_error{reason=\"%s\"} 1\n", gg_read_why_label(why));
	if (fclose(m))
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
	else
		respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, text, len, head_only, now,
		        sv->timeout_ms);
	free(text);
}

static void serve_discovered(struct server *sv, struct conn *c, int head_only, uint64_t now)
{
	char err[sizeof sv->last_err];
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
		return;
	}
	enum gg_read_why why;
	if (gg_metrics_discover(m, gg_metrics_discover_root, err, sizeof err, &why)) {
		fclose(m);
		free(text);
		serve_down(sv, c, err, why, head_only, now);
		return;
	}
	sv->last_err[0] = '\0';
	if (fclose(m))
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
	else
		respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, text, len, head_only, now,
		        sv->timeout_ms);
	free(text);
}

static void serve_metrics(struct server *sv, struct conn *c, int head_only, uint64_t now)
{
	static struct gg_region r;
	char err[sizeof sv->last_err];
	if (gg_metrics_discover_root) {
		serve_discovered(sv, c, head_only, now);
		return;
	}
	enum gg_read_why why;
	if (gg_region_read_why(&r, sv->path, err, sizeof err, &why)) {
		serve_down(sv, c, err, why, head_only, now);
		return;
	}
	if (sv->last_err[0])
		gg_note("%s is readable again", r.path);
	sv->last_err[0] = '\0';
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m) {
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
		return;
	}
	gg_metrics_render(m, &r);
	if (fclose(m))
		respond_text(c, 500, "Internal Server Error", NULL, "out of memory\n", head_only, now, sv->timeout_ms);
	else
		respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL, text, len, head_only, now,
		        sv->timeout_ms);
	free(text);
}

static int is_tchar(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A whole head is in c->in (ends in an empty line): answer its request line. */
static void handle_request(struct server *sv, struct conn *c, uint64_t now)
{
	char *eol = memchr(c->in, '\n', c->inlen);
	size_t ll = (size_t)(eol - c->in);
	if (ll && c->in[ll - 1] == '\r')
		ll--;
	c->in[ll] = '\0';
	char *method = c->in, *sp1 = strchr(method, ' ');
	char *target = sp1 ? sp1 + 1 : NULL, *sp2 = target ? strchr(target, ' ') : NULL;
	char *version = sp2 ? sp2 + 1 : NULL;
	if (!sp1 || !sp2 || sp1 == method || sp2 == target || strncmp(version, "HTTP/1.", 7) || strchr(version, ' ')) {
		respond_text(c, 400, "Bad Request", NULL, "bad request line\n", 0, now, sv->timeout_ms);
		return;
	}
	*sp1 = *sp2 = '\0';
	for (const char *p = method; *p; p++) {
		if (!is_tchar(*p)) {
			respond_text(c, 400, "Bad Request", NULL, "bad request method\n", 0, now, sv->timeout_ms);
			return;
		}
	}
	int head = !strcmp(method, "HEAD");
	if (!head && strcmp(method, "GET")) {
		respond_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n", "only GET and HEAD\n", 0, now,
		             sv->timeout_ms);
		return;
	}
	target[strcspn(target, "?#")] = '\0';
	if (!strcmp(target, "/metrics") || !strcmp(target, "/"))
		serve_metrics(sv, c, head, now);
	else
		respond_text(c, 404, "Not Found", NULL, "not found: try /metrics\n", head, now, sv->timeout_ms);
}

static void conn_read(struct server *sv, struct conn *c, uint64_t now)
{
	if (c->state == C_DRAIN) {
		char scratch[4096];
		ssize_t got = recv(c->fd, scratch, sizeof scratch, 0);
		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
			conn_close(c);
		return;
	}
	ssize_t got = recv(c->fd, c->in + c->inlen, sizeof c->in - c->inlen, 0);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) { /* gone before a whole request: nobody to answer */
		conn_close(c);
		return;
	}
	/* Search only where the new bytes can complete an empty line. */
	size_t from = c->inlen > 3 ? c->inlen - 3 : 0;
	c->inlen += (size_t)got;
	const char *p = c->in + from;
	size_t n = c->inlen - from;
	if (memmem(p, n, "\r\n\r\n", 4) || memmem(p, n, "\n\n", 2))
		handle_request(sv, c, now);
	else if (c->inlen == sizeof c->in)
		respond_text(c, 431, "Request Header Fields Too Large", NULL, "request head over 8 KiB\n", 0, now,
		             sv->timeout_ms);
}

static void conn_write(struct conn *c, uint64_t now)
{
	ssize_t put = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
	if (put < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (put < 0) {
		conn_close(c);
		return;
	}
	c->outoff += (size_t)put;
	if (c->outoff < c->outlen)
		return;
	/* Closing with unread input would reset the connection, and the client
	 * could lose the answer: say we are done, then read until it is. */
	free(c->out);
	c->out = NULL;
	if (shutdown(c->fd, SHUT_WR)) {
		conn_close(c);
		return;
	}
	c->state = C_DRAIN;
	c->deadline = now + HTTP_LINGER_MS;
}

static void conn_expire(struct server *sv, struct conn *c, uint64_t now)
{
	if (c->state == C_READ)
		respond_text(c, 408, "Request Timeout", NULL, "request not received in time\n", 0, now, sv->timeout_ms);
	else
		conn_close(c);
}

static int listen_on(const char *addr, int *fdp)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (parse_listen(addr, &ss, &sl)) {
		gg_error(
		    "--listen '%.128s': want ADDR:PORT with an IPv4 address, [IPv6 address] or localhost, and a port "
		    "0-65535 (0: any free one)",
		    addr);
		return GG_EXIT_USAGE;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    (ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one)) ||
	    bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 1024) || getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		gg_error("listening on %.128s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		return GG_EXIT_BADINPUT;
	}
	char host[INET6_ADDRSTRLEN];
	const void *a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
	                                         : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
	unsigned port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                               : ((struct sockaddr_in *)&ss)->sin_port);
	if (!inet_ntop(ss.ss_family, a, host, sizeof host))
		snprintf(host, sizeof host, "?");
	gg_note("serving metrics on http://%s%s%s:%u/metrics", ss.ss_family == AF_INET6 ? "[" : "", host,
	        ss.ss_family == AF_INET6 ? "]" : "", port);
	*fdp = fd;
	return GG_EXIT_OK;
}

/* The connection a new one replaces when all max are open: one already
 * answered (draining) first, then the oldest that has not sent a whole
 * request (idle, or slow on purpose: age, not activity, decides, so a
 * byte every so often does not keep a slot), then the oldest of all. */
static struct conn *victim(struct server *sv)
{
	struct conn *best = NULL;
	int best_rank = 3;
	for (int i = 0; i < sv->max; i++) {
		struct conn *c = &sv->conns[i];
		if (c->state == C_FREE)
			continue;
		int rank = c->state == C_DRAIN ? 0 : c->state == C_READ ? 1 : 2;
		if (rank < best_rank || (rank == best_rank && c->seq < best->seq)) {
			best = c;
			best_rank = rank;
		}
	}
	return best;
}

/* Accepts what is pending, up to a batch; at max open, each new one closes
 * a victim. Never waits: the listener is non-blocking. */
static void accept_some(struct server *sv, int lfd, uint64_t now, uint64_t *accept_pause)
{
	/* Under half the cap a turn: a request accepted early in a batch is
	 * read (and answered) at the next turn, before a later batch could
	 * make it the oldest. */
	int batch = sv->max / 2 + 1 < HTTP_ACCEPT_BATCH ? sv->max / 2 + 1 : HTTP_ACCEPT_BATCH;
	for (int k = 0; k < batch; k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			struct conn *v = errno == EMFILE || errno == ENFILE ? victim(sv) : NULL;
			if (v) {
				/* Out of descriptors all the same (something else holds
				 * some): make room as for the cap. */
				sv_close(sv, v);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				*accept_pause = now + 100;
			return;
		}
		struct conn *v = sv->busy >= sv->max ? victim(sv) : NULL;
		if (v)
			sv_close(sv, v);
		struct conn *c = NULL;
		for (int i = 0; i < sv->max && !c; i++)
			if (sv->conns[i].state == C_FREE)
				c = &sv->conns[i];
		if (!c) { /* cannot happen: a victim was just closed */
			close(fd);
			return;
		}
		c->fd = fd;
		c->state = C_READ;
		c->inlen = 0;
		c->seq = sv->seq++;
		c->deadline = now + sv->timeout_ms;
		sv->busy++;
	}
}

/* max connections, within the descriptor limit (raised to its hard limit
 * where that helps). */
static int fit_max_conns(int want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return want < 16 ? want : 16;
	rlim_t need = (rlim_t)want + HTTP_SPARE_FDS;
	if (rl.rlim_cur < need && rl.rlim_cur != RLIM_INFINITY) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
		long fit = (long)rl.rlim_cur - HTTP_SPARE_FDS;
		return fit < 1 ? 1 : (int)fit;
	}
	return want;
}

int gg_metrics_serve(const char *path, const char *addr, uint64_t timeout_ms, int max_conns)
{
	int lfd, rc = listen_on(addr, &lfd);
	if (rc)
		return rc;
	struct server *sv = calloc(1, sizeof *sv);
	int max = fit_max_conns(max_conns);
	if (max < max_conns)
		gg_warning("the descriptor limit allows %d connections, not %d: serving at most %d at once", max,
		           max_conns, max);
	/* calloc: pages of buffers never used are never touched. */
	if (sv) {
		sv->conns = calloc((size_t)max, sizeof *sv->conns);
		sv->pfd = calloc((size_t)max + 1, sizeof *sv->pfd);
		sv->map = calloc((size_t)max + 1, sizeof *sv->map);
	}
	if (!sv || !sv->conns || !sv->pfd || !sv->map) {
		if (sv) {
			free(sv->conns);
			free(sv->pfd);
			free(sv->map);
		}
		free(sv);
		close(lfd);
		gg_error("out of memory");
		return GG_EXIT_BADINPUT;
	}
	sv->path = path;
	sv->timeout_ms = timeout_ms;
	sv->max = max;
	for (int i = 0; i < max; i++)
		sv->conns[i].fd = -1;
	/* SIGINT and SIGTERM are blocked except inside ppoll, so a stop that
	 * lands between the flag check and the wait is not missed. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &block, &waitmask) || sigaction(SIGINT, &sa, NULL) ||
	    sigaction(SIGTERM, &sa, NULL) || signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
		gg_error("signals: %s", strerror(errno));
		rc = GG_EXIT_BADINPUT;
		stop_serving = 1;
	}
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGTERM);
	uint64_t accept_pause = 0; /* accept failed for want of memory: retry later */
	struct pollfd *pfd = sv->pfd;
	int *map = sv->map;
	while (!stop_serving) {
		int n = 0;
		uint64_t now = clock_ms(CLOCK_MONOTONIC), next = UINT64_MAX;
		sv->busy = 0;
		for (int i = 0; i < max; i++) {
			struct conn *c = &sv->conns[i];
			if (c->state == C_FREE)
				continue;
			if (now >= c->deadline) {
				conn_expire(sv, c, now);
				if (c->state == C_FREE)
					continue;
			}
			sv->busy++;
			pfd[n] = (struct pollfd){c->fd, c->state == C_WRITE ? POLLOUT : POLLIN, 0};
			map[n++] = i;
			if (c->deadline < next)
				next = c->deadline;
		}
		/* The listener is always polled (a new connection may replace an
		 * old one), unless accept is paused. */
		if (now >= accept_pause) {
			pfd[n] = (struct pollfd){lfd, POLLIN, 0};
			map[n++] = -1;
		} else if (accept_pause < next) {
			next = accept_pause;
		}
		struct timespec ts, *tsp = NULL;
		if (next != UINT64_MAX) {
			uint64_t wait = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(wait / 1000);
			ts.tv_nsec = (long)(wait % 1000) * 1000000L;
			tsp = &ts;
		}
		int ready = ppoll(pfd, (nfds_t)n, tsp, &waitmask);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0) {
			gg_error("poll: %s", strerror(errno));
			rc = GG_EXIT_BADINPUT;
			break;
		}
		now = clock_ms(CLOCK_MONOTONIC);
		for (int k = 0; k < n; k++) {
			if (!pfd[k].revents)
				continue;
			if (map[k] >= 0) {
				struct conn *c = &sv->conns[map[k]];
				int was_open = c->state != C_FREE;
				if (c->state == C_WRITE)
					conn_write(c, now);
				else
					conn_read(sv, c, now);
				if (was_open && c->state == C_FREE)
					sv->busy--;
				continue;
			}
			/* The listener is last: no entry after it refers to a
			 * connection accept_some may evict. */
			accept_some(sv, lfd, now, &accept_pause);
		}
	}
	for (int i = 0; i < max; i++)
		conn_close(&sv->conns[i]);
	free(sv->conns);
	free(sv->pfd);
	free(sv->map);
	free(sv);
	close(lfd);
	sigprocmask(SIG_UNBLOCK, &block, NULL);
	return rc;
}
