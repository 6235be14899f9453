/* gpuguard: memory of CUDA graphs' allocation nodes (cuGraphAddMemAllocNode,
 * or cudaMallocAsync captured into a graph). The driver serves it from each
 * device's graph-memory reserve (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
 * which is what is charged, like a stream-ordered pool's reserve: reconciled
 * after the calls that can grow or shrink it. The bytes of each graph's
 * allocation nodes are known, so a launch that could grow the reserve past
 * the ceiling is refused before the driver call. */
#include <pthread.h>
#include <string.h>

#include "graph.h"
#include "base.h"
#include "ceiling.h"

#define MAX_GRAPHS 1024

struct gent {
	const void *key; /* CUgraph or CUgraphExec; NULL = free */
	uint64_t bytes;  /* allocation-node bytes */
	int dev;
};

#define MAX_VAS 4096

static struct gent graphs[MAX_GRAPHS], execs[MAX_GRAPHS];
/* Addresses the driver handed out for graph allocations: their frees
 * outside a graph are none of the allocation table's (never untracked).
 * Kept for the process's life; a full set stops growing. */
static _Atomic uint64_t vas[MAX_VAS];
static uint64_t charged[GG_MAX_DEVICES];
/* Guards both maps and charged[]. Never held across a call out of the
 * library: the hooks read the driver's figures first. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void after_fork_child(void)
{
	gg_graph_reset();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void)
{
	/* here, not in init.c: the core's unit tests do not link this file */
	pthread_atfork(NULL, NULL, after_fork_child);
}

static struct gent *find_locked(struct gent *t, const void *key, int add)
{
	struct gent *hole = NULL;
	for (int i = 0; i < MAX_GRAPHS; i++) {
		if (t[i].key == key)
			return &t[i];
		if (!t[i].key && !hole)
			hole = &t[i];
	}
	if (add && hole) {
		*hole = (struct gent){key, 0, -1};
		return hole;
	}
	return NULL;
}

void gg_graph_add_bytes(const void *graph, int dev, uint64_t bytes)
{
	if (!graph || dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&lock);
	struct gent *g = find_locked(graphs, graph, 1);
	if (g) {
		/* the driver backs each allocation node with whole pages */
		g->bytes += (bytes + GG_PAGE - 1) / GG_PAGE * GG_PAGE;
		g->dev = dev;
	}
	pthread_mutex_unlock(&lock);
}

void gg_graph_va_add(uint64_t va)
{
	if (!va)
		return;
	uint32_t i = (uint32_t)((va >> 9) * 0x9e3779b1u) % MAX_VAS;
	for (uint32_t n = 0; n < MAX_VAS; n++, i = (i + 1) % MAX_VAS) {
		uint64_t seen = 0;
		/* relaxed: a set of plain values, read only by gg_graph_va_known;
		 * the driver call that frees va comes after the one that made it. */
		if (atomic_compare_exchange_strong_explicit(&vas[i], &seen, va, memory_order_relaxed,
		                                            memory_order_relaxed) ||
		    seen == va)
			return;
	}
}

int gg_graph_va_known(uint64_t va)
{
	uint32_t i = (uint32_t)((va >> 9) * 0x9e3779b1u) % MAX_VAS;
	for (uint32_t n = 0; va && n < MAX_VAS; n++, i = (i + 1) % MAX_VAS) {
		uint64_t seen = atomic_load_explicit(&vas[i], memory_order_relaxed);
		if (seen == va)
			return 1;
		if (!seen)
			return 0;
	}
	return 0;
}

void gg_graph_instantiated(const void *exec, const void *graph)
{
	pthread_mutex_lock(&lock);
	struct gent *g = find_locked(graphs, graph, 0);
	struct gent *e = g ? find_locked(execs, exec, 1) : NULL;
	if (e) {
		e->bytes = g->bytes;
		e->dev = g->dev;
	}
	pthread_mutex_unlock(&lock);
}

void gg_graph_forget(const void *key, int exec)
{
	pthread_mutex_lock(&lock);
	struct gent *g = find_locked(exec ? execs : graphs, key, 0);
	if (g)
		g->key = NULL;
	pthread_mutex_unlock(&lock);
}

int gg_graph_exec_bytes(const void *exec, int *dev, uint64_t *bytes)
{
	pthread_mutex_lock(&lock);
	struct gent *e = find_locked(execs, exec, 0);
	if (e) {
		*dev = e->dev;
		*bytes = e->bytes;
	}
	pthread_mutex_unlock(&lock);
	return e && e->bytes ? 0 : -1;
}

void gg_graph_settle(int dev, uint64_t reserved, uint64_t credit)
{
	if (dev < 0 || dev >= GG_MAX_DEVICES)
		return;
	struct gg_device *g = &gg_devices[dev];
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&lock);
	uint64_t held = charged[dev] + credit; /* what `used` holds for the reserve now */
	if (reserved > held) {
		/* Growth nobody reserved (a graph whose needs we did not know, or
		 * the driver's own rounding): the memory is taken, so charge it
		 * and count how far past the ceiling it went (pod scope: the
		 * pod's limit against what the whole pod uses). */
		gg_ceiling_force_over(dev, reserved - held);
	} else {
		gg_ceiling_release(dev, held - reserved);
	}
	if (reserved >= charged[dev])
		atomic_fetch_add_explicit(&g->pool_reserved, reserved - charged[dev], memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&g->pool_reserved, charged[dev] - reserved, memory_order_relaxed);
	charged[dev] = reserved;
	pthread_mutex_unlock(&lock);
}

void gg_graph_reset(void)
{
	/* Fork child: one thread, no graphs of the parent's are ours. */
	memset(graphs, 0, sizeof(graphs));
	memset(execs, 0, sizeof(execs));
	memset(charged, 0, sizeof(charged));
	for (int i = 0; i < MAX_VAS; i++)
		atomic_store_explicit(&vas[i], 0, memory_order_relaxed);
	pthread_mutex_init(&lock, NULL);
}
