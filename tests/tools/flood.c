/* gpuguard tests: a slow-client flood on `gpuguard metrics --listen`, on
 * 127.0.0.1 only (the address is fixed here, never taken from the command
 * line). Opens IDLE connections that send nothing and SLOW ones that send a
 * request head one byte every 100 ms and never finish it, then times full
 * scrapes (GET /metrics, read to the close) while both stay open. Bounded:
 * 5 s to connect, each scrape at most 5 s, then everything is closed.
 * Usage: flood PORT IDLE SLOW SCRAPES; the last scrape's answer on stdout,
 * one line per scrape on stderr ("scrape N: MS ms, BYTES bytes"); exit 0
 * when every scrape got a whole answer, 1 on an error, 3 on a time-out. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 5000

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* 127.0.0.1, and nothing else */
	return a;
}

/* A non-blocking connect under way (or done); -1 on an error. */
static int start_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = loopback(port);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

struct slow {
	int fd;
	size_t sent;
};

static const char slow_head[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

/* One more byte from each slow client whose 100 ms are up (the server may
 * have closed it: that is its right, and not an error here). */
static void drip(struct slow *s, int n, long long *next)
{
	long long t = now_ms();
	if (t < *next)
		return;
	*next = t + 100;
	for (int i = 0; i < n; i++) {
		if (s[i].fd < 0)
			continue;
		char ch = s[i].sent < sizeof slow_head - 1 ? slow_head[s[i].sent] : 'a';
		if (send(s[i].fd, &ch, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
			s[i].sent++;
		else if (errno != EAGAIN && errno != ENOTCONN) {
			close(s[i].fd);
			s[i].fd = -1;
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fputs("usage: flood PORT IDLE SLOW SCRAPES\n", stderr);
		return 1;
	}
	int port = atoi(argv[1]), nidle = atoi(argv[2]), nslow = atoi(argv[3]), nscrape = atoi(argv[4]);
	if (port <= 0 || port > 65535 || nidle < 0 || nslow < 0 || nidle + nslow > MAX_CLIENTS || nscrape < 1 ||
	    nscrape > 100) {
		fputs("flood: PORT 1-65535, IDLE + SLOW at most 5000, SCRAPES 1-100\n", stderr);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Enough descriptors for every client, within the hard limit. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(nidle + nslow + 64)) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)(nidle + nslow + 64) ? rl.rlim_max : (rlim_t)(nidle + nslow + 64);
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int *idle = calloc((size_t)nidle + 1, sizeof *idle);
	struct slow *slow = calloc((size_t)nslow + 1, sizeof *slow);
	struct pollfd *pfd = calloc((size_t)(nidle + nslow) + 1, sizeof *pfd);
	if (!idle || !slow || !pfd) {
		fputs("flood: out of memory\n", stderr);
		return 1;
	}
	for (int i = 0; i < nidle; i++)
		if ((idle[i] = start_connect(port)) < 0) {
			perror("flood: connect (idle)");
			return 1;
		}
	for (int i = 0; i < nslow; i++)
		if ((slow[i].fd = start_connect(port)) < 0) {
			perror("flood: connect (slow)");
			return 1;
		}
	/* Wait (at most 5 s) until every connection is established: poll only
	 * those not yet writable. */
	char *ready = calloc((size_t)(nidle + nslow) + 1, 1);
	int *which = calloc((size_t)(nidle + nslow) + 1, sizeof *which);
	if (!ready || !which) {
		fputs("flood: out of memory\n", stderr);
		return 1;
	}
	long long t0 = now_ms(), deadline = t0 + 5000;
	for (;;) {
		int n = 0;
		for (int i = 0; i < nidle + nslow; i++) {
			if (ready[i])
				continue;
			pfd[n] = (struct pollfd){i < nidle ? idle[i] : slow[i - nidle].fd, POLLOUT, 0};
			which[n++] = i;
		}
		int left = (int)(deadline - now_ms());
		if (n == 0 || left <= 0)
			break;
		if (poll(pfd, (nfds_t)n, left) < 0 && errno != EINTR) {
			perror("flood: poll");
			return 1;
		}
		for (int i = 0; i < n; i++)
			if (pfd[i].revents)
				ready[which[i]] = 1;
	}
	free(ready);
	free(which);
	int connected = 0;
	for (int i = 0; i < nidle + nslow; i++) {
		int fd = i < nidle ? idle[i] : slow[i - nidle].fd, err = 0;
		socklen_t el = sizeof err;
		struct pollfd one = {fd, POLLOUT, 0};
		if (poll(&one, 1, 0) == 1 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) && !err)
			connected++;
	}
	fprintf(stderr, "flood: %d of %d connections established in %lld ms\n", connected, nidle + nslow,
	        now_ms() - t0);
	/* Let the slow clients drip for a moment before the first scrape. */
	long long next_drip = 0, settle = now_ms() + 300;
	while (now_ms() < settle) {
		drip(slow, nslow, &next_drip);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	int rc = 0;
	static char buf[1 << 20];
	size_t got = 0;
	for (int k = 1; k <= nscrape && rc == 0; k++) {
		long long start = now_ms(), end = start + 5000;
		int fd = start_connect(port);
		if (fd < 0) {
			perror("flood: connect (scrape)");
			return 1;
		}
		static const char req[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
		size_t off = 0;
		got = 0;
		int done = 0;
		while (!done) {
			drip(slow, nslow, &next_drip);
			long long t = now_ms();
			if (t >= end) {
				fprintf(stderr, "scrape %d: timed out after %lld ms, %zu bytes\n", k, t - start, got);
				rc = 3;
				break;
			}
			struct pollfd p = {fd, (short)(POLLIN | (off < sizeof req - 1 ? POLLOUT : 0)), 0};
			long long wait = end - t < 20 ? end - t : 20; /* the drip goes on meanwhile */
			if (poll(&p, 1, (int)wait) < 0 && errno != EINTR) {
				perror("flood: poll");
				rc = 1;
				break;
			}
			if ((p.revents & POLLOUT) && off < sizeof req - 1) {
				ssize_t put = send(fd, req + off, sizeof req - 1 - off, MSG_NOSIGNAL);
				if (put > 0)
					off += (size_t)put;
				else if (put < 0 && errno != EAGAIN) {
					perror("flood: send (scrape)");
					rc = 1;
					break;
				}
			}
			if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
				ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
				if (r == 0) {
					done = 1;
				} else if (r > 0) {
					got += (size_t)r;
					if (got == sizeof buf - 1) {
						fputs("flood: answer over 1 MiB\n", stderr);
						rc = 1;
						break;
					}
				} else if (errno != EAGAIN && errno != EINTR) {
					perror("flood: recv (scrape)");
					rc = 1;
					break;
				}
			}
		}
		close(fd);
		if (done)
			fprintf(stderr, "scrape %d: %lld ms, %zu bytes\n", k, now_ms() - start, got);
	}
	if (rc == 0)
		fwrite(buf, 1, got, stdout);
	for (int i = 0; i < nidle; i++)
		close(idle[i]);
	for (int i = 0; i < nslow; i++)
		if (slow[i].fd >= 0)
			close(slow[i].fd);
	free(idle);
	free(slow);
	free(pfd);
	return rc;
}
