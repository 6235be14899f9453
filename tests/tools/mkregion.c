/* gpuguard tests: writes pod region images (include/gpuguard/region.h) with
 * chosen contents, and hostile variants of them, for the tests of
 * `gpuguard top` and `gpuguard metrics`; and holds slots' liveness locks, as
 * an attached process does. Usage: mkregion with no arguments. */
#define _GNU_SOURCE /* F_OFD_SETLK */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpuguard/region.h>

static const char usage[] = "usage: mkregion PATH [SPEC...]     write a region image\n"
                            "       mkregion --hold SLOT[,SLOT...] PATH\n"
                            "                                   take the slots' OFD locks, print \"held\", wait\n"
                            "                                   for a signal (at most 60 s)\n"
                            "SPEC:\n"
                            "  limit=TEXT        the header's limit text\n"
                            "  created=MS        the header's creation time\n"
                            "  dev=I:KIND:ID:LIMIT:USED:PEAK:PHYSICAL:WAITERS:REFUSED:RECLAIMED\n"
                            "                    a READY device entry; KIND cuda|hip|ordinal|N; ID 32 hex\n"
                            "                    digits, or the ordinal; LIMIT none or bytes\n"
                            "  devstate=I:STATE  empty|claiming|ready|N\n"
                            "  devwait=I:NS      device entry I's time spent waiting (wait_ns)\n"
                            "  devoom=I:N        device entry I's driver out-of-memory count\n"
                            "  devruntime=I:BYTES device entry I's runtime word (version 3's sum, or\n"
                            "                    version 4's snapshot)\n"
                            "  procruntime=S:DEV=BYTES slot S's runtime word on device entry DEV\n"
                            "  dumps=N           the header's count of dumps written\n"
                            "  pod=NAMESPACE:NAME the header's pod identity (without it: none, as an\n"
                            "                    older library leaves it)\n"
                            "  container=S:NAME  slot S's container, NAME added to the header's list\n"
                            "  pinned=S:BYTES    slot S's pinned host memory (without it: not known)\n"
                            "  proc=S:PID:COMM:START_MS[:DEV=BYTES...]\n"
                            "                    a LIVE process slot holding BYTES on device entry DEV\n"
                            "  procstate=S:STATE free|live|N\n"
                            "  prochost=S:OBIT_MS:WORKING_SET:USAGE:HOST_LIMIT:REFUSED:FLAGS\n"
                            "                    slot S's last host sample and refusals (its obituary\n"
                            "                    in waiting); FLAGS GPUGUARD_OBIT_* bits\n"
                            "  death=I:SEQ:PID:COMM:FOUND_MS:LAST_MS:GPU_USED:GPU_LIMIT:REFUSED:REFUSED_AGE_MS:\n"
                            "        WORKING_SET:HOST_LIMIT:FLAGS\n"
                            "                    entry I of the deaths ring; GPU_LIMIT none or bytes;\n"
                            "                    REFUSED_AGE_MS none or ms; FLAGS GPUGUARD_OBIT_* bits\n"
                            "  hostile=MODE      applied last: truncate=N extend magic version header-size\n"
                            "                    v3 (an older library's layout: version 3, no runtime\n"
                            "                    table; not hostile, but written last too)\n"
                            "                    size-field devlayout proclayout deathlayout limit-unterminated\n"
                            "                    comm-unterminated huge random=SEED random-ready=SEED\n";

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "mkregion: %s '%s'\n%s", what, arg, usage);
	exit(2);
}

static uint64_t num(const char *s, const char *spec)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		die("bad number in", spec);
	return v;
}

/* Splits s at ':' into f, in place: the number of fields, or max + 1 when
 * there are more than max. */
static int fields(char *s, char **f, int max)
{
	int n = 0;
	char *t;
	while (n < max && (t = strsep(&s, ":")))
		f[n++] = t;
	return s ? max + 1 : n;
}

static uint32_t state_num(const char *s, const char *spec)
{
	static const char *const names[] = {"empty", "claiming", "ready"};
	if (!strcmp(s, "free"))
		return GPUGUARD_RPROC_FREE;
	if (!strcmp(s, "live"))
		return GPUGUARD_RPROC_LIVE;
	for (uint32_t i = 0; i < 3; i++)
		if (!strcmp(s, names[i]))
			return i;
	return (uint32_t)num(s, spec);
}

static unsigned index_in(const char *s, unsigned n, const char *spec)
{
	uint64_t v = num(s, spec);
	if (v >= n)
		die("index out of range in", spec);
	return (unsigned)v;
}

static void spec_dev(char *buf, char *arg, const char *spec)
{
	char *f[10];
	if (fields(arg, f, 10) != 10)
		die("dev= takes 10 fields:", spec);
	struct gpuguard_region_device *d = gpuguard_region_dev(buf, index_in(f[0], GPUGUARD_REGION_DEVICES, spec));
	d->state = GPUGUARD_RDEV_READY;
	d->kind = !strcmp(f[1], "cuda")      ? GPUGUARD_RDEV_CUDA
	          : !strcmp(f[1], "hip")     ? GPUGUARD_RDEV_HIP
	          : !strcmp(f[1], "ordinal") ? GPUGUARD_RDEV_ORDINAL
	                                     : (uint32_t)num(f[1], spec);
	memset(d->uuid, 0, sizeof d->uuid);
	if (d->kind == GPUGUARD_RDEV_ORDINAL) {
		uint32_t ord = (uint32_t)num(f[2], spec);
		memcpy(d->uuid, &ord, sizeof ord);
	} else {
		if (strlen(f[2]) != 32)
			die("the id takes 32 hex digits:", spec);
		for (int i = 0; i < 16; i++) {
			char h[3] = {f[2][2 * i], f[2][2 * i + 1], 0};
			d->uuid[i] = (uint8_t)strtoul(h, NULL, 16);
		}
	}
	d->limit = !strcmp(f[3], "none") ? UINT64_MAX : num(f[3], spec);
	d->used = num(f[4], spec);
	d->peak = num(f[5], spec);
	d->physical = num(f[6], spec);
	d->waiters = (uint32_t)num(f[7], spec);
	d->refused = num(f[8], spec);
	d->reclaimed = num(f[9], spec);
}

static void spec_proc(char *buf, char *arg, const char *spec)
{
	char *f[4 + GPUGUARD_REGION_DEVICES];
	int n = fields(arg, f, 4 + GPUGUARD_REGION_DEVICES);
	if (n < 4 || n > 4 + GPUGUARD_REGION_DEVICES)
		die("proc= takes 4 fields and up to 16 DEV=BYTES:", spec);
	struct gpuguard_region_proc *p = gpuguard_region_proc(buf, index_in(f[0], GPUGUARD_REGION_PROCS, spec));
	p->state = GPUGUARD_RPROC_LIVE;
	p->pid = (uint32_t)num(f[1], spec);
	memset(p->comm, 0, sizeof p->comm);
	strncpy(p->comm, f[2], sizeof p->comm - 1);
	p->start_ms = num(f[3], spec);
	for (int i = 4; i < n; i++) {
		char *eq = strchr(f[i], '=');
		if (!eq)
			die("want DEV=BYTES in", spec);
		*eq = '\0';
		p->used[index_in(f[i], GPUGUARD_REGION_DEVICES, spec)] = num(eq + 1, spec);
	}
}

static void spec_death(char *buf, char *arg, const char *spec)
{
	char *f[13];
	if (fields(arg, f, 13) != 13)
		die("death= takes 13 fields:", spec);
	struct gpuguard_region_death *d = gpuguard_region_death(buf, index_in(f[0], GPUGUARD_REGION_DEATHS, spec));
	d->seq = num(f[1], spec);
	d->pid = (uint32_t)num(f[2], spec);
	memset(d->comm, 0, sizeof d->comm);
	strncpy(d->comm, f[3], sizeof d->comm - 1);
	d->found_ms = num(f[4], spec);
	d->last_ms = num(f[5], spec);
	d->gpu_used = num(f[6], spec);
	d->gpu_limit = !strcmp(f[7], "none") ? UINT64_MAX : num(f[7], spec);
	d->refused = (uint32_t)num(f[8], spec);
	d->refused_age_ms = !strcmp(f[9], "none") ? UINT32_MAX : (uint32_t)num(f[9], spec);
	d->host_ws = num(f[10], spec);
	d->host_limit = num(f[11], spec);
	d->host_flags = (uint16_t)num(f[12], spec);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Returns the number of bytes to write. */
static size_t hostile(char *buf, const char *mode, const char *spec)
{
	struct gpuguard_region_header *h = (struct gpuguard_region_header *)buf;
	size_t len = GPUGUARD_REGION_SIZE;
	if (!strncmp(mode, "truncate=", 9)) {
		len = (size_t)num(mode + 9, spec);
		if (len > GPUGUARD_REGION_SIZE)
			die("truncate past the end:", spec);
	} else if (!strcmp(mode, "extend")) {
		len++;
	} else if (!strcmp(mode, "magic")) {
		h->magic ^= 1;
	} else if (!strcmp(mode, "v3")) {
		h->version = 3;
		h->size = GPUGUARD_REGION_V3_SIZE;
		h->runtime_off = 0;
		len = GPUGUARD_REGION_V3_SIZE;
	} else if (!strcmp(mode, "version")) {
		h->version = GPUGUARD_REGION_VERSION + 1;
	} else if (!strcmp(mode, "header-size")) {
		h->header_size--;
	} else if (!strcmp(mode, "size-field")) {
		h->size *= 2;
	} else if (!strcmp(mode, "devlayout")) {
		h->device_size = 64;
	} else if (!strcmp(mode, "proclayout")) {
		h->proc_off += 8;
	} else if (!strcmp(mode, "deathlayout")) {
		h->death_size = 64;
	} else if (!strcmp(mode, "limit-unterminated")) {
		memset(h->limit_text, 'A', sizeof h->limit_text);
	} else if (!strcmp(mode, "comm-unterminated")) {
		/* Sixteen bytes, no NUL: escapes, quotes, a newline, high bytes. */
		static const char evil[16] = "\x1b[2J\"\\\n\xff\xfe{}=,\t%s";
		for (unsigned i = 0; i < GPUGUARD_REGION_PROCS; i++)
			memcpy(gpuguard_region_proc(buf, i)->comm, evil, sizeof evil);
		for (unsigned i = 0; i < GPUGUARD_REGION_DEATHS; i++) {
			struct gpuguard_region_death *d = gpuguard_region_death(buf, i);
			memcpy(d->comm, evil, sizeof evil);
			d->seq = i + 1;
		}
	} else if (!strcmp(mode, "huge")) {
		h->created_ms = UINT64_MAX;
		for (unsigned i = 0; i < GPUGUARD_REGION_DEVICES; i++) {
			struct gpuguard_region_device *d = gpuguard_region_dev(buf, i);
			d->state = GPUGUARD_RDEV_READY;
			d->kind = UINT32_MAX;
			memset(d->uuid, 0xff, sizeof d->uuid);
			d->limit = UINT64_MAX - 1;
			d->used = d->peak = d->physical = d->refused = d->reclaimed = UINT64_MAX;
			d->waiters = UINT32_MAX;
		}
		for (unsigned i = 0; i < GPUGUARD_REGION_PROCS; i++) {
			struct gpuguard_region_proc *p = gpuguard_region_proc(buf, i);
			p->state = GPUGUARD_RPROC_LIVE;
			p->pid = UINT32_MAX;
			p->start_ms = UINT64_MAX;
			memset(p->comm, 'W', sizeof p->comm);
			for (unsigned d = 0; d < GPUGUARD_REGION_DEVICES; d++)
				p->used[d] = UINT64_MAX;
		}
		for (unsigned i = 0; i < GPUGUARD_REGION_DEATHS; i++) {
			struct gpuguard_region_death *d = gpuguard_region_death(buf, i);
			memset(d, 0xff, sizeof *d);
			d->seq = i + 1 + GPUGUARD_REGION_DEATHS * 1000;
		}
	} else if (!strncmp(mode, "random=", 7) || !strncmp(mode, "random-ready=", 13)) {
		int ready = mode[6] == '-';
		uint64_t s = num(mode + (ready ? 13 : 7), spec) | 1;
		for (size_t i = GPUGUARD_REGION_DEVICE_OFF; i < GPUGUARD_REGION_SIZE; i++)
			buf[i] = (char)xorshift(&s);
		for (unsigned i = 0; ready && i < GPUGUARD_REGION_DEVICES; i++)
			gpuguard_region_dev(buf, i)->state = GPUGUARD_RDEV_READY;
		for (unsigned i = 0; ready && i < GPUGUARD_REGION_PROCS; i++)
			gpuguard_region_proc(buf, i)->state = GPUGUARD_RPROC_LIVE;
		for (unsigned i = 0; ready && i < GPUGUARD_REGION_DEATHS; i++)
			gpuguard_region_death(buf, i)->seq = i + 1;
	} else {
		die("unknown hostile mode", mode);
	}
	return len;
}

static int hold(const char *slots, const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	char *copy = strdup(slots), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1};
		fl.l_start = (off_t)gpuguard_region_slot_lock(index_in(t, GPUGUARD_REGION_PROCS, slots));
		if (fcntl(fd, F_OFD_SETLK, &fl)) {
			perror("mkregion: F_OFD_SETLK");
			return 2;
		}
	}
	free(copy);
	printf("held\n");
	fflush(stdout);
	alarm(60); /* a holder a test forgot must not linger */
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--hold"))
		return hold(argv[2], argv[3]);
	if (argc < 2 || argv[1][0] == '-') {
		fputs(usage, stderr);
		return 2;
	}
	static char buf[GPUGUARD_REGION_SIZE + 1] __attribute__((aligned(64)));
	struct gpuguard_region_header *h = (struct gpuguard_region_header *)buf;
	gpuguard_region_layout(h, 1700000000000ull, "");
	h->magic = GPUGUARD_REGION_MAGIC;
	const char *mode = NULL;
	for (int i = 2; i < argc; i++) {
		char *arg = argv[i], *eq = strchr(arg, '=');
		if (!eq)
			die("want KEY=VALUE:", arg);
		char *spec = strdup(arg), *v = eq + 1;
		*eq = '\0';
		if (!strcmp(arg, "limit")) {
			if (strlen(v) >= sizeof h->limit_text)
				die("limit text too long:", spec);
			strcpy(h->limit_text, v);
		} else if (!strcmp(arg, "created")) {
			h->created_ms = num(v, spec);
		} else if (!strcmp(arg, "dev")) {
			spec_dev(buf, v, spec);
		} else if (!strcmp(arg, "devstate")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want devstate=I:STATE:", spec);
			gpuguard_region_dev(buf, index_in(f[0], GPUGUARD_REGION_DEVICES, spec))->state =
			    state_num(f[1], spec);
		} else if (!strcmp(arg, "devwait")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want devwait=I:NS:", spec);
			gpuguard_region_dev(buf, index_in(f[0], GPUGUARD_REGION_DEVICES, spec))->wait_ns =
			    num(f[1], spec);
		} else if (!strcmp(arg, "devoom")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want devoom=I:N:", spec);
			gpuguard_region_dev(buf, index_in(f[0], GPUGUARD_REGION_DEVICES, spec))->driver_oom =
			    num(f[1], spec);
		} else if (!strcmp(arg, "devruntime")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want devruntime=I:BYTES:", spec);
			gpuguard_region_dev(buf, index_in(f[0], GPUGUARD_REGION_DEVICES, spec))->runtime =
			    num(f[1], spec);
		} else if (!strcmp(arg, "procruntime")) {
			char *f[2];
			if (fields(v, f, 2) != 2 || !strchr(f[1], '='))
				die("want procruntime=S:DEV=BYTES:", spec);
			char *at = strchr(f[1], '=');
			*at = 0;
			unsigned slot = index_in(f[0], GPUGUARD_REGION_PROCS, spec);
			unsigned dev = index_in(f[1], GPUGUARD_REGION_DEVICES, spec);
			*gpuguard_region_runtime_word(buf, slot, dev) = num(at + 1, spec);
		} else if (!strcmp(arg, "pod")) {
			char *f[2];
			if (fields(v, f, 2) != 2 || strlen(f[0]) >= sizeof h->pod_namespace ||
			    strlen(f[1]) >= sizeof h->pod_name)
				die("want pod=NAMESPACE:NAME (each under 64 bytes):", spec);
			memcpy(h->pod_namespace, f[0], strlen(f[0]));
			memcpy(h->pod_name, f[1], strlen(f[1]));
			h->ident = 1;
		} else if (!strcmp(arg, "container")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want container=S:NAME:", spec);
			struct gpuguard_region_proc *p =
			    gpuguard_region_proc(buf, index_in(f[0], GPUGUARD_REGION_PROCS, spec));
			size_t off = 0, len = strlen(f[1]);
			unsigned k = 0;
			while (k < h->ncontainers && strcmp(h->containers + off, f[1])) {
				off += strlen(h->containers + off) + 1;
				k++;
			}
			if (k == h->ncontainers) {
				if (off + len + 1 > sizeof h->containers)
					die("no room for container name:", spec);
				memcpy(h->containers + off, f[1], len + 1);
				h->ncontainers++;
			}
			p->container = (uint8_t)(k + 1);
		} else if (!strcmp(arg, "pinned")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want pinned=S:BYTES:", spec);
			struct gpuguard_region_proc *p =
			    gpuguard_region_proc(buf, index_in(f[0], GPUGUARD_REGION_PROCS, spec));
			p->has_pinned = 1;
			p->host_pinned = num(f[1], spec);
		} else if (!strcmp(arg, "dumps")) {
			((struct gpuguard_region_header *)buf)->dumps_written = num(v, spec);
		} else if (!strcmp(arg, "proc")) {
			spec_proc(buf, v, spec);
		} else if (!strcmp(arg, "death")) {
			spec_death(buf, v, spec);
		} else if (!strcmp(arg, "procstate")) {
			char *f[2];
			if (fields(v, f, 2) != 2)
				die("want procstate=S:STATE:", spec);
			gpuguard_region_proc(buf, index_in(f[0], GPUGUARD_REGION_PROCS, spec))->state =
			    state_num(f[1], spec);
		} else if (!strcmp(arg, "prochost")) {
			char *f[7];
			if (fields(v, f, 7) != 7)
				die("want prochost=S:OBIT_MS:WORKING_SET:USAGE:HOST_LIMIT:REFUSED:FLAGS:", spec);
			struct gpuguard_region_proc *p =
			    gpuguard_region_proc(buf, index_in(f[0], GPUGUARD_REGION_PROCS, spec));
			p->obit_ms = num(f[1], spec);
			p->host_ws = num(f[2], spec);
			p->host_usage = num(f[3], spec);
			p->host_limit = num(f[4], spec);
			p->refused = (uint32_t)num(f[5], spec);
			p->host_flags = (uint16_t)num(f[6], spec);
		} else if (!strcmp(arg, "hostile")) {
			mode = v;
		} else {
			die("unknown spec", spec);
		}
		free(spec);
	}
	size_t len = mode ? hostile(buf, mode, mode) : GPUGUARD_REGION_SIZE;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	for (size_t off = 0; off < len;) {
		ssize_t put = write(fd, buf + off, len - off);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0) {
			perror(argv[1]);
			return 2;
		}
		off += (size_t)put;
	}
	if (close(fd)) {
		perror(argv[1]);
		return 2;
	}
	return 0;
}
