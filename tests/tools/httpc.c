/* gpuguard tests: a raw HTTP client for the tests of `gpuguard metrics
 * --listen`, so they need neither curl nor a shell with /dev/tcp. Copies
 * stdin to the connection as it arrives (a slow or partial request is just a
 * slow stdin) and the connection to stdout, until the server closes it.
 * Usage: httpc ADDR PORT [SECONDS]; exit 0 when the server closed the
 * connection, 1 on a reset or error, 2 when it cannot connect, 3 after
 * SECONDS (default 5). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t put = write(fd, p, n);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		p += put;
		n -= (size_t)put;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fputs("usage: httpc ADDR PORT [SECONDS]\n", stderr);
		return 2;
	}
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
	memset(&v4, 0, sizeof v4);
	memset(&v6, 0, sizeof v6);
	int port = atoi(argv[2]), fd = -1;
	if (inet_pton(AF_INET, argv[1], &v4.sin_addr) == 1) {
		v4.sin_family = AF_INET;
		v4.sin_port = htons((uint16_t)port);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&v4, sizeof v4)) {
			perror("httpc: connect");
			return 2;
		}
	} else if (inet_pton(AF_INET6, argv[1], &v6.sin6_addr) == 1) {
		v6.sin6_family = AF_INET6;
		v6.sin6_port = htons((uint16_t)port);
		fd = socket(AF_INET6, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&v6, sizeof v6)) {
			perror("httpc: connect");
			return 2;
		}
	} else {
		fprintf(stderr, "httpc: not an address: %s\n", argv[1]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* a server that closed early: see its answer */
	long long deadline = now_ms() + (argc > 3 ? atoi(argv[3]) : 5) * 1000LL;
	int in_open = 1;
	char buf[65536];
	for (;;) {
		struct pollfd p[2] = {{fd, POLLIN, 0}, {in_open ? 0 : -1, POLLIN, 0}};
		long long left = deadline - now_ms();
		if (left <= 0) {
			fputs("httpc: timed out\n", stderr);
			return 3;
		}
		int n = poll(p, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("httpc: poll");
			return 1;
		}
		if (p[0].revents) {
			ssize_t got = read(fd, buf, sizeof buf);
			if (got == 0)
				return 0;
			if (got < 0) {
				perror("httpc: read");
				return 1;
			}
			if (write_all(1, buf, (size_t)got))
				return 1;
		}
		if (in_open && p[1].revents) {
			ssize_t got = read(0, buf, sizeof buf);
			if (got <= 0)
				in_open = 0; /* no half-close: a real client keeps writing open */
			else if (write_all(fd, buf, (size_t)got))
				in_open = 0; /* the server stopped reading: its answer follows */
		}
	}
}
