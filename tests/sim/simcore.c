/* gpuguard simulated GPU: per-device page bitmap (2 MiB pages, first fit from
 * a next-fit hint, so fragmentation is real), small allocations packed into
 * shared pages, stream-ordered pools that keep a reserve, VMM handles and
 * address reservations. One mutex per device; an open-addressing hash maps
 * addresses to allocations so a million live allocations stay cheap. */
#define _GNU_SOURCE
#include "simcore.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS_PER_PAGE (SIM_PAGE / SIM_SMALL_ALIGN) /* 4096 */
#define SLOT_WORDS (SLOTS_PER_PAGE / 64)

/* ---------------------------------------------------------------- hash map */

struct amap_ent {
	uint64_t addr;  /* 0 = empty */
	uint64_t size;  /* as requested */
	uint64_t rsize; /* as charged: slots, pages or pool units */
	uint32_t kind;
	uint32_t ctx; /* owner context id (SIM_CTX_PRIMARY, or a created context's) */
};

struct amap {
	struct amap_ent *t;
	uint64_t cap, n;
};

static uint64_t amap_home(const struct amap *m, uint64_t a)
{
	uint64_t h = (a >> 9) * 0x9E3779B97F4A7C15ull;
	return (h ^ (h >> 31)) & (m->cap - 1);
}

static struct amap_ent *amap_find(const struct amap *m, uint64_t a)
{
	if (!m->cap)
		return NULL;
	for (uint64_t i = amap_home(m, a);; i = (i + 1) & (m->cap - 1)) {
		if (m->t[i].addr == a)
			return &m->t[i];
		if (!m->t[i].addr)
			return NULL;
	}
}

static int amap_put_unlocked(struct amap *m, const struct amap_ent *e)
{
	uint64_t i = amap_home(m, e->addr);
	while (m->t[i].addr)
		i = (i + 1) & (m->cap - 1);
	m->t[i] = *e;
	m->n++;
	return 0;
}

static int amap_insert(struct amap *m, const struct amap_ent *e)
{
	if ((m->n + 1) * 10 >= m->cap * 7) {
		struct amap old = *m;
		uint64_t cap = old.cap ? old.cap * 2 : 1024;
		struct amap_ent *t = calloc(cap, sizeof(*t));
		if (!t)
			return -1;
		m->t = t;
		m->cap = cap;
		m->n = 0;
		for (uint64_t i = 0; i < old.cap; i++)
			if (old.t[i].addr)
				amap_put_unlocked(m, &old.t[i]);
		free(old.t);
	}
	return amap_put_unlocked(m, e);
}

/* backward-shift deletion: no tombstones, so lookups stay short under churn */
static void amap_remove(struct amap *m, struct amap_ent *e)
{
	uint64_t mask = m->cap - 1, i = (uint64_t)(e - m->t), j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!m->t[j].addr)
			break;
		uint64_t k = amap_home(m, m->t[j].addr);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			m->t[i] = m->t[j];
			i = j;
		}
	}
	m->t[i].addr = 0;
	m->n--;
}

/* ------------------------------------------------------------------ bitmap */

/* first run of n zero bits in [from, to); bits past the end are kept set */
static int64_t bits_find_run(const uint64_t *bits, uint64_t n, uint64_t from, uint64_t to)
{
	uint64_t i = from;
	while (i + n <= to) {
		uint64_t w = i >> 6, b = i & 63;
		uint64_t freebits = ~bits[w] & (~0ull << b);
		if (!freebits) {
			i = (w + 1) << 6;
			continue;
		}
		uint64_t start = (w << 6) + (uint64_t)__builtin_ctzll(freebits);
		if (start + n > to)
			return -1;
		uint64_t j = start;
		for (;;) {
			w = j >> 6;
			b = j & 63;
			uint64_t used = bits[w] & (~0ull << b);
			if (used) {
				j = (w << 6) + (uint64_t)__builtin_ctzll(used);
				break;
			}
			j = (w + 1) << 6;
			if (j >= start + n)
				break;
		}
		if (j >= start + n)
			return (int64_t)start;
		i = j;
	}
	return -1;
}

static void bits_set(uint64_t *bits, uint64_t start, uint64_t n, int val)
{
	while (n) {
		uint64_t w = start >> 6, b = start & 63;
		uint64_t k = 64 - b < n ? 64 - b : n;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;
		if (val)
			bits[w] |= mask;
		else
			bits[w] &= ~mask;
		start += k;
		n -= k;
	}
}

static int bits_test(const uint64_t *bits, uint64_t i)
{
	return (int)((bits[i >> 6] >> (i & 63)) & 1);
}

/* ------------------------------------------------------------------ state */

enum { PG_FREE = 0, PG_LARGE, PG_SMALL, PG_POOL, PG_VMM };

struct small_page {
	uint64_t page;
	uint32_t live, free_slots, nofit, hint, idx;
	uint64_t used[SLOT_WORDS];
};

struct ext {
	uint64_t off, len; /* in SIM_SMALL_ALIGN units, relative to the chunk */
};

struct pool;
struct chunk {
	struct pool *pool;
	uint64_t page, npages, free_units;
	struct ext *ext;
	uint32_t next, capext;
};

struct pool {
	uint64_t handle;
	int dev, is_default, destroyed;
	uint32_t ctx; /* the context that created it; the default pool: primary */
	uint64_t threshold, reserved, used, reserved_high, used_high, live;
	uint64_t reuse[4]; /* attributes 1..3 (reuse policy flags), default 1 */
	struct chunk **chunks;
	size_t nchunks, capchunks;
};

/* A cuMemCreate handle: its pages live while refs > 0 or maps > 0. The
 * handle stays valid (for a retain through a mapped address) until then;
 * calls naming it directly need refs > 0. */
struct vmm {
	uint64_t handle, size;
	int dev;
	uint32_t ctx;
	uint64_t refs, maps, npages;
	uint32_t *pages;
	unsigned char prop[SIM_PROP_MAX];
};

/* slot table: opaque handles = tag | dev | generation | slot, validated O(1) */
struct slot_table {
	void **ptr;
	uint32_t *gen;
	uint32_t n, cap;
	uint32_t *freel;
	uint32_t nfree;
};

enum { TAG_POOL = 1, TAG_VMM = 2, TAG_HANDLE = 3 };

static uint64_t st_add(struct slot_table *st, void *p, int tag, int dev)
{
	uint32_t s;
	if (st->nfree) {
		s = st->freel[--st->nfree];
	} else {
		if (st->n == st->cap) {
			uint32_t cap = st->cap ? st->cap * 2 : 16;
			void **np = realloc(st->ptr, cap * sizeof(*np));
			if (!np)
				return 0;
			st->ptr = np;
			uint32_t *ng = realloc(st->gen, cap * sizeof(*ng));
			if (!ng)
				return 0;
			st->gen = ng;
			uint32_t *nf = realloc(st->freel, cap * sizeof(*nf));
			if (!nf)
				return 0;
			st->freel = nf;
			st->cap = cap;
		}
		s = st->n++;
		st->gen[s] = 0;
	}
	st->ptr[s] = p;
	st->gen[s] = (st->gen[s] + 1) & 0xFFFFF;
	return ((uint64_t)tag << 60) | ((uint64_t)SIM_LIB_ID << 59) | ((uint64_t)dev << 52) |
	       ((uint64_t)st->gen[s] << 32) | s;
}

static int h_tag(uint64_t h)
{
	return (int)(h >> 60);
}
static int h_dev(uint64_t h)
{
	return (int)((h >> 52) & 0x7F);
}

static void *st_get(const struct slot_table *st, uint64_t h)
{
	uint32_t s = (uint32_t)h, g = (uint32_t)(h >> 32) & 0xFFFFF;
	if (s >= st->n || st->gen[s] != g || !st->ptr[s])
		return NULL;
	return st->ptr[s];
}

static void st_del(struct slot_table *st, uint64_t h)
{
	uint32_t s = (uint32_t)h;
	st->ptr[s] = NULL;
	st->freel[st->nfree++] = s;
}

struct sim_dev {
	pthread_mutex_t mu;
	uint64_t total, npages;
	uint64_t *bits;
	uint8_t *pkind;
	uint32_t *pbase;
	void **pptr;
	uint64_t hint, used_pages, peak_pages, live_vmm;
	/* bytes charged beyond the pages (sim_charge): per use, and their sum */
	uint64_t fp[SIM_USE_N], fp_total;
	struct amap map;
	struct small_page *cur;
	struct small_page **smalls;
	size_t nsmall, capsmall;
	struct slot_table pools, vmms;
	uint64_t default_pool, current_pool;
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ndev;
static uint64_t g_uuid_seed; /* SIMGPU_UUID_SEED, hashed */
static int g_same_cards;     /* SIMGPU_SAME_CARDS=1: HIP device d is CUDA's card d */
static int g_shared;         /* SIMGPU_SHARED: the card's books are simcard.c's */
static struct sim_dev g_dev[SIM_MAX_DEVICES];
/* MIG (SIMGPU_MIG): the card's slots are its GPUs (0 .. g_nphys-1) and GPU
 * 0's instances after them (g_nphys + k); device d of this library is slot
 * g_slot[d]: the GPU d itself except in the CUDA library under MIG. */
static int g_nphys, g_nmig;
static uint64_t g_gpu_total;
static uint64_t g_mig_size[SIM_MAX_DEVICES];
static int g_slot[SIM_MAX_DEVICES];

static pthread_mutex_t g_hmu = PTHREAD_MUTEX_INITIALIZER; /* handles + host memory */
static struct slot_table g_handles;
static struct amap g_host;

/* --------------------------------------------------------------- env/init */

int sim_parse_quantity(const char *s, uint64_t *out)
{
	static const struct {
		const char *sfx;
		double mul;
	} sfx[] = {
	    {"", 1},
	    {"k", 1e3},
	    {"M", 1e6},
	    {"G", 1e9},
	    {"T", 1e12},
	    {"P", 1e15},
	    {"Ki", 1024.0},
	    {"Mi", 1048576.0},
	    {"Gi", 1073741824.0},
	    {"Ti", 1099511627776.0},
	    {"Pi", 1125899906842624.0},
	};
	if (!s)
		return -1;
	while (*s == ' ')
		s++;
	const char *p = s;
	uint64_t ip = 0;
	int digits = 0;
	while (*p >= '0' && *p <= '9') {
		if (ip > (UINT64_MAX - 9) / 10)
			return -1;
		ip = ip * 10 + (uint64_t)(*p++ - '0');
		digits++;
	}
	double frac = 0, scale = 0.1;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			frac += scale * (*p++ - '0');
			scale /= 10;
			digits++;
		}
	}
	if (!digits)
		return -1;
	size_t len = strlen(p);
	while (len && p[len - 1] == ' ')
		len--;
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		if (strlen(sfx[i].sfx) == len && !strncmp(p, sfx[i].sfx, len)) {
			double v = ((double)ip + frac) * sfx[i].mul;
			if (v >= 18446744073709551615.0)
				return -1;
			if (frac == 0 && sfx[i].mul == 1)
				*out = ip;
			else
				*out = (uint64_t)v;
			return 0;
		}
	}
	return -1;
}

/* SIMGPU_MIG (the CUDA and NVML libraries): "<n>" instances of equal size,
 * or a list of sizes "40Gi,20Gi", carved out of GPU 0. 0 with the sizes
 * filled, -1 after a message naming the variable, the value and the
 * syntax. */
static int mig_parse(const char *e, uint64_t gpu, int most, uint64_t size[SIM_MAX_DEVICES], int *n)
{
	int k = 0;
	uint64_t sum = 0;
	char *end;
	long v = strtol(e, &end, 10);
	if (*e >= '0' && *e <= '9' && !*end) {
		if (v < 1 || v > most)
			goto bad;
		for (k = 0; k < v; k++)
			size[k] = gpu / (uint64_t)v - (gpu / (uint64_t)v) % SIM_PAGE;
		sum = size[0] * (uint64_t)v;
	} else {
		char buf[256];
		if (strlen(e) >= sizeof buf)
			goto bad;
		strcpy(buf, e);
		for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			uint64_t q;
			if (k == most || sim_parse_quantity(t, &q) || q < SIM_PAGE)
				goto bad;
			size[k++] = q - q % SIM_PAGE;
			sum += q - q % SIM_PAGE;
		}
	}
	if (!k || !size[0] || sum > gpu)
		goto bad;
	*n = k;
	return 0;
bad:
	fprintf(stderr,
	        "simgpu: ignoring invalid SIMGPU_MIG=%s (expected a count of 1 to %d equal instances, or a list of "
	        "sizes such as 40Gi,20Gi, each at least 2Mi, adding up to at most GPU 0's memory); MIG is off\n",
	        e, most);
	return -1;
}

static void slot_string(int slot, char *buf, unsigned len);
static uint64_t slot_total(int slot);

/* A MIG instance's number among the instances, from its UUID string
 * "MIG-…", or -1. */
static int mig_by_uuid(const char *s, size_t len)
{
	for (int k = 0; k < g_nmig; k++) {
		char u[64];
		slot_string(g_nphys + k, u, sizeof u);
		if (strlen(u) == len && !strncmp(u, s, len))
			return k;
	}
	return -1;
}

/* The CUDA library's devices under MIG: CUDA_VISIBLE_DEVICES' entries in
 * order, a "MIG-<uuid>" naming its instance, an index or "GPU-<uuid>"
 * naming a GPU, and GPU 0 (in MIG mode) standing for its first instance;
 * one instance at most (CUDA's MIG support enumerates a single MIG device
 * per process); the list ends at the first entry that names nothing, as
 * CUDA's does. Unset: the first instance, then the other GPUs. */
static int mig_visible(int slot[SIM_MAX_DEVICES])
{
	const char *e = getenv("CUDA_VISIBLE_DEVICES");
	int n = 0, mig_seen = 0;
	if (!e) {
		slot[n++] = g_nphys;
		for (int d = 1; d < g_nphys; d++)
			slot[n++] = d;
		return n;
	}
	while (*e && n < SIM_MAX_DEVICES) {
		size_t len = strcspn(e, ",");
		int s = -1;
		if (len > 4 && !strncmp(e, "MIG-", 4)) {
			int k = mig_by_uuid(e, len);
			s = k < 0 ? -1 : g_nphys + k;
		} else if (len > 4 && !strncmp(e, "GPU-", 4)) {
			for (int d = 0; d < g_nphys && s < 0; d++) {
				char u[64];
				slot_string(d, u, sizeof u);
				if (strlen(u) == len && !strncmp(u, e, len))
					s = d;
			}
		} else if (len && strspn(e, "0123456789") == len) {
			long i = strtol(e, NULL, 10);
			s = i < g_nphys ? (int)i : -1;
		}
		if (s < 0)
			break;
		if (s == 0)
			s = g_nphys; /* the MIG-mode GPU: its first instance */
		if (s >= g_nphys) {
			if (mig_seen)
				s = -2; /* a second instance: not enumerated */
			mig_seen = 1;
		}
		int dup = 0;
		for (int i = 0; i < n; i++)
			dup |= slot[i] == s;
		if (s >= 0 && !dup)
			slot[n++] = s;
		e += len;
		if (*e == ',')
			e++;
	}
	return n;
}

static void do_init(void)
{
	int ndev = 1;
	uint64_t mem = 80ull << 30;
	const char *e = getenv("SIMGPU_DEVICES");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end || v < 0)
			fprintf(stderr, "simgpu: ignoring invalid SIMGPU_DEVICES=%s\n", e);
		else
			ndev = v > SIM_MAX_DEVICES ? SIM_MAX_DEVICES : (int)v;
	}
	e = getenv("SIMGPU_MEMORY");
	if (e && *e && sim_parse_quantity(e, &mem)) {
		fprintf(stderr, "simgpu: ignoring invalid SIMGPU_MEMORY=%s\n", e);
		mem = 80ull << 30;
	}
	if (mem > SIM_DEV_STRIDE)
		mem = SIM_DEV_STRIDE;
	mem -= mem % SIM_PAGE;
	if (mem < SIM_PAGE)
		mem = SIM_PAGE;
	/* FNV-1a: any string is a seed */
	e = getenv("SIMGPU_UUID_SEED");
	for (g_uuid_seed = 0xcbf29ce484222325ull; e && *e; e++)
		g_uuid_seed = (g_uuid_seed ^ (unsigned char)*e) * 0x100000001b3ull;
	e = getenv("SIMGPU_SAME_CARDS");
	g_same_cards = e && !strcmp(e, "1");
	/* MIG: NVIDIA's libraries only (HIP has none); at most 7 instances, as
	 * on an H100, and a slot for each beside the GPUs */
	int nmig = 0;
	e = getenv("SIMGPU_MIG");
	if (!SIM_LIB_ID && e && *e && ndev > 0) {
		int most = SIM_MAX_DEVICES - ndev < 7 ? SIM_MAX_DEVICES - ndev : 7;
		if (most < 1 || mig_parse(e, mem, most, g_mig_size, &nmig))
			nmig = 0;
	}
	/* a shared card's devices, size, UUIDs and instances are its maker's */
	e = getenv("SIMGPU_SHARED");
	if (e && *e && ndev > 0)
		g_shared = sim_card_open(e, &ndev, &mem, &g_uuid_seed, &nmig, g_mig_size) == 0;
	g_nphys = ndev;
	g_nmig = nmig;
	g_gpu_total = mem;
	/* the devices this library shows: the GPUs, or under MIG for the CUDA
	 * library the instances and GPUs CUDA_VISIBLE_DEVICES names */
	for (int d = 0; d < ndev; d++)
		g_slot[d] = d;
	if (nmig && sim_lib_shows_mig)
		ndev = mig_visible(g_slot);
	for (int d = 0; d < ndev; d++) {
		struct sim_dev *dv = &g_dev[d];
		pthread_mutex_init(&dv->mu, NULL);
		dv->total = slot_total(g_slot[d]);
		dv->npages = dv->total / SIM_PAGE;
		uint64_t words = (dv->npages + 63) / 64;
		dv->bits = calloc(words, sizeof(uint64_t));
		dv->pkind = calloc(dv->npages, 1);
		dv->pbase = calloc(dv->npages, sizeof(uint32_t));
		dv->pptr = calloc(dv->npages, sizeof(void *));
		if (!dv->bits || !dv->pkind || !dv->pbase || !dv->pptr) {
			fprintf(stderr, "simgpu: out of host memory\n");
			abort();
		}
		if (dv->npages % 64)
			bits_set(dv->bits, dv->npages, words * 64 - dv->npages, 1);
	}
	g_ndev = ndev;
}

void sim_init(void)
{
	pthread_once(&g_once, do_init);
}

int sim_device_count(void)
{
	sim_init();
	return g_ndev;
}

int sim_device_valid(int dev)
{
	sim_init();
	return dev >= 0 && dev < g_ndev;
}

uint64_t sim_device_total(int dev)
{
	return sim_device_valid(dev) ? g_dev[dev].total : 0;
}

uint64_t sim_device_free(int dev)
{
	if (!sim_device_valid(dev))
		return 0;
	if (g_shared) {
		uint64_t held = sim_card_used(g_slot[dev]) + sim_card_reserved(g_slot[dev]);
		return held < g_dev[dev].total ? g_dev[dev].total - held : 0;
	}
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	uint64_t f = d->total - d->used_pages * SIM_PAGE - d->fp_total;
	pthread_mutex_unlock(&d->mu);
	return f;
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* A GPU's UUID from (seed, library, index); an instance's from (seed,
 * "MIG", its number): the CUDA library and NVML agree. */
static void slot_uuid(int slot, uint8_t out[16])
{
	uint64_t lib = g_same_cards ? 0 : SIM_LIB_ID; /* the card, not the library */
	uint64_t x = g_uuid_seed ^ (lib << 32) ^ (uint64_t)(unsigned)slot;
	if (slot >= g_nphys)
		x = g_uuid_seed ^ (0x4d4947ull << 40) ^ (uint64_t)(unsigned)(slot - g_nphys);
	for (int i = 0; i < 16; i += 8) {
		uint64_t r = splitmix64(&x);
		memcpy(out + i, &r, 8);
	}
	out[6] = (uint8_t)((out[6] & 0x0f) | 0x40); /* version 4 (random) */
	out[8] = (uint8_t)((out[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

void sim_device_uuid(int dev, uint8_t out[16])
{
	sim_init();
	slot_uuid(dev >= 0 && dev < g_ndev ? g_slot[dev] : dev, out);
}

int sim_device_parent_uuid(int dev, uint8_t out[16])
{
	sim_init();
	if (dev < 0 || dev >= g_ndev || g_slot[dev] < g_nphys)
		return -1;
	slot_uuid(0, out);
	return 0;
}

int sim_slot_count(void)
{
	sim_init();
	return g_nphys + g_nmig;
}

int sim_mig_count(void)
{
	sim_init();
	return g_nmig;
}

/* slot_total and slot_string run inside sim_init's once as well */
static uint64_t slot_total(int slot)
{
	if (slot < 0 || slot >= g_nphys + g_nmig)
		return 0;
	return slot < g_nphys ? g_gpu_total : g_mig_size[slot - g_nphys];
}

uint64_t sim_slot_total(int slot)
{
	sim_init();
	return slot_total(slot);
}

void sim_slot_uuid_string(int slot, char *buf, unsigned len)
{
	sim_init();
	slot_string(slot, buf, len);
}

static void slot_string(int slot, char *buf, unsigned len)
{
	uint8_t u[16];
	slot_uuid(slot, u);
	snprintf(buf, len, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         slot < g_nphys ? "GPU" : "MIG", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
	         u[11], u[12], u[13], u[14], u[15]);
}

int sim_slot_device(int slot)
{
	sim_init();
	for (int d = 0; d < g_ndev; d++)
		if (g_slot[d] == slot)
			return d;
	return -1;
}

int sim_cuda_device_of_slot(int slot)
{
	sim_init();
	if (!g_nmig)
		return slot >= 0 && slot < g_nphys ? slot : -1;
	int v[SIM_MAX_DEVICES], n = mig_visible(v);
	for (int d = 0; d < n; d++)
		if (v[d] == slot)
			return d;
	return -1;
}

/* PCI location of device d: domain 0, bus 0x18 + 0x10 d, device 0 (the
 * CUDA and NVML libraries agree); a MIG instance is on its GPU's */
void sim_device_pci(int dev, int *domain, int *bus, int *device)
{
	int slot = dev >= 0 && dev < g_ndev ? g_slot[dev] : dev;
	if (slot >= g_nphys)
		slot = 0;
	*domain = 0;
	*bus = 0x18 + 0x10 * slot;
	*device = 0;
}

static uint64_t dev_base(int dev)
{
	return SIM_DEV_BASE + (uint64_t)dev * SIM_DEV_STRIDE;
}

int sim_addr_device(uint64_t addr)
{
	sim_init();
	if (addr < SIM_DEV_BASE)
		return -1;
	uint64_t d = (addr - SIM_DEV_BASE) / SIM_DEV_STRIDE;
	if (d >= (uint64_t)g_ndev)
		return -1;
	if (addr - dev_base((int)d) >= g_dev[d].total)
		return -1;
	return (int)d;
}

/* ------------------------------------------------------------------ pages */

static void pages_account(struct sim_dev *d, int64_t delta)
{
	d->used_pages = (uint64_t)((int64_t)d->used_pages + delta);
	if (d->used_pages > d->peak_pages)
		d->peak_pages = d->used_pages;
}

/* pages this process may still take: the card's size less its pages and
 * its other charges (on a shared card the card's lock decides the rest) */
static uint64_t pages_avail(const struct sim_dev *d)
{
	return (d->total - d->fp_total) / SIM_PAGE - d->used_pages;
}

static int64_t pages_take(struct sim_dev *d, uint64_t n, int kind, void *ptr)
{
	if (n == 0 || n > pages_avail(d))
		return -1;
	int slot = g_slot[d - g_dev];
	if (g_shared && sim_card_take(slot, SIM_USE_MEMORY, n * SIM_PAGE))
		return -1;
	int64_t r = bits_find_run(d->bits, n, d->hint, d->npages);
	if (r < 0)
		r = bits_find_run(d->bits, n, 0, d->npages);
	if (r < 0) {
		if (g_shared)
			sim_card_give(slot, SIM_USE_MEMORY, n * SIM_PAGE);
		return -1;
	}
	uint64_t s = (uint64_t)r;
	bits_set(d->bits, s, n, 1);
	for (uint64_t i = 0; i < n; i++) {
		d->pkind[s + i] = (uint8_t)kind;
		d->pbase[s + i] = (uint32_t)s;
		d->pptr[s + i] = ptr;
	}
	d->hint = s + n >= d->npages ? 0 : s + n;
	pages_account(d, (int64_t)n);
	return r;
}

static void pages_give(struct sim_dev *d, uint64_t s, uint64_t n)
{
	bits_set(d->bits, s, n, 0);
	for (uint64_t i = 0; i < n; i++) {
		d->pkind[s + i] = PG_FREE;
		d->pptr[s + i] = NULL;
	}
	pages_account(d, -(int64_t)n);
	if (g_shared)
		sim_card_give(g_slot[d - g_dev], SIM_USE_MEMORY, n * SIM_PAGE);
}

/* ------------------------------------------------------------ small pages */

static int small_try(struct small_page *sp, uint32_t slots, uint64_t *slot)
{
	if (sp->free_slots < slots || slots >= sp->nofit)
		return 0;
	int64_t r = bits_find_run(sp->used, slots, sp->hint, SLOTS_PER_PAGE);
	if (r < 0 && sp->hint)
		r = bits_find_run(sp->used, slots, 0, SLOTS_PER_PAGE);
	if (r < 0) {
		sp->nofit = slots; /* until something in this page is freed */
		return 0;
	}
	bits_set(sp->used, (uint64_t)r, slots, 1);
	sp->free_slots -= slots;
	sp->live++;
	sp->hint = (uint32_t)((uint64_t)r + slots) % SLOTS_PER_PAGE;
	*slot = (uint64_t)r;
	return 1;
}

static int small_alloc(struct sim_dev *d, int dev, uint32_t slots, uint64_t *addr)
{
	uint64_t slot;
	struct small_page *sp = d->cur;
	if (!sp || !small_try(sp, slots, &slot)) {
		sp = NULL;
		for (size_t i = 0; i < d->nsmall; i++) {
			if (d->smalls[i] != d->cur && small_try(d->smalls[i], slots, &slot)) {
				sp = d->smalls[i];
				break;
			}
		}
		if (!sp) {
			if (d->nsmall == d->capsmall) {
				size_t cap = d->capsmall ? d->capsmall * 2 : 64;
				struct small_page **n = realloc(d->smalls, cap * sizeof(*n));
				if (!n)
					return SIM_ENOMEM;
				d->smalls = n;
				d->capsmall = cap;
			}
			sp = calloc(1, sizeof(*sp));
			if (!sp)
				return SIM_ENOMEM;
			int64_t pg = pages_take(d, 1, PG_SMALL, sp);
			if (pg < 0) {
				free(sp);
				return SIM_ENOMEM;
			}
			sp->page = (uint64_t)pg;
			sp->free_slots = SLOTS_PER_PAGE;
			sp->nofit = SLOTS_PER_PAGE + 1;
			sp->idx = (uint32_t)d->nsmall;
			d->smalls[d->nsmall++] = sp;
			small_try(sp, slots, &slot);
		}
		d->cur = sp;
	}
	*addr = dev_base(dev) + sp->page * SIM_PAGE + slot * SIM_SMALL_ALIGN;
	return SIM_OK;
}

static void small_free(struct sim_dev *d, int dev, uint64_t addr, uint64_t rsize)
{
	uint64_t off = addr - dev_base(dev);
	struct small_page *sp = d->pptr[off / SIM_PAGE];
	uint64_t slots = rsize / SIM_SMALL_ALIGN;
	bits_set(sp->used, (off % SIM_PAGE) / SIM_SMALL_ALIGN, slots, 0);
	sp->free_slots += (uint32_t)slots;
	sp->nofit = SLOTS_PER_PAGE + 1;
	if (--sp->live == 0) {
		pages_give(d, sp->page, 1);
		d->smalls[sp->idx] = d->smalls[--d->nsmall];
		d->smalls[sp->idx]->idx = sp->idx;
		if (d->cur == sp)
			d->cur = NULL;
		free(sp);
	}
}

/* ----------------------------------------------------------------- linear */

int sim_alloc(int dev, uint64_t size, int kind, int whole_pages, uint64_t *addr)
{
	return sim_alloc_ctx(dev, SIM_CTX_PRIMARY, size, kind, whole_pages, addr);
}

int sim_alloc_ctx(int dev, uint32_t ctx, uint64_t size, int kind, int whole_pages, uint64_t *addr)
{
	if (!sim_device_valid(dev))
		return SIM_EDEVICE;
	if (!size || !addr)
		return SIM_EINVAL;
	struct sim_dev *d = &g_dev[dev];
	if (size > d->total)
		return SIM_ENOMEM;
	struct amap_ent e = {.size = size, .kind = (uint32_t)kind, .ctx = ctx};
	int rc = SIM_OK;
	int small = size <= SIM_SMALL_MAX && !whole_pages;
	pthread_mutex_lock(&d->mu);
	if (small) {
		uint32_t slots = (uint32_t)((size + SIM_SMALL_ALIGN - 1) / SIM_SMALL_ALIGN);
		e.rsize = (uint64_t)slots * SIM_SMALL_ALIGN;
		rc = small_alloc(d, dev, slots, &e.addr);
	} else {
		uint64_t n = (size + SIM_PAGE - 1) / SIM_PAGE;
		int64_t pg = pages_take(d, n, PG_LARGE, NULL);
		if (pg < 0)
			rc = SIM_ENOMEM;
		e.rsize = n * SIM_PAGE;
		e.addr = dev_base(dev) + (uint64_t)pg * SIM_PAGE;
	}
	if (rc == SIM_OK && amap_insert(&d->map, &e)) {
		if (small)
			small_free(d, dev, e.addr, e.rsize);
		else
			pages_give(d, (e.addr - dev_base(dev)) / SIM_PAGE, e.rsize / SIM_PAGE);
		rc = SIM_ENOMEM;
	}
	pthread_mutex_unlock(&d->mu);
	if (rc == SIM_OK)
		*addr = e.addr;
	return rc;
}

static void pool_block_free(struct sim_dev *d, uint64_t off, uint64_t rsize);

/* remove one allocation from the map and give back what it held */
static void ent_free_unlocked(struct sim_dev *d, int dev, struct amap_ent *p)
{
	struct amap_ent e = *p;
	amap_remove(&d->map, p);
	uint64_t off = e.addr - dev_base(dev);
	switch (d->pkind[off / SIM_PAGE]) {
	case PG_SMALL:
		small_free(d, dev, e.addr, e.rsize);
		break;
	case PG_POOL:
		pool_block_free(d, off, e.rsize);
		break;
	default:
		pages_give(d, off / SIM_PAGE, e.rsize / SIM_PAGE);
	}
}

int sim_free(uint64_t addr, unsigned kind_mask)
{
	int dev = sim_addr_device(addr);
	if (dev < 0)
		return SIM_EINVAL;
	struct sim_dev *d = &g_dev[dev];
	int rc = SIM_OK;
	pthread_mutex_lock(&d->mu);
	struct amap_ent *p = amap_find(&d->map, addr);
	if (!p || !(kind_mask & SIM_KMASK(p->kind)))
		rc = SIM_EINVAL;
	else
		ent_free_unlocked(d, dev, p);
	pthread_mutex_unlock(&d->mu);
	return rc;
}

static int in_ent(const struct amap_ent *e, uint64_t a)
{
	return e && (e->kind == SIM_KIND_LINEAR || e->kind == SIM_KIND_MANAGED || e->kind == SIM_KIND_POOL) &&
	       a >= e->addr && a < e->addr + e->size;
}

int sim_addr_range(uint64_t addr, uint64_t *base, uint64_t *size)
{
	return sim_addr_kind(addr, base, size, NULL);
}

int sim_addr_kind(uint64_t addr, uint64_t *base, uint64_t *size, int *kind)
{
	int dev = sim_addr_device(addr);
	if (dev < 0)
		return SIM_ENOTFOUND;
	struct sim_dev *d = &g_dev[dev];
	uint64_t off = addr - dev_base(dev), pg = off / SIM_PAGE;
	const struct amap_ent *e = NULL;
	pthread_mutex_lock(&d->mu);
	switch (d->pkind[pg]) {
	case PG_LARGE:
		e = amap_find(&d->map, dev_base(dev) + (uint64_t)d->pbase[pg] * SIM_PAGE);
		break;
	case PG_SMALL: {
		/* walk back to the nearest allocation start in this page */
		const struct small_page *sp = d->pptr[pg];
		for (int64_t s = (int64_t)((off % SIM_PAGE) / SIM_SMALL_ALIGN); s >= 0 && !e; s--)
			if (bits_test(sp->used, (uint64_t)s))
				e = amap_find(&d->map, dev_base(dev) + pg * SIM_PAGE + (uint64_t)s * SIM_SMALL_ALIGN);
		break;
	}
	case PG_POOL: {
		const struct chunk *c = d->pptr[pg];
		uint64_t lo = dev_base(dev) + c->page * SIM_PAGE;
		for (uint64_t a = addr & ~(SIM_SMALL_ALIGN - 1); a >= lo && !e; a -= SIM_SMALL_ALIGN)
			e = amap_find(&d->map, a);
		break;
	}
	default:
		break;
	}
	int rc = in_ent(e, addr) ? SIM_OK : SIM_ENOTFOUND;
	if (rc == SIM_OK) {
		if (base)
			*base = e->addr;
		if (size)
			*size = e->size;
		if (kind)
			*kind = (int)e->kind;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

uint64_t sim_addr_pool(uint64_t addr)
{
	int kind = -1;
	if (sim_addr_kind(addr, NULL, NULL, &kind) != SIM_OK || kind != SIM_KIND_POOL)
		return 0;
	int dev = sim_addr_device(addr);
	struct sim_dev *d = &g_dev[dev];
	uint64_t pg = (addr - dev_base(dev)) / SIM_PAGE;
	uint64_t h = 0;
	pthread_mutex_lock(&d->mu);
	/* a block freed meanwhile leaves the page to another kind, or none */
	if (d->pkind[pg] == PG_POOL)
		h = ((const struct chunk *)d->pptr[pg])->pool->handle;
	pthread_mutex_unlock(&d->mu);
	return h;
}

/* ------------------------------------------------------------------ pools */

#define UNITS_PER_PAGE SLOTS_PER_PAGE

static void pool_high(struct pool *p)
{
	if (p->reserved > p->reserved_high)
		p->reserved_high = p->reserved;
	if (p->used > p->used_high)
		p->used_high = p->used;
}

static void chunk_drop(struct sim_dev *d, struct pool *p, size_t i)
{
	struct chunk *c = p->chunks[i];
	p->chunks[i] = p->chunks[--p->nchunks];
	free(c->ext);
	free(c);
	(void)d;
}

/* release k whole pages from the tail of an entirely free chunk */
static void chunk_shrink(struct sim_dev *d, struct pool *p, size_t i, uint64_t k)
{
	struct chunk *c = p->chunks[i];
	c->npages -= k;
	pages_give(d, c->page + c->npages, k);
	p->reserved -= k * SIM_PAGE;
	if (!c->npages) {
		chunk_drop(d, p, i);
		return;
	}
	c->ext[0].len -= k * UNITS_PER_PAGE;
	c->free_units -= k * UNITS_PER_PAGE;
}

static void pool_trim_unlocked(struct sim_dev *d, struct pool *p, uint64_t keep)
{
	for (size_t i = p->nchunks; i-- > 0 && p->reserved > keep;) {
		struct chunk *c = p->chunks[i];
		if (c->free_units != c->npages * UNITS_PER_PAGE)
			continue;
		uint64_t k = (p->reserved - keep) / SIM_PAGE;
		if (!k)
			break;
		chunk_shrink(d, p, i, k < c->npages ? k : c->npages);
	}
}

static void pool_free_struct(struct sim_dev *d, struct pool *p)
{
	pool_trim_unlocked(d, p, 0);
	free(p->chunks);
	free(p);
}

static struct pool *pool_new(struct sim_dev *d, int dev)
{
	struct pool *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->dev = dev;
	p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
	p->handle = st_add(&d->pools, p, TAG_POOL, dev);
	if (!p->handle) {
		free(p);
		return NULL;
	}
	return p;
}

/* the default pool is made on first use, under the device lock */
static void pool_ensure_default(struct sim_dev *d, int dev)
{
	if (d->default_pool)
		return;
	struct pool *p = pool_new(d, dev);
	if (!p) {
		fprintf(stderr, "simgpu: out of host memory\n");
		abort();
	}
	p->is_default = 1;
	d->default_pool = d->current_pool = p->handle;
}

/* The device a handle of kind tag (TAG_POOL, TAG_VMM) names, locked; NULL
 * (nothing locked) for another kind or no such device. The caller looks
 * the handle up in the device's table and unlocks d->mu. */
static struct sim_dev *handle_dev_lock(uint64_t h, int tag)
{
	sim_init();
	if (h_tag(h) != tag || h_dev(h) >= g_ndev)
		return NULL;
	struct sim_dev *d = &g_dev[h_dev(h)];
	pthread_mutex_lock(&d->mu);
	return d;
}

/* lock the pool's device and return the pool, or NULL (nothing locked) */
static struct pool *pool_lock(uint64_t h, struct sim_dev **dp)
{
	struct sim_dev *d = handle_dev_lock(h, TAG_POOL);
	if (!d)
		return NULL;
	struct pool *p = st_get(&d->pools, h);
	if (!p) {
		pthread_mutex_unlock(&d->mu);
		return NULL;
	}
	*dp = d;
	return p;
}

/* dev's default pool (current 0) or its current one, made on first use */
static uint64_t pool_of(int dev, int current)
{
	if (!sim_device_valid(dev))
		return 0;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	pool_ensure_default(d, dev);
	uint64_t h = current ? d->current_pool : d->default_pool;
	pthread_mutex_unlock(&d->mu);
	return h;
}

uint64_t sim_pool_default(int dev)
{
	return pool_of(dev, 0);
}

uint64_t sim_pool_current(int dev)
{
	return pool_of(dev, 1);
}

int sim_pool_set_current(int dev, uint64_t h)
{
	if (!sim_device_valid(dev))
		return SIM_EDEVICE;
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EINVAL;
	int rc = SIM_OK;
	if (p->dev != dev)
		rc = SIM_EINVAL;
	else
		d->current_pool = h;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int sim_pool_create(int dev, uint64_t *out)
{
	return sim_pool_create_ctx(dev, SIM_CTX_PRIMARY, out);
}

int sim_pool_create_ctx(int dev, uint32_t ctx, uint64_t *out)
{
	if (!sim_device_valid(dev))
		return SIM_EDEVICE;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	pool_ensure_default(d, dev);
	struct pool *p = pool_new(d, dev);
	if (p)
		p->ctx = ctx;
	pthread_mutex_unlock(&d->mu);
	if (!p)
		return SIM_ENOMEM;
	*out = p->handle;
	return SIM_OK;
}

int sim_pool_device(uint64_t h)
{
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return -1;
	int dev = p->dev;
	pthread_mutex_unlock(&d->mu);
	return dev;
}

/* Real driver: destroying a pool with live blocks returns at once and frees
 * the pool when its last block is freed. */
int sim_pool_destroy(uint64_t h)
{
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EINVAL;
	if (p->is_default) {
		pthread_mutex_unlock(&d->mu);
		return SIM_EINVAL;
	}
	st_del(&d->pools, h);
	if (d->current_pool == h)
		d->current_pool = d->default_pool;
	if (p->live == 0)
		pool_free_struct(d, p);
	else {
		p->destroyed = 1;
		pool_trim_unlocked(d, p, 0);
	}
	pthread_mutex_unlock(&d->mu);
	return SIM_OK;
}

static int chunk_carve(struct chunk *c, uint64_t units, uint64_t *off)
{
	if (c->free_units < units)
		return 0;
	for (uint32_t i = 0; i < c->next; i++) {
		struct ext *x = &c->ext[i];
		if (x->len < units)
			continue;
		*off = x->off;
		x->off += units;
		x->len -= units;
		if (!x->len) {
			memmove(x, x + 1, (c->next - i - 1) * sizeof(*x));
			c->next--;
		}
		c->free_units -= units;
		return 1;
	}
	return 0;
}

static int chunk_ext_insert(struct chunk *c, uint64_t off, uint64_t len)
{
	uint32_t lo = 0, hi = c->next;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (c->ext[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	c->free_units += len;
	int prev = lo > 0 && c->ext[lo - 1].off + c->ext[lo - 1].len == off;
	int next = lo < c->next && off + len == c->ext[lo].off;
	if (prev && next) {
		c->ext[lo - 1].len += len + c->ext[lo].len;
		memmove(&c->ext[lo], &c->ext[lo + 1], (c->next - lo - 1) * sizeof(struct ext));
		c->next--;
	} else if (prev) {
		c->ext[lo - 1].len += len;
	} else if (next) {
		c->ext[lo].off = off;
		c->ext[lo].len += len;
	} else {
		if (c->next == c->capext) {
			uint32_t cap = c->capext ? c->capext * 2 : 8;
			struct ext *n = realloc(c->ext, cap * sizeof(*n));
			if (!n)
				return -1;
			c->ext = n;
			c->capext = cap;
		}
		memmove(&c->ext[lo + 1], &c->ext[lo], (c->next - lo) * sizeof(struct ext));
		c->ext[lo].off = off;
		c->ext[lo].len = len;
		c->next++;
	}
	return 0;
}

int sim_pool_alloc(uint64_t h, uint64_t size, uint64_t *addr)
{
	return sim_pool_alloc_ctx(h, SIM_CTX_PRIMARY, size, addr);
}

int sim_pool_alloc_ctx(uint64_t h, uint32_t ctx, uint64_t size, uint64_t *addr)
{
	if (!size)
		return SIM_EINVAL;
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EHANDLE;
	uint64_t base = dev_base(p->dev);
	uint64_t units = (size + SIM_SMALL_ALIGN - 1) / SIM_SMALL_ALIGN, off = 0;
	struct chunk *c = NULL;
	int rc = SIM_OK;
	if (size > d->total) {
		rc = SIM_ENOMEM;
		goto out;
	}
	/* a warm pool serves from its reserve without taking pages */
	for (size_t i = 0; i < p->nchunks && !c; i++)
		if (chunk_carve(p->chunks[i], units, &off))
			c = p->chunks[i];
	if (!c) {
		uint64_t n = (units + UNITS_PER_PAGE - 1) / UNITS_PER_PAGE;
		if (p->nchunks == p->capchunks) {
			size_t cap = p->capchunks ? p->capchunks * 2 : 8;
			struct chunk **nc = realloc(p->chunks, cap * sizeof(*nc));
			if (!nc) {
				rc = SIM_ENOMEM;
				goto out;
			}
			p->chunks = nc;
			p->capchunks = cap;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			rc = SIM_ENOMEM;
			goto out;
		}
		int64_t pg = pages_take(d, n, PG_POOL, c);
		if (pg < 0) {
			free(c);
			rc = SIM_ENOMEM;
			goto out;
		}
		c->pool = p;
		c->page = (uint64_t)pg;
		c->npages = n;
		p->chunks[p->nchunks++] = c;
		p->reserved += n * SIM_PAGE;
		chunk_ext_insert(c, 0, n * UNITS_PER_PAGE);
		chunk_carve(c, units, &off);
	}
	struct amap_ent e = {.addr = base + c->page * SIM_PAGE + off * SIM_SMALL_ALIGN,
	                     .size = size,
	                     .rsize = units * SIM_SMALL_ALIGN,
	                     .kind = SIM_KIND_POOL,
	                     .ctx = ctx};
	if (amap_insert(&d->map, &e)) {
		chunk_ext_insert(c, off, units);
		rc = SIM_ENOMEM;
		goto out;
	}
	p->used += e.rsize;
	p->live++;
	pool_high(p);
	*addr = e.addr;
out:
	pthread_mutex_unlock(&d->mu);
	return rc;
}

static void pool_block_free(struct sim_dev *d, uint64_t off, uint64_t rsize)
{
	struct chunk *c = d->pptr[off / SIM_PAGE];
	struct pool *p = c->pool;
	if (chunk_ext_insert(c, (off - c->page * SIM_PAGE) / SIM_SMALL_ALIGN, rsize / SIM_SMALL_ALIGN)) {
		fprintf(stderr, "simgpu: out of host memory\n");
		abort();
	}
	p->used -= rsize;
	p->live--;
	if (p->destroyed && !p->live)
		pool_free_struct(d, p);
}

int sim_pool_trim(uint64_t h, uint64_t keep)
{
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EINVAL;
	pool_trim_unlocked(d, p, keep);
	pthread_mutex_unlock(&d->mu);
	return SIM_OK;
}

void sim_device_sync(int dev)
{
	if (!sim_device_valid(dev))
		return;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	for (uint32_t i = 0; i < d->pools.n; i++) {
		struct pool *p = d->pools.ptr[i];
		if (p)
			pool_trim_unlocked(d, p, p->threshold);
	}
	pthread_mutex_unlock(&d->mu);
}

int sim_pool_get_attr(uint64_t h, int attr, uint64_t *v)
{
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EINVAL;
	int rc = SIM_OK;
	switch (attr) {
	case SIM_POOL_ATTR_RELEASE_THRESHOLD:
		*v = p->threshold;
		break;
	case SIM_POOL_ATTR_RESERVED_CURRENT:
		*v = p->reserved;
		break;
	case SIM_POOL_ATTR_RESERVED_HIGH:
		*v = p->reserved_high;
		break;
	case SIM_POOL_ATTR_USED_CURRENT:
		*v = p->used;
		break;
	case SIM_POOL_ATTR_USED_HIGH:
		*v = p->used_high;
		break;
	case 1:
	case 2:
	case 3:
		*v = p->reuse[attr];
		break;
	default:
		rc = SIM_EINVAL;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

int sim_pool_set_attr(uint64_t h, int attr, uint64_t v)
{
	struct sim_dev *d;
	struct pool *p = pool_lock(h, &d);
	if (!p)
		return SIM_EINVAL;
	int rc = SIM_OK;
	switch (attr) {
	case SIM_POOL_ATTR_RELEASE_THRESHOLD:
		p->threshold = v;
		break;
	case 1:
	case 2:
	case 3:
		p->reuse[attr] = v != 0;
		break;
	case SIM_POOL_ATTR_RESERVED_HIGH:
		if (v)
			rc = SIM_EINVAL;
		else
			p->reserved_high = p->reserved;
		break;
	case SIM_POOL_ATTR_USED_HIGH:
		if (v)
			rc = SIM_EINVAL;
		else
			p->used_high = p->used;
		break;
	default:
		rc = SIM_EINVAL;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* -------------------------------------------------------------------- VMM */

/* physical pages need not be contiguous: collect any free ones */
int sim_vmm_create(int dev, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle)
{
	return sim_vmm_create_ctx(dev, SIM_CTX_PRIMARY, size, prop, prop_len, handle);
}

int sim_vmm_create_ctx(int dev, uint32_t ctx, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle)
{
	if (!sim_device_valid(dev))
		return SIM_EDEVICE;
	if (!size || size % SIM_PAGE || prop_len > SIM_PROP_MAX)
		return SIM_EINVAL;
	struct sim_dev *d = &g_dev[dev];
	uint64_t n = size / SIM_PAGE;
	if (n > d->npages)
		return SIM_ENOMEM;
	struct vmm *v = calloc(1, sizeof(*v));
	uint32_t *pages = malloc(n * sizeof(uint32_t));
	if (!v || !pages) {
		free(v);
		free(pages);
		return SIM_ENOMEM;
	}
	v->dev = dev;
	v->ctx = ctx;
	v->refs = 1;
	v->size = size;
	v->npages = n;
	v->pages = pages;
	memcpy(v->prop, prop, prop_len);
	int rc = SIM_OK;
	pthread_mutex_lock(&d->mu);
	if (n > pages_avail(d) || (g_shared && sim_card_take(g_slot[dev], SIM_USE_MEMORY, n * SIM_PAGE))) {
		rc = SIM_ENOMEM;
	} else {
		uint64_t i = d->hint, got = 0;
		while (got < n) {
			if (i >= d->npages)
				i = 0;
			uint64_t w = i >> 6;
			uint64_t fb = ~d->bits[w] & (~0ull << (i & 63));
			if (!fb) {
				i = (w + 1) << 6;
				continue;
			}
			i = (w << 6) + (uint64_t)__builtin_ctzll(fb);
			if (i >= d->npages)
				continue;
			bits_set(d->bits, i, 1, 1);
			d->pkind[i] = PG_VMM;
			d->pptr[i] = v;
			pages[got++] = (uint32_t)i;
			i++;
		}
		pages_account(d, (int64_t)n);
		v->handle = st_add(&d->vmms, v, TAG_VMM, dev);
		if (!v->handle) {
			for (uint64_t k = 0; k < n; k++)
				pages_give(d, pages[k], 1);
			rc = SIM_ENOMEM;
		} else {
			d->live_vmm++;
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (rc) {
		free(pages);
		free(v);
		return rc;
	}
	*handle = v->handle;
	return SIM_OK;
}

/* Host memory behind a VMM handle (cuMemCreate at a HOST or HOST_NUMA
 * location): no device page, so no device memory is used; it lives in
 * device 0's handle table (any table would do: host memory has none). */
int sim_vmm_create_host(uint32_t ctx, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle)
{
	if (!size || size % SIM_PAGE || prop_len > SIM_PROP_MAX || g_ndev == 0)
		return SIM_EINVAL;
	struct vmm *v = calloc(1, sizeof(*v));
	if (!v)
		return SIM_ENOMEM;
	v->ctx = ctx;
	v->refs = 1;
	v->size = size;
	memcpy(v->prop, prop, prop_len);
	struct sim_dev *d = &g_dev[0];
	pthread_mutex_lock(&d->mu);
	v->handle = st_add(&d->vmms, v, TAG_VMM, 0);
	if (v->handle)
		d->live_vmm++;
	pthread_mutex_unlock(&d->mu);
	if (!v->handle) {
		free(v);
		return SIM_ENOMEM;
	}
	*handle = v->handle;
	return SIM_OK;
}

static void vmm_destroy(struct sim_dev *d, struct vmm *v)
{
	st_del(&d->vmms, v->handle);
	for (uint64_t k = 0; k < v->npages; k++)
		pages_give(d, v->pages[k], 1);
	d->live_vmm--;
	free(v->pages);
	free(v);
}

static struct vmm *vmm_lock(uint64_t h, struct sim_dev **dp)
{
	struct sim_dev *d = handle_dev_lock(h, TAG_VMM);
	if (!d)
		return NULL;
	struct vmm *v = st_get(&d->vmms, h);
	if (!v) {
		pthread_mutex_unlock(&d->mu);
		return NULL;
	}
	*dp = d;
	return v;
}

/* Real driver: each release drops one reference (cuMemCreate's or a
 * cuMemRetainAllocationHandle's); the pages go when no reference is left
 * and nothing maps them, so a released handle's memory stays until its last
 * unmap. A handle with no reference left is invalid for release. */
int sim_vmm_release(uint64_t h)
{
	struct sim_dev *d;
	struct vmm *v = vmm_lock(h, &d);
	if (!v)
		return SIM_EHANDLE;
	if (!v->refs) {
		pthread_mutex_unlock(&d->mu);
		return SIM_EHANDLE;
	}
	if (--v->refs == 0 && !v->maps)
		vmm_destroy(d, v);
	pthread_mutex_unlock(&d->mu);
	return SIM_OK;
}

int sim_vmm_refs(uint64_t h, uint64_t *refs, uint64_t *maps)
{
	struct sim_dev *d;
	struct vmm *v = vmm_lock(h, &d);
	if (!v)
		return SIM_EHANDLE;
	if (refs)
		*refs = v->refs;
	if (maps)
		*maps = v->maps;
	pthread_mutex_unlock(&d->mu);
	return SIM_OK;
}

int sim_vmm_prop(uint64_t h, void *prop, unsigned prop_len)
{
	struct sim_dev *d;
	struct vmm *v = vmm_lock(h, &d);
	if (!v)
		return SIM_EHANDLE;
	if (!v->refs) {
		pthread_mutex_unlock(&d->mu);
		return SIM_EHANDLE;
	}
	memcpy(prop, v->prop, prop_len < SIM_PROP_MAX ? prop_len : SIM_PROP_MAX);
	pthread_mutex_unlock(&d->mu);
	return SIM_OK;
}

/* Address reservations, sorted by base; lock order: g_vamu, then a device. */
struct mapping {
	uint64_t addr, size;
	struct vmm *v;
};
struct resv {
	uint64_t base, size;
	struct mapping *m;
	size_t nm, capm;
};
static pthread_mutex_t g_vamu = PTHREAD_MUTEX_INITIALIZER;
static struct resv *g_resv;
static size_t g_nresv, g_capresv;

int sim_va_reserve(uint64_t size, uint64_t align, uint64_t *addr)
{
	if (!size || size % SIM_PAGE || (align & (align - 1)))
		return SIM_EINVAL;
	if (align < SIM_PAGE)
		align = SIM_PAGE;
	if (size > SIM_VA_END - SIM_VA_BASE)
		return SIM_ENOMEM;
	int rc = SIM_OK;
	pthread_mutex_lock(&g_vamu);
	uint64_t cand = (SIM_VA_BASE + align - 1) & ~(align - 1);
	size_t i = 0;
	for (; i < g_nresv; i++) {
		if (cand + size <= g_resv[i].base)
			break;
		uint64_t end = g_resv[i].base + g_resv[i].size;
		if (end > cand)
			cand = (end + align - 1) & ~(align - 1);
	}
	if (cand < SIM_VA_BASE || cand + size > SIM_VA_END || cand + size < cand) {
		rc = SIM_ENOMEM;
	} else if (g_nresv == g_capresv) {
		size_t cap = g_capresv ? g_capresv * 2 : 16;
		struct resv *n = realloc(g_resv, cap * sizeof(*n));
		if (!n)
			rc = SIM_ENOMEM;
		else {
			g_resv = n;
			g_capresv = cap;
		}
	}
	if (rc == SIM_OK) {
		memmove(&g_resv[i + 1], &g_resv[i], (g_nresv - i) * sizeof(*g_resv));
		memset(&g_resv[i], 0, sizeof(*g_resv));
		g_resv[i].base = cand;
		g_resv[i].size = size;
		g_nresv++;
		*addr = cand;
	}
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

static struct resv *resv_find_unlocked(uint64_t addr, uint64_t size)
{
	for (size_t i = 0; i < g_nresv; i++) {
		struct resv *r = &g_resv[i];
		if (addr >= r->base && addr < r->base + r->size)
			return (size <= r->base + r->size - addr) ? r : NULL;
	}
	return NULL;
}

static void unmap_one_unlocked(struct resv *r, size_t k)
{
	struct vmm *v = r->m[k].v;
	struct sim_dev *d = &g_dev[v->dev];
	pthread_mutex_lock(&d->mu);
	if (--v->maps == 0 && v->refs == 0)
		vmm_destroy(d, v);
	pthread_mutex_unlock(&d->mu);
	r->m[k] = r->m[--r->nm];
}

int sim_va_free(uint64_t addr, uint64_t size)
{
	int rc = SIM_EINVAL;
	pthread_mutex_lock(&g_vamu);
	for (size_t i = 0; i < g_nresv; i++) {
		struct resv *r = &g_resv[i];
		if (r->base != addr || r->size != size)
			continue;
		while (r->nm)
			unmap_one_unlocked(r, r->nm - 1);
		free(r->m);
		memmove(r, r + 1, (g_nresv - i - 1) * sizeof(*r));
		g_nresv--;
		rc = SIM_OK;
		break;
	}
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

int sim_va_map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t h)
{
	if (!size || addr % SIM_PAGE || size % SIM_PAGE || offset % SIM_PAGE)
		return SIM_EINVAL;
	int rc = SIM_OK;
	pthread_mutex_lock(&g_vamu);
	struct resv *r = resv_find_unlocked(addr, size);
	if (!r) {
		rc = SIM_EINVAL;
		goto out;
	}
	for (size_t k = 0; k < r->nm; k++)
		if (addr < r->m[k].addr + r->m[k].size && r->m[k].addr < addr + size) {
			rc = SIM_EINVAL;
			goto out;
		}
	if (r->nm == r->capm) {
		size_t cap = r->capm ? r->capm * 2 : 8;
		struct mapping *n = realloc(r->m, cap * sizeof(*n));
		if (!n) {
			rc = SIM_ENOMEM;
			goto out;
		}
		r->m = n;
		r->capm = cap;
	}
	struct sim_dev *d;
	struct vmm *v = vmm_lock(h, &d);
	if (!v) {
		rc = SIM_EHANDLE;
		goto out;
	}
	if (!v->refs) {
		rc = SIM_EHANDLE;
	} else if (offset > v->size || size > v->size - offset) {
		rc = SIM_EINVAL;
	} else {
		v->maps++;
		r->m[r->nm++] = (struct mapping){addr, size, v};
	}
	pthread_mutex_unlock(&d->mu);
out:
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

int sim_va_unmap(uint64_t addr, uint64_t size)
{
	if (!size)
		return SIM_EINVAL;
	int rc = SIM_OK;
	pthread_mutex_lock(&g_vamu);
	struct resv *r = resv_find_unlocked(addr, size);
	size_t hit = 0;
	if (!r) {
		rc = SIM_EINVAL;
		goto out;
	}
	for (size_t k = 0; k < r->nm; k++) {
		const struct mapping *m = &r->m[k];
		if (m->addr < addr + size && addr < m->addr + m->size) {
			if (m->addr < addr || m->addr + m->size > addr + size) {
				rc = SIM_EINVAL; /* would split a mapping */
				goto out;
			}
			hit++;
		}
	}
	if (!hit) {
		rc = SIM_EINVAL;
		goto out;
	}
	for (size_t k = r->nm; k-- > 0;)
		if (r->m[k].addr >= addr && r->m[k].addr < addr + size)
			unmap_one_unlocked(r, k);
out:
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

int sim_va_mapped(uint64_t addr, uint64_t size)
{
	if (!size)
		return SIM_EINVAL;
	int rc = SIM_OK;
	pthread_mutex_lock(&g_vamu);
	struct resv *r = resv_find_unlocked(addr, size);
	uint64_t cur = addr;
	while (r && cur < addr + size) {
		size_t k = 0;
		while (k < r->nm && !(cur >= r->m[k].addr && cur < r->m[k].addr + r->m[k].size))
			k++;
		if (k == r->nm)
			break;
		cur = r->m[k].addr + r->m[k].size;
	}
	if (!r || cur < addr + size)
		rc = SIM_EINVAL;
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

/* the mapping containing addr, under g_vamu; NULL if none */
static struct mapping *mapping_at_unlocked(uint64_t addr)
{
	struct resv *r = resv_find_unlocked(addr, 1);
	if (!r)
		return NULL;
	for (size_t k = 0; k < r->nm; k++)
		if (addr >= r->m[k].addr && addr < r->m[k].addr + r->m[k].size)
			return &r->m[k];
	return NULL;
}

/* cuMemRetainAllocationHandle: the handle mapped at addr, one more reference
 * (also for a handle whose own references are gone but which is still mapped) */
int sim_vmm_retain(uint64_t addr, uint64_t *handle)
{
	int rc = SIM_EINVAL;
	pthread_mutex_lock(&g_vamu);
	struct mapping *m = mapping_at_unlocked(addr);
	if (m) {
		struct vmm *v = m->v;
		struct sim_dev *d = &g_dev[v->dev];
		pthread_mutex_lock(&d->mu);
		v->refs++;
		*handle = v->handle;
		pthread_mutex_unlock(&d->mu);
		rc = SIM_OK;
	}
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

int sim_va_range(uint64_t addr, uint64_t *base, uint64_t *size, int *dev)
{
	int rc = SIM_ENOTFOUND;
	pthread_mutex_lock(&g_vamu);
	struct mapping *m = mapping_at_unlocked(addr);
	if (m) {
		if (base)
			*base = m->addr;
		if (size)
			*size = m->size;
		if (dev)
			*dev = m->v->dev;
		rc = SIM_OK;
	}
	pthread_mutex_unlock(&g_vamu);
	return rc;
}

/* --------------------------------------------------------- context teardown */

/* What cuDevicePrimaryCtxReset / cuCtxDestroy do to memory: every allocation
 * the context made, every VMM handle it created (its mappings are removed,
 * all references dropped), and, without keep_pools, every pool it created
 * (with all its blocks) and the default pool's blocks. The primary
 * context's default pool loses its free reserve and its attributes, as a
 * fresh one would have. With keep_pools (a primary reset, as CUDA's) the
 * pools and their live blocks stay. Reservations are process-wide and stay.
 * Lock order: g_vamu, then the device. */
int sim_free_context(int dev, uint32_t ctx, int keep_pools)
{
	if (!sim_device_valid(dev))
		return SIM_EDEVICE;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&g_vamu);
	for (size_t i = 0; i < g_nresv; i++) {
		struct resv *r = &g_resv[i];
		/* v->dev and v->ctx never change; a mapped vmm cannot be freed
		 * without g_vamu, which we hold */
		for (size_t k = r->nm; k-- > 0;)
			if (r->m[k].v->dev == dev && r->m[k].v->ctx == ctx)
				unmap_one_unlocked(r, k);
	}
	pthread_mutex_lock(&d->mu);
	for (uint32_t s = 0; s < d->vmms.n; s++) {
		struct vmm *v = d->vmms.ptr[s];
		if (v && v->ctx == ctx && !v->maps) {
			v->refs = 0;
			vmm_destroy(d, v);
		}
	}
	/* collect first: removal reorders the open-addressing table */
	uint64_t n = 0, cap = d->map.n;
	uint64_t *victims = cap ? malloc(cap * sizeof(uint64_t)) : NULL;
	if (cap && !victims) {
		pthread_mutex_unlock(&d->mu);
		pthread_mutex_unlock(&g_vamu);
		return SIM_ENOMEM;
	}
	for (uint64_t i = 0; i < d->map.cap; i++) {
		const struct amap_ent *e = &d->map.t[i];
		if (!e->addr)
			continue;
		int hit = e->ctx == ctx;
		if (e->kind == SIM_KIND_POOL) {
			/* A stream-ordered block lives in its pool, not in the
			 * context that asked for it, and pools outlive a reset
			 * of the primary context: on an H200 (driver 580), 256
			 * MiB from cudaMallocAsync (default pool) and 256 MiB
			 * from cudaMallocFromPoolAsync (a created pool) stayed
			 * in use after cudaDeviceReset, by the pools' figures
			 * and by cudaMemGetInfo, and freed later as any block.
			 * cuCtxDestroy and hipDeviceReset were not seen: they
			 * keep the old model, the context's pools and blocks
			 * freed with it. */
			const struct chunk *c = d->pptr[(e->addr - dev_base(dev)) / SIM_PAGE];
			hit = keep_pools ? 0 : (hit || c->pool->ctx == ctx);
		}
		if (hit)
			victims[n++] = e->addr;
	}
	for (uint64_t i = 0; i < n; i++) {
		struct amap_ent *e = amap_find(&d->map, victims[i]);
		if (e)
			ent_free_unlocked(d, dev, e);
	}
	free(victims);
	for (uint32_t s = 0; s < d->pools.n; s++) {
		struct pool *p = d->pools.ptr[s];
		if (!p || p->ctx != ctx || (keep_pools && !p->is_default))
			continue;
		if (p->is_default) {
			pool_trim_unlocked(d, p, 0);
			p->threshold = 0;
			p->reserved_high = p->reserved;
			p->used_high = p->used;
			p->reuse[1] = p->reuse[2] = p->reuse[3] = 1;
			continue;
		}
		st_del(&d->pools, p->handle);
		if (d->current_pool == p->handle)
			d->current_pool = d->default_pool;
		pool_free_struct(d, p); /* no block is left in it */
	}
	pthread_mutex_unlock(&d->mu);
	pthread_mutex_unlock(&g_vamu);
	return SIM_OK;
}

/* ------------------------------------------------- handles and host memory */

uint64_t sim_handle_new(int dev)
{
	return sim_handle_new_obj(dev, (void *)1);
}

uint64_t sim_handle_new_obj(int dev, void *obj)
{
	pthread_mutex_lock(&g_hmu);
	uint64_t h = st_add(&g_handles, obj, TAG_HANDLE, dev);
	pthread_mutex_unlock(&g_hmu);
	return h;
}

void *sim_handle_obj(uint64_t h)
{
	if (h_tag(h) != TAG_HANDLE || ((h >> 59) & 1) != SIM_LIB_ID)
		return NULL;
	pthread_mutex_lock(&g_hmu);
	void *p = st_get(&g_handles, h);
	pthread_mutex_unlock(&g_hmu);
	return p;
}

int sim_handle_device(uint64_t h)
{
	if (h_tag(h) != TAG_HANDLE)
		return -1;
	pthread_mutex_lock(&g_hmu);
	int dev = st_get(&g_handles, h) ? h_dev(h) : -1;
	pthread_mutex_unlock(&g_hmu);
	return dev;
}

int sim_handle_delete(uint64_t h)
{
	if (h_tag(h) != TAG_HANDLE)
		return SIM_EHANDLE;
	int rc = SIM_EHANDLE;
	pthread_mutex_lock(&g_hmu);
	if (st_get(&g_handles, h)) {
		st_del(&g_handles, h);
		rc = SIM_OK;
	}
	pthread_mutex_unlock(&g_hmu);
	return rc;
}

void *sim_host_alloc(uint64_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, size ? size : 1))
		return NULL;
	struct amap_ent e = {.addr = (uint64_t)(uintptr_t)p, .size = size};
	pthread_mutex_lock(&g_hmu);
	int bad = amap_insert(&g_host, &e);
	pthread_mutex_unlock(&g_hmu);
	if (bad) {
		free(p);
		return NULL;
	}
	return p;
}

/* inside a live sim_host_alloc block (a scan: pinned blocks are few) */
int sim_host_known(const void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	int ok = 0;
	pthread_mutex_lock(&g_hmu);
	for (uint64_t i = 0; i < g_host.cap && !ok; i++) {
		const struct amap_ent *e = &g_host.t[i];
		ok = e->addr && a >= e->addr && a < e->addr + (e->size ? e->size : 1);
	}
	pthread_mutex_unlock(&g_hmu);
	return ok;
}

int sim_host_free(void *p)
{
	pthread_mutex_lock(&g_hmu);
	struct amap_ent *e = amap_find(&g_host, (uint64_t)(uintptr_t)p);
	if (e)
		amap_remove(&g_host, e);
	pthread_mutex_unlock(&g_hmu);
	if (!e)
		return SIM_EINVAL;
	free(p);
	return SIM_OK;
}

/* ------------------------------------------------------------------ debug */

int sim_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_bytes,
                   unsigned long long *live_allocs)
{
	if (!sim_device_valid(dev))
		return -1;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	if (pages_bytes)
		*pages_bytes = d->used_pages * SIM_PAGE;
	if (peak_bytes)
		*peak_bytes = d->peak_pages * SIM_PAGE;
	if (live_allocs)
		*live_allocs = d->map.n + d->live_vmm;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* ---------------------------------------------------------- footprint */

int sim_charge(int dev, int use, uint64_t bytes)
{
	if (!sim_device_valid(dev) || use <= SIM_USE_MEMORY || use >= SIM_USE_N)
		return SIM_EINVAL;
	if (!bytes)
		return SIM_OK;
	struct sim_dev *d = &g_dev[dev];
	int rc = SIM_OK;
	pthread_mutex_lock(&d->mu);
	uint64_t held = d->used_pages * SIM_PAGE + d->fp_total;
	if (bytes > d->total - held || (g_shared && sim_card_take(g_slot[dev], use, bytes))) {
		rc = SIM_ENOMEM;
	} else {
		d->fp[use] += bytes;
		d->fp_total += bytes;
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

void sim_uncharge(int dev, int use, uint64_t bytes)
{
	if (!sim_device_valid(dev) || use <= SIM_USE_MEMORY || use >= SIM_USE_N || !bytes)
		return;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	if (bytes > d->fp[use])
		bytes = d->fp[use];
	d->fp[use] -= bytes;
	d->fp_total -= bytes;
	if (g_shared)
		sim_card_give(g_slot[dev], use, bytes);
	pthread_mutex_unlock(&d->mu);
}

int sim_footprint(int dev, uint64_t out[SIM_USE_N])
{
	if (!sim_device_valid(dev))
		return -1;
	struct sim_dev *d = &g_dev[dev];
	pthread_mutex_lock(&d->mu);
	memcpy(out, d->fp, sizeof(d->fp));
	out[SIM_USE_MEMORY] = d->used_pages * SIM_PAGE;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

void sim_debug_reset_peak(void)
{
	sim_init();
	for (int i = 0; i < g_ndev; i++) {
		pthread_mutex_lock(&g_dev[i].mu);
		g_dev[i].peak_pages = g_dev[i].used_pages;
		pthread_mutex_unlock(&g_dev[i].mu);
	}
}
