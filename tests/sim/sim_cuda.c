/* gpuguard simulated GPU: a fake libcuda.so.1 over simcore. It exports the
 * real entry point names (with the _v2 / _ptsz / legacy split), answers
 * cuGetProcAddress by the driver's per-function version rules and returns the
 * driver's error codes. Nothing here runs a kernel; streams are synchronous. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include "gpuguard/cuda_abi.h"
#include "simcore.h"
#include "sim_md2.h"

/* the CUDA library: its devices are what CUDA_VISIBLE_DEVICES names under MIG (simcore.h) */
const int sim_lib_shows_mig = 1;

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* Every entry point has a hidden local_<name> alias (glibc's hidden_def
 * trick). Internal calls and the cuGetProcAddress table use it, so an
 * LD_PRELOAD interposer never sees the driver calling itself and gets the
 * driver's own pointers back from cuGetProcAddress, as with the real driver. */
#define GGT(t) gg_##t
#define GG_CU_FN(name, params) extern __typeof(name) local_##name __attribute__((visibility("hidden")));
#define GG_CU_FN_PTSZ(name, params) GG_CU_FN(name, params)
#define GG_CU_FN_LEGACY(name, params) GG_CU_FN(name, params)
#include "gpuguard/cuda_abi_funcs.h"
#undef GG_CU_FN
#define SIM_FN(name, params)     \
	gg_CUresult name params; \
	extern __typeof(name) local_##name __attribute__((visibility("hidden")));
#include "sim_cuda_extra.h"
#undef SIM_FN

#define SIM_DRIVER_VERSION 13000 /* also hashed by the integrity check */
#define SIM_SM_COUNT 132
#define SIM_THREADS_PER_SM 2048 /* attribute 39; also local memory's formula (the footprint) */
#define SIM_ATTR_MAX 147        /* the last CUdevice_attribute of CUDA 13.0 */

static int graph_free_addr(uint64_t va);
static int graph_addr_range(uint64_t addr, uint64_t *base, uint64_t *size);

/* Context-local storage entry (export table c693336e): cudart keeps its
 * per-context state here and expects the driver to call dtor(ctx, key, value)
 * when the context is reset or destroyed. */
struct cls_ent {
	void *key, *value;
	void (*dtor)(struct CUctx_st *ctx, void *key, void *value);
};

/* Primary contexts are g_ctx[dev] (id SIM_CTX_PRIMARY, never freed; reset
 * keeps the handle). Created contexts are calloc'd with a fresh id and never
 * freed either: a destroyed one stays a tombstone (alive == 0), so a stale
 * handle on another thread's stack is detected instead of dereferenced. */
/* the driver's limit on peer connections of one context
 * (CUDA_ERROR_TOO_MANY_PEERS beyond it) */
#define SIM_MAX_PEERS 8
#define SIM_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED 704
#define SIM_CUDA_ERROR_PEER_ACCESS_NOT_ENABLED 705
#define SIM_CUDA_ERROR_TOO_MANY_PEERS 711

struct CUctx_st {
	int dev;
	uint32_t id;
	int primary;
	atomic_int alive;    /* release/acquire: published before the handle is used */
	unsigned int flags;  /* CU_CTX_* */
	atomic_uint epoch;   /* teardowns so far; only compared for equality: relaxed */
	struct cls_ent *cls; /* under g_ctx_mu */
	size_t ncls, capcls;
	struct CUctx_st *next; /* registry of created contexts, under g_ctx_mu */
	/* contexts whose memory this one may access (cuCtxEnablePeerAccess), under g_ctx_mu */
	struct CUctx_st *peer[SIM_MAX_PEERS];
	int npeer;
	/* its footprint (the footprint section below), under g_fp_mu: bytes per
	 * sim_use, the per-thread local memory it holds, whether its context
	 * cost, heap and printf FIFO are taken */
	uint64_t fpu[SIM_USE_N];
	uint64_t local_pt;
	int charged, heap_taken, fifo_taken;
};

static struct CUctx_st g_ctx[SIM_MAX_DEVICES];
static int g_ctx_ref[SIM_MAX_DEVICES];            /* primary retain count, under g_ctx_mu */
static unsigned int g_ctx_flags[SIM_MAX_DEVICES]; /* primary flags, under g_ctx_mu */
static struct CUctx_st *g_created;                /* under g_ctx_mu */
static atomic_uint g_next_ctx_id = 1;             /* only uniqueness matters: relaxed */
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_inited;
static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;

/* per-thread context stack; cuCtxSetCurrent replaces its top */
#define CTX_STACK 64
static __thread gg_CUcontext tls_ctx[CTX_STACK];
static __thread int tls_depth;

static gg_CUresult to_cu(int rc)
{
	switch (rc) {
	case SIM_OK:
		return GG_CUDA_SUCCESS;
	case SIM_ENOMEM:
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	case SIM_EDEVICE:
		return GG_CUDA_ERROR_INVALID_DEVICE;
	case SIM_EHANDLE:
		return GG_CUDA_ERROR_INVALID_HANDLE;
	case SIM_ENOTFOUND:
		return GG_CUDA_ERROR_NOT_FOUND;
	case SIM_ENODEV:
		return GG_CUDA_ERROR_NO_DEVICE;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
}

static gg_CUresult ctx_charge(gg_CUcontext c);
static void ctx_uncharge(gg_CUcontext c);

#define REQUIRE_INIT()                                        \
	do {                                                  \
		if (!atomic_load(&g_inited))                  \
			return GG_CUDA_ERROR_NOT_INITIALIZED; \
	} while (0)

/* An output pointer and a device ordinal, checked in the driver's order. */
#define REQUIRE_OUT_AND_DEVICE(out, dev)                     \
	do {                                                 \
		REQUIRE_INIT();                              \
		if (!(out))                                  \
			return GG_CUDA_ERROR_INVALID_VALUE;  \
		if (!sim_device_valid(dev))                  \
			return GG_CUDA_ERROR_INVALID_DEVICE; \
	} while (0)

static gg_CUcontext cur_ctx(void)
{
	return tls_depth ? tls_ctx[tls_depth - 1] : NULL;
}

/* the current context's owner id for new allocations (primary if none) */
static uint32_t cur_id(void)
{
	gg_CUcontext c = cur_ctx();
	return c ? c->id : SIM_CTX_PRIMARY;
}

/* init check, then the current context's device; a destroyed current
 * context is CUDA_ERROR_CONTEXT_IS_DESTROYED */
#define REQUIRE_CTX(devvar)                                                  \
	int devvar;                                                          \
	do {                                                                 \
		REQUIRE_INIT();                                              \
		gg_CUcontext c_ = cur_ctx();                                 \
		if (!c_)                                                     \
			return GG_CUDA_ERROR_INVALID_CONTEXT;                \
		if (!atomic_load_explicit(&c_->alive, memory_order_acquire)) \
			return GG_CUDA_ERROR_CONTEXT_IS_DESTROYED;           \
		devvar = c_->dev;                                            \
	} while (0)

/* a handle we issued and that is alive */
static int ctx_valid(gg_CUcontext c)
{
	uintptr_t p = (uintptr_t)c, lo = (uintptr_t)&g_ctx[0];
	if (p >= lo && (p - lo) % sizeof(g_ctx[0]) == 0 && (p - lo) / sizeof(g_ctx[0]) < (uintptr_t)sim_device_count())
		return 1;
	int ok = 0;
	pthread_mutex_lock(&g_ctx_mu);
	for (struct CUctx_st *x = g_created; x && !ok; x = x->next)
		ok = x == c && atomic_load(&x->alive);
	pthread_mutex_unlock(&g_ctx_mu);
	return ok;
}

static void ctx_init(void)
{
	for (int i = 0; i < SIM_MAX_DEVICES; i++) {
		g_ctx[i].dev = i;
		g_ctx[i].id = SIM_CTX_PRIMARY;
		g_ctx[i].primary = 1;
		atomic_store(&g_ctx[i].alive, 1);
	}
}

/* resolve NULL to the current context; NULL result: none / not ours */
static gg_CUcontext ctx_or_current(gg_CUcontext c)
{
	if (!c)
		return cur_ctx();
	return ctx_valid(c) ? c : NULL;
}

/* Run and drop a context's CLS destructors (outside the lock: cudart's
 * destructors call back into the driver), then free its memory. */
static void ctx_teardown(gg_CUcontext c)
{
	pthread_mutex_lock(&g_ctx_mu);
	struct cls_ent *ents = c->cls;
	size_t n = c->ncls;
	c->cls = NULL;
	c->ncls = c->capcls = 0;
	c->npeer = 0; /* a reset or destroyed context keeps no peer access */
	pthread_mutex_unlock(&g_ctx_mu);
	for (size_t i = 0; i < n; i++)
		if (ents[i].dtor)
			ents[i].dtor(c, ents[i].key, ents[i].value);
	free(ents);
	sim_free_context(c->dev, c->id, c->id == SIM_CTX_PRIMARY); /* a reset keeps pools */
	ctx_uncharge(c);                                           /* its footprint back; its epoch moves on */
}

/* -------------------------------------------------- init, devices, contexts */

gg_CUresult cuInit(unsigned int Flags)
{
	if (Flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_once(&g_ctx_once, ctx_init);
	if (sim_device_count() == 0)
		return GG_CUDA_ERROR_NO_DEVICE;
	atomic_store(&g_inited, 1);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*driverVersion = SIM_DRIVER_VERSION;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGet(gg_CUdevice *device, int ordinal)
{
	REQUIRE_OUT_AND_DEVICE(device, ordinal);
	*device = ordinal;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetCount(int *count)
{
	REQUIRE_INIT();
	if (!count)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*count = sim_device_count();
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetName(char *name, int len, gg_CUdevice dev)
{
	static const char n[] = "gpuguard simulated GPU";
	REQUIRE_INIT();
	if (!name || len <= 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	size_t k = (size_t)len - 1 < sizeof(n) - 1 ? (size_t)len - 1 : sizeof(n) - 1;
	memcpy(name, n, k);
	name[k] = 0;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceTotalMem_v2(size_t *bytes, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(bytes, dev);
	*bytes = sim_device_total(dev);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetUuid_v2(gg_CUuuid *uuid, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(uuid, dev);
	sim_device_uuid(dev, (uint8_t *)uuid->bytes);
	return GG_CUDA_SUCCESS;
}

/* The legacy query names the GPU: a MIG instance's is its parent's (the
 * driver API's cuDeviceGetUuid_v2 answers the instance's MIG UUID). */
gg_CUresult cuDeviceGetUuid(gg_CUuuid *uuid, gg_CUdevice dev)
{
	gg_CUresult rc = local_cuDeviceGetUuid_v2(uuid, dev);
	if (rc == GG_CUDA_SUCCESS)
		sim_device_parent_uuid(dev, (uint8_t *)uuid->bytes);
	return rc;
}

gg_CUresult cuDevicePrimaryCtxRetain(gg_CUcontext *pctx, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pctx, dev);
	/* the first retain (after a reset) makes the context: its cost */
	gg_CUresult r = ctx_charge(&g_ctx[dev]);
	if (r)
		return r;
	pthread_mutex_lock(&g_ctx_mu);
	g_ctx_ref[dev]++;
	pthread_mutex_unlock(&g_ctx_mu);
	*pctx = &g_ctx[dev];
	return GG_CUDA_SUCCESS;
}

/* The last release resets the context, as the driver does ("The context is
 * automatically reset once the last reference to it is released"): its
 * memory is freed and its CLS destructors run, as at cuDevicePrimaryCtxReset;
 * the handle stays. A release without a retain is INVALID_CONTEXT. */
gg_CUresult cuDevicePrimaryCtxRelease_v2(gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	int last = 0;
	pthread_mutex_lock(&g_ctx_mu);
	if (g_ctx_ref[dev] <= 0)
		r = GG_CUDA_ERROR_INVALID_CONTEXT;
	else
		last = --g_ctx_ref[dev] == 0;
	pthread_mutex_unlock(&g_ctx_mu);
	if (last)
		ctx_teardown(&g_ctx[dev]);
	return r;
}

/* Frees every allocation of the primary context, runs its CLS destructors and
 * makes it inactive (retain count 0); the handle stays the same. */
gg_CUresult cuDevicePrimaryCtxReset_v2(gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	ctx_teardown(&g_ctx[dev]);
	pthread_mutex_lock(&g_ctx_mu);
	g_ctx_ref[dev] = 0;
	pthread_mutex_unlock(&g_ctx_mu);
	return GG_CUDA_SUCCESS;
}

/* the legacy ABI is the same call */
gg_CUresult cuDevicePrimaryCtxReset(gg_CUdevice dev)
{
	return local_cuDevicePrimaryCtxReset_v2(dev);
}

gg_CUresult cuDevicePrimaryCtxGetState(gg_CUdevice dev, unsigned int *flags, int *active)
{
	REQUIRE_INIT();
	if (!flags || !active)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&g_ctx_mu);
	*flags = g_ctx_flags[dev];
	*active = g_ctx_ref[dev] > 0;
	pthread_mutex_unlock(&g_ctx_mu);
	return GG_CUDA_SUCCESS;
}

static gg_CUresult primary_set_flags(gg_CUdevice dev, unsigned int flags, int refuse_active)
{
	REQUIRE_INIT();
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	/* one scheduling mode (0..4, 3 is unused) plus the other bits */
	if ((flags & ~(unsigned)GG_CU_CTX_FLAGS_MASK) || (flags & GG_CU_CTX_SCHED_MASK) == 3 ||
	    (flags & GG_CU_CTX_SCHED_MASK) > 4)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_ctx_mu);
	if (refuse_active && g_ctx_ref[dev] > 0)
		r = GG_CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
	else
		g_ctx_flags[dev] = flags;
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

/* _v2 (11000) may change the flags of an active primary context; the legacy
 * one refuses with CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE */
gg_CUresult cuDevicePrimaryCtxSetFlags_v2(gg_CUdevice dev, unsigned int flags)
{
	return primary_set_flags(dev, flags, 0);
}

gg_CUresult cuDevicePrimaryCtxSetFlags(gg_CUdevice dev, unsigned int flags)
{
	return primary_set_flags(dev, flags, 1);
}

/* a new context on dev, pushed on this thread's stack */
static gg_CUresult ctx_create(gg_CUcontext *pctx, unsigned int flags, gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!pctx || (flags & ~(unsigned)GG_CU_CTX_FLAGS_MASK) || (flags & GG_CU_CTX_SCHED_MASK) == 3 ||
	    (flags & GG_CU_CTX_SCHED_MASK) > 4)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	if (tls_depth == CTX_STACK)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	struct CUctx_st *c = calloc(1, sizeof(*c));
	if (!c)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	c->flags = flags;
	c->id = atomic_fetch_add_explicit(&g_next_ctx_id, 1, memory_order_relaxed);
	gg_CUresult r = ctx_charge(c);
	if (r) {
		free(c);
		return r;
	}
	atomic_store_explicit(&c->alive, 1, memory_order_release);
	pthread_mutex_lock(&g_ctx_mu);
	c->next = g_created;
	g_created = c;
	pthread_mutex_unlock(&g_ctx_mu);
	tls_ctx[tls_depth++] = c;
	*pctx = c;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxCreate(gg_CUcontext *pctx, unsigned int flags, gg_CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

gg_CUresult cuCtxCreate_v2(gg_CUcontext *pctx, unsigned int flags, gg_CUdevice dev)
{
	return ctx_create(pctx, flags, dev);
}

/* execution affinity (SM partitioning) is not simulated */
gg_CUresult cuCtxCreate_v3(gg_CUcontext *pctx, gg_CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                           gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (numParams < 0 || (numParams > 0 && !paramsArray))
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (numParams > 0)
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	return ctx_create(pctx, flags, dev);
}

gg_CUresult cuCtxCreate_v4(gg_CUcontext *pctx, gg_CUctxCreateParams *ctxCreateParams, unsigned int flags,
                           gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	return ctx_create(pctx, flags, dev);
}

/* Frees the context's memory and runs its CLS destructors; it is popped from
 * this thread's stack. The primary context cannot be destroyed this way. */
gg_CUresult cuCtxDestroy_v2(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (!ctx || !ctx_valid(ctx) || ctx->primary)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	int expect = 1;
	/* acq_rel: one destroyer wins; REQUIRE_CTX's acquire load sees it */
	if (!atomic_compare_exchange_strong_explicit(&ctx->alive, &expect, 0, memory_order_acq_rel,
	                                             memory_order_acquire))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	ctx_teardown(ctx);
	int k = 0;
	for (int i = 0; i < tls_depth; i++)
		if (tls_ctx[i] != ctx)
			tls_ctx[k++] = tls_ctx[i];
	tls_depth = k;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxDestroy(gg_CUcontext ctx)
{
	return local_cuCtxDestroy_v2(ctx);
}

/* the pre-_v2 ABIs of these share the _v2 one */
gg_CUresult cuDevicePrimaryCtxRelease(gg_CUdevice dev)
{
	return local_cuDevicePrimaryCtxRelease_v2(dev);
}

gg_CUresult cuCtxPushCurrent(gg_CUcontext ctx)
{
	return local_cuCtxPushCurrent_v2(ctx);
}

gg_CUresult cuCtxPopCurrent(gg_CUcontext *pctx)
{
	return local_cuCtxPopCurrent_v2(pctx);
}

gg_CUresult cuStreamDestroy(gg_CUstream hStream)
{
	return local_cuStreamDestroy_v2(hStream);
}

gg_CUresult cuCtxSetCurrent(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (ctx && !ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth)
		tls_ctx[tls_depth - 1] = ctx;
	else if (ctx)
		tls_ctx[tls_depth++] = ctx;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxGetCurrent(gg_CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!pctx)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*pctx = cur_ctx();
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxGetDevice(gg_CUdevice *device)
{
	REQUIRE_INIT();
	if (!device)
		return GG_CUDA_ERROR_INVALID_VALUE;
	REQUIRE_CTX(dev);
	*device = dev;
	return GG_CUDA_SUCCESS;
}

/* 13000 ABI: a NULL context means the current one */
gg_CUresult cuCtxGetDevice_v2(gg_CUdevice *device, gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (!device)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!ctx)
		return local_cuCtxGetDevice(device);
	if (!ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	*device = ctx->dev;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxPushCurrent_v2(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (!ctx || !ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	if (tls_depth == CTX_STACK)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	tls_ctx[tls_depth++] = ctx;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxPopCurrent_v2(gg_CUcontext *pctx)
{
	REQUIRE_INIT();
	if (!tls_depth)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUcontext c = tls_ctx[--tls_depth];
	if (pctx)
		*pctx = c;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSynchronize(void)
{
	REQUIRE_CTX(dev);
	sim_device_sync(dev);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSynchronize_v2(gg_CUcontext ctx)
{
	REQUIRE_INIT();
	if (!ctx)
		return local_cuCtxSynchronize();
	if (!ctx_valid(ctx))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	sim_device_sync(ctx->dev);
	return GG_CUDA_SUCCESS;
}

/* every context speaks the 3020 context ABI (what the driver reports for
 * contexts made by the _v2 and later entry points) */
gg_CUresult cuCtxGetApiVersion(gg_CUcontext ctx, unsigned int *version)
{
	REQUIRE_INIT();
	if (!version)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUcontext c = ctx_or_current(ctx);
	if (!c)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	*version = 3020;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxGetFlags(unsigned int *flags)
{
	REQUIRE_CTX(dev);
	if (!flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUcontext c = cur_ctx();
	pthread_mutex_lock(&g_ctx_mu);
	*flags = c->primary ? g_ctx_flags[dev] : c->flags;
	pthread_mutex_unlock(&g_ctx_mu);
	return GG_CUDA_SUCCESS;
}

/* Peer access is a per-context list of peer contexts: nothing is mapped
 * (memory is not backed), but the driver's rules and errors hold. Every pair
 * of distinct devices can access each other (cuDeviceCanAccessPeer); a
 * context cannot be its own device's peer. */
gg_CUresult cuCtxEnablePeerAccess(gg_CUcontext peerContext, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	if (!peerContext || !ctx_valid(peerContext))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	if (Flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (peerContext->dev == dev)
		return GG_CUDA_ERROR_INVALID_DEVICE;
	gg_CUcontext c = cur_ctx();
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_ctx_mu);
	for (int i = 0; i < c->npeer && !r; i++)
		if (c->peer[i] == peerContext)
			r = SIM_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	if (!r && c->npeer == SIM_MAX_PEERS)
		r = SIM_CUDA_ERROR_TOO_MANY_PEERS;
	if (!r)
		c->peer[c->npeer++] = peerContext;
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

gg_CUresult cuCtxDisablePeerAccess(gg_CUcontext peerContext)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!peerContext || !ctx_valid(peerContext))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUcontext c = cur_ctx();
	gg_CUresult r = SIM_CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	pthread_mutex_lock(&g_ctx_mu);
	for (int i = 0; i < c->npeer && r; i++)
		if (c->peer[i] == peerContext) {
			c->peer[i] = c->peer[--c->npeer];
			r = GG_CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

/* ---------------------------------------------------- objects behind handles */

/* Streams, events, graphs, graph nodes and execs, libraries, kernels,
 * modules and functions are objects registered in simcore's handle table;
 * the handle value is what the caller sees, so a stale or foreign handle is
 * detected (never dereferenced). Each object starts with its kind. */
enum obj_kind { OBJ_STREAM = 0x5101, OBJ_EVENT, OBJ_GRAPH, OBJ_NODE, OBJ_EXEC, OBJ_LIBRARY, OBJ_KERNEL, OBJ_LINK };

struct obj {
	int kind, dev;
	uint64_t h; /* its own handle */
};

static void *obj_new(size_t size, int kind, int dev)
{
	struct obj *o = calloc(1, size);
	if (!o)
		return NULL;
	o->kind = kind;
	o->dev = dev;
	o->h = sim_handle_new_obj(dev, o);
	if (!o->h) {
		free(o);
		return NULL;
	}
	return o;
}

static void *obj_get(const void *handle, int kind)
{
	struct obj *o = handle ? sim_handle_obj((uint64_t)(uintptr_t)handle) : NULL;
	return o && o->kind == kind ? o : NULL;
}

static void obj_free(void *p)
{
	struct obj *o = p;
	sim_handle_delete(o->h);
	free(o);
}

/* ------------------------------------------------------------------ streams */

#define STREAM_LEGACY ((gg_CUstream)0x1)
#define STREAM_PER_THREAD ((gg_CUstream)0x2)

struct graph;
struct stream {
	struct obj o;
	unsigned int flags;
	int prio;
	gg_CUcontext ctx;
	unsigned long long id;
	/* capture (under g_cap_mu) */
	int capturing, mode;
	struct graph *cap;
	unsigned long long cap_id;
};

static atomic_ullong g_stream_ids = 16; /* ids 0..15 stand for default streams; only uniqueness matters */
static pthread_mutex_t g_cap_mu = PTHREAD_MUTEX_INITIALIZER; /* capture state of all streams */
static __thread int tls_capmode;                             /* cuThreadExchangeStreamCaptureMode */

static int default_stream(gg_CUstream s)
{
	return !s || s == STREAM_LEGACY || s == STREAM_PER_THREAD;
}

/* the device a stream belongs to; NULL / legacy / per-thread: the context's */
static gg_CUresult stream_device(gg_CUstream s, int ctxdev, int *dev)
{
	if (default_stream(s)) {
		*dev = ctxdev;
		return GG_CUDA_SUCCESS;
	}
	struct stream *st = obj_get(s, OBJ_STREAM);
	if (!st)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*dev = st->o.dev;
	return GG_CUDA_SUCCESS;
}

static struct stream *stream_obj(gg_CUstream s)
{
	return default_stream(s) ? NULL : obj_get(s, OBJ_STREAM);
}

/* the graph s is capturing into, or NULL (the caller holds g_cap_mu) */
static struct graph *capturing_graph_unlocked(gg_CUstream s)
{
	struct stream *st = stream_obj(s);
	return st && st->capturing == GG_CU_STREAM_CAPTURE_STATUS_ACTIVE ? st->cap : NULL;
}

/* priorities: [0, -5] like a data-centre card (lower is higher) */
#define PRIO_LEAST 0
#define PRIO_GREATEST (-5)

gg_CUresult cuStreamCreateWithPriority(gg_CUstream *phStream, unsigned int flags, int priority)
{
	REQUIRE_CTX(dev);
	if (!phStream || flags > 1) /* CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING */
		return GG_CUDA_ERROR_INVALID_VALUE;
	/* out-of-range priorities are clamped, as the driver does */
	if (priority > PRIO_LEAST)
		priority = PRIO_LEAST;
	if (priority < PRIO_GREATEST)
		priority = PRIO_GREATEST;
	struct stream *s = obj_new(sizeof(*s), OBJ_STREAM, dev);
	if (!s)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	s->flags = flags;
	s->prio = priority;
	s->ctx = cur_ctx();
	s->id = atomic_fetch_add_explicit(&g_stream_ids, 1, memory_order_relaxed);
	*phStream = (gg_CUstream)(uintptr_t)s->o.h;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamCreate(gg_CUstream *phStream, unsigned int Flags)
{
	return local_cuStreamCreateWithPriority(phStream, Flags, 0);
}

gg_CUresult cuStreamDestroy_v2(gg_CUstream hStream)
{
	REQUIRE_CTX(dev);
	(void)dev;
	struct stream *s = stream_obj(hStream);
	if (!s)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_cap_mu);
	int cap = s->capturing;
	pthread_mutex_unlock(&g_cap_mu);
	if (cap)
		return GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	obj_free(s);
	return GG_CUDA_SUCCESS;
}

/* a stream call that would wait on a capturing stream invalidates the capture */
static gg_CUresult stream_wait_ok(gg_CUstream s)
{
	struct stream *st = stream_obj(s);
	if (!st)
		return GG_CUDA_SUCCESS;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	if (st->capturing == GG_CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		st->capturing = GG_CU_STREAM_CAPTURE_STATUS_INVALIDATED;
		r = GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	} else if (st->capturing) {
		r = GG_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	}
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

/* synchronisation is where a pool gives back reserve above its threshold */
gg_CUresult cuStreamSynchronize(gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	r = stream_wait_ok(hStream);
	if (r)
		return r;
	sim_device_sync(dev);
	return GG_CUDA_SUCCESS;
}

/* per-thread default stream variants: a NULL stream means this thread's */
static gg_CUstream ptsz(gg_CUstream s)
{
	return s ? s : STREAM_PER_THREAD;
}

gg_CUresult cuStreamSynchronize_ptsz(gg_CUstream hStream)
{
	return local_cuStreamSynchronize(ptsz(hStream));
}

/* nothing runs, so every stream is always idle */
gg_CUresult cuStreamQuery(gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	return stream_wait_ok(hStream);
}

gg_CUresult cuStreamQuery_ptsz(gg_CUstream hStream)
{
	return local_cuStreamQuery(ptsz(hStream));
}

/* What a stream getter asks about (the getters below): *s is the stream,
 * or NULL for a default stream (the getter answers for the context); 0, or
 * the error the driver gives for no context, no out pointer or a stale
 * handle. */
static gg_CUresult stream_getter(gg_CUstream h, const void *out, struct stream **s)
{
	*s = NULL;
	REQUIRE_CTX(dev);
	(void)dev;
	if (!out)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (default_stream(h))
		return GG_CUDA_SUCCESS;
	*s = stream_obj(h);
	return *s ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_HANDLE;
}

gg_CUresult cuStreamGetPriority(gg_CUstream hStream, int *priority)
{
	struct stream *s;
	gg_CUresult r = stream_getter(hStream, priority, &s);
	if (!r)
		*priority = s ? s->prio : PRIO_LEAST;
	return r;
}

gg_CUresult cuStreamGetPriority_ptsz(gg_CUstream hStream, int *priority)
{
	return local_cuStreamGetPriority(ptsz(hStream), priority);
}

gg_CUresult cuStreamGetFlags(gg_CUstream hStream, unsigned int *flags)
{
	struct stream *s;
	gg_CUresult r = stream_getter(hStream, flags, &s);
	if (!r)
		*flags = s ? s->flags : 0;
	return r;
}

gg_CUresult cuStreamGetFlags_ptsz(gg_CUstream hStream, unsigned int *flags)
{
	return local_cuStreamGetFlags(ptsz(hStream), flags);
}

/* default streams have fixed small ids: legacy 1, per-thread 2 + thread slot
 * is not modelled (one id for all threads' per-thread streams) */
gg_CUresult cuStreamGetId(gg_CUstream hStream, unsigned long long *streamId)
{
	struct stream *s;
	gg_CUresult r = stream_getter(hStream, streamId, &s);
	if (!r)
		*streamId = s ? s->id : (hStream == STREAM_PER_THREAD ? 2 : 1);
	return r;
}

gg_CUresult cuStreamGetId_ptsz(gg_CUstream hStream, unsigned long long *streamId)
{
	return local_cuStreamGetId(ptsz(hStream), streamId);
}

gg_CUresult cuStreamGetCtx(gg_CUstream hStream, gg_CUcontext *pctx)
{
	struct stream *s;
	gg_CUresult r = stream_getter(hStream, pctx, &s);
	if (!r)
		*pctx = s ? s->ctx : cur_ctx();
	return r;
}

gg_CUresult cuStreamGetCtx_ptsz(gg_CUstream hStream, gg_CUcontext *pctx)
{
	return local_cuStreamGetCtx(ptsz(hStream), pctx);
}

gg_CUresult cuStreamGetDevice(gg_CUstream hStream, gg_CUdevice *device)
{
	REQUIRE_CTX(ctxdev);
	if (!device)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (!r)
		*device = dev;
	return r;
}

gg_CUresult cuStreamGetDevice_ptsz(gg_CUstream hStream, gg_CUdevice *device)
{
	return local_cuStreamGetDevice(ptsz(hStream), device);
}

gg_CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (leastPriority)
		*leastPriority = PRIO_LEAST;
	if (greatestPriority)
		*greatestPriority = PRIO_GREATEST;
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------------------- events */

struct event {
	struct obj o;
	unsigned int flags;
	int recorded;
};

gg_CUresult cuEventCreate(gg_CUevent *phEvent, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	if (!phEvent ||
	    (Flags & ~(unsigned)(GG_CU_EVENT_BLOCKING_SYNC | GG_CU_EVENT_DISABLE_TIMING | GG_CU_EVENT_INTERPROCESS)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	/* an interprocess event must also disable timing */
	if ((Flags & GG_CU_EVENT_INTERPROCESS) && !(Flags & GG_CU_EVENT_DISABLE_TIMING))
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct event *e = obj_new(sizeof(*e), OBJ_EVENT, dev);
	if (!e)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	e->flags = Flags;
	*phEvent = (gg_CUevent)(uintptr_t)e->o.h;
	return GG_CUDA_SUCCESS;
}

/* CUgraphNodeType values (cuda.h) of the nodes the simulator makes */
enum {
	NT_MEMCPY = 1,
	NT_MEMSET = 2,
	NT_HOST = 3,
	NT_EMPTY = 5,
	NT_WAIT_EVENT = 6,
	NT_EVENT_RECORD = 7,
	NT_MEM_ALLOC = 10,
	NT_MEM_FREE = 11,
	NT_BATCH_MEM_OP = 12,
};
static void graph_add_other(struct graph *g, int ntype);

gg_CUresult cuEventRecord(gg_CUevent hEvent, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	struct event *e = obj_get(hEvent, OBJ_EVENT);
	if (!e)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(hStream);
	if (g)
		graph_add_other(g, NT_EVENT_RECORD);
	pthread_mutex_unlock(&g_cap_mu);
	e->recorded = 1;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuEventRecord_ptsz(gg_CUevent hEvent, gg_CUstream hStream)
{
	return local_cuEventRecord(hEvent, ptsz(hStream));
}

gg_CUresult cuEventRecordWithFlags(gg_CUevent hEvent, gg_CUstream hStream, unsigned int flags)
{
	if (flags & ~1u) /* CU_EVENT_RECORD_EXTERNAL */
		return GG_CUDA_ERROR_INVALID_VALUE;
	return local_cuEventRecord(hEvent, hStream);
}

gg_CUresult cuEventRecordWithFlags_ptsz(gg_CUevent hEvent, gg_CUstream hStream, unsigned int flags)
{
	return local_cuEventRecordWithFlags(hEvent, ptsz(hStream), flags);
}

/* nothing runs: a recorded event has completed at once */
gg_CUresult cuEventQuery(gg_CUevent hEvent)
{
	REQUIRE_INIT();
	return obj_get(hEvent, OBJ_EVENT) ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_HANDLE;
}

gg_CUresult cuEventSynchronize(gg_CUevent hEvent)
{
	return local_cuEventQuery(hEvent);
}

gg_CUresult cuEventDestroy_v2(gg_CUevent hEvent)
{
	REQUIRE_INIT();
	struct event *e = obj_get(hEvent, OBJ_EVENT);
	if (!e)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	obj_free(e);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuEventDestroy(gg_CUevent hEvent)
{
	return local_cuEventDestroy_v2(hEvent);
}

/* no timing without execution: both events must have been recorded, and the
 * time between them is 0 */
gg_CUresult cuEventElapsedTime_v2(float *pMilliseconds, gg_CUevent hStart, gg_CUevent hEnd)
{
	REQUIRE_INIT();
	struct event *a = obj_get(hStart, OBJ_EVENT), *b = obj_get(hEnd, OBJ_EVENT);
	if (!pMilliseconds)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!a || !b)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & GG_CU_EVENT_DISABLE_TIMING)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (!a->recorded || !b->recorded)
		return GG_CUDA_ERROR_NOT_READY;
	*pMilliseconds = 0.0f;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuEventElapsedTime(float *pMilliseconds, gg_CUevent hStart, gg_CUevent hEnd)
{
	return local_cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

gg_CUresult cuStreamWaitEvent(gg_CUstream hStream, gg_CUevent hEvent, unsigned int Flags)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	if (!obj_get(hEvent, OBJ_EVENT))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (Flags & ~1u) /* CU_EVENT_WAIT_EXTERNAL */
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(hStream);
	if (g)
		graph_add_other(g, NT_WAIT_EVENT);
	pthread_mutex_unlock(&g_cap_mu);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamWaitEvent_ptsz(gg_CUstream hStream, gg_CUevent hEvent, unsigned int Flags)
{
	return local_cuStreamWaitEvent(ptsz(hStream), hEvent, Flags);
}

/* Host functions run at once, on the caller's thread: streams are
 * synchronous here. During capture they become a node and do not run. */
gg_CUresult cuLaunchHostFunc(gg_CUstream hStream, gg_CUhostFn fn, void *userData)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	if (!fn)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(hStream);
	if (g)
		graph_add_other(g, NT_HOST);
	pthread_mutex_unlock(&g_cap_mu);
	if (!g)
		fn(userData);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuLaunchHostFunc_ptsz(gg_CUstream hStream, gg_CUhostFn fn, void *userData)
{
	return local_cuLaunchHostFunc(ptsz(hStream), fn, userData);
}

typedef void (*stream_cb)(gg_CUstream hStream, gg_CUresult status, void *userData);

gg_CUresult cuStreamAddCallback(gg_CUstream hStream, void *callback, void *userData, unsigned int flags)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	if (!callback || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	pthread_mutex_lock(&g_cap_mu);
	int cap = capturing_graph_unlocked(hStream) != NULL;
	pthread_mutex_unlock(&g_cap_mu);
	if (cap) /* callbacks cannot be captured (the driver's rule) */
		return GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	stream_cb cb;
	memcpy(&cb, &callback, sizeof(cb));
	cb(hStream, GG_CUDA_SUCCESS, userData);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamAddCallback_ptsz(gg_CUstream hStream, void *callback, void *userData, unsigned int flags)
{
	return local_cuStreamAddCallback(ptsz(hStream), callback, userData, flags);
}

/* ------------------------------------------------------------------- errors */

static const struct {
	int code;
	const char *name, *str;
} g_errs[] = {
    {GG_CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {GG_CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {GG_CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {GG_CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {GG_CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {GG_CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {GG_CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {GG_CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {GG_CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {GG_CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {GG_CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {GG_CUDA_ERROR_PROFILER_DISABLED, "CUDA_ERROR_PROFILER_DISABLED",
     "profiler disabled while using external profiling tool"},
    {GG_CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {GG_CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "context is already in use"},
    {GG_CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {GG_CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {GG_CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {GG_CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {GG_CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {GG_CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "primary context active"},
    {SIM_CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {SIM_CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {GG_CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {SIM_CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {GG_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {GG_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {GG_CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {GG_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {GG_CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {GG_CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {GG_CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {GG_CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static gg_CUresult err_lookup(gg_CUresult error, const char **pStr, int name)
{
	if (!pStr)
		return GG_CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(g_errs) / sizeof(g_errs[0]); i++)
		if (g_errs[i].code == error) {
			*pStr = name ? g_errs[i].name : g_errs[i].str;
			return GG_CUDA_SUCCESS;
		}
	*pStr = NULL;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuGetErrorString(gg_CUresult error, const char **pStr)
{
	return err_lookup(error, pStr, 0);
}

gg_CUresult cuGetErrorName(gg_CUresult error, const char **pStr)
{
	return err_lookup(error, pStr, 1);
}

/* ------------------------------------------------------------ device memory */

gg_CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	REQUIRE_CTX(dev);
	if (!free || !total)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*free = sim_device_free(dev);
	*total = sim_device_total(dev);
	return GG_CUDA_SUCCESS;
}

/* SIMGPU_ALLOC_SIGNAL=<sig>:<bytes>: a signal that arrives while the driver
 * works on a large allocation, made deterministic: cuMemAlloc_v2 of at
 * least <bytes> raises <sig> on the calling thread before it allocates.
 * Smaller requests (a handler's own) raise nothing. */
static int alloc_sig;
static unsigned long long alloc_sig_min;
static pthread_once_t alloc_sig_once = PTHREAD_ONCE_INIT;
/* What a plain allocation tests, once: the signal's 1 (set once, at the
 * first allocation) plus one for each thread whose next address is armed
 * (simgpu_cuda_debug_next_address). One word for both quirks, so that a
 * plain run pays one load and branch (the benchmark's baseline measures
 * the simulator: its cuMemAlloc_v2 pair came out 12 instructions cheaper
 * than with the signal's own test, its stream-ordered pair 3 dearer).
 * relaxed: a count of arming threads; what an armed thread hands out is
 * its own thread-local. */
static _Atomic int alloc_quirks;
/* The calling thread's armed address, 0 when none. */
static __thread gg_CUdeviceptr tls_next_addr;

/* Read once: a getenv per allocation would be the simulator's own largest
 * cost, and the benchmark's baseline measures the simulator. */
static void alloc_signal_read(void)
{
	const char *e = getenv("SIMGPU_ALLOC_SIGNAL");
	char *end;
	long sig = e ? strtol(e, &end, 10) : 0;
	if (sig <= 0 || sig >= 65 || *end != ':')
		return;
	alloc_sig_min = strtoull(end + 1, NULL, 10);
	alloc_sig = (int)sig;
	atomic_fetch_add_explicit(&alloc_quirks, 1, memory_order_relaxed);
}

/* A block just allocated at a, as its caller sees it: a, or this thread's
 * armed address, the block then given back at once (the knob's driver
 * handed out an address it does not hold). */
static gg_CUdeviceptr handed_out(uint64_t a)
{
	gg_CUdeviceptr x = tls_next_addr;
	if (!x)
		return a;
	tls_next_addr = 0;
	atomic_fetch_sub_explicit(&alloc_quirks, 1, memory_order_relaxed);
	sim_free(a, SIM_KMASK_FREEABLE);
	return x;
}

static gg_CUresult alloc_linear(int dev, gg_CUdeviceptr *dptr, size_t bytesize)
{
	uint64_t a;
	int rc = sim_alloc_ctx(dev, cur_id(), bytesize, SIM_KIND_LINEAR, 0, &a);
	if (rc == SIM_OK)
		*dptr = a;
	return to_cu(rc);
}

/* cuMemAlloc_v2 with a quirk on: the signal, then the allocation, then
 * the address the caller is handed. */
static __attribute__((noinline)) gg_CUresult alloc_quirky(int dev, gg_CUdeviceptr *dptr, size_t bytesize)
{
	if (alloc_sig && bytesize >= alloc_sig_min)
		raise(alloc_sig);
	gg_CUresult r = alloc_linear(dev, dptr, bytesize);
	if (r == GG_CUDA_SUCCESS)
		*dptr = handed_out(*dptr);
	return r;
}

gg_CUresult cuMemAlloc_v2(gg_CUdeviceptr *dptr, size_t bytesize)
{
	REQUIRE_CTX(dev);
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_once(&alloc_sig_once, alloc_signal_read);
	if (__builtin_expect(atomic_load_explicit(&alloc_quirks, memory_order_relaxed) != 0, 0))
		return alloc_quirky(dev, dptr, bytesize);
	return alloc_linear(dev, dptr, bytesize);
}

/* The calling thread's next successful cuMemAlloc_v2 or stream-ordered
 * allocation hands its caller addr, and gives its block back at once: a
 * driver that returned what no real one does (1 and 2 are an interposer's
 * table slot states), so that the interposer's handling of it can be
 * tested. The caller's later free of addr is refused, as a free of any
 * address the driver does not hold. 0 disarms. */
SIM_EXPORT void simgpu_cuda_debug_next_address(gg_CUdeviceptr addr);

void simgpu_cuda_debug_next_address(gg_CUdeviceptr addr)
{
	int was = tls_next_addr != 0, now = addr != 0;
	tls_next_addr = addr;
	atomic_fetch_add_explicit(&alloc_quirks, now - was, memory_order_relaxed);
}

gg_CUresult cuMemAllocPitch_v2(gg_CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                               unsigned int ElementSizeBytes)
{
	REQUIRE_CTX(dev);
	if (!dptr || !pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return GG_CUDA_ERROR_INVALID_VALUE;
	size_t pitch = (WidthInBytes + 511) & ~(size_t)511, bytes;
	if (pitch < WidthInBytes || __builtin_mul_overflow(pitch, Height, &bytes))
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t a;
	int rc = sim_alloc_ctx(dev, cur_id(), bytes, SIM_KIND_LINEAR, 0, &a);
	if (rc == SIM_OK) {
		*dptr = a;
		*pPitch = pitch;
	}
	return to_cu(rc);
}

gg_CUresult cuMemFree_v2(gg_CUdeviceptr dptr)
{
	REQUIRE_INIT();
	if (!dptr)
		return GG_CUDA_SUCCESS;
	REQUIRE_CTX(dev);
	(void)dev;
	if (sim_free(dptr, SIM_KMASK_FREEABLE) == SIM_OK || graph_free_addr(dptr))
		return GG_CUDA_SUCCESS;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

/* linear allocations, VMM mappings (the mapping's range, as NCCL relies on)
 * and live graph allocations */
gg_CUresult cuMemGetAddressRange_v2(gg_CUdeviceptr *pbase, size_t *psize, gg_CUdeviceptr dptr)
{
	REQUIRE_CTX(dev);
	(void)dev;
	uint64_t b, s;
	if (sim_addr_range(dptr, &b, &s) && sim_va_range(dptr, &b, &s, NULL) && !graph_addr_range(dptr, &b, &s))
		return GG_CUDA_ERROR_NOT_FOUND;
	if (pbase)
		*pbase = b;
	if (psize)
		*psize = s;
	return GG_CUDA_SUCCESS;
}

/* simplified: managed memory is charged as device memory on the current device */
gg_CUresult cuMemAllocManaged(gg_CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	REQUIRE_CTX(dev);
	if (!dptr || !bytesize || (flags != GG_CU_MEM_ATTACH_GLOBAL && flags != GG_CU_MEM_ATTACH_HOST))
		return GG_CUDA_ERROR_INVALID_VALUE;
	/* SIMGPU_REENTER=1: build managed memory on the public cuMemAlloc_v2,
	 * looked up by name, the way some runtimes call their own entry points.
	 * Under gpuguard that inner call lands in its hook while the outer hook
	 * runs, which is what tests/preload/t_lifecycle_lcuda.c checks. */
	const char *re = getenv("SIMGPU_REENTER");
	if (re && re[0] == '1') {
		gg_pfn_cuMemAlloc_v2 pub = (gg_pfn_cuMemAlloc_v2)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
		return pub ? pub(dptr, bytesize) : GG_CUDA_ERROR_NOT_INITIALIZED;
	}
	uint64_t a;
	int rc = sim_alloc_ctx(dev, cur_id(), bytesize, SIM_KIND_MANAGED, 0, &a);
	if (rc == SIM_OK)
		*dptr = a;
	return to_cu(rc);
}

/* --------------------------------------------------------- pinned host memory */

gg_CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pp || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	void *p = sim_host_alloc(bytesize);
	if (!p)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	*pp = p;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	if (Flags & ~(unsigned)(GG_CU_MEMHOSTALLOC_PORTABLE | GG_CU_MEMHOSTALLOC_DEVICEMAP |
	                        GG_CU_MEMHOSTALLOC_WRITECOMBINED)) {
		REQUIRE_INIT();
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
	return local_cuMemAllocHost_v2(pp, bytesize);
}

gg_CUresult cuMemFreeHost(void *p)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!p)
		return GG_CUDA_SUCCESS;
	return sim_host_free(p) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------------------- arrays */

static size_t fmt_bytes(gg_CUarray_format f)
{
	switch (f) {
	case GG_CU_AD_FORMAT_UNSIGNED_INT8:
	case GG_CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case GG_CU_AD_FORMAT_UNSIGNED_INT16:
	case GG_CU_AD_FORMAT_SIGNED_INT16:
	case GG_CU_AD_FORMAT_HALF:
		return 2;
	case GG_CU_AD_FORMAT_UNSIGNED_INT32:
	case GG_CU_AD_FORMAT_SIGNED_INT32:
	case GG_CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 0;
	}
}

/* bytes of one level; height/depth 0 mean a 1D/2D array. 0 on bad input */
static uint64_t array_bytes(size_t w, size_t h, size_t d, gg_CUarray_format f, unsigned ch)
{
	uint64_t e = fmt_bytes(f), r;
	if (!w || !e || (ch != 1 && ch != 2 && ch != 4))
		return 0;
	if (__builtin_mul_overflow((uint64_t)w, h ? h : 1, &r) || __builtin_mul_overflow(r, d ? d : 1, &r) ||
	    __builtin_mul_overflow(r, e * ch, &r))
		return UINT64_MAX;
	return r;
}

static gg_CUresult array_alloc(uint64_t bytes, int kind, uint64_t *h)
{
	REQUIRE_CTX(dev);
	if (!bytes)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (bytes == UINT64_MAX)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	/* the handle is the array's fake device address: opaque, and checkable */
	return to_cu(sim_alloc_ctx(dev, cur_id(), bytes, kind, 1, h));
}

gg_CUresult cuArrayCreate_v2(gg_CUarray *pHandle, const gg_CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
	REQUIRE_INIT();
	if (!pHandle || !pAllocateArray)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
	uint64_t h;
	gg_CUresult r = array_alloc(array_bytes(a->Width, a->Height, 0, a->Format, a->NumChannels), SIM_KIND_ARRAY, &h);
	if (!r)
		*pHandle = (gg_CUarray)(uintptr_t)h;
	return r;
}

gg_CUresult cuArray3DCreate_v2(gg_CUarray *pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
	REQUIRE_INIT();
	if (!pHandle || !pAllocateArray)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
	uint64_t h;
	gg_CUresult r =
	    array_alloc(array_bytes(a->Width, a->Height, a->Depth, a->Format, a->NumChannels), SIM_KIND_ARRAY, &h);
	if (!r)
		*pHandle = (gg_CUarray)(uintptr_t)h;
	return r;
}

gg_CUresult cuArrayDestroy(gg_CUarray hArray)
{
	REQUIRE_INIT();
	return sim_free((uint64_t)(uintptr_t)hArray, SIM_KMASK(SIM_KIND_ARRAY)) ? GG_CUDA_ERROR_INVALID_HANDLE
	                                                                        : GG_CUDA_SUCCESS;
}

static size_t level_dim(size_t x, unsigned l)
{
	if (!x)
		return 0;
	x = l >= sizeof(size_t) * 8 ? 0 : x >> l;
	return x ? x : 1;
}

gg_CUresult cuMipmappedArrayCreate(gg_CUmipmappedArray *pHandle, const gg_CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                   unsigned int numMipmapLevels)
{
	REQUIRE_INIT();
	if (!pHandle || !pMipmappedArrayDesc || !numMipmapLevels)
		return GG_CUDA_ERROR_INVALID_VALUE;
	const gg_CUDA_ARRAY3D_DESCRIPTOR *a = pMipmappedArrayDesc;
	uint64_t total = 0;
	for (unsigned l = 0; l < numMipmapLevels; l++) {
		uint64_t b = array_bytes(level_dim(a->Width, l), level_dim(a->Height, l), level_dim(a->Depth, l),
		                         a->Format, a->NumChannels);
		if (!b)
			return GG_CUDA_ERROR_INVALID_VALUE;
		total = (b == UINT64_MAX || total + b < total) ? UINT64_MAX : total + b;
	}
	uint64_t h;
	gg_CUresult r = array_alloc(total, SIM_KIND_MIPMAP, &h);
	if (!r)
		*pHandle = (gg_CUmipmappedArray)(uintptr_t)h;
	return r;
}

gg_CUresult cuMipmappedArrayDestroy(gg_CUmipmappedArray hMipmappedArray)
{
	REQUIRE_INIT();
	return sim_free((uint64_t)(uintptr_t)hMipmappedArray, SIM_KMASK(SIM_KIND_MIPMAP)) ? GG_CUDA_ERROR_INVALID_HANDLE
	                                                                                  : GG_CUDA_SUCCESS;
}

/* ---------------------------------------------------- virtual memory (VMM) */

static gg_CUresult check_location(const gg_CUmemLocation *loc, int *dev)
{
	if (loc->type != GG_CU_MEM_LOCATION_TYPE_DEVICE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(loc->id))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	*dev = loc->id;
	return GG_CUDA_SUCCESS;
}

/* SIMGPU_HOST_NUMA_VMM=1: the card reports
 * HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (141) as an H200 does, and
 * cuMemCreate makes host memory at a HOST, HOST_NUMA (node 0, the
 * HOST_NUMA_ID it reports) or HOST_NUMA_CURRENT location. NCCL 2.28 then
 * allocates its host buffers so. Off by default: NCCL would also touch
 * such memory from the CPU, and the simulator's addresses are not host
 * memory. */
static int host_numa_on;
static pthread_once_t host_numa_once = PTHREAD_ONCE_INIT;

static void host_numa_read(void)
{
	const char *e = getenv("SIMGPU_HOST_NUMA_VMM");
	host_numa_on = e && strcmp(e, "1") == 0;
}

static int host_numa_vmm(void)
{
	pthread_once(&host_numa_once, host_numa_read); /* orders host_numa_on for every reader */
	return host_numa_on;
}

/* 1 when prop asks for host memory the card can make (dev is then -1). */
static int host_location(const gg_CUmemAllocationProp *prop)
{
	int t = (int)prop->location.type;
	if (!host_numa_vmm())
		return 0;
	return t == GG_CU_MEM_LOCATION_TYPE_HOST || t == GG_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
	       (t == GG_CU_MEM_LOCATION_TYPE_HOST_NUMA && prop->location.id == 0);
}

static gg_CUresult check_prop(const gg_CUmemAllocationProp *prop, int *dev)
{
	if (!prop || prop->type != GG_CU_MEM_ALLOCATION_TYPE_PINNED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (host_location(prop)) {
		*dev = -1;
		/* HOST memory cannot be exported (the driver's documented rule) */
		return prop->location.type == GG_CU_MEM_LOCATION_TYPE_HOST && prop->requestedHandleTypes
		           ? GG_CUDA_ERROR_INVALID_VALUE
		           : GG_CUDA_SUCCESS;
	}
	return check_location(&prop->location, dev);
}

gg_CUresult cuMemGetAllocationGranularity(size_t *granularity, const gg_CUmemAllocationProp *prop,
                                          gg_CUmemAllocationGranularity_flags option)
{
	REQUIRE_INIT();
	int dev;
	if (!granularity ||
	    (option != GG_CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != GG_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_prop(prop, &dev);
	if (r)
		return r;
	*granularity = SIM_PAGE;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemCreate(gg_CUmemGenericAllocationHandle *handle, size_t size, const gg_CUmemAllocationProp *prop,
                        unsigned long long flags)
{
	REQUIRE_INIT();
	int dev;
	if (!handle || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_prop(prop, &dev);
	if (r)
		return r;
	if (!size || size % SIM_PAGE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t h;
	int rc = dev < 0 ? sim_vmm_create_host(cur_id(), size, prop, sizeof(*prop), &h)
	                 : sim_vmm_create_ctx(dev, cur_id(), size, prop, sizeof(*prop), &h);
	if (rc == SIM_OK)
		*handle = h;
	return to_cu(rc);
}

/* unknown VMM handles are CUDA_ERROR_INVALID_VALUE, as the driver documents */
gg_CUresult cuMemRelease(gg_CUmemGenericAllocationHandle handle)
{
	REQUIRE_INIT();
	return sim_vmm_release(handle) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemGetAllocationPropertiesFromHandle(gg_CUmemAllocationProp *prop, gg_CUmemGenericAllocationHandle handle)
{
	REQUIRE_INIT();
	if (!prop)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return sim_vmm_prop(handle, prop, sizeof(*prop)) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* simplified: the fixed-address hint `addr` is ignored */
gg_CUresult cuMemAddressReserve(gg_CUdeviceptr *ptr, size_t size, size_t alignment, gg_CUdeviceptr addr,
                                unsigned long long flags)
{
	REQUIRE_INIT();
	(void)addr;
	if (!ptr || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t a;
	int rc = sim_va_reserve(size, alignment, &a);
	if (rc == SIM_OK)
		*ptr = a;
	return to_cu(rc);
}

gg_CUresult cuMemAddressFree(gg_CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	return sim_va_free(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemMap(gg_CUdeviceptr ptr, size_t size, size_t offset, gg_CUmemGenericAllocationHandle handle,
                     unsigned long long flags)
{
	REQUIRE_INIT();
	if (flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int rc = sim_va_map(ptr, size, offset, handle);
	return rc == SIM_ENOMEM ? GG_CUDA_ERROR_OUT_OF_MEMORY : rc ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemUnmap(gg_CUdeviceptr ptr, size_t size)
{
	REQUIRE_INIT();
	return sim_va_unmap(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemSetAccess(gg_CUdeviceptr ptr, size_t size, const gg_CUmemAccessDesc *desc, size_t count)
{
	REQUIRE_INIT();
	if (!desc || !count)
		return GG_CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		int dev;
		gg_CUresult r = check_location(&desc[i].location, &dev);
		if (r)
			return r;
		if (desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_NONE &&
		    desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[i].flags != GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return GG_CUDA_ERROR_INVALID_VALUE;
	}
	return sim_va_mapped(ptr, size) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* ------------------------------------------------ stream capture and graphs */

/* Only what memory nodes need (README "Graphs"): a graph is a list of nodes;
 * alloc nodes own a virtual address fixed at creation (reserved, never
 * backed); instantiation turns the list into an exec whose alloc nodes get
 * physical memory from the device's graph-memory pool at upload / launch.
 * All graph state is under g_cap_mu. */
enum { GN_ALLOC = 1, GN_FREE, GN_OTHER };

struct gnode {
	struct obj o;
	int type;
	int ntype;         /* the CUgraphNodeType cuGraphNodeGetType reports */
	uint64_t va, size; /* alloc: its address and size; free: the address */
};

struct graph {
	struct obj o;
	struct gnode **nodes;
	size_t n, cap;
	struct gexec *exec; /* the live instantiation of a graph with alloc nodes */
};

/* one alloc node of an exec: its memory is live between its alloc and its free */
struct galloc {
	uint64_t va, size, rsize;
	struct gexec *owner;
	int live;
};

struct gexec {
	struct obj o;
	unsigned long long flags;
	struct graph *from;
	int *op;        /* GN_ALLOC / GN_FREE per step */
	uint64_t *opva; /* the address each step names */
	size_t nops;
	struct galloc **allocs; /* this exec's, in g_gallocs too */
	size_t nallocs;
	uint64_t reserve; /* physical bytes its alloc nodes need (2 MiB each, rounded) */
	int backed, destroyed;
	size_t live; /* allocations of this exec that are live */
};

/* the device's graph-memory pool: pages held (VMM handles owned by the
 * pseudo-context SIM_CTX_GRAPH), how much of it execs have claimed, and what
 * is live */
#define SIM_CTX_GRAPH 0xFFFFFFFEu
struct gpool {
	uint64_t reserved, reserved_high, used, used_high, claimed;
	uint64_t *h;
	size_t nh, caph;
};
static struct gpool g_gp[SIM_MAX_DEVICES];
static struct galloc **g_gallocs;
static size_t g_ngallocs, g_capgallocs;
static unsigned long long g_capture_ids = 1; /* under g_cap_mu */
static const unsigned char g_noprop[8];      /* graph pages have no cuMemCreate properties */

static int graph_push(struct graph *g, struct gnode *n)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		struct gnode **nn = realloc(g->nodes, cap * sizeof(*nn));
		if (!nn)
			return -1;
		g->nodes = nn;
		g->cap = cap;
	}
	g->nodes[g->n++] = n;
	return 0;
}

/* every alloc node's address range ever made (addresses are not recycled):
 * copies and sets inside a capture may name them */
struct varange {
	uint64_t va, size;
};
static struct varange *g_nodeva;
static size_t g_nnodeva, g_capnodeva;

static int nodeva_add_unlocked(uint64_t va, uint64_t size)
{
	if (g_nnodeva == g_capnodeva) {
		size_t cap = g_capnodeva ? g_capnodeva * 2 : 64;
		struct varange *n = realloc(g_nodeva, cap * sizeof(*n));
		if (!n)
			return -1;
		g_nodeva = n;
		g_capnodeva = cap;
	}
	g_nodeva[g_nnodeva++] = (struct varange){va, size};
	return 0;
}

static int graph_va_known(uint64_t a, size_t n)
{
	int ok = 0;
	pthread_mutex_lock(&g_cap_mu);
	for (size_t i = 0; i < g_nnodeva && !ok; i++)
		ok = a >= g_nodeva[i].va && a - g_nodeva[i].va + n <= g_nodeva[i].size;
	pthread_mutex_unlock(&g_cap_mu);
	return ok;
}

static struct gnode *graph_node(struct graph *g, int type, uint64_t va, uint64_t size)
{
	struct gnode *n = obj_new(sizeof(*n), OBJ_NODE, g->o.dev);
	if (!n)
		return NULL;
	n->type = type;
	n->ntype = type == GN_ALLOC ? NT_MEM_ALLOC : type == GN_FREE ? NT_MEM_FREE : NT_EMPTY;
	n->va = va;
	n->size = size;
	if (graph_push(g, n)) {
		obj_free(n);
		return NULL;
	}
	return n;
}

/* a node we do not model beyond its existence and type (copy, set, event,
 * host function, stream memory operation) */
static void graph_add_other(struct graph *g, int ntype)
{
	struct gnode *n = graph_node(g, GN_OTHER, 0, 0);
	if (n)
		n->ntype = ntype;
}

static uint64_t round_page(uint64_t n)
{
	return (n + SIM_PAGE - 1) & ~(SIM_PAGE - 1);
}

/* an alloc node: a fresh virtual address, nothing physical */
static gg_CUresult graph_alloc_node(struct graph *g, uint64_t size, struct gnode **out)
{
	uint64_t va;
	if (size == 0 || round_page(size) < size)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int rc = sim_va_reserve(round_page(size), 0, &va);
	if (rc)
		return to_cu(rc);
	struct gnode *n = nodeva_add_unlocked(va, size) ? NULL : graph_node(g, GN_ALLOC, va, size);
	if (!n) {
		sim_va_free(va, round_page(size));
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = n;
	return GG_CUDA_SUCCESS;
}

/* the allocation at va: the live one if any (a re-instantiated graph's
 * exec shares its addresses with an older exec whose memory outlived it) */
static struct galloc *galloc_at_unlocked(uint64_t va)
{
	struct galloc *any = NULL;
	for (size_t i = 0; i < g_ngallocs; i++)
		if (g_gallocs[i]->va == va) {
			if (g_gallocs[i]->live)
				return g_gallocs[i];
			any = g_gallocs[i];
		}
	return any;
}

/* a free node may name an alloc node of the same graph or the live memory of
 * another graph's allocation; nothing else */
static int graph_free_ok_unlocked(struct graph *g, uint64_t va)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->nodes[i]->type == GN_ALLOC && g->nodes[i]->va == va)
			return 1;
	struct galloc *a = galloc_at_unlocked(va);
	return a && a->live;
}

static void gpool_high(struct gpool *p)
{
	if (p->reserved > p->reserved_high)
		p->reserved_high = p->reserved;
	if (p->used > p->used_high)
		p->used_high = p->used;
}

/* claim bytes of physical memory for an exec, taking pages if the pool's
 * unclaimed reserve is short */
static gg_CUresult gpool_claim_unlocked(int dev, uint64_t bytes)
{
	struct gpool *p = &g_gp[dev];
	uint64_t avail = p->reserved - p->claimed;
	if (avail < bytes) {
		uint64_t need = bytes - avail, h;
		if (p->nh == p->caph) {
			size_t cap = p->caph ? p->caph * 2 : 8;
			uint64_t *nh = realloc(p->h, cap * sizeof(*nh));
			if (!nh)
				return GG_CUDA_ERROR_OUT_OF_MEMORY;
			p->h = nh;
			p->caph = cap;
		}
		if (sim_vmm_create_ctx(dev, SIM_CTX_GRAPH, need, g_noprop, sizeof(g_noprop), &h))
			return GG_CUDA_ERROR_OUT_OF_MEMORY;
		p->h[p->nh++] = h;
		p->reserved += need;
	}
	p->claimed += bytes;
	gpool_high(p);
	return GG_CUDA_SUCCESS;
}

static void galloc_set_live_unlocked(struct galloc *a, int live)
{
	struct gpool *p = &g_gp[a->owner->o.dev];
	if (a->live == live)
		return;
	a->live = live;
	if (live) {
		p->used += a->rsize;
		a->owner->live++;
	} else {
		p->used -= a->rsize;
		a->owner->live--;
	}
	gpool_high(p);
}

static void exec_free_unlocked(struct gexec *e)
{
	for (size_t i = 0; i < e->nallocs; i++) {
		for (size_t k = 0; k < g_ngallocs; k++)
			if (g_gallocs[k] == e->allocs[i]) {
				g_gallocs[k] = g_gallocs[--g_ngallocs];
				break;
			}
		free(e->allocs[i]);
	}
	if (e->backed)
		g_gp[e->o.dev].claimed -= e->reserve; /* stays reserved until a trim */
	free(e->allocs);
	free(e->op);
	free(e->opva);
	free(e);
}

/* cuMemFree / cuMemFreeAsync outside a graph of a graph allocation */
static int graph_free_addr(uint64_t va)
{
	pthread_mutex_lock(&g_cap_mu);
	struct galloc *a = galloc_at_unlocked(va);
	int ok = a && a->live;
	if (ok) {
		struct gexec *e = a->owner;
		galloc_set_live_unlocked(a, 0);
		if (e->destroyed && !e->live)
			exec_free_unlocked(e);
	}
	pthread_mutex_unlock(&g_cap_mu);
	return ok;
}

static int graph_addr_range(uint64_t addr, uint64_t *base, uint64_t *size)
{
	int ok = 0;
	pthread_mutex_lock(&g_cap_mu);
	for (size_t i = 0; i < g_ngallocs && !ok; i++) {
		struct galloc *a = g_gallocs[i];
		if (a->live && addr >= a->va && addr < a->va + a->size) {
			*base = a->va;
			*size = a->size;
			ok = 1;
		}
	}
	pthread_mutex_unlock(&g_cap_mu);
	return ok;
}

gg_CUresult cuGraphCreate(gg_CUgraph *phGraph, unsigned int flags)
{
	REQUIRE_CTX(dev);
	if (!phGraph || flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct graph *g = obj_new(sizeof(*g), OBJ_GRAPH, dev);
	if (!g)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (gg_CUgraph)(uintptr_t)g->o.h;
	return GG_CUDA_SUCCESS;
}

static void graph_destroy_unlocked(struct graph *g)
{
	for (size_t i = 0; i < g->n; i++)
		obj_free(g->nodes[i]);
	free(g->nodes);
	if (g->exec)
		g->exec->from = NULL;
	obj_free(g);
}

/* the virtual addresses of its alloc nodes are not recycled (README) */
gg_CUresult cuGraphDestroy(gg_CUgraph hGraph)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	if (g)
		graph_destroy_unlocked(g);
	pthread_mutex_unlock(&g_cap_mu);
	return g ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

static int deps_ok(const gg_CUgraphNode *deps, size_t n)
{
	if (n && !deps)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!obj_get(deps[i], OBJ_NODE))
			return 0;
	return 1;
}

gg_CUresult cuGraphAddMemAllocNode(gg_CUgraphNode *phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                                   size_t numDependencies, gg_CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	REQUIRE_INIT();
	int dev;
	if (!phGraphNode || !nodeParams || !deps_ok(dependencies, numDependencies) ||
	    nodeParams->poolProps.allocType != GG_CU_MEM_ALLOCATION_TYPE_PINNED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_location(&nodeParams->poolProps.location, &dev);
	if (r)
		return r;
	if (nodeParams->accessDescCount > (size_t)sim_device_count() ||
	    (nodeParams->accessDescCount && !nodeParams->accessDescs))
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	struct gnode *n = NULL;
	r = g ? graph_alloc_node(g, nodeParams->bytesize, &n) : GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&g_cap_mu);
	if (r)
		return r;
	nodeParams->dptr = n->va;
	*phGraphNode = (gg_CUgraphNode)(uintptr_t)n->o.h;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuGraphAddMemFreeNode(gg_CUgraphNode *phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                                  size_t numDependencies, gg_CUdeviceptr dptr)
{
	REQUIRE_INIT();
	if (!phGraphNode || !deps_ok(dependencies, numDependencies))
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	struct gnode *n = g && graph_free_ok_unlocked(g, dptr) ? graph_node(g, GN_FREE, dptr, 0) : NULL;
	pthread_mutex_unlock(&g_cap_mu);
	if (!n)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*phGraphNode = (gg_CUgraphNode)(uintptr_t)n->o.h;
	return GG_CUDA_SUCCESS;
}

/* the nodes in creation order; NULL nodes: how many. Entries past the
 * graph's nodes are set to NULL, and *numNodes says how many were written. */
gg_CUresult cuGraphGetNodes(gg_CUgraph hGraph, gg_CUgraphNode *nodes, size_t *numNodes)
{
	REQUIRE_INIT();
	if (!numNodes)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	if (g && !nodes) {
		*numNodes = g->n;
	} else if (g) {
		size_t k = 0;
		for (; k < *numNodes && k < g->n; k++)
			nodes[k] = (gg_CUgraphNode)(uintptr_t)g->nodes[k]->o.h;
		for (size_t i = k; i < *numNodes; i++)
			nodes[i] = NULL;
		*numNodes = k;
	}
	pthread_mutex_unlock(&g_cap_mu);
	return g ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuGraphNodeGetType(gg_CUgraphNode hNode, int *type)
{
	REQUIRE_INIT();
	if (!type)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct gnode *n = obj_get(hNode, OBJ_NODE);
	if (n)
		*type = n->ntype;
	pthread_mutex_unlock(&g_cap_mu);
	return n ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

/* No graph here holds a kernel node (launches are not simulated), so every
 * node is the wrong type for these: the driver's INVALID_VALUE, nothing
 * read or written. The _v2 structures differ from v1 only in what follows. */
gg_CUresult cuGraphKernelNodeGetParams(gg_CUgraphNode hNode, void *nodeParams)
{
	REQUIRE_INIT();
	(void)hNode;
	(void)nodeParams;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuGraphKernelNodeGetParams_v2(gg_CUgraphNode hNode, void *nodeParams)
{
	return local_cuGraphKernelNodeGetParams(hNode, nodeParams);
}

gg_CUresult cuGraphExecKernelNodeSetParams(gg_CUgraphExec hGraphExec, gg_CUgraphNode hNode, const void *nodeParams)
{
	REQUIRE_INIT();
	(void)hGraphExec;
	(void)hNode;
	(void)nodeParams;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuGraphExecKernelNodeSetParams_v2(gg_CUgraphExec hGraphExec, gg_CUgraphNode hNode, const void *nodeParams)
{
	return local_cuGraphExecKernelNodeSetParams(hGraphExec, hNode, nodeParams);
}

/* Only one exec may exist at a time for a graph with alloc nodes (the
 * driver's rule: the allocations' addresses are the graph's). */
static gg_CUresult exec_create_unlocked(struct graph *g, unsigned long long flags, struct gexec **out)
{
	size_t nalloc = 0;
	for (size_t i = 0; i < g->n; i++)
		nalloc += g->nodes[i]->type == GN_ALLOC;
	if (nalloc && g->exec)
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	struct gexec *e = obj_new(sizeof(*e), OBJ_EXEC, g->o.dev);
	if (!e)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	e->flags = flags;
	e->op = calloc(g->n + 1, sizeof(int));
	e->opva = calloc(g->n + 1, sizeof(uint64_t));
	e->allocs = calloc(nalloc + 1, sizeof(*e->allocs));
	int bad = !e->op || !e->opva || !e->allocs;
	if (!bad && g_ngallocs + nalloc > g_capgallocs) {
		size_t cap = (g_capgallocs + nalloc) * 2 + 16;
		struct galloc **ng = realloc(g_gallocs, cap * sizeof(*ng));
		if (ng) {
			g_gallocs = ng;
			g_capgallocs = cap;
		} else {
			bad = 1;
		}
	}
	for (size_t i = 0; i < g->n && !bad; i++) {
		struct gnode *n = g->nodes[i];
		if (n->type == GN_OTHER)
			continue;
		if (n->type == GN_ALLOC) {
			struct galloc *a = calloc(1, sizeof(*a));
			if (!a) {
				bad = 1;
				break;
			}
			a->va = n->va;
			a->size = n->size;
			a->rsize = round_page(n->size);
			a->owner = e;
			e->allocs[e->nallocs++] = a;
			g_gallocs[g_ngallocs++] = a;
			e->reserve += a->rsize;
		}
		e->op[e->nops] = n->type;
		e->opva[e->nops++] = n->va;
	}
	if (bad) {
		sim_handle_delete(e->o.h);
		exec_free_unlocked(e);
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (nalloc) {
		g->exec = e;
		e->from = g;
	}
	*out = e;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuGraphInstantiateWithFlags(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph, unsigned long long flags)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!phGraphExec)
		return GG_CUDA_ERROR_INVALID_VALUE;
	/* auto-free on launch and node priorities; device launch is not simulated */
	if (flags & ~(unsigned long long)(GG_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | 8))
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	struct gexec *e = NULL;
	gg_CUresult r = g ? exec_create_unlocked(g, flags, &e) : GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&g_cap_mu);
	if (!r)
		*phGraphExec = (gg_CUgraphExec)(uintptr_t)e->o.h;
	return r;
}

/* legacy (10000) and _v2 (11000): error node and log buffer outputs */
static gg_CUresult instantiate_logged(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph, gg_CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize)
{
	gg_CUresult r = local_cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = 0;
	return r;
}

gg_CUresult cuGraphInstantiate(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph, gg_CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
	return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

gg_CUresult cuGraphInstantiate_v2(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph, gg_CUgraphNode *phErrorNode,
                                  char *logBuffer, size_t bufferSize)
{
	return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

/* 12000: the flags in a struct, with an upload stream for FLAG_UPLOAD */
gg_CUresult cuGraphInstantiateWithParams(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph,
                                         gg_CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	if (!instantiateParams)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_cuuint64_t flags = instantiateParams->flags;
	gg_CUresult r = local_cuGraphInstantiateWithFlags(
	    phGraphExec, hGraph, flags & ~(gg_cuuint64_t)GG_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	if (!r && (flags & GG_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
		r = local_cuGraphUpload(*phGraphExec, instantiateParams->hUploadStream);
	instantiateParams->hErrNode_out = NULL;
	instantiateParams->result_out = r ? 1 : 0; /* CUDA_GRAPH_INSTANTIATE_ERROR or _SUCCESS */
	return r;
}

gg_CUresult cuGraphInstantiateWithParams_ptsz(gg_CUgraphExec *phGraphExec, gg_CUgraph hGraph,
                                              gg_CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	return local_cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

/* Updating an exec is not simulated: every update fails as one the driver
 * cannot make (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result NOT_SUPPORTED). */
gg_CUresult cuGraphExecUpdate(gg_CUgraphExec hGraphExec, gg_CUgraph hGraph, gg_CUgraphNode *hErrorNode_out,
                              gg_CUgraphExecUpdateResult *updateResult_out)
{
	REQUIRE_INIT();
	if (!hGraphExec || !hGraph || !hErrorNode_out || !updateResult_out)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*hErrorNode_out = NULL;
	*updateResult_out = 5; /* CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED */
	return (gg_CUresult)910;
}

gg_CUresult cuGraphExecUpdate_v2(gg_CUgraphExec hGraphExec, gg_CUgraph hGraph,
                                 gg_CUgraphExecUpdateResultInfo *resultInfo)
{
	REQUIRE_INIT();
	if (!hGraphExec || !hGraph || !resultInfo)
		return GG_CUDA_ERROR_INVALID_VALUE;
	resultInfo->result = 5;
	resultInfo->errorNode = resultInfo->errorFromNode = NULL;
	return (gg_CUresult)910;
}

/* The generic node add (12020; edge data, all zero here, from 12030): only
 * allocation nodes are simulated. */
gg_CUresult cuGraphAddNode(gg_CUgraphNode *phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                           size_t numDependencies, gg_CUgraphNodeParams *nodeParams)
{
	REQUIRE_INIT();
	if (!nodeParams)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (nodeParams->type != GG_CU_GRAPH_NODE_TYPE_MEM_ALLOC)
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	return local_cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, &nodeParams->alloc);
}

gg_CUresult cuGraphAddNode_v2(gg_CUgraphNode *phGraphNode, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                              const gg_CUgraphEdgeData *dependencyData, size_t numDependencies,
                              gg_CUgraphNodeParams *nodeParams)
{
	(void)dependencyData;
	return local_cuGraphAddNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

/* take physical memory for the exec's alloc nodes if it has none */
static gg_CUresult exec_back_unlocked(struct gexec *e)
{
	if (e->backed)
		return GG_CUDA_SUCCESS;
	gg_CUresult r = gpool_claim_unlocked(e->o.dev, e->reserve);
	if (!r)
		e->backed = 1;
	return r;
}

static gg_CUresult exec_stream_check(struct gexec *e, gg_CUstream s)
{
	int ctxdev = cur_ctx()->dev, dev;
	gg_CUresult r = stream_device(s, ctxdev, &dev);
	if (r)
		return r;
	(void)e;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuGraphUpload(gg_CUgraphExec hGraphExec, gg_CUstream hStream)
{
	REQUIRE_CTX(dev);
	(void)dev;
	pthread_mutex_lock(&g_cap_mu);
	struct gexec *e = obj_get(hGraphExec, OBJ_EXEC);
	gg_CUresult r = e ? exec_stream_check(e, hStream) : GG_CUDA_ERROR_INVALID_VALUE;
	if (!r)
		r = exec_back_unlocked(e);
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

gg_CUresult cuGraphUpload_ptsz(gg_CUgraphExec hGraphExec, gg_CUstream hStream)
{
	return local_cuGraphUpload(hGraphExec, ptsz(hStream));
}

/* A launch runs the exec's memory steps in order. Its allocations must have
 * been freed since the last launch, unless it was instantiated with
 * auto-free-on-launch (then they are freed first). */
gg_CUresult cuGraphLaunch(gg_CUgraphExec hGraphExec, gg_CUstream hStream)
{
	REQUIRE_CTX(dev);
	(void)dev;
	pthread_mutex_lock(&g_cap_mu);
	struct gexec *e = obj_get(hGraphExec, OBJ_EXEC);
	gg_CUresult r = e ? exec_stream_check(e, hStream) : GG_CUDA_ERROR_INVALID_VALUE;
	if (!r && capturing_graph_unlocked(hStream))
		r = GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* child graphs are not simulated */
	if (!r && e->live) {
		if (e->flags & GG_CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
			for (size_t i = 0; i < e->nallocs; i++)
				galloc_set_live_unlocked(e->allocs[i], 0);
		else
			r = GG_CUDA_ERROR_INVALID_VALUE;
	}
	/* an address still live from an older exec of the same graph */
	for (size_t i = 0; !r && i < e->nallocs; i++) {
		struct galloc *a = galloc_at_unlocked(e->allocs[i]->va);
		if (a && a->live && a != e->allocs[i])
			r = GG_CUDA_ERROR_INVALID_VALUE;
	}
	if (!r)
		r = exec_back_unlocked(e);
	for (size_t i = 0; !r && i < e->nops; i++) {
		struct galloc *a = NULL;
		for (size_t k = 0; e->op[i] == GN_ALLOC && k < e->nallocs && !a; k++)
			if (e->allocs[k]->va == e->opva[i])
				a = e->allocs[k];
		if (!a)
			a = galloc_at_unlocked(e->opva[i]);
		if (!a)
			continue; /* a free of memory already freed elsewhere */
		galloc_set_live_unlocked(a, e->op[i] == GN_ALLOC);
		if (e->op[i] == GN_FREE && a->owner != e && a->owner->destroyed && !a->owner->live)
			exec_free_unlocked(a->owner);
	}
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

gg_CUresult cuGraphLaunch_ptsz(gg_CUgraphExec hGraphExec, gg_CUstream hStream)
{
	return local_cuGraphLaunch(hGraphExec, ptsz(hStream));
}

/* Allocations still live outlive the exec (the driver's rule); its reserve
 * stays in the pool until cuDeviceGraphMemTrim. */
gg_CUresult cuGraphExecDestroy(gg_CUgraphExec hGraphExec)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&g_cap_mu);
	struct gexec *e = obj_get(hGraphExec, OBJ_EXEC);
	if (e) {
		sim_handle_delete(e->o.h);
		e->destroyed = 1;
		if (e->from)
			e->from->exec = NULL;
		e->from = NULL;
		if (!e->live)
			exec_free_unlocked(e);
	}
	pthread_mutex_unlock(&g_cap_mu);
	return e ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

/* Give back every page of the pool that no live allocation needs: execs
 * without live allocations lose their claim (they claim again at their next
 * upload / launch). */
gg_CUresult cuDeviceGraphMemTrim(gg_CUdevice device)
{
	REQUIRE_INIT();
	if (!sim_device_valid(device))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&g_cap_mu);
	struct gpool *p = &g_gp[device];
	for (size_t i = 0; i < g_ngallocs; i++) {
		struct gexec *e = g_gallocs[i]->owner;
		if (e->o.dev == device && e->backed && !e->live) {
			e->backed = 0;
			p->claimed -= e->reserve;
		}
	}
	/* what stays: the whole reserve of each exec with live allocations */
	uint64_t keep = p->claimed;
	for (size_t i = 0; i < p->nh; i++)
		sim_vmm_release(p->h[i]);
	p->nh = 0;
	p->reserved = 0;
	gg_CUresult r = GG_CUDA_SUCCESS;
	if (keep) {
		uint64_t h;
		/* the pages just released cover it: this cannot fail for lack of pages */
		if (sim_vmm_create_ctx(device, SIM_CTX_GRAPH, keep, g_noprop, sizeof(g_noprop), &h) == SIM_OK) {
			p->h[p->nh++] = h;
			p->reserved = keep;
		} else {
			r = GG_CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

gg_CUresult cuDeviceGetGraphMemAttribute(gg_CUdevice device, gg_CUgraphMem_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!sim_device_valid(device))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	if (!value)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	const struct gpool *p = &g_gp[device];
	gg_cuuint64_t v = 0;
	switch (attr) {
	case GG_CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
		v = p->used;
		break;
	case GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
		v = p->used_high;
		break;
	case GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
		v = p->reserved;
		break;
	case GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
		v = p->reserved_high;
		break;
	default:
		r = GG_CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&g_cap_mu);
	if (!r)
		*(gg_cuuint64_t *)value = v;
	return r;
}

/* only the high watermarks can be set, and only to 0 (reset to current) */
gg_CUresult cuDeviceSetGraphMemAttribute(gg_CUdevice device, gg_CUgraphMem_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!sim_device_valid(device))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	if (!value || *(gg_cuuint64_t *)value != 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	struct gpool *p = &g_gp[device];
	if (attr == GG_CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
		p->used_high = p->used;
	else if (attr == GG_CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
		p->reserved_high = p->reserved;
	else
		r = GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

/* capture of the default streams is not simulated (README) */
gg_CUresult cuStreamBeginCapture_v2(gg_CUstream hStream, gg_CUstreamCaptureMode mode)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (mode < GG_CU_STREAM_CAPTURE_MODE_GLOBAL || mode > GG_CU_STREAM_CAPTURE_MODE_RELAXED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (default_stream(hStream))
		return GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	struct stream *s = stream_obj(hStream);
	if (!s)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	struct graph *g = obj_new(sizeof(*g), OBJ_GRAPH, s->o.dev);
	if (!g)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	if (s->capturing) {
		r = GG_CUDA_ERROR_ILLEGAL_STATE;
	} else {
		s->capturing = GG_CU_STREAM_CAPTURE_STATUS_ACTIVE;
		s->mode = mode;
		s->cap = g;
		s->cap_id = g_capture_ids++;
	}
	pthread_mutex_unlock(&g_cap_mu);
	if (r)
		obj_free(g);
	return r;
}

gg_CUresult cuStreamBeginCapture_v2_ptsz(gg_CUstream hStream, gg_CUstreamCaptureMode mode)
{
	return local_cuStreamBeginCapture_v2(ptsz(hStream), mode);
}

/* 10000: no mode argument, global mode */
gg_CUresult cuStreamBeginCapture(gg_CUstream hStream)
{
	return local_cuStreamBeginCapture_v2(hStream, GG_CU_STREAM_CAPTURE_MODE_GLOBAL);
}

gg_CUresult cuStreamBeginCapture_ptsz(gg_CUstream hStream)
{
	return local_cuStreamBeginCapture_v2(ptsz(hStream), GG_CU_STREAM_CAPTURE_MODE_GLOBAL);
}

/* 12030: capture into the caller's graph (dependencies are not simulated) */
gg_CUresult cuStreamBeginCaptureToGraph(gg_CUstream hStream, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                                        const gg_CUgraphEdgeData *dependencyData, size_t numDependencies,
                                        gg_CUstreamCaptureMode mode)
{
	REQUIRE_CTX(dev);
	(void)dev;
	(void)dependencies;
	(void)dependencyData;
	if (numDependencies || mode < GG_CU_STREAM_CAPTURE_MODE_GLOBAL || mode > GG_CU_STREAM_CAPTURE_MODE_RELAXED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (default_stream(hStream))
		return GG_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	struct stream *s = stream_obj(hStream);
	if (!s)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = obj_get(hGraph, OBJ_GRAPH);
	if (!g) {
		r = GG_CUDA_ERROR_INVALID_VALUE;
	} else if (s->capturing) {
		r = GG_CUDA_ERROR_ILLEGAL_STATE;
	} else {
		s->capturing = GG_CU_STREAM_CAPTURE_STATUS_ACTIVE;
		s->mode = mode;
		s->cap = g;
		s->cap_id = g_capture_ids++;
	}
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

gg_CUresult cuStreamBeginCaptureToGraph_ptsz(gg_CUstream hStream, gg_CUgraph hGraph, const gg_CUgraphNode *dependencies,
                                             const gg_CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             gg_CUstreamCaptureMode mode)
{
	return local_cuStreamBeginCaptureToGraph(ptsz(hStream), hGraph, dependencies, dependencyData, numDependencies,
	                                         mode);
}

gg_CUresult cuStreamEndCapture(gg_CUstream hStream, gg_CUgraph *phGraph)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!phGraph)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (default_stream(hStream))
		return GG_CUDA_ERROR_ILLEGAL_STATE;
	struct stream *s = stream_obj(hStream);
	if (!s)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_cap_mu);
	if (!s->capturing) {
		r = GG_CUDA_ERROR_ILLEGAL_STATE;
	} else {
		struct graph *g = s->cap;
		if (s->capturing == GG_CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
			graph_destroy_unlocked(g);
			*phGraph = NULL;
			r = GG_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		} else {
			*phGraph = (gg_CUgraph)(uintptr_t)g->o.h;
		}
		s->capturing = GG_CU_STREAM_CAPTURE_STATUS_NONE;
		s->cap = NULL;
	}
	pthread_mutex_unlock(&g_cap_mu);
	return r;
}

gg_CUresult cuStreamEndCapture_ptsz(gg_CUstream hStream, gg_CUgraph *phGraph)
{
	return local_cuStreamEndCapture(ptsz(hStream), phGraph);
}

static gg_CUresult capture_info(gg_CUstream hStream, gg_CUstreamCaptureStatus *status, gg_cuuint64_t *id,
                                gg_CUgraph *graph, const gg_CUgraphNode **deps, const gg_CUgraphEdgeData **edges,
                                size_t *ndeps)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	if (!status)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	struct stream *s = stream_obj(hStream);
	pthread_mutex_lock(&g_cap_mu);
	int st = s ? s->capturing : GG_CU_STREAM_CAPTURE_STATUS_NONE;
	*status = st;
	if (st == GG_CU_STREAM_CAPTURE_STATUS_ACTIVE) {
		if (id)
			*id = s->cap_id;
		if (graph)
			*graph = (gg_CUgraph)(uintptr_t)s->cap->o.h;
	}
	pthread_mutex_unlock(&g_cap_mu);
	/* dependencies are not tracked: every node follows the previous one */
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = 0;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuStreamIsCapturing(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus)
{
	return capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL);
}

gg_CUresult cuStreamIsCapturing_ptsz(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus)
{
	return capture_info(ptsz(hStream), captureStatus, NULL, NULL, NULL, NULL, NULL);
}

gg_CUresult cuStreamGetCaptureInfo(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                   gg_cuuint64_t *id_out)
{
	return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

gg_CUresult cuStreamGetCaptureInfo_ptsz(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                        gg_cuuint64_t *id_out)
{
	return capture_info(ptsz(hStream), captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

gg_CUresult cuStreamGetCaptureInfo_v2(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                      gg_cuuint64_t *id_out, gg_CUgraph *graph_out,
                                      const gg_CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

gg_CUresult cuStreamGetCaptureInfo_v2_ptsz(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                           gg_cuuint64_t *id_out, gg_CUgraph *graph_out,
                                           const gg_CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
	return capture_info(ptsz(hStream), captureStatus_out, id_out, graph_out, dependencies_out, NULL,
	                    numDependencies_out);
}

gg_CUresult cuStreamGetCaptureInfo_v3(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                      gg_cuuint64_t *id_out, gg_CUgraph *graph_out,
                                      const gg_CUgraphNode **dependencies_out, const gg_CUgraphEdgeData **edgeData_out,
                                      size_t *numDependencies_out)
{
	return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
	                    numDependencies_out);
}

gg_CUresult cuStreamGetCaptureInfo_v3_ptsz(gg_CUstream hStream, gg_CUstreamCaptureStatus *captureStatus_out,
                                           gg_cuuint64_t *id_out, gg_CUgraph *graph_out,
                                           const gg_CUgraphNode **dependencies_out,
                                           const gg_CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	return capture_info(ptsz(hStream), captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
	                    numDependencies_out);
}

gg_CUresult cuThreadExchangeStreamCaptureMode(gg_CUstreamCaptureMode *mode)
{
	REQUIRE_INIT();
	if (!mode || *mode < GG_CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > GG_CU_STREAM_CAPTURE_MODE_RELAXED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int old = tls_capmode;
	tls_capmode = *mode;
	*mode = old;
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------ stream-ordered allocation */

static gg_CUmemoryPool pool_ptr(uint64_t h)
{
	return (gg_CUmemoryPool)(uintptr_t)h;
}

static uint64_t pool_h(gg_CUmemoryPool p)
{
	return (uint64_t)(uintptr_t)p;
}

gg_CUresult cuMemAllocFromPoolAsync(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUmemoryPool pool, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int sdev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &sdev);
	if (r)
		return r;
	uint64_t a;
	/* during capture: an alloc node, a virtual address, nothing physical */
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(hStream);
	if (g) {
		struct gnode *n = NULL;
		r = sim_pool_device(pool_h(pool)) < 0 ? GG_CUDA_ERROR_INVALID_VALUE : graph_alloc_node(g, bytesize, &n);
		pthread_mutex_unlock(&g_cap_mu);
		if (!r)
			*dptr = n->va;
		return r;
	}
	pthread_mutex_unlock(&g_cap_mu);
	int rc = sim_pool_alloc_ctx(pool_h(pool), cur_id(), bytesize, &a);
	if (rc == SIM_EHANDLE)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (rc == SIM_OK)
		*dptr = __builtin_expect(atomic_load_explicit(&alloc_quirks, memory_order_relaxed) != 0, 0)
		            ? handed_out(a)
		            : a;
	return to_cu(rc);
}

gg_CUresult cuMemAllocAsync(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	return local_cuMemAllocFromPoolAsync(dptr, bytesize, pool_ptr(sim_pool_current(dev)), hStream);
}

gg_CUresult cuMemFreeAsync(gg_CUdeviceptr dptr, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	if (!dptr)
		return GG_CUDA_SUCCESS;
	/* during capture: a free node, which must name a graph allocation */
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(hStream);
	if (g) {
		r = graph_free_ok_unlocked(g, dptr) && graph_node(g, GN_FREE, dptr, 0) ? GG_CUDA_SUCCESS
		                                                                       : GG_CUDA_ERROR_INVALID_VALUE;
		pthread_mutex_unlock(&g_cap_mu);
		return r;
	}
	pthread_mutex_unlock(&g_cap_mu);
	if (sim_free(dptr, SIM_KMASK_FREEABLE) == SIM_OK || graph_free_addr(dptr))
		return GG_CUDA_SUCCESS;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuMemAllocAsync_ptsz(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUstream hStream)
{
	return local_cuMemAllocAsync(dptr, bytesize, ptsz(hStream));
}

gg_CUresult cuMemAllocFromPoolAsync_ptsz(gg_CUdeviceptr *dptr, size_t bytesize, gg_CUmemoryPool pool,
                                         gg_CUstream hStream)
{
	return local_cuMemAllocFromPoolAsync(dptr, bytesize, pool, ptsz(hStream));
}

gg_CUresult cuMemFreeAsync_ptsz(gg_CUdeviceptr dptr, gg_CUstream hStream)
{
	return local_cuMemFreeAsync(dptr, ptsz(hStream));
}

gg_CUresult cuDeviceGetDefaultMemPool(gg_CUmemoryPool *pool_out, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pool_out, dev);
	*pool_out = pool_ptr(sim_pool_default(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetMemPool(gg_CUmemoryPool *pool, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(pool, dev);
	*pool = pool_ptr(sim_pool_current(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceSetMemPool(gg_CUdevice dev, gg_CUmemoryPool pool)
{
	REQUIRE_INIT();
	return to_cu(sim_pool_set_current(dev, pool_h(pool)));
}

gg_CUresult cuMemPoolCreate(gg_CUmemoryPool *pool, const gg_CUmemPoolProps *poolProps)
{
	REQUIRE_INIT();
	int dev;
	if (!pool || !poolProps || poolProps->allocType != GG_CU_MEM_ALLOCATION_TYPE_PINNED)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = check_location(&poolProps->location, &dev);
	if (r)
		return r;
	uint64_t h;
	int rc = sim_pool_create_ctx(dev, cur_id(), &h);
	if (rc == SIM_OK)
		*pool = pool_ptr(h);
	return to_cu(rc);
}

gg_CUresult cuMemPoolDestroy(gg_CUmemoryPool pool)
{
	REQUIRE_INIT();
	return sim_pool_destroy(pool_h(pool)) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemPoolTrimTo(gg_CUmemoryPool pool, size_t minBytesToKeep)
{
	REQUIRE_INIT();
	return sim_pool_trim(pool_h(pool), minBytesToKeep) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

/* attributes 1..3 are int, 4..8 cuuint64_t */
gg_CUresult cuMemPoolSetAttribute(gg_CUmemoryPool pool, gg_CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!value || attr < 1 || attr > GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH ||
	    attr == GG_CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT || attr == GG_CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t v = attr <= 3 ? (uint64_t) * (int *)value : *(gg_cuuint64_t *)value;
	return sim_pool_set_attr(pool_h(pool), attr, v) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuMemPoolGetAttribute(gg_CUmemoryPool pool, gg_CUmemPool_attribute attr, void *value)
{
	REQUIRE_INIT();
	if (!value || attr < 1 || attr > GG_CU_MEMPOOL_ATTR_USED_MEM_HIGH)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t v;
	if (sim_pool_get_attr(pool_h(pool), attr, &v))
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (attr <= 3)
		*(int *)value = (int)v;
	else
		*(gg_cuuint64_t *)value = v;
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------- VMM retain, IPC, sharing */

gg_CUresult cuMemRetainAllocationHandle(gg_CUmemGenericAllocationHandle *handle, void *addr)
{
	REQUIRE_INIT();
	if (!handle)
		return GG_CUDA_ERROR_INVALID_VALUE;
	uint64_t h;
	if (sim_vmm_retain((uint64_t)(uintptr_t)addr, &h))
		return GG_CUDA_ERROR_INVALID_VALUE;
	*handle = h;
	return GG_CUDA_SUCCESS;
}

/* Shareable handles cross processes; one simulated process has no one to
 * share with, so the handle types are not supported (what the driver says
 * for a handle type the allocation was not created with). */
gg_CUresult cuMemExportToShareableHandle(void *shareableHandle, gg_CUmemGenericAllocationHandle handle,
                                         gg_CUmemAllocationHandleType handleType, unsigned long long flags)
{
	REQUIRE_INIT();
	gg_CUmemAllocationProp prop;
	if (!shareableHandle || flags || sim_vmm_prop(handle, &prop, sizeof(prop)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	(void)handleType;
	return GG_CUDA_ERROR_NOT_SUPPORTED;
}

gg_CUresult cuMemImportFromShareableHandle(gg_CUmemGenericAllocationHandle *handle, void *osHandle,
                                           gg_CUmemAllocationHandleType shHandleType)
{
	REQUIRE_INIT();
	if (!handle)
		return GG_CUDA_ERROR_INVALID_VALUE;
	(void)osHandle;
	(void)shHandleType;
	return GG_CUDA_ERROR_NOT_SUPPORTED;
}

/* Legacy IPC: a handle names an allocation's base; opening one in the
 * process that made it is the driver's CUDA_ERROR_INVALID_CONTEXT, and there
 * is no other process here. */
#define IPC_MAGIC 0x47475349504331ull /* "GGSIPC1" */
gg_CUresult cuIpcGetMemHandle(gg_CUipcMemHandle *pHandle, gg_CUdeviceptr dptr)
{
	REQUIRE_CTX(dev);
	(void)dev;
	uint64_t base, size;
	if (!pHandle || sim_addr_range(dptr, &base, &size) || base != dptr)
		return GG_CUDA_ERROR_INVALID_VALUE;
	memset(pHandle, 0, sizeof(*pHandle));
	uint64_t w[3] = {IPC_MAGIC, (uint64_t)getpid(), base};
	memcpy(pHandle->reserved, w, sizeof(w));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuIpcOpenMemHandle_v2(gg_CUdeviceptr *pdptr, gg_CUipcMemHandle handle, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	(void)dev;
	uint64_t w[3];
	memcpy(w, handle.reserved, sizeof(w));
	if (!pdptr || Flags > 1 || w[0] != IPC_MAGIC)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return GG_CUDA_ERROR_INVALID_CONTEXT;
}

gg_CUresult cuIpcOpenMemHandle(gg_CUdeviceptr *pdptr, gg_CUipcMemHandle handle, unsigned int Flags)
{
	return local_cuIpcOpenMemHandle_v2(pdptr, handle, Flags);
}

gg_CUresult cuIpcCloseMemHandle(gg_CUdeviceptr dptr)
{
	REQUIRE_CTX(dev);
	(void)dev;
	(void)dptr;
	return GG_CUDA_ERROR_INVALID_VALUE; /* nothing was opened */
}

/* -------------------------------------------------- host memory registration */

struct hreg {
	uintptr_t p;
	size_t size;
	unsigned int flags;
};
static pthread_mutex_t g_hreg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hreg *g_hreg;
static size_t g_nhreg, g_caphreg;

gg_CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!p || !bytesize ||
	    (Flags & ~(unsigned)(GG_CU_MEMHOSTREGISTER_PORTABLE | GG_CU_MEMHOSTREGISTER_DEVICEMAP |
	                         GG_CU_MEMHOSTREGISTER_IOMEMORY | GG_CU_MEMHOSTREGISTER_READ_ONLY)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (Flags & GG_CU_MEMHOSTREGISTER_IOMEMORY) /* no I/O memory here */
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	uintptr_t a = (uintptr_t)p;
	if (a + bytesize < a)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_hreg_mu);
	for (size_t i = 0; i < g_nhreg && !r; i++)
		if (a < g_hreg[i].p + g_hreg[i].size && g_hreg[i].p < a + bytesize)
			r = GG_CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (!r && g_nhreg == g_caphreg) {
		size_t cap = g_caphreg ? g_caphreg * 2 : 16;
		struct hreg *n = realloc(g_hreg, cap * sizeof(*n));
		if (!n)
			r = GG_CUDA_ERROR_OUT_OF_MEMORY;
		else {
			g_hreg = n;
			g_caphreg = cap;
		}
	}
	if (!r)
		g_hreg[g_nhreg++] = (struct hreg){a, bytesize, Flags};
	pthread_mutex_unlock(&g_hreg_mu);
	return r;
}

gg_CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	return local_cuMemHostRegister_v2(p, bytesize, Flags);
}

gg_CUresult cuMemHostUnregister(void *p)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!p)
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUresult r = GG_CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	pthread_mutex_lock(&g_hreg_mu);
	for (size_t i = 0; i < g_nhreg; i++)
		if (g_hreg[i].p == (uintptr_t)p) {
			g_hreg[i] = g_hreg[--g_nhreg];
			r = GG_CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&g_hreg_mu);
	return r;
}

/* pinned (sim_host_alloc) or registered host memory containing [p, p+n) */
static int host_registered(uintptr_t p, size_t n)
{
	int ok = 0;
	pthread_mutex_lock(&g_hreg_mu);
	for (size_t i = 0; i < g_nhreg && !ok; i++)
		ok = p >= g_hreg[i].p && p - g_hreg[i].p + n <= g_hreg[i].size;
	pthread_mutex_unlock(&g_hreg_mu);
	return ok;
}

/* unified addressing: a registered or pinned host page's device address is
 * the host address */
gg_CUresult cuMemHostGetDevicePointer_v2(gg_CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pdptr || !p || Flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!host_registered((uintptr_t)p, 1) && !sim_host_known(p))
		return GG_CUDA_ERROR_INVALID_VALUE;
	*pdptr = (gg_CUdeviceptr)(uintptr_t)p;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pFlags || !p)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_host_known(p))
		return GG_CUDA_ERROR_INVALID_VALUE;
	*pFlags = GG_CU_MEMHOSTALLOC_DEVICEMAP;
	return GG_CUDA_SUCCESS;
}

/* ---------------------------------------------------------- memcpy / memset */

/* Nothing is copied: device memory is not backed. The calls check what the
 * driver checks (a device range must lie inside one allocation or mapping)
 * and, on a capturing stream, become a graph node. */
static int dev_range_ok(uint64_t a, size_t n)
{
	uint64_t base, size;
	if (!a)
		return 0;
	if (!n)
		return 1;
	if (sim_addr_range(a, &base, &size) == SIM_OK || sim_va_range(a, &base, &size, NULL) == SIM_OK)
		return a - base + n <= size;
	if (graph_va_known(a, n))
		return 1;
	return host_registered((uintptr_t)a, n) || sim_host_known((void *)(uintptr_t)a);
}

/* a unified-address argument: device ranges are checked, host ones need only
 * be non-NULL */
static int any_range_ok(uint64_t a, size_t n)
{
	if (!a)
		return n == 0;
	if (sim_addr_device(a) >= 0 || (a >= SIM_VA_BASE && a < SIM_VA_END))
		return dev_range_ok(a, n);
	return 1;
}

static gg_CUresult op_on(gg_CUstream s, int ok, int ntype)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(s, ctxdev, &dev);
	if (r)
		return r;
	if (!ok)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_cap_mu);
	struct graph *g = capturing_graph_unlocked(s);
	if (g)
		graph_add_other(g, ntype);
	pthread_mutex_unlock(&g_cap_mu);
	return GG_CUDA_SUCCESS;
}

static gg_CUresult copy_on(gg_CUstream s, int ok)
{
	return op_on(s, ok, NT_MEMCPY);
}

static gg_CUresult set_on(gg_CUstream s, int ok)
{
	return op_on(s, ok, NT_MEMSET);
}

#define SYNC_STREAM STREAM_LEGACY

/* A 1-D copy's four entry points: name<ver> (synchronous, on the legacy
 * stream), name<ver>_ptds, name Async<ver> and its _ptsz, each as
 * good as ok (an expression of dst, src and ByteCount). */
#define SIM_MEMCPY_1D(name, ver, Tdst, Tsrc, ok)                                                       \
	gg_CUresult name##ver(Tdst dst, Tsrc src, size_t ByteCount)                                    \
	{                                                                                              \
		return copy_on(SYNC_STREAM, ok);                                                       \
	}                                                                                              \
	gg_CUresult name##ver##_ptds(Tdst dst, Tsrc src, size_t ByteCount)                             \
	{                                                                                              \
		return copy_on(STREAM_PER_THREAD, ok);                                                 \
	}                                                                                              \
	gg_CUresult name##Async##ver(Tdst dst, Tsrc src, size_t ByteCount, gg_CUstream hStream)        \
	{                                                                                              \
		return copy_on(hStream, ok);                                                           \
	}                                                                                              \
	gg_CUresult name##Async##ver##_ptsz(Tdst dst, Tsrc src, size_t ByteCount, gg_CUstream hStream) \
	{                                                                                              \
		return copy_on(ptsz(hStream), ok);                                                     \
	}
SIM_MEMCPY_1D(cuMemcpy, , gg_CUdeviceptr, gg_CUdeviceptr, any_range_ok(dst, ByteCount) && any_range_ok(src, ByteCount))
gg_CUresult cuMemcpyPeer(gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                         size_t ByteCount)
{
	return copy_on(SYNC_STREAM, ctx_valid(dstCtx) && ctx_valid(srcCtx) && dev_range_ok(dst, ByteCount) &&
	                                dev_range_ok(src, ByteCount));
}
gg_CUresult cuMemcpyPeer_ptds(gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                              size_t ByteCount)
{
	return copy_on(STREAM_PER_THREAD, ctx_valid(dstCtx) && ctx_valid(srcCtx) && dev_range_ok(dst, ByteCount) &&
	                                      dev_range_ok(src, ByteCount));
}
gg_CUresult cuMemcpyPeerAsync(gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                              size_t ByteCount, gg_CUstream hStream)
{
	return copy_on(hStream, ctx_valid(dstCtx) && ctx_valid(srcCtx) && dev_range_ok(dst, ByteCount) &&
	                            dev_range_ok(src, ByteCount));
}
gg_CUresult cuMemcpyPeerAsync_ptsz(gg_CUdeviceptr dst, gg_CUcontext dstCtx, gg_CUdeviceptr src, gg_CUcontext srcCtx,
                                   size_t ByteCount, gg_CUstream hStream)
{
	return local_cuMemcpyPeerAsync(dst, dstCtx, src, srcCtx, ByteCount, ptsz(hStream));
}
SIM_MEMCPY_1D(cuMemcpyHtoD, _v2, gg_CUdeviceptr, const void *, (src || !ByteCount) && dev_range_ok(dst, ByteCount))
SIM_MEMCPY_1D(cuMemcpyDtoH, _v2, void *, gg_CUdeviceptr, (dst || !ByteCount) && dev_range_ok(src, ByteCount))
SIM_MEMCPY_1D(cuMemcpyDtoD, _v2, gg_CUdeviceptr, gg_CUdeviceptr,
              dev_range_ok(dst, ByteCount) && dev_range_ok(src, ByteCount))

/* CUDA_MEMCPY2D (v2) as cuda.h lays it out; CUmemorytype host 1, device 2,
 * array 3, unified 4. Array copies are not simulated. */
struct memcpy2d {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	gg_CUdeviceptr srcDevice;
	gg_CUarray srcArray;
	size_t srcPitch, dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	gg_CUdeviceptr dstDevice;
	gg_CUarray dstArray;
	size_t dstPitch, WidthInBytes, Height;
};
_Static_assert(sizeof(struct memcpy2d) == 128, "CUDA_MEMCPY2D layout");

static gg_CUresult side2d_ok(int type, const void *host, gg_CUdeviceptr dev, size_t x, size_t y, size_t pitch, size_t w,
                             size_t h)
{
	size_t span, off;
	if (h > 1 && pitch < x + w)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (__builtin_mul_overflow(h ? h - 1 : 0, pitch, &span) || __builtin_add_overflow(span, w, &span) ||
	    __builtin_mul_overflow(y, pitch, &off) || __builtin_add_overflow(off, x, &off))
		return GG_CUDA_ERROR_INVALID_VALUE;
	switch (type) {
	case 1:
		return host || !span ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
	case 2:
		return dev_range_ok(dev + off, span) ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
	case 4:
		return any_range_ok(dev + off, span) ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
	case 3:
		return GG_CUDA_ERROR_NOT_SUPPORTED;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
}

static gg_CUresult copy2d(const void *pCopy, gg_CUstream s)
{
	if (!pCopy)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct memcpy2d c;
	memcpy(&c, pCopy, sizeof(c));
	gg_CUresult r = side2d_ok(c.srcMemoryType, c.srcHost, c.srcDevice, c.srcXInBytes, c.srcY, c.srcPitch,
	                          c.WidthInBytes, c.Height);
	if (!r)
		r = side2d_ok(c.dstMemoryType, c.dstHost, c.dstDevice, c.dstXInBytes, c.dstY, c.dstPitch,
		              c.WidthInBytes, c.Height);
	if (r == GG_CUDA_ERROR_NOT_SUPPORTED) {
		REQUIRE_INIT();
		return r;
	}
	return copy_on(s, r == GG_CUDA_SUCCESS);
}

gg_CUresult cuMemcpy2D_v2(const void *pCopy)
{
	return copy2d(pCopy, SYNC_STREAM);
}
gg_CUresult cuMemcpy2D_v2_ptds(const void *pCopy)
{
	return copy2d(pCopy, STREAM_PER_THREAD);
}
gg_CUresult cuMemcpy2DUnaligned_v2(const void *pCopy)
{
	return copy2d(pCopy, SYNC_STREAM);
}
gg_CUresult cuMemcpy2DUnaligned_v2_ptds(const void *pCopy)
{
	return copy2d(pCopy, STREAM_PER_THREAD);
}
gg_CUresult cuMemcpy2DAsync_v2(const void *pCopy, gg_CUstream hStream)
{
	return copy2d(pCopy, hStream);
}
gg_CUresult cuMemcpy2DAsync_v2_ptsz(const void *pCopy, gg_CUstream hStream)
{
	return copy2d(pCopy, ptsz(hStream));
}

/* element counts; the range is N elements of the given size */
static int set_ok(gg_CUdeviceptr d, size_t n, size_t elem)
{
	size_t bytes;
	return !__builtin_mul_overflow(n, elem, &bytes) && (d % elem) == 0 && dev_range_ok(d, bytes);
}

/* A 1-D memset's four entry points, D<bits> of <T> values <elem> bytes each:
 * the synchronous _v2 (on the legacy stream), its _ptds, Async and
 * Async_ptsz. Memory holds no values: the value is not used. */
#define SIM_MEMSET_1D(bits, T, elem)                                                                              \
	gg_CUresult cuMemsetD##bits##_v2(gg_CUdeviceptr dstDevice, T value, size_t N)                             \
	{                                                                                                         \
		(void)value;                                                                                      \
		return set_on(SYNC_STREAM, set_ok(dstDevice, N, elem));                                           \
	}                                                                                                         \
	gg_CUresult cuMemsetD##bits##_v2_ptds(gg_CUdeviceptr dstDevice, T value, size_t N)                        \
	{                                                                                                         \
		(void)value;                                                                                      \
		return set_on(STREAM_PER_THREAD, set_ok(dstDevice, N, elem));                                     \
	}                                                                                                         \
	gg_CUresult cuMemsetD##bits##Async(gg_CUdeviceptr dstDevice, T value, size_t N, gg_CUstream hStream)      \
	{                                                                                                         \
		(void)value;                                                                                      \
		return set_on(hStream, set_ok(dstDevice, N, elem));                                               \
	}                                                                                                         \
	gg_CUresult cuMemsetD##bits##Async_ptsz(gg_CUdeviceptr dstDevice, T value, size_t N, gg_CUstream hStream) \
	{                                                                                                         \
		(void)value;                                                                                      \
		return set_on(ptsz(hStream), set_ok(dstDevice, N, elem));                                         \
	}
SIM_MEMSET_1D(8, unsigned char, 1)
SIM_MEMSET_1D(32, unsigned int, 4)

static int set2d_ok(gg_CUdeviceptr d, size_t pitch, size_t w, size_t h)
{
	size_t bytes;
	if (!w || !h)
		return d != 0;
	if (pitch < w || __builtin_mul_overflow(pitch, h - 1, &bytes) || __builtin_add_overflow(bytes, w, &bytes))
		return 0;
	return dev_range_ok(d, bytes);
}
gg_CUresult cuMemsetD2D8_v2(gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)
{
	(void)uc;
	return set_on(SYNC_STREAM, set2d_ok(dstDevice, dstPitch, Width, Height));
}
gg_CUresult cuMemsetD2D8_v2_ptds(gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                                 size_t Height)
{
	(void)uc;
	return set_on(STREAM_PER_THREAD, set2d_ok(dstDevice, dstPitch, Width, Height));
}
gg_CUresult cuMemsetD2D8Async(gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height,
                              gg_CUstream hStream)
{
	(void)uc;
	return set_on(hStream, set2d_ok(dstDevice, dstPitch, Width, Height));
}
gg_CUresult cuMemsetD2D8Async_ptsz(gg_CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                                   size_t Height, gg_CUstream hStream)
{
	(void)uc;
	return set_on(ptsz(hStream), set2d_ok(dstDevice, dstPitch, Width, Height));
}

/* ------------------------------------------- stream memory operations, prefetch */

/* Stream memory operations (v1 at 8000 and _v2 at 11070 share these
 * layouts; the device reports CAN_USE_STREAM_MEM_OPS_V1). Nothing runs and
 * memory holds no values, so a wait is satisfied at once and a write writes
 * nothing; the operands are checked as the driver checks them (a 4- or
 * 8-byte aligned word of device or registered host memory, known flags),
 * and on a capturing stream the call becomes a batch-memop node. */
#define MEMOP_WAIT_VALUE_32 1
#define MEMOP_WRITE_VALUE_32 2
#define MEMOP_FLUSH_REMOTE_WRITES 3
#define MEMOP_WAIT_VALUE_64 4
#define MEMOP_WRITE_VALUE_64 5
#define MEMOP_BARRIER 6
#define MEMOP_MAX_COUNT 256         /* operations per cuStreamBatchMemOp */
#define WAIT_VALUE_FLUSH (1u << 30) /* CU_STREAM_WAIT_VALUE_FLUSH */

/* CUstreamBatchMemOpParams: a 48-byte union led by the operation */
struct memop {
	uint32_t operation, flags4; /* flags4: flush and barrier flags */
	uint64_t address, value;    /* wait / write */
	uint32_t flags, pad0;
	uint64_t alias, pad1;
};
_Static_assert(sizeof(struct memop) == 48, "CUstreamBatchMemOpParams is 48 bytes");

static int memop_word_ok(uint64_t addr, size_t n)
{
	return addr % n == 0 && dev_range_ok(addr, n);
}

/* wait flags: a condition (GEQ, EQ, AND, NOR) and FLUSH; write flags: NO_MEMORY_BARRIER */
static int memop_ok(const struct memop *m)
{
	switch (m->operation) {
	case MEMOP_WAIT_VALUE_32:
	case MEMOP_WAIT_VALUE_64:
		return (m->flags & ~(3u | WAIT_VALUE_FLUSH)) == 0 &&
		       memop_word_ok(m->address, m->operation == MEMOP_WAIT_VALUE_32 ? 4 : 8);
	case MEMOP_WRITE_VALUE_32:
	case MEMOP_WRITE_VALUE_64:
		return (m->flags & ~1u) == 0 && memop_word_ok(m->address, m->operation == MEMOP_WRITE_VALUE_32 ? 4 : 8);
	case MEMOP_FLUSH_REMOTE_WRITES:
		return m->flags4 == 0;
	case MEMOP_BARRIER:
		return m->flags4 <= 1; /* CU_STREAM_MEMORY_BARRIER_TYPE_SYS, _GPU */
	default:
		return 0;
	}
}

gg_CUresult cuStreamWaitValue32(gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags)
{
	struct memop m = {.operation = MEMOP_WAIT_VALUE_32, .address = addr, .value = value, .flags = flags};
	return op_on(stream, memop_ok(&m), NT_BATCH_MEM_OP);
}

gg_CUresult cuStreamWaitValue32_ptsz(gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags)
{
	return local_cuStreamWaitValue32(ptsz(stream), addr, value, flags);
}

gg_CUresult cuStreamWaitValue32_v2(gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags)
{
	return local_cuStreamWaitValue32(stream, addr, value, flags);
}

gg_CUresult cuStreamWaitValue32_v2_ptsz(gg_CUstream stream, gg_CUdeviceptr addr, uint32_t value, unsigned int flags)
{
	return local_cuStreamWaitValue32(ptsz(stream), addr, value, flags);
}

gg_CUresult cuStreamBatchMemOp(gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags)
{
	int ok = count >= 1 && count <= MEMOP_MAX_COUNT && paramArray && flags == 0;
	for (unsigned int i = 0; ok && i < count; i++) {
		struct memop m;
		memcpy(&m, (const char *)paramArray + (size_t)i * sizeof(m), sizeof(m));
		ok = memop_ok(&m);
	}
	return op_on(stream, ok, NT_BATCH_MEM_OP);
}

gg_CUresult cuStreamBatchMemOp_ptsz(gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags)
{
	return local_cuStreamBatchMemOp(ptsz(stream), count, paramArray, flags);
}

gg_CUresult cuStreamBatchMemOp_v2(gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags)
{
	return local_cuStreamBatchMemOp(stream, count, paramArray, flags);
}

gg_CUresult cuStreamBatchMemOp_v2_ptsz(gg_CUstream stream, unsigned int count, void *paramArray, unsigned int flags)
{
	return local_cuStreamBatchMemOp(ptsz(stream), count, paramArray, flags);
}

/* Prefetch moves nothing (managed memory is charged to one device and never
 * migrates); the range must lie inside one managed allocation, the
 * destination be a device or the host. Captured, it is a memcpy-like node. */
#define SIM_CU_DEVICE_CPU (-1)

static gg_CUresult prefetch(gg_CUdeviceptr devPtr, size_t count, int dst_ok, gg_CUstream hStream)
{
	REQUIRE_CTX(ctxdev);
	int dev;
	gg_CUresult r = stream_device(hStream, ctxdev, &dev);
	if (r)
		return r;
	if (!dst_ok)
		return GG_CUDA_ERROR_INVALID_DEVICE;
	uint64_t base, size;
	int kind = 0;
	int ok = devPtr && count && sim_addr_kind(devPtr, &base, &size, &kind) == SIM_OK && kind == SIM_KIND_MANAGED &&
	         devPtr - base + count <= size;
	return op_on(hStream, ok, NT_MEMCPY);
}

gg_CUresult cuMemPrefetchAsync(gg_CUdeviceptr devPtr, size_t count, gg_CUdevice dstDevice, gg_CUstream hStream)
{
	return prefetch(devPtr, count, dstDevice == SIM_CU_DEVICE_CPU || sim_device_valid(dstDevice), hStream);
}

gg_CUresult cuMemPrefetchAsync_ptsz(gg_CUdeviceptr devPtr, size_t count, gg_CUdevice dstDevice, gg_CUstream hStream)
{
	return local_cuMemPrefetchAsync(devPtr, count, dstDevice, ptsz(hStream));
}

/* 12020: a location instead of a device, and flags (none defined) */
gg_CUresult cuMemPrefetchAsync_v2(gg_CUdeviceptr devPtr, size_t count, gg_CUmemLocation location, unsigned int flags,
                                  gg_CUstream hStream)
{
	if (flags)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int t = (int)location.type;
	int ok = (t == GG_CU_MEM_LOCATION_TYPE_DEVICE && sim_device_valid(location.id)) ||
	         t == GG_CU_MEM_LOCATION_TYPE_HOST || t == GG_CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
	         (t == GG_CU_MEM_LOCATION_TYPE_HOST_NUMA && location.id == 0);
	return prefetch(devPtr, count, ok, hStream);
}

gg_CUresult cuMemPrefetchAsync_v2_ptsz(gg_CUdeviceptr devPtr, size_t count, gg_CUmemLocation location,
                                       unsigned int flags, gg_CUstream hStream)
{
	return local_cuMemPrefetchAsync_v2(devPtr, count, location, flags, ptsz(hStream));
}

/* ------------------------------------------------------ pointer attributes */

#define PA_CONTEXT 1
#define PA_MEMORY_TYPE 2
#define PA_DEVICE_POINTER 3
#define PA_HOST_POINTER 4
#define PA_SYNC_MEMOPS 6
#define PA_BUFFER_ID 7
#define PA_IS_MANAGED 8
#define PA_DEVICE_ORDINAL 9
#define PA_IS_LEGACY_CUDA_IPC_CAPABLE 10
#define PA_RANGE_START_ADDR 11
#define PA_RANGE_SIZE 12
#define PA_MAPPED 13
#define PA_ALLOWED_HANDLE_TYPES 14
#define PA_IS_GPU_DIRECT_RDMA_CAPABLE 15
#define PA_ACCESS_FLAGS 16
#define PA_MEMPOOL_HANDLE 17
#define MEMTYPE_HOST 1
#define MEMTYPE_DEVICE 2

struct ptrinfo {
	int known, dev, host, managed, vmm;
	uint64_t base, size;
};

static struct ptrinfo ptr_info(uint64_t p)
{
	struct ptrinfo i = {0};
	uint64_t b, s;
	int dev;
	if (sim_addr_range(p, &b, &s) == SIM_OK) {
		i = (struct ptrinfo){1, sim_addr_device(p), 0, 0, 0, b, s};
	} else if (sim_va_range(p, &b, &s, &dev) == SIM_OK) {
		i = (struct ptrinfo){1, dev, 0, 0, 1, b, s};
	} else if (graph_addr_range(p, &b, &s)) {
		i = (struct ptrinfo){1, 0, 0, 0, 0, b, s};
	} else if (sim_host_known((void *)(uintptr_t)p) || host_registered((uintptr_t)p, 1)) {
		i = (struct ptrinfo){1, cur_ctx() ? cur_ctx()->dev : 0, 1, 0, 0, p, 1};
	}
	return i;
}

static gg_CUresult ptr_attr(void *data, int attr, uint64_t p, const struct ptrinfo *i)
{
	switch (attr) {
	case PA_CONTEXT:
		*(gg_CUcontext *)data = i->vmm ? NULL : &g_ctx[i->dev];
		return GG_CUDA_SUCCESS;
	case PA_MEMORY_TYPE:
		*(unsigned int *)data = i->host ? MEMTYPE_HOST : MEMTYPE_DEVICE;
		return GG_CUDA_SUCCESS;
	case PA_DEVICE_POINTER:
	case PA_HOST_POINTER:
		if (attr == PA_HOST_POINTER && !i->host)
			return GG_CUDA_ERROR_INVALID_VALUE;
		*(void **)data = (void *)(uintptr_t)p;
		return GG_CUDA_SUCCESS;
	case PA_SYNC_MEMOPS:
	case PA_IS_MANAGED:
	case PA_MAPPED:
		*(int *)data = attr == PA_MAPPED ? 1 : attr == PA_IS_MANAGED ? i->managed : 0;
		return GG_CUDA_SUCCESS;
	case PA_BUFFER_ID:
		*(unsigned long long *)data = i->base;
		return GG_CUDA_SUCCESS;
	case PA_DEVICE_ORDINAL:
		*(int *)data = i->dev;
		return GG_CUDA_SUCCESS;
	case PA_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(int *)data = !i->host && !i->vmm;
		return GG_CUDA_SUCCESS;
	case PA_RANGE_START_ADDR:
		*(void **)data = (void *)(uintptr_t)i->base;
		return GG_CUDA_SUCCESS;
	case PA_RANGE_SIZE:
		*(size_t *)data = i->size;
		return GG_CUDA_SUCCESS;
	case PA_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = 0;
		return GG_CUDA_SUCCESS;
	case PA_IS_GPU_DIRECT_RDMA_CAPABLE:
		*(int *)data = !i->host;
		return GG_CUDA_SUCCESS;
	case PA_ACCESS_FLAGS:
		*(unsigned long long *)data = GG_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		return GG_CUDA_SUCCESS;
	case PA_MEMPOOL_HANDLE:
		/* the pool of a stream-ordered block, else NULL */
		*(gg_CUmemoryPool *)data = i->host ? NULL : (gg_CUmemoryPool)(uintptr_t)sim_addr_pool(p);
		return GG_CUDA_SUCCESS;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
}

gg_CUresult cuPointerGetAttribute(void *data, gg_CUpointer_attribute attribute, gg_CUdeviceptr ptr)
{
	REQUIRE_INIT();
	if (!data || !ptr)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct ptrinfo i = ptr_info(ptr);
	if (!i.known)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return ptr_attr(data, attribute, ptr, &i);
}

/* unlike the single query, unknown pointers succeed with zeros (the driver's
 * documented behaviour, which cudaPointerGetAttributes builds on) */
gg_CUresult cuPointerGetAttributes(unsigned int numAttributes, gg_CUpointer_attribute *attributes, void **data,
                                   gg_CUdeviceptr ptr)
{
	REQUIRE_INIT();
	if (!attributes || !data || !numAttributes)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct ptrinfo i = ptr_info(ptr);
	for (unsigned k = 0; k < numAttributes; k++) {
		if (!data[k])
			continue;
		if (!i.known) {
			switch (attributes[k]) {
			case PA_CONTEXT:
			case PA_DEVICE_POINTER:
			case PA_HOST_POINTER:
			case PA_RANGE_START_ADDR:
			case PA_MEMPOOL_HANDLE:
				*(void **)data[k] = NULL;
				break;
			case PA_RANGE_SIZE:
			case PA_BUFFER_ID:
			case PA_ALLOWED_HANDLE_TYPES:
			case PA_ACCESS_FLAGS:
				*(unsigned long long *)data[k] = 0;
				break;
			case PA_DEVICE_ORDINAL:
				*(int *)data[k] = -2;
				break;
			default:
				*(int *)data[k] = 0;
			}
			continue;
		}
		gg_CUresult r = ptr_attr(data[k], attributes[k], ptr, &i);
		if (r == GG_CUDA_ERROR_INVALID_VALUE && attributes[k] == PA_HOST_POINTER)
			*(void **)data[k] = NULL;
		else if (r)
			return r;
	}
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------------- footprint */

/* What the driver holds for a process beyond its allocations
 * (tests/sim/README.md, "The footprint"): each context's cost, module images,
 * local memory grown past the context's own, the device malloc heap and the
 * printf FIFO. On by default on a shared card (SIMGPU_SHARED), where NVML
 * shows it; SIMGPU_FOOTPRINT=1 turns it on for a card of one process.
 * SIMGPU_CONTEXT alone charges contexts either way. */
#define SIM_STACK_DEFAULT 1024ull         /* CU_LIMIT_STACK_SIZE's default, held by every context */
#define SIM_STACK_ALIGN 16ull             /* a thread's stack is kept in 16-byte units */
#define SIM_CONTEXT_SHARED (526ull << 20) /* a bare context on an H200 (REAL-CUDA.md §7) */
#define SIM_MODULE_ALIGN 4096ull

static pthread_once_t g_fp_once = PTHREAD_ONCE_INIT;
static int g_fp_on;         /* modules, local memory, heap and FIFO are charged */
static uint64_t g_ctx_cost; /* SIMGPU_CONTEXT */
static long g_ctx_delay_ms; /* SIMGPU_CONTEXT_DELAY_MS */
static double g_mod_factor; /* SIMGPU_MODULE_FACTOR */
static int g_lazy;          /* CUDA_MODULE_LOADING is not EAGER */
/* the footprint fields of every context and library; taken before simcore's
 * device locks (which sim_charge takes) and never inside them */
static pthread_mutex_t g_fp_mu = PTHREAD_MUTEX_INITIALIZER;

static void fp_env(void)
{
	int shared = sim_card_shared();
	const char *e = getenv("SIMGPU_FOOTPRINT");
	g_fp_on = shared;
	if (e && *e) {
		if (!strcmp(e, "0") || !strcmp(e, "1"))
			g_fp_on = e[0] == '1';
		else
			fprintf(stderr, "simgpu: ignoring invalid SIMGPU_FOOTPRINT=%s (expected 0 or 1)\n", e);
	}
	g_ctx_cost = shared ? SIM_CONTEXT_SHARED : 0;
	e = getenv("SIMGPU_CONTEXT");
	if (e && *e && sim_parse_quantity(e, &g_ctx_cost)) {
		fprintf(stderr,
		        "simgpu: ignoring invalid SIMGPU_CONTEXT=%s (expected a quantity: bytes, or with Ki Mi Gi Ti "
		        "or k M G T, e.g. 526Mi)\n",
		        e);
		g_ctx_cost = shared ? SIM_CONTEXT_SHARED : 0;
	}
	g_mod_factor = 1.0;
	e = getenv("SIMGPU_MODULE_FACTOR");
	if (e && *e) {
		char *end;
		double v = strtod(e, &end);
		if (*end || !(v >= 0 && v <= 1000))
			fprintf(stderr,
			        "simgpu: ignoring invalid SIMGPU_MODULE_FACTOR=%s (expected a number, 0..1000)\n", e);
		else
			g_mod_factor = v;
	}
	e = getenv("CUDA_MODULE_LOADING");
	g_lazy = !(e && !strcmp(e, "EAGER"));
	e = getenv("SIMGPU_CONTEXT_DELAY_MS");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end || v < 0 || v > 60000)
			fprintf(
			    stderr,
			    "simgpu: ignoring invalid SIMGPU_CONTEXT_DELAY_MS=%s (expected milliseconds, 0..60000)\n",
			    e);
		else
			g_ctx_delay_ms = v;
	}
}

/* SIMGPU_CONTEXT_DELAY_MS: a context's creation takes this long before
 * the card shows it, and as long again after, so that processes started
 * together make their contexts "at the same moment" (each one's NVML
 * listing before its own context lacks the others, and the one after has
 * them all), as pods of one rollout on a shared card do. */
static void ctx_delay(void)
{
	struct timespec ts = {g_ctx_delay_ms / 1000, (g_ctx_delay_ms % 1000) * 1000000L};
	if (g_ctx_delay_ms > 0)
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
}

static void fp_init(void)
{
	pthread_once(&g_fp_once, fp_env);
}

/* local memory for a per-thread size: one context-wide allocation of stack
 * per thread x threads per SM x SMs */
static uint64_t local_bytes(uint64_t per_thread)
{
	return per_thread * SIM_THREADS_PER_SM * SIM_SM_COUNT;
}

static uint64_t stack_round(uint64_t v)
{
	return (v + SIM_STACK_ALIGN - 1) / SIM_STACK_ALIGN * SIM_STACK_ALIGN;
}

/* charges c for use, under g_fp_mu */
static gg_CUresult fp_take_unlocked(gg_CUcontext c, int use, uint64_t bytes)
{
	int rc = sim_charge(c->dev, use, bytes);
	if (rc)
		return to_cu(rc);
	c->fpu[use] += bytes;
	return GG_CUDA_SUCCESS;
}

/* A context's cost, once per life (the first retain of a primary context
 * after a reset, each cuCtxCreate); its local memory starts at the default
 * stack, which the cost includes. */
static gg_CUresult ctx_charge(gg_CUcontext c)
{
	fp_init();
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_fp_mu);
	int first = !c->charged;
	pthread_mutex_unlock(&g_fp_mu);
	if (first)
		ctx_delay(); /* before the card shows the context */
	pthread_mutex_lock(&g_fp_mu);
	if (!c->charged) {
		r = fp_take_unlocked(c, SIM_USE_CONTEXT, g_ctx_cost);
		if (!r) {
			c->charged = 1;
			c->local_pt = SIM_STACK_DEFAULT;
		}
	}
	pthread_mutex_unlock(&g_fp_mu);
	if (first)
		ctx_delay(); /* and after: the call is still in flight */
	return r;
}

/* A reset or destroy gives everything back and counts the teardown, both
 * under g_fp_mu: a library's first use (library_load) checks the epoch under
 * it, so it never charges a context whose charges are already gone. */
static void ctx_uncharge(gg_CUcontext c)
{
	pthread_mutex_lock(&g_fp_mu);
	atomic_fetch_add_explicit(&c->epoch, 1, memory_order_relaxed);
	for (int u = 0; u < SIM_USE_N; u++) {
		sim_uncharge(c->dev, u, c->fpu[u]);
		c->fpu[u] = 0;
	}
	c->charged = c->heap_taken = c->fifo_taken = 0;
	c->local_pt = 0;
	pthread_mutex_unlock(&g_fp_mu);
}

/* Grows c's local memory to per_thread (never shrinks it). */
static gg_CUresult local_grow_unlocked(gg_CUcontext c, uint64_t per_thread)
{
	uint64_t pt = stack_round(per_thread);
	if (!g_fp_on || pt <= c->local_pt)
		return GG_CUDA_SUCCESS;
	gg_CUresult r = fp_take_unlocked(c, SIM_USE_LOCAL, local_bytes(pt) - local_bytes(c->local_pt));
	if (!r)
		c->local_pt = pt;
	return r;
}

/* The image's size as the driver reads it, headers only: a fatbin (magic
 * 0xBA55ED50: its header and payload sizes), the wrapper cudart registers
 * (magic 0x466243B1, pointing at a fatbin), an ELF cubin (its section
 * headers close it), else NUL-terminated PTX. Magic bytes are compared one
 * at a time, so a short PTX string is never read past its NUL. */
static uint64_t image_size(const void *code, int depth)
{
	const unsigned char *p = code;
	if (p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba) {
		uint16_t hs;
		uint64_t fs;
		memcpy(&hs, p + 6, 2);
		memcpy(&fs, p + 8, 8);
		return hs + fs;
	}
	if (p[0] == 0xb1 && p[1] == 0x43 && p[2] == 0x62 && p[3] == 0x46 && depth == 0) {
		const void *data;
		memcpy(&data, p + 8, sizeof(data));
		return data ? image_size(data, 1) : 0;
	}
	if (p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[4] == 2) {
		uint64_t shoff;
		uint16_t shentsize, shnum;
		memcpy(&shoff, p + 0x28, 8);
		memcpy(&shentsize, p + 0x3a, 2);
		memcpy(&shnum, p + 0x3c, 2);
		return shoff + (uint64_t)shentsize * shnum;
	}
	return strlen((const char *)code) + 1;
}

/* device memory for an image of n bytes: n x SIMGPU_MODULE_FACTOR, in 4 KiB */
static uint64_t module_charge(uint64_t n)
{
	double b = (double)n * g_mod_factor;
	if (b > (double)(1ull << 50))
		b = (double)(1ull << 50);
	uint64_t v = (uint64_t)b;
	return (v + SIM_MODULE_ALIGN - 1) / SIM_MODULE_ALIGN * SIM_MODULE_ALIGN;
}

/* -------------------------------------- libraries, modules, kernels (empty) */

/* Nothing is loaded or compiled: a library is a handle, its kernels are
 * handles named on request, and its globals are small device allocations
 * made on first request (512 bytes each, reported as such). A launch runs
 * nothing but takes what the driver would (local memory, heap, FIFO). A
 * CUkernel doubles as its CUfunction, a CUlibrary as its CUmodule, as in the
 * driver's own handle scheme. With the footprint on, an image takes
 * module_charge(its size) on its context's device: at load under
 * CUDA_MODULE_LOADING=EAGER, at the first use of one of its functions under
 * LAZY (the default); unload, reset and destroy give it back. */
#define LIB_MAX_GLOBALS 256
struct library {
	struct obj o;
	uint32_t ctx;
	gg_CUcontext owner; /* its globals died with a reset / destroy of it */
	unsigned epoch;
	size_t nglob;
	uint64_t glob[LIB_MAX_GLOBALS];
	uint64_t globname[LIB_MAX_GLOBALS]; /* FNV-1a of the name */
	uint64_t charge;                    /* module_charge of its image; 0 with the footprint off */
	int loaded;                         /* charge taken, under g_fp_mu */
};
#define KERNEL_NAME 128
struct kernel {
	struct obj o;
	uint64_t lib;
	char name[KERNEL_NAME];
	int attr[16];     /* set with cu{Kernel,Func}SetAttribute, -1 = default */
	unsigned fpflags; /* SIMGPU_FUNC_USES_MALLOC / _PRINTF (simgpu_cuda_func_set_footprint) */
};
#define SIMGPU_FUNC_USES_MALLOC 1u
#define SIMGPU_FUNC_USES_PRINTF 2u
#define FUNC_ATTR_LOCAL_SIZE_BYTES 3 /* CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES */

static uint64_t fnv(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

/* A library loaded with no current context (context-independent loading,
 * as cudart's under EAGER) belongs to the context current at its first use;
 * its owner, or NULL while it has none and none is current. */
static gg_CUcontext library_owner(struct library *l)
{
	pthread_mutex_lock(&g_fp_mu);
	if (!l->owner) {
		gg_CUcontext c = cur_ctx();
		/* acquire: pairs with ctx_create's release, as REQUIRE_CTX's */
		if (c && atomic_load_explicit(&c->alive, memory_order_acquire)) {
			l->owner = c;
			l->ctx = c->id;
			l->o.dev = c->dev;
			l->epoch = atomic_load_explicit(&c->epoch, memory_order_relaxed);
		}
	}
	gg_CUcontext o = l->owner;
	pthread_mutex_unlock(&g_fp_mu);
	return o;
}

/* takes a library's image charge once, while its context lives (none yet:
 * at its first use in one) */
static gg_CUresult library_load(struct library *l)
{
	gg_CUresult r = GG_CUDA_SUCCESS;
	if (!library_owner(l))
		return r;
	pthread_mutex_lock(&g_fp_mu);
	if (!l->loaded && l->charge && atomic_load_explicit(&l->owner->epoch, memory_order_relaxed) == l->epoch) {
		r = fp_take_unlocked(l->owner, SIM_USE_MODULE, l->charge);
		l->loaded = !r;
	}
	pthread_mutex_unlock(&g_fp_mu);
	return r;
}

/* code: the image in memory, or NULL and file: its path. A module needs a
 * current context; a library may have none yet (library_owner). */
static gg_CUresult library_new(gg_CUlibrary *out, const void *code, const char *file, int is_module)
{
	REQUIRE_INIT();
	int dev = 0;
	if (is_module || cur_ctx()) {
		REQUIRE_CTX(d);
		dev = d;
	}
	fp_init();
	uint64_t bytes = 0;
	if (g_fp_on) {
		if (code) {
			bytes = image_size(code, 0);
		} else { /* lseek, not stat: see simcard.c */
			int fd = open(file, O_RDONLY | O_CLOEXEC);
			off_t n = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
			if (fd >= 0)
				close(fd);
			bytes = n > 0 ? (uint64_t)n : 0;
		}
	}
	struct library *l = obj_new(sizeof(*l), OBJ_LIBRARY, dev);
	if (!l)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	l->ctx = cur_id();
	l->owner = cur_ctx();
	if (l->owner)
		l->epoch = atomic_load_explicit(&l->owner->epoch, memory_order_relaxed);
	l->charge = bytes ? module_charge(bytes) : 0;
	if (!g_lazy) {
		gg_CUresult r = library_load(l);
		if (r) {
			obj_free(l);
			return r;
		}
	}
	*out = (gg_CUlibrary)(uintptr_t)l->o.h;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuLibraryLoadData(gg_CUlibrary *library, const void *code, gg_CUjit_option *jitOptions,
                              void **jitOptionsValues, unsigned int numJitOptions, gg_CUlibraryOption *libraryOptions,
                              void **libraryOptionValues, unsigned int numLibraryOptions)
{
	REQUIRE_INIT();
	if (!library || !code || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	return library_new(library, code, NULL, 0);
}

gg_CUresult cuLibraryLoadFromFile(gg_CUlibrary *library, const char *fileName, gg_CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  gg_CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
	REQUIRE_INIT();
	if (!library || !fileName || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (access(fileName, R_OK))
		return GG_CUDA_ERROR_FILE_NOT_FOUND;
	return library_new(library, NULL, fileName, 0);
}

gg_CUresult cuLibraryUnload(gg_CUlibrary library)
{
	REQUIRE_INIT();
	struct library *l = obj_get(library, OBJ_LIBRARY);
	if (!l)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_fp_mu);
	gg_CUcontext owner = l->owner;
	pthread_mutex_unlock(&g_fp_mu);
	if (!owner) { /* never used in a context: nothing to give back */
		obj_free(l);
		return GG_CUDA_SUCCESS;
	}
	/* after a reset of its context the globals are gone, and their
	 * addresses may belong to someone else by now */
	if (atomic_load_explicit(&l->owner->epoch, memory_order_relaxed) == l->epoch)
		for (size_t i = 0; i < l->nglob; i++)
			sim_free(l->glob[i], SIM_KMASK(SIM_KIND_LINEAR));
	pthread_mutex_lock(&g_fp_mu);
	/* a reset or destroy of its context gave the charge back already */
	if (l->loaded && atomic_load_explicit(&l->owner->epoch, memory_order_relaxed) == l->epoch) {
		uint64_t b = l->charge < l->owner->fpu[SIM_USE_MODULE] ? l->charge : l->owner->fpu[SIM_USE_MODULE];
		sim_uncharge(l->owner->dev, SIM_USE_MODULE, b);
		l->owner->fpu[SIM_USE_MODULE] -= b;
	}
	pthread_mutex_unlock(&g_fp_mu);
	obj_free(l);
	return GG_CUDA_SUCCESS;
}

static gg_CUresult kernel_new(uint64_t lib, int dev, const char *name, gg_CUkernel *out)
{
	struct kernel *k = obj_new(sizeof(*k), OBJ_KERNEL, dev);
	if (!k)
		return GG_CUDA_ERROR_OUT_OF_MEMORY;
	k->lib = lib;
	snprintf(k->name, sizeof(k->name), "%s", name);
	for (int i = 0; i < 16; i++)
		k->attr[i] = -1;
	*out = (gg_CUkernel)(uintptr_t)k->o.h;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuLibraryGetKernel(gg_CUkernel *pKernel, gg_CUlibrary library, const char *name)
{
	REQUIRE_INIT();
	if (!pKernel || !name)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct library *l = obj_get(library, OBJ_LIBRARY);
	if (!l)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	gg_CUresult r = library_load(l); /* a first use, under LAZY */
	if (r)
		return r;
	return kernel_new(l->o.h, l->o.dev, name, pKernel);
}

gg_CUresult cuLibraryGetModule(gg_CUmodule *pMod, gg_CUlibrary library)
{
	REQUIRE_INIT();
	if (!pMod)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(library, OBJ_LIBRARY))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*pMod = (gg_CUmodule)(void *)library;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuKernelGetFunction(gg_CUfunction *pFunc, gg_CUkernel kernel)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pFunc)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct kernel *k = obj_get(kernel, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	struct library *l = obj_get((const void *)(uintptr_t)k->lib, OBJ_LIBRARY);
	gg_CUresult r = l ? library_load(l) : GG_CUDA_SUCCESS;
	if (r)
		return r;
	*pFunc = (gg_CUfunction)(void *)kernel;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuKernelGetLibrary(gg_CUlibrary *pLib, gg_CUkernel kernel)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(kernel, OBJ_KERNEL);
	if (!pLib)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*pLib = (gg_CUlibrary)(uintptr_t)k->lib;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuKernelGetName(const char **name, gg_CUkernel hfunc)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(hfunc, OBJ_KERNEL);
	if (!name)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*name = k->name;
	return GG_CUDA_SUCCESS;
}

#define GLOBAL_BYTES SIM_SMALL_ALIGN
static gg_CUresult library_global(gg_CUdeviceptr *dptr, size_t *bytes, const void *library, const char *name)
{
	REQUIRE_INIT();
	if (!name || (!dptr && !bytes))
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct library *l = obj_get(library, OBJ_LIBRARY);
	if (!l)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (!library_owner(l))
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	uint64_t hn = fnv(name), a = 0;
	for (size_t i = 0; i < l->nglob && !a; i++)
		if (l->globname[i] == hn)
			a = l->glob[i];
	if (atomic_load_explicit(&l->owner->epoch, memory_order_relaxed) != l->epoch)
		return GG_CUDA_ERROR_CONTEXT_IS_DESTROYED; /* its context was reset under it */
	if (!a) {
		if (l->nglob == LIB_MAX_GLOBALS)
			return GG_CUDA_ERROR_NOT_FOUND;
		int rc = sim_alloc_ctx(l->o.dev, l->ctx, GLOBAL_BYTES, SIM_KIND_LINEAR, 0, &a);
		if (rc)
			return to_cu(rc);
		l->glob[l->nglob] = a;
		l->globname[l->nglob++] = hn;
	}
	if (dptr)
		*dptr = a;
	if (bytes)
		*bytes = GLOBAL_BYTES;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuLibraryGetGlobal(gg_CUdeviceptr *dptr, size_t *bytes, gg_CUlibrary library, const char *name)
{
	return library_global(dptr, bytes, library, name);
}

gg_CUresult cuLibraryGetManaged(gg_CUdeviceptr *dptr, size_t *bytes, gg_CUlibrary library, const char *name)
{
	return library_global(dptr, bytes, library, name);
}

gg_CUresult cuModuleGetGlobal_v2(gg_CUdeviceptr *dptr, size_t *bytes, gg_CUmodule hmod, const char *name)
{
	return library_global(dptr, bytes, hmod, name);
}

/* host-side unified functions do not exist without a loaded image */
gg_CUresult cuLibraryGetUnifiedFunction(void **fptr, gg_CUlibrary library, const char *symbol)
{
	REQUIRE_INIT();
	if (!fptr || !symbol)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(library, OBJ_LIBRARY))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*fptr = NULL;
	return GG_CUDA_ERROR_NOT_FOUND;
}

gg_CUresult cuModuleLoadData(gg_CUmodule *module, const void *image)
{
	REQUIRE_INIT();
	if (!module || !image)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return library_new((gg_CUlibrary *)(void *)module, image, NULL, 1);
}

gg_CUresult cuModuleLoadDataEx(gg_CUmodule *module, const void *image, unsigned int numOptions,
                               gg_CUjit_option *options, void **optionValues)
{
	if (numOptions && (!options || !optionValues))
		return GG_CUDA_ERROR_INVALID_VALUE;
	return local_cuModuleLoadData(module, image);
}

gg_CUresult cuModuleLoadFatBinary(gg_CUmodule *module, const void *fatCubin)
{
	return local_cuModuleLoadData(module, fatCubin);
}

gg_CUresult cuModuleLoad(gg_CUmodule *module, const char *fname)
{
	REQUIRE_INIT();
	if (!module || !fname)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (access(fname, R_OK))
		return GG_CUDA_ERROR_FILE_NOT_FOUND;
	return library_new((gg_CUlibrary *)(void *)module, NULL, fname, 1);
}

gg_CUresult cuModuleUnload(gg_CUmodule hmod)
{
	return local_cuLibraryUnload((gg_CUlibrary)(void *)hmod);
}

gg_CUresult cuModuleGetFunction(gg_CUfunction *hfunc, gg_CUmodule hmod, const char *name)
{
	return local_cuLibraryGetKernel((gg_CUkernel *)(void *)hfunc, (gg_CUlibrary)(void *)hmod, name);
}

/* CUDA_MODULE_LOADING: LAZY (the default since CUDA 12.2) or EAGER */
gg_CUresult cuModuleGetLoadingMode(gg_CUmoduleLoadingMode *mode)
{
	REQUIRE_INIT();
	if (!mode)
		return GG_CUDA_ERROR_INVALID_VALUE;
	fp_init();
	*mode = g_lazy ? 2 : 1; /* CU_MODULE_LAZY_LOADING, CU_MODULE_EAGER_LOADING */
	return GG_CUDA_SUCCESS;
}

/* plausible attributes of an empty kernel on the simulated card */
static gg_CUresult func_attr(int *pi, gg_CUfunction_attribute attrib, const struct kernel *k)
{
	static const int def[16] = {1024, 0, 0, 0, 32, 90, 90, 0, 0, -1, 0, 0, 0, 0, 0, 0};
	if (!pi || attrib < 0 || attrib > 15)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*pi = k->attr[attrib] != -1 ? k->attr[attrib] : def[attrib];
	return GG_CUDA_SUCCESS;
}

/* settable: max dynamic shared memory (<= 227 KiB), carveout, cluster
 * flags and scheduling policy */
static gg_CUresult func_set(gg_CUfunction_attribute attrib, int value, struct kernel *k)
{
	switch (attrib) {
	case 8:
		if (value < 0 || value > 232448)
			return GG_CUDA_ERROR_INVALID_VALUE;
		break;
	case 9:
		if (value < -1 || value > 100)
			return GG_CUDA_ERROR_INVALID_VALUE;
		break;
	case 11:
	case 12:
	case 13:
	case 14:
	case 15:
		break;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
	k->attr[attrib] = value;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuKernelGetAttribute(int *pi, gg_CUfunction_attribute attrib, gg_CUkernel kernel, gg_CUdevice dev)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(kernel, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	return func_attr(pi, attrib, k);
}

gg_CUresult cuKernelSetAttribute(gg_CUfunction_attribute attrib, int val, gg_CUkernel kernel, gg_CUdevice dev)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(kernel, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	return func_set(attrib, val, k);
}

gg_CUresult cuKernelSetCacheConfig(gg_CUkernel kernel, gg_CUfunc_cache config, gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!obj_get(kernel, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	return config >= 0 && config <= 3 ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuFuncGetAttribute(int *pi, gg_CUfunction_attribute attrib, gg_CUfunction hfunc)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(hfunc, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	return func_attr(pi, attrib, k);
}

gg_CUresult cuFuncSetAttribute(gg_CUfunction hfunc, gg_CUfunction_attribute attrib, int value)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(hfunc, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	return func_set(attrib, value, k);
}

gg_CUresult cuFuncSetCacheConfig(gg_CUfunction hfunc, gg_CUfunc_cache config)
{
	REQUIRE_INIT();
	if (!obj_get(hfunc, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	return config >= 0 && config <= 3 ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_VALUE;
}

gg_CUresult cuFuncGetName(const char **name, gg_CUfunction hfunc)
{
	return local_cuKernelGetName(name, (gg_CUkernel)(void *)hfunc);
}

gg_CUresult cuFuncGetModule(gg_CUmodule *hmod, gg_CUfunction hfunc)
{
	return local_cuKernelGetLibrary((gg_CUlibrary *)(void *)hmod, (gg_CUkernel)(void *)hfunc);
}

/* CUfunctionLoadingState: 1 loaded (nothing to load) */
gg_CUresult cuFuncIsLoaded(int *state, gg_CUfunction hfunc)
{
	REQUIRE_INIT();
	if (!state)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(hfunc, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	*state = 1;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuFuncLoad(gg_CUfunction hfunc)
{
	REQUIRE_INIT();
	return obj_get(hfunc, OBJ_KERNEL) ? GG_CUDA_SUCCESS : GG_CUDA_ERROR_INVALID_HANDLE;
}

/* JIT linking is not simulated */
gg_CUresult cuLinkCreate_v2(unsigned int numOptions, gg_CUjit_option *options, void **optionValues,
                            gg_CUlinkState *stateOut)
{
	REQUIRE_INIT();
	if (!stateOut || (numOptions && (!options || !optionValues)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	return GG_CUDA_ERROR_NOT_SUPPORTED;
}
gg_CUresult cuLinkAddData_v2(gg_CUlinkState state, gg_CUjitInputType type, void *data, size_t size, const char *name,
                             unsigned int numOptions, gg_CUjit_option *options, void **optionValues)
{
	(void)state, (void)type, (void)data, (void)size, (void)name, (void)numOptions, (void)options,
	    (void)optionValues;
	REQUIRE_INIT();
	return GG_CUDA_ERROR_INVALID_HANDLE;
}
gg_CUresult cuLinkAddFile_v2(gg_CUlinkState state, gg_CUjitInputType type, const char *path, unsigned int numOptions,
                             gg_CUjit_option *options, void **optionValues)
{
	(void)state, (void)type, (void)path, (void)numOptions, (void)options, (void)optionValues;
	REQUIRE_INIT();
	return GG_CUDA_ERROR_INVALID_HANDLE;
}
gg_CUresult cuLinkComplete(gg_CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	(void)state, (void)cubinOut, (void)sizeOut;
	REQUIRE_INIT();
	return GG_CUDA_ERROR_INVALID_HANDLE;
}
gg_CUresult cuLinkDestroy(gg_CUlinkState state)
{
	(void)state;
	REQUIRE_INIT();
	return GG_CUDA_ERROR_INVALID_HANDLE;
}

/* What a launch takes on the current context, as the driver would: the
 * first use of the kernel's image (LAZY), local memory grown to the kernel's
 * per-thread need (LOCAL_SIZE_BYTES), and the malloc heap and printf FIFO
 * at the first launch of a kernel that uses them, at their limits' sizes.
 * The card full: CUDA_ERROR_OUT_OF_MEMORY. Nothing executes. */
static size_t limit_get(int limit);
static void limit_raise_stack(uint64_t per_thread);

static gg_CUresult launch(gg_CUfunction f, const unsigned dims[6], unsigned smem, gg_CUstream hStream)
{
	REQUIRE_CTX(dev);
	struct kernel *k = obj_get(f, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	uint64_t threads = (uint64_t)dims[3] * dims[4] * dims[5];
	for (int i = 0; i < 6; i++)
		if (!dims[i])
			return GG_CUDA_ERROR_INVALID_VALUE;
	if (threads > 1024 || dims[5] > 64 || smem > 232448)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int sdev;
	gg_CUresult r = stream_device(hStream, dev, &sdev);
	if (r)
		return r;
	struct library *l = obj_get((const void *)(uintptr_t)k->lib, OBJ_LIBRARY);
	if (l && (r = library_load(l)))
		return r;
	fp_init();
	if (!g_fp_on)
		return GG_CUDA_SUCCESS;
	gg_CUcontext c = cur_ctx();
	pthread_mutex_lock(&g_fp_mu);
	uint64_t need = k->attr[FUNC_ATTR_LOCAL_SIZE_BYTES] > 0 ? (uint64_t)k->attr[FUNC_ATTR_LOCAL_SIZE_BYTES] : 0;
	uint64_t before = c->local_pt;
	r = local_grow_unlocked(c, need);
	if (!r && c->local_pt > before)
		limit_raise_stack(c->local_pt); /* the driver's grown stack is the limit now */
	if (!r && (k->fpflags & SIMGPU_FUNC_USES_MALLOC) && !c->heap_taken) {
		r = fp_take_unlocked(c, SIM_USE_HEAP, limit_get(2));
		c->heap_taken = !r;
	}
	if (!r && (k->fpflags & SIMGPU_FUNC_USES_PRINTF) && !c->fifo_taken) {
		r = fp_take_unlocked(c, SIM_USE_FIFO, limit_get(1));
		c->fifo_taken = !r;
	}
	pthread_mutex_unlock(&g_fp_mu);
	return r;
}

gg_CUresult cuLaunchKernel(gg_CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                           unsigned int sharedMemBytes, gg_CUstream hStream, void **kernelParams, void **extra)
{
	(void)kernelParams, (void)extra;
	const unsigned dims[6] = {gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ};
	return launch(f, dims, sharedMemBytes, hStream);
}
gg_CUresult cuLaunchKernel_ptsz(gg_CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, gg_CUstream hStream, void **kernelParams, void **extra)
{
	return local_cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
	                            ptsz(hStream), kernelParams, extra);
}
/* CUlaunchConfig: grid and block dimensions, shared memory bytes (seven
 * unsigned ints), then the stream; its attributes are not read */
gg_CUresult cuLaunchKernelEx(const void *config, gg_CUfunction f, void **kernelParams, void **extra)
{
	(void)kernelParams, (void)extra;
	REQUIRE_INIT();
	if (!config)
		return GG_CUDA_ERROR_INVALID_VALUE;
	unsigned v[7];
	gg_CUstream st;
	memcpy(v, config, sizeof(v));
	memcpy(&st, (const char *)config + 32, sizeof(st));
	return launch(f, v, v[6], st);
}
gg_CUresult cuLaunchKernelEx_ptsz(const void *config, gg_CUfunction f, void **kernelParams, void **extra)
{
	(void)kernelParams, (void)extra;
	REQUIRE_INIT();
	if (!config)
		return GG_CUDA_ERROR_INVALID_VALUE;
	unsigned v[7];
	gg_CUstream st;
	memcpy(v, config, sizeof(v));
	memcpy(&st, (const char *)config + 32, sizeof(st));
	return launch(f, v, v[6], ptsz(st));
}
/* tensor maps describe memory for kernels, which never run */
gg_CUresult cuTensorMapEncodeTiled(void *tensorMap, int dataType, unsigned int rank, void *globalAddress,
                                   const void *globalDim, const void *globalStrides, const void *boxDim,
                                   const void *elementStrides, int interleave, int swizzle, int l2Promotion,
                                   int oobFill)
{
	(void)dataType, (void)globalAddress, (void)globalDim, (void)globalStrides, (void)boxDim, (void)elementStrides,
	    (void)interleave, (void)swizzle, (void)l2Promotion, (void)oobFill;
	REQUIRE_INIT();
	if (!tensorMap || !rank || rank > 5)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return GG_CUDA_ERROR_NOT_SUPPORTED;
}

/* ---------------------------------------------------------------- occupancy */

/* From the attribute table: 2048 threads, 32 blocks and 228 KiB of shared
 * memory per SM, 1024 threads per block; no registers are modelled. */
static int occ_blocks(int blockSize, size_t dynSmem)
{
	if (blockSize <= 0 || blockSize > 1024 || dynSmem > 232448)
		return -1;
	int b = 2048 / ((blockSize + 31) / 32 * 32);
	if (b > 32)
		b = 32;
	if (dynSmem) {
		int s = (int)(233472 / (dynSmem + 1024));
		if (s < b)
			b = s;
	}
	return b;
}

gg_CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, gg_CUfunction func, int blockSize,
                                                                 size_t dynamicSMemSize, unsigned int flags)
{
	REQUIRE_INIT();
	if (!numBlocks || flags > 1)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(func, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	int b = occ_blocks(blockSize, dynamicSMemSize);
	if (b < 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*numBlocks = b;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, gg_CUfunction func, int blockSize,
                                                        size_t dynamicSMemSize)
{
	return local_cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize,
	                                                                  0);
}

gg_CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, gg_CUfunction func,
                                                      gg_CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                      size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags)
{
	REQUIRE_INIT();
	if (!minGridSize || !blockSize || flags > 1)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(func, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	int limit = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
	int best = 0, bestsz = 32;
	for (int bs = limit / 32 * 32; bs >= 32; bs -= 32) {
		size_t sm = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(bs) : dynamicSMemSize;
		int b = occ_blocks(bs, sm);
		if (b > 0 && b * bs > best) {
			best = b * bs;
			bestsz = bs;
		}
	}
	*blockSize = bestsz;
	*minGridSize = best / bestsz * SIM_SM_COUNT;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, gg_CUfunction func,
                                             gg_CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize,
                                             int blockSizeLimit)
{
	return local_cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, func, blockSizeToDynamicSMemSize,
	                                                       dynamicSMemSize, blockSizeLimit, 0);
}

gg_CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, gg_CUfunction func, int numBlocks,
                                                    int blockSize)
{
	REQUIRE_INIT();
	if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0 || blockSize > 1024)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(func, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	size_t per = 233472 / (size_t)numBlocks;
	per = per > 1024 ? per - 1024 : 0;
	*dynamicSmemSize = per > 232448 ? 232448 : per;
	return GG_CUDA_SUCCESS;
}

/* CUlaunchConfig's layout (cuda.h): 6 unsigned dims, shared bytes, stream,
 * attrs, numAttrs; a CUlaunchAttribute is {id, pad, 64-byte value} */
struct launch_config {
	unsigned int grid[3], block[3], shmem;
	void *stream;
	const unsigned char *attrs;
	unsigned int numAttrs;
};

static unsigned cluster_size(const struct launch_config *c)
{
	unsigned n = 1;
	for (unsigned i = 0; c->attrs && i < c->numAttrs; i++) {
		const unsigned char *a = c->attrs + i * 72u;
		int id;
		memcpy(&id, a, sizeof(id));
		if (id == 4) { /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
			unsigned d[3];
			memcpy(d, a + 8, sizeof(d));
			n = (d[0] ? d[0] : 1) * (d[1] ? d[1] : 1) * (d[2] ? d[2] : 1);
		}
	}
	return n;
}

gg_CUresult cuOccupancyMaxPotentialClusterSize(int *clusterSize, gg_CUfunction func, const void *config)
{
	REQUIRE_INIT();
	if (!clusterSize || !config)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!obj_get(func, OBJ_KERNEL))
		return GG_CUDA_ERROR_INVALID_HANDLE;
	struct kernel *k = obj_get(func, OBJ_KERNEL);
	*clusterSize = k && k->attr[14] == 1 ? 16 : 8; /* portable maximum unless non-portable is allowed */
	return GG_CUDA_SUCCESS;
}

/* 132 SMs in 8 GPCs (two of 18, six of 16); a cluster's blocks must be
 * co-resident in one GPC, which is what cuBLASLt's cluster discovery probes */
static const int g_gpc_sms[8] = {18, 18, 16, 16, 16, 16, 16, 16};

gg_CUresult cuOccupancyMaxActiveClusters(int *numClusters, gg_CUfunction func, const void *config)
{
	REQUIRE_INIT();
	if (!numClusters || !config)
		return GG_CUDA_ERROR_INVALID_VALUE;
	struct kernel *k = obj_get(func, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	struct launch_config c;
	memcpy(&c, config, sizeof(c));
	unsigned n = cluster_size(&c);
	/* above the portable 8 only with the non-portable attribute; a cluster
	 * larger than a GPC cannot be resident at all: 0 of them */
	if (n > 8 && k->attr[14] != 1)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (n > 16) {
		*numClusters = 0;
		return GG_CUDA_SUCCESS;
	}
	int bps =
	    occ_blocks((int)(c.block[0] * (c.block[1] ? c.block[1] : 1) * (c.block[2] ? c.block[2] : 1)), c.shmem);
	if (bps < 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	int total = 0;
	for (int g = 0; g < 8; g++)
		total += g_gpc_sms[g] * bps / (int)n;
	*numClusters = total;
	return GG_CUDA_SUCCESS;
}

/* -------------------------------------------------------- device attributes */

/* One coherent table for an H100-SXM-like data-centre card (CC 9.0, 132 SMs,
 * 1.98 GHz, HBM3 5120-bit, 50 MiB L2); every CUdevice_attribute of CUDA 13.0
 * (1..147) has a value, anything else is CUDA_ERROR_INVALID_VALUE. The PCI
 * location comes from simcore (the simulated NVML reports the same). */
static const int g_attr[SIM_ATTR_MAX + 1] = {
    [1] = 1024,          /* MAX_THREADS_PER_BLOCK */
    [2] = 1024,          /* MAX_BLOCK_DIM_X */
    [3] = 1024,          /* MAX_BLOCK_DIM_Y */
    [4] = 64,            /* MAX_BLOCK_DIM_Z */
    [5] = 2147483647,    /* MAX_GRID_DIM_X */
    [6] = 65535,         /* MAX_GRID_DIM_Y */
    [7] = 65535,         /* MAX_GRID_DIM_Z */
    [8] = 49152,         /* MAX_SHARED_MEMORY_PER_BLOCK */
    [9] = 65536,         /* TOTAL_CONSTANT_MEMORY */
    [10] = 32,           /* WARP_SIZE */
    [11] = 2147483647,   /* MAX_PITCH */
    [12] = 65536,        /* MAX_REGISTERS_PER_BLOCK */
    [13] = 1980000,      /* CLOCK_RATE, kHz */
    [14] = 512,          /* TEXTURE_ALIGNMENT */
    [15] = 1,            /* GPU_OVERLAP */
    [16] = SIM_SM_COUNT, /* MULTIPROCESSOR_COUNT */
    [17] = 0,            /* KERNEL_EXEC_TIMEOUT */
    [18] = 0,            /* INTEGRATED */
    [19] = 1,            /* CAN_MAP_HOST_MEMORY */
    [20] = 0,            /* COMPUTE_MODE: default */
    [21] = 131072,       /* MAXIMUM_TEXTURE1D_WIDTH */
    [22] = 131072,       /* MAXIMUM_TEXTURE2D_WIDTH */
    [23] = 65536,        /* MAXIMUM_TEXTURE2D_HEIGHT */
    [24] = 16384,        /* MAXIMUM_TEXTURE3D_WIDTH */
    [25] = 16384,        /* MAXIMUM_TEXTURE3D_HEIGHT */
    [26] = 16384,        /* MAXIMUM_TEXTURE3D_DEPTH */
    [27] = 32768,        /* MAXIMUM_TEXTURE2D_LAYERED_WIDTH */
    [28] = 32768,        /* MAXIMUM_TEXTURE2D_LAYERED_HEIGHT */
    [29] = 2048,         /* MAXIMUM_TEXTURE2D_LAYERED_LAYERS */
    [30] = 512,          /* SURFACE_ALIGNMENT */
    [31] = 1,            /* CONCURRENT_KERNELS */
    [32] = 1,            /* ECC_ENABLED */
    [33] = -1,           /* PCI_BUS_ID: from simcore */
    [34] = -1,           /* PCI_DEVICE_ID: from simcore */
    [35] = 0,            /* TCC_DRIVER */
    [36] = 2619000,      /* MEMORY_CLOCK_RATE, kHz */
    [37] = 5120,         /* GLOBAL_MEMORY_BUS_WIDTH */
    [38] = 52428800,     /* L2_CACHE_SIZE */
    [39] = 2048,         /* MAX_THREADS_PER_MULTIPROCESSOR */
    [40] = 5,            /* ASYNC_ENGINE_COUNT */
    [41] = 1,            /* UNIFIED_ADDRESSING */
    [42] = 32768,        /* MAXIMUM_TEXTURE1D_LAYERED_WIDTH */
    [43] = 2048,         /* MAXIMUM_TEXTURE1D_LAYERED_LAYERS */
    [44] = 0,            /* CAN_TEX2D_GATHER (deprecated) */
    [45] = 32768,        /* MAXIMUM_TEXTURE2D_GATHER_WIDTH */
    [46] = 32768,        /* MAXIMUM_TEXTURE2D_GATHER_HEIGHT */
    [47] = 8192,         /* MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE */
    [48] = 8192,         /* MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE */
    [49] = 32768,        /* MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE */
    [50] = -1,           /* PCI_DOMAIN_ID: from simcore */
    [51] = 32,           /* TEXTURE_PITCH_ALIGNMENT */
    [52] = 32768,        /* MAXIMUM_TEXTURECUBEMAP_WIDTH */
    [53] = 32768,        /* MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH */
    [54] = 2046,         /* MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS */
    [55] = 32768,        /* MAXIMUM_SURFACE1D_WIDTH */
    [56] = 131072,       /* MAXIMUM_SURFACE2D_WIDTH */
    [57] = 65536,        /* MAXIMUM_SURFACE2D_HEIGHT */
    [58] = 16384,        /* MAXIMUM_SURFACE3D_WIDTH */
    [59] = 16384,        /* MAXIMUM_SURFACE3D_HEIGHT */
    [60] = 16384,        /* MAXIMUM_SURFACE3D_DEPTH */
    [61] = 32768,        /* MAXIMUM_SURFACE1D_LAYERED_WIDTH */
    [62] = 2048,         /* MAXIMUM_SURFACE1D_LAYERED_LAYERS */
    [63] = 32768,        /* MAXIMUM_SURFACE2D_LAYERED_WIDTH */
    [64] = 32768,        /* MAXIMUM_SURFACE2D_LAYERED_HEIGHT */
    [65] = 2048,         /* MAXIMUM_SURFACE2D_LAYERED_LAYERS */
    [66] = 32768,        /* MAXIMUM_SURFACECUBEMAP_WIDTH */
    [67] = 32768,        /* MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH */
    [68] = 2046,         /* MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS */
    [69] = 268435456,    /* MAXIMUM_TEXTURE1D_LINEAR_WIDTH (deprecated) */
    [70] = 131072,       /* MAXIMUM_TEXTURE2D_LINEAR_WIDTH */
    [71] = 65000,        /* MAXIMUM_TEXTURE2D_LINEAR_HEIGHT */
    [72] = 2097120,      /* MAXIMUM_TEXTURE2D_LINEAR_PITCH */
    [73] = 32768,        /* MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH */
    [74] = 32768,        /* MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT */
    [75] = 9,            /* COMPUTE_CAPABILITY_MAJOR */
    [76] = 0,            /* COMPUTE_CAPABILITY_MINOR */
    [77] = 32768,        /* MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH */
    [78] = 1,            /* STREAM_PRIORITIES_SUPPORTED */
    [79] = 1,            /* GLOBAL_L1_CACHE_SUPPORTED */
    [80] = 1,            /* LOCAL_L1_CACHE_SUPPORTED */
    [81] = 233472,       /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    [82] = 65536,        /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    [83] = 1,            /* MANAGED_MEMORY */
    [84] = 0,            /* MULTI_GPU_BOARD */
    [85] = -1,           /* MULTI_GPU_BOARD_GROUP_ID: the ordinal */
    [86] = 0,            /* HOST_NATIVE_ATOMIC_SUPPORTED (PCIe, not NVLink-C2C) */
    [87] = 2,            /* SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO */
    [88] = 0,            /* PAGEABLE_MEMORY_ACCESS (no HMM) */
    [89] = 1,            /* CONCURRENT_MANAGED_ACCESS */
    [90] = 1,            /* COMPUTE_PREEMPTION_SUPPORTED */
    [91] = 0,            /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    [92] = 1,            /* CAN_USE_STREAM_MEM_OPS_V1 */
    [93] = 1,            /* CAN_USE_64_BIT_STREAM_MEM_OPS_V1 */
    [94] = 1,            /* CAN_USE_STREAM_WAIT_VALUE_NOR_V1 */
    [95] = 1,            /* COOPERATIVE_LAUNCH */
    [96] = 0,            /* COOPERATIVE_MULTI_DEVICE_LAUNCH (deprecated) */
    [97] = 232448,       /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    [98] = 1,            /* CAN_FLUSH_REMOTE_WRITES */
    [99] = 1,            /* HOST_REGISTER_SUPPORTED */
    [100] = 0,           /* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
    [101] = 0,           /* DIRECT_MANAGED_MEM_ACCESS_FROM_HOST */
    [102] = 1,           /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    [103] = 1,           /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */
    [104] = 0,           /* HANDLE_TYPE_WIN32_HANDLE_SUPPORTED */
    [105] = 0,           /* HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED */
    [106] = 32,          /* MAX_BLOCKS_PER_MULTIPROCESSOR */
    [107] = 1,           /* GENERIC_COMPRESSION_SUPPORTED */
    [108] = 32505856,    /* MAX_PERSISTING_L2_CACHE_SIZE */
    [109] = 134213632,   /* MAX_ACCESS_POLICY_WINDOW_SIZE */
    [110] = 1,           /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
    [111] = 1024,        /* RESERVED_SHARED_MEMORY_PER_BLOCK */
    [112] = 1,           /* SPARSE_CUDA_ARRAY_SUPPORTED */
    [113] = 1,           /* READ_ONLY_HOST_REGISTER_SUPPORTED */
    [114] = 1,           /* TIMELINE_SEMAPHORE_INTEROP_SUPPORTED */
    [115] = 1,           /* MEMORY_POOLS_SUPPORTED */
    [116] = 1,           /* GPU_DIRECT_RDMA_SUPPORTED */
    [117] = 1,           /* GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: host */
    [118] = 100,         /* GPU_DIRECT_RDMA_WRITES_ORDERING: owner */
    [119] = 1,           /* MEMPOOL_SUPPORTED_HANDLE_TYPES: POSIX fd */
    [120] = 1,           /* CLUSTER_LAUNCH */
    [121] = 1,           /* DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED */
    [122] = 1,           /* CAN_USE_64_BIT_STREAM_MEM_OPS */
    [123] = 1,           /* CAN_USE_STREAM_WAIT_VALUE_NOR */
    [124] = 1,           /* DMA_BUF_SUPPORTED */
    [125] = 1,           /* IPC_EVENT_SUPPORTED */
    [126] = 4,           /* MEM_SYNC_DOMAIN_COUNT */
    [127] = 1,           /* TENSOR_MAP_ACCESS_SUPPORTED */
    [128] = 0,           /* HANDLE_TYPE_FABRIC_SUPPORTED */
    [129] = 0,           /* UNIFIED_FUNCTION_POINTERS */
    [130] = 0,           /* NUMA_CONFIG: none */
    [131] = -1,          /* NUMA_ID */
    [132] = 0,           /* MULTICAST_SUPPORTED (no NVSwitch) */
    [133] = 0,           /* MPS_ENABLED */
    [134] = 0,           /* HOST_NUMA_ID */
    [135] = 0,           /* D3D12_CIG_SUPPORTED */
    [136] = 0,           /* MEM_DECOMPRESS_ALGORITHM_MASK */
    [137] = 0,           /* MEM_DECOMPRESS_MAXIMUM_LENGTH */
    [138] = 0,           /* VULKAN_CIG_SUPPORTED */
    [139] = 0x233010de,  /* GPU_PCI_DEVICE_ID: device 0x2330, vendor 0x10de */
    [140] = 0x16c110de,  /* GPU_PCI_SUBSYSTEM_ID */
    [141] = 0,           /* HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    [142] = 0,           /* HOST_NUMA_MEMORY_POOLS_SUPPORTED */
    [143] = 0,           /* HOST_NUMA_MULTINODE_IPC_SUPPORTED */
    [144] = 0,           /* HOST_MEMORY_POOLS_SUPPORTED */
    [145] = 0,           /* HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    [146] = 0,           /* HOST_ALLOC_DMA_BUF_SUPPORTED */
    [147] = 0,           /* ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED */
};

static int sim_cuda_attr_value(int attrib, int dev, int *value)
{
	if (attrib < 1 || attrib > SIM_ATTR_MAX)
		return -1;
	int dom, bus, slot;
	sim_device_pci(dev, &dom, &bus, &slot);
	switch (attrib) {
	case 33:
		*value = bus;
		break;
	case 34:
		*value = slot;
		break;
	case 50:
		*value = dom;
		break;
	case 85:
		*value = dev;
		break;
	case GG_CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		*value = host_numa_vmm();
		break;
	default:
		*value = g_attr[attrib];
	}
	return 0;
}

gg_CUresult cuDeviceGetAttribute(int *pi, gg_CUdevice_attribute attrib, gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!pi)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	return sim_cuda_attr_value(attrib, dev, pi) ? GG_CUDA_ERROR_INVALID_VALUE : GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceComputeCapability(int *major, int *minor, gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!major || !minor)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	*major = g_attr[75];
	*minor = g_attr[76];
	return GG_CUDA_SUCCESS;
}

/* "dddd:bb:ss.0", the driver's 4-digit-domain form */
gg_CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, gg_CUdevice dev)
{
	REQUIRE_INIT();
	if (!pciBusId || len <= 0)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	int dom, bus, slot;
	sim_device_pci(dev, &dom, &bus, &slot);
	char buf[32];
	snprintf(buf, sizeof(buf), "%04x:%02x:%02x.0", (unsigned)dom, (unsigned)bus, (unsigned)slot);
	snprintf(pciBusId, (size_t)len, "%s", buf);
	return GG_CUDA_SUCCESS;
}

/* [domain:]bus:device[.function], hex, any case */
gg_CUresult cuDeviceGetByPCIBusId(gg_CUdevice *dev, const char *pciBusId)
{
	REQUIRE_INIT();
	if (!dev || !pciBusId)
		return GG_CUDA_ERROR_INVALID_VALUE;
	unsigned a, b, c, f = 0;
	int n = sscanf(pciBusId, "%x:%x:%x.%x", &a, &b, &c, &f), dom, bus, slot;
	if (n < 3) {
		if (sscanf(pciBusId, "%x:%x.%x", &b, &c, &f) < 2)
			return GG_CUDA_ERROR_INVALID_VALUE;
		a = 0;
	}
	for (int d = 0; d < sim_device_count(); d++) {
		sim_device_pci(d, &dom, &bus, &slot);
		if ((unsigned)dom == a && (unsigned)bus == b && (unsigned)slot == c && f == 0) {
			*dev = d;
			return GG_CUDA_SUCCESS;
		}
	}
	return GG_CUDA_ERROR_INVALID_DEVICE;
}

/* every pair of simulated devices is peer-capable (PCIe switch, no NVLink) */
gg_CUresult cuDeviceCanAccessPeer(int *canAccessPeer, gg_CUdevice dev, gg_CUdevice peerDev)
{
	REQUIRE_INIT();
	if (!canAccessPeer)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(dev) || !sim_device_valid(peerDev))
		return GG_CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = dev != peerDev;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceGetP2PAttribute(int *value, gg_CUdevice_P2PAttribute attrib, gg_CUdevice srcDevice,
                                    gg_CUdevice dstDevice)
{
	REQUIRE_INIT();
	if (!value)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!sim_device_valid(srcDevice) || !sim_device_valid(dstDevice) || srcDevice == dstDevice)
		return GG_CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case 1: /* PERFORMANCE_RANK */
		*value = 0;
		break;
	case 2: /* ACCESS_SUPPORTED */
	case 4: /* CUDA_ARRAY_ACCESS_SUPPORTED */
		*value = 1;
		break;
	case 3: /* NATIVE_ATOMIC_SUPPORTED: not over PCIe */
	case 5:
	case 6:
		*value = 0;
		break;
	default:
		return GG_CUDA_ERROR_INVALID_VALUE;
	}
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------------ limits, cache config */

static size_t g_limit[7] = {1024, 1048576, 8388608, 2, 2048, 32, 0};
static int g_cache_cfg;
/* taken inside g_fp_mu (launch, cuCtxSetLimit), never the other way round */
static pthread_mutex_t g_limit_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t limit_get(int limit)
{
	pthread_mutex_lock(&g_limit_mu);
	size_t v = g_limit[limit];
	pthread_mutex_unlock(&g_limit_mu);
	return v;
}

static void limit_raise_stack(uint64_t per_thread)
{
	pthread_mutex_lock(&g_limit_mu);
	if (g_limit[0] < per_thread)
		g_limit[0] = per_thread;
	pthread_mutex_unlock(&g_limit_mu);
}

gg_CUresult cuCtxGetLimit(size_t *pvalue, gg_CUlimit limit)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pvalue)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (limit == 7) { /* SHMEM_SIZE: all of it, no CIG */
		*pvalue = 233472;
		return GG_CUDA_SUCCESS;
	}
	if (limit == 8 || limit == 9) { /* CIG */
		*pvalue = 0;
		return GG_CUDA_SUCCESS;
	}
	if (limit < 0 || limit > 6)
		return GG_CUDA_ERROR_INVALID_VALUE; /* the driver: UNSUPPORTED_LIMIT is for a known one */
	pthread_mutex_lock(&g_limit_mu);
	*pvalue = g_limit[limit];
	pthread_mutex_unlock(&g_limit_mu);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSetLimit(gg_CUlimit limit, size_t value)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (limit < 0 || limit > 6)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (limit == 5) { /* MAX_L2_FETCH_GRANULARITY: 0..128, a power of two */
		if (value > 128)
			return GG_CUDA_ERROR_INVALID_VALUE;
	}
	if (limit == 6 && value > 32505856) /* PERSISTING_L2_CACHE_SIZE */
		return GG_CUDA_ERROR_INVALID_VALUE;
	fp_init();
	if (limit == 0 && g_fp_on && value > 524288) /* STACK_SIZE: at most 512 KiB a thread on this card */
		return GG_CUDA_ERROR_INVALID_VALUE;
	gg_CUcontext c = cur_ctx();
	gg_CUresult r = GG_CUDA_SUCCESS;
	/* The stack's local memory is taken now, before the limit changes; the
	 * heap and the FIFO cannot change once a kernel that uses them ran. */
	pthread_mutex_lock(&g_fp_mu);
	if (limit == 0)
		r = local_grow_unlocked(c, value);
	else if ((limit == 1 && c->fifo_taken) || (limit == 2 && c->heap_taken))
		r = GG_CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		pthread_mutex_lock(&g_limit_mu);
		g_limit[limit] = value;
		pthread_mutex_unlock(&g_limit_mu);
	}
	pthread_mutex_unlock(&g_fp_mu);
	return r;
}

gg_CUresult cuCtxGetCacheConfig(gg_CUfunc_cache *pconfig)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!pconfig)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_limit_mu);
	*pconfig = g_cache_cfg;
	pthread_mutex_unlock(&g_limit_mu);
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuCtxSetCacheConfig(gg_CUfunc_cache config)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (config < 0 || config > 3)
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_limit_mu);
	g_cache_cfg = config;
	pthread_mutex_unlock(&g_limit_mu);
	return GG_CUDA_SUCCESS;
}

/* ------------------------------------------------ export tables (private) */

/* The runtime's private tables (tests/sim/README.md "Export tables"). Slot 0
 * holds the table's size in bytes except in the CLS table; unused slots are
 * NULL. Table layouts follow what cudart 13.0 calls (REAL-CUDA.md 2). */

static gg_CUresult et_retain_primary(gg_CUcontext *out, gg_CUdevice dev)
{
	return local_cuDevicePrimaryCtxRetain(out, dev);
}

static void *const g_et_cudart[13] = {
    (void *)(uintptr_t)(13 * sizeof(void *)),
    NULL,
    (void *)et_retain_primary,
};

/* CUPTI's callback-enable arrays: 523 runtime ids, 14 of the second kind;
 * all zero (no tool subscribed) */
static uint64_t g_tools_cb[523];
static uint64_t g_tools_cb2[14];
static void et_tools_cb(void **buf, size_t *n)
{
	*buf = g_tools_cb;
	*n = sizeof(g_tools_cb) / sizeof(g_tools_cb[0]);
}
static void et_tools_cb2(void **buf, size_t *n)
{
	*buf = g_tools_cb2;
	*n = sizeof(g_tools_cb2) / sizeof(g_tools_cb2[0]);
}
static void *const g_et_tools[7] = {
    (void *)(uintptr_t)(7 * sizeof(void *)), NULL, (void *)et_tools_cb, NULL, NULL, NULL, (void *)et_tools_cb2,
};

static void *const g_et_tools_tls[4] = {(void *)(uintptr_t)(4 * sizeof(void *))};

/* context-local storage: put, delete, get; a NULL context is the current one */
typedef void (*cls_dtor)(struct CUctx_st *ctx, void *key, void *value);

static gg_CUresult et_cls_put(gg_CUcontext ctx, void *key, void *value, cls_dtor dtor)
{
	gg_CUcontext c = ctx_or_current(ctx);
	if (!c)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUresult r = GG_CUDA_SUCCESS;
	pthread_mutex_lock(&g_ctx_mu);
	size_t i = 0;
	while (i < c->ncls && c->cls[i].key != key)
		i++;
	if (i == c->ncls) {
		if (c->ncls == c->capcls) {
			size_t cap = c->capcls ? c->capcls * 2 : 8;
			struct cls_ent *n = realloc(c->cls, cap * sizeof(*n));
			if (!n)
				r = GG_CUDA_ERROR_OUT_OF_MEMORY;
			else {
				c->cls = n;
				c->capcls = cap;
			}
		}
		if (!r)
			c->ncls++;
	}
	if (!r)
		c->cls[i] = (struct cls_ent){key, value, dtor};
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

static gg_CUresult et_cls_delete(gg_CUcontext ctx, void *key)
{
	gg_CUcontext c = ctx_or_current(ctx);
	if (!c)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUresult r = GG_CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&g_ctx_mu);
	for (size_t i = 0; i < c->ncls; i++)
		if (c->cls[i].key == key) {
			c->cls[i] = c->cls[--c->ncls];
			r = GG_CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

static gg_CUresult et_cls_get(void **value, gg_CUcontext ctx, void *key)
{
	gg_CUcontext c = ctx_or_current(ctx);
	if (!value)
		return GG_CUDA_ERROR_INVALID_VALUE;
	if (!c)
		return GG_CUDA_ERROR_INVALID_CONTEXT;
	gg_CUresult r = GG_CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&g_ctx_mu);
	for (size_t i = 0; i < c->ncls; i++)
		if (c->cls[i].key == key) {
			*value = c->cls[i].value;
			r = GG_CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&g_ctx_mu);
	return r;
}

static void *const g_et_cls[4] = {(void *)et_cls_put, (void *)et_cls_delete, (void *)et_cls_get, NULL};

/* context checks: nothing to report (bit 0 of r1 would fail static cudart's
 * cudaDeviceSynchronize) */
static gg_CUresult et_ctx_check(gg_CUcontext ctx, uint32_t *r1, void **r2)
{
	(void)ctx;
	if (r1)
		*r1 = 0;
	if (r2)
		*r2 = NULL;
	return GG_CUDA_SUCCESS;
}
static uint32_t et_ctx_check2(void)
{
	return 0;
}
static void *const g_et_ctxcheck[4] = {
    (void *)(uintptr_t)(4 * sizeof(void *)),
    NULL,
    (void *)et_ctx_check,
    (void *)et_ctx_check2,
};

/* the integrity check (README "Integrity check") */
static gg_CUresult et_integrity(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);
static void *const g_et_integrity[3] = {(void *)(uintptr_t)(3 * sizeof(void *)), (void *)et_integrity, NULL};

static const uint8_t SIM_INTEGRITY_KEY[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                              0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

/* the message: fixed header, then 28 bytes per device */
struct integrity_head {
	uint32_t driver_version, version, pid, thread;
	const void *cudart_table, *integrity_table, *slot;
	uint64_t unix_seconds;
};
_Static_assert(sizeof(struct integrity_head) == 48, "integrity header layout");
struct integrity_dev {
	uint8_t uuid[16];
	int32_t domain, bus, device;
};
_Static_assert(sizeof(struct integrity_dev) == 28, "integrity device layout");

static int sim_cuda_integrity(uint32_t version, uint64_t unix_seconds, uint32_t pid, uint32_t thread, uint64_t out[2])
{
	if (version % 10 == 0) {
		out[0] = 0x3341181c03cb675cull;
		out[1] = 0x8ed383aa1f4cd1e8ull;
		return 0;
	}
	if (version % 10 == 1) {
		out[0] = 0x1841181c03cb675cull;
		out[1] = 0x8ed383aa1f4cd1e8ull;
		return 0;
	}
	struct integrity_head h = {SIM_DRIVER_VERSION,         version,     pid, thread, g_et_cudart, g_et_integrity,
	                           (const void *)et_integrity, unix_seconds};
	struct sim_md2 c;
	uint8_t k[16], mac[16];
	memcpy(k, SIM_INTEGRITY_KEY, 16);
	sim_hmac_md2_begin(&c, k);
	sim_md2_update(&c, &h, sizeof(h));
	for (int d = 0; d < sim_device_count(); d++) {
		struct integrity_dev dv;
		sim_device_uuid(d, dv.uuid);
		sim_device_pci(d, &dv.domain, &dv.bus, &dv.device);
		sim_md2_update(&c, &dv, sizeof(dv));
	}
	sim_hmac_md2_end(&c, k, mac);
	memcpy(out, mac, 16);
	return 0;
}

static gg_CUresult et_integrity(uint32_t version, uint64_t unix_seconds, uint64_t out[2])
{
	if (!out)
		return GG_CUDA_ERROR_INVALID_VALUE;
	sim_cuda_integrity(version, unix_seconds, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(), out);
	return GG_CUDA_SUCCESS;
}

static const struct {
	uint8_t id[16];
	const void *table;
} g_export_tables[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, g_et_cudart},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, g_et_tools},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, g_et_tools_tls},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, g_et_cls},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, g_et_ctxcheck},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, g_et_integrity},
};
/* CUDA 13's requirements table: not provided (NOT_FOUND is what cudart
 * tolerates on this path) */
static const uint8_t g_et_requirements[16] = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                              0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};

gg_CUresult cuGetExportTable(const void **ppExportTable, const gg_CUuuid *pExportTableId)
{
	if (!ppExportTable || !pExportTableId)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*ppExportTable = NULL;
	for (size_t i = 0; i < sizeof(g_export_tables) / sizeof(g_export_tables[0]); i++)
		if (!memcmp(g_export_tables[i].id, pExportTableId->bytes, 16)) {
			*ppExportTable = g_export_tables[i].table;
			return GG_CUDA_SUCCESS;
		}
	if (!memcmp(g_et_requirements, pExportTableId->bytes, 16))
		return GG_CUDA_ERROR_NOT_FOUND;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

/* -------------------------------------------------------------- legacy ABIs */

/* 32-bit CUdeviceptr: no simulated address fits, so allocation always fails */
gg_CUresult cuMemAlloc(gg_CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	REQUIRE_CTX(dev);
	(void)dev;
	if (!dptr || !bytesize)
		return GG_CUDA_ERROR_INVALID_VALUE;
	return GG_CUDA_ERROR_OUT_OF_MEMORY;
}

gg_CUresult cuMemFree(gg_CUdeviceptr_v1 dptr)
{
	REQUIRE_INIT();
	if (!dptr)
		return GG_CUDA_SUCCESS;
	REQUIRE_CTX(dev);
	(void)dev;
	return GG_CUDA_ERROR_INVALID_VALUE;
}

static unsigned int clamp_u32(uint64_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

gg_CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	REQUIRE_CTX(dev);
	if (!free || !total)
		return GG_CUDA_ERROR_INVALID_VALUE;
	*free = clamp_u32(sim_device_free(dev));
	*total = clamp_u32(sim_device_total(dev));
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuDeviceTotalMem(unsigned int *bytes, gg_CUdevice dev)
{
	REQUIRE_OUT_AND_DEVICE(bytes, dev);
	*bytes = clamp_u32(sim_device_total(dev));
	return GG_CUDA_SUCCESS;
}

/* ---------------------------------------------------------- cuGetProcAddress */

/* {base name, per-function ABI version, function, _ptsz variant}. Legacy
 * cuCtxPushCurrent/PopCurrent, cuStreamDestroy and cuDevicePrimaryCtxRelease
 * share their successor's ABI, so the successor also answers those versions. */
struct proc {
	const char *name;
	int version;
	void *fn, *ptsz;
};
#define P(n, v, f)                              \
	{                                       \
		n, v, (void *)(local_##f), NULL \
	}
#define PZ(n, v, f)                                                   \
	{                                                             \
		n, v, (void *)(local_##f), (void *)(local_##f##_ptsz) \
	}
#define PD(n, v, f, fz)                                         \
	{                                                       \
		n, v, (void *)(local_##f), (void *)(local_##fz) \
	}
static const struct proc g_procs[] = {
    P("cuInit", 2000, cuInit),
    P("cuDriverGetVersion", 2020, cuDriverGetVersion),
    P("cuGetExportTable", 3000, cuGetExportTable),
    P("cuDeviceGet", 2000, cuDeviceGet),
    P("cuDeviceGetCount", 2000, cuDeviceGetCount),
    P("cuDeviceGetName", 2000, cuDeviceGetName),
    P("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    P("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    P("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    P("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    P("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    P("cuDeviceComputeCapability", 2000, cuDeviceComputeCapability),
    P("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    P("cuDeviceGetByPCIBusId", 4010, cuDeviceGetByPCIBusId),
    P("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    P("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
    P("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
    P("cuDeviceGetP2PAttribute", 8000, cuDeviceGetP2PAttribute),
    P("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    P("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    P("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    P("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    P("cuDevicePrimaryCtxSetFlags", 7000, cuDevicePrimaryCtxSetFlags),
    P("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
    P("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    P("cuCtxCreate", 2000, cuCtxCreate),
    P("cuCtxCreate", 3020, cuCtxCreate_v2),
    P("cuCtxCreate", 11040, cuCtxCreate_v3),
    P("cuCtxCreate", 12050, cuCtxCreate_v4),
    P("cuCtxDestroy", 2000, cuCtxDestroy),
    P("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    P("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    P("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    P("cuCtxGetDevice", 2000, cuCtxGetDevice),
    P("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    P("cuCtxGetFlags", 7000, cuCtxGetFlags),
    P("cuCtxGetApiVersion", 3020, cuCtxGetApiVersion),
    P("cuCtxGetLimit", 3010, cuCtxGetLimit),
    P("cuCtxSetLimit", 3010, cuCtxSetLimit),
    P("cuCtxGetCacheConfig", 3020, cuCtxGetCacheConfig),
    P("cuCtxSetCacheConfig", 3020, cuCtxSetCacheConfig),
    P("cuCtxGetStreamPriorityRange", 5050, cuCtxGetStreamPriorityRange),
    P("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    P("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    P("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    P("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    P("cuCtxSynchronize", 2000, cuCtxSynchronize),
    P("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    P("cuStreamCreate", 2000, cuStreamCreate),
    P("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    P("cuStreamDestroy", 2000, cuStreamDestroy),
    P("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    PZ("cuStreamSynchronize", 2000, cuStreamSynchronize),
    PZ("cuStreamQuery", 2000, cuStreamQuery),
    PZ("cuStreamGetPriority", 5050, cuStreamGetPriority),
    PZ("cuStreamGetFlags", 5050, cuStreamGetFlags),
    PZ("cuStreamGetCtx", 9020, cuStreamGetCtx),
    PZ("cuStreamGetId", 12000, cuStreamGetId),
    PZ("cuStreamGetDevice", 12080, cuStreamGetDevice),
    PZ("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    PZ("cuStreamAddCallback", 5000, cuStreamAddCallback),
    PZ("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    P("cuEventCreate", 2000, cuEventCreate),
    PZ("cuEventRecord", 2000, cuEventRecord),
    PZ("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags),
    P("cuEventQuery", 2000, cuEventQuery),
    P("cuEventSynchronize", 2000, cuEventSynchronize),
    P("cuEventDestroy", 2000, cuEventDestroy),
    P("cuEventDestroy", 4000, cuEventDestroy_v2),
    P("cuEventElapsedTime", 2000, cuEventElapsedTime),
    P("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    PZ("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PZ("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PZ("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PZ("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PZ("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
    PZ("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    PZ("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    P("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    P("cuGraphCreate", 10000, cuGraphCreate),
    P("cuGraphDestroy", 10000, cuGraphDestroy),
    P("cuGraphGetNodes", 10000, cuGraphGetNodes),
    P("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    P("cuGraphKernelNodeGetParams", 10000, cuGraphKernelNodeGetParams),
    P("cuGraphKernelNodeGetParams", 12000, cuGraphKernelNodeGetParams_v2),
    P("cuGraphExecKernelNodeSetParams", 10010, cuGraphExecKernelNodeSetParams),
    P("cuGraphExecKernelNodeSetParams", 12000, cuGraphExecKernelNodeSetParams_v2),
    PZ("cuStreamWaitValue32", 8000, cuStreamWaitValue32),
    PZ("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2),
    PZ("cuStreamBatchMemOp", 8000, cuStreamBatchMemOp),
    PZ("cuStreamBatchMemOp", 11070, cuStreamBatchMemOp_v2),
    PZ("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync),
    PZ("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2),
    P("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    P("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    P("cuGraphInstantiate", 10000, cuGraphInstantiate),
    P("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    P("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    PZ("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    P("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
    P("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
    P("cuGraphAddNode", 12020, cuGraphAddNode),
    P("cuGraphAddNode", 12030, cuGraphAddNode_v2),
    PZ("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph),
    PZ("cuGraphLaunch", 10000, cuGraphLaunch),
    PZ("cuGraphUpload", 11010, cuGraphUpload),
    P("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    P("cuDeviceGraphMemTrim", 11040, cuDeviceGraphMemTrim),
    P("cuDeviceGetGraphMemAttribute", 11040, cuDeviceGetGraphMemAttribute),
    P("cuDeviceSetGraphMemAttribute", 11040, cuDeviceSetGraphMemAttribute),
    P("cuGetErrorString", 6000, cuGetErrorString),
    P("cuGetErrorName", 6000, cuGetErrorName),
    P("cuMemGetInfo", 2000, cuMemGetInfo),
    P("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    P("cuMemAlloc", 2000, cuMemAlloc),
    P("cuMemAlloc", 3020, cuMemAlloc_v2),
    P("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    P("cuMemFree", 2000, cuMemFree),
    P("cuMemFree", 3020, cuMemFree_v2),
    P("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    P("cuMemAllocManaged", 6000, cuMemAllocManaged),
    P("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    P("cuMemHostAlloc", 2020, cuMemHostAlloc),
    P("cuMemFreeHost", 2000, cuMemFreeHost),
    P("cuMemHostRegister", 4000, cuMemHostRegister),
    P("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    P("cuMemHostUnregister", 4000, cuMemHostUnregister),
    P("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    P("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
    P("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    P("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    PD("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
    PZ("cuMemcpyAsync", 4000, cuMemcpyAsync),
    PD("cuMemcpyPeer", 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
    PZ("cuMemcpyPeerAsync", 4000, cuMemcpyPeerAsync),
    PD("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    PD("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    PD("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    PD("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    PD("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    PD("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    PD("cuMemcpy2D", 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
    PD("cuMemcpy2DUnaligned", 3020, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
    PD("cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
    PD("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
    PZ("cuMemsetD8Async", 3020, cuMemsetD8Async),
    PD("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    PZ("cuMemsetD32Async", 3020, cuMemsetD32Async),
    PD("cuMemsetD2D8", 3020, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds),
    PZ("cuMemsetD2D8Async", 3020, cuMemsetD2D8Async),
    P("cuArrayCreate", 3020, cuArrayCreate_v2),
    P("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    P("cuArrayDestroy", 2000, cuArrayDestroy),
    P("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    P("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),
    P("cuMemAddressReserve", 10020, cuMemAddressReserve),
    P("cuMemAddressFree", 10020, cuMemAddressFree),
    P("cuMemCreate", 10020, cuMemCreate),
    P("cuMemRelease", 10020, cuMemRelease),
    P("cuMemMap", 10020, cuMemMap),
    P("cuMemUnmap", 10020, cuMemUnmap),
    P("cuMemSetAccess", 10020, cuMemSetAccess),
    P("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    P("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    P("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    P("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    P("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    P("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    P("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    P("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    P("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    PZ("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PZ("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PZ("cuMemFreeAsync", 11020, cuMemFreeAsync),
    P("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    P("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    P("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    P("cuMemPoolCreate", 11020, cuMemPoolCreate),
    P("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    P("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    P("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    P("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    P("cuModuleGetLoadingMode", 11070, cuModuleGetLoadingMode),
    P("cuModuleLoad", 2000, cuModuleLoad),
    P("cuModuleLoadData", 2000, cuModuleLoadData),
    P("cuModuleLoadDataEx", 2010, cuModuleLoadDataEx),
    P("cuModuleLoadFatBinary", 2000, cuModuleLoadFatBinary),
    P("cuModuleUnload", 2000, cuModuleUnload),
    P("cuModuleGetFunction", 2000, cuModuleGetFunction),
    P("cuModuleGetGlobal", 3020, cuModuleGetGlobal_v2),
    P("cuLibraryLoadData", 12000, cuLibraryLoadData),
    P("cuLibraryLoadFromFile", 12000, cuLibraryLoadFromFile),
    P("cuLibraryUnload", 12000, cuLibraryUnload),
    P("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
    P("cuLibraryGetModule", 12000, cuLibraryGetModule),
    P("cuLibraryGetGlobal", 12000, cuLibraryGetGlobal),
    P("cuLibraryGetManaged", 12000, cuLibraryGetManaged),
    P("cuLibraryGetUnifiedFunction", 12000, cuLibraryGetUnifiedFunction),
    P("cuKernelGetFunction", 12000, cuKernelGetFunction),
    P("cuKernelGetAttribute", 12000, cuKernelGetAttribute),
    P("cuKernelSetAttribute", 12000, cuKernelSetAttribute),
    P("cuKernelSetCacheConfig", 12000, cuKernelSetCacheConfig),
    P("cuKernelGetName", 12030, cuKernelGetName),
    P("cuKernelGetLibrary", 12050, cuKernelGetLibrary),
    P("cuFuncGetAttribute", 2020, cuFuncGetAttribute),
    P("cuFuncSetAttribute", 9000, cuFuncSetAttribute),
    P("cuFuncSetCacheConfig", 3000, cuFuncSetCacheConfig),
    P("cuFuncGetName", 12030, cuFuncGetName),
    P("cuFuncGetModule", 11000, cuFuncGetModule),
    P("cuFuncIsLoaded", 12040, cuFuncIsLoaded),
    P("cuFuncLoad", 12040, cuFuncLoad),
    P("cuLinkCreate", 5050, cuLinkCreate_v2),
    P("cuLinkAddData", 5050, cuLinkAddData_v2),
    P("cuLinkAddFile", 5050, cuLinkAddFile_v2),
    P("cuLinkComplete", 5050, cuLinkComplete),
    P("cuLinkDestroy", 5050, cuLinkDestroy),
    PZ("cuLaunchKernel", 4000, cuLaunchKernel),
    PZ("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
    P("cuTensorMapEncodeTiled", 12000, cuTensorMapEncodeTiled),
    P("cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, cuOccupancyMaxActiveBlocksPerMultiprocessor),
    P("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", 7000,
      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
    P("cuOccupancyMaxPotentialBlockSize", 6050, cuOccupancyMaxPotentialBlockSize),
    P("cuOccupancyMaxPotentialBlockSizeWithFlags", 7000, cuOccupancyMaxPotentialBlockSizeWithFlags),
    P("cuOccupancyAvailableDynamicSMemPerBlock", 10020, cuOccupancyAvailableDynamicSMemPerBlock),
    P("cuOccupancyMaxPotentialClusterSize", 11070, cuOccupancyMaxPotentialClusterSize),
    P("cuOccupancyMaxActiveClusters", 11070, cuOccupancyMaxActiveClusters),
    P("cuGetProcAddress", 11030, cuGetProcAddress),
    P("cuGetProcAddress", 12000, cuGetProcAddress_v2),
};

gg_CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags,
                                gg_CUdriverProcAddressQueryResult *symbolStatus)
{
	if (!symbol || !pfn || (flags & ~(gg_cuuint64_t)3))
		return GG_CUDA_ERROR_INVALID_VALUE;
	const struct proc *best = NULL;
	int known = 0;
	for (size_t i = 0; i < sizeof(g_procs) / sizeof(g_procs[0]); i++) {
		if (strcmp(g_procs[i].name, symbol))
			continue;
		known = 1;
		if (g_procs[i].version <= cudaVersion && (!best || g_procs[i].version > best->version))
			best = &g_procs[i];
	}
	*pfn = NULL;
	if (!best) {
		if (symbolStatus)
			*symbolStatus = known ? GG_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			                      : GG_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return GG_CUDA_ERROR_NOT_FOUND;
	}
	*pfn = (flags & GG_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->ptsz ? best->ptsz : best->fn;
	if (symbolStatus)
		*symbolStatus = GG_CU_GET_PROC_ADDRESS_SUCCESS;
	return GG_CUDA_SUCCESS;
}

gg_CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, gg_cuuint64_t flags)
{
	return local_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ------------------------------------------------------- test introspection */

SIM_EXPORT int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                                      unsigned long long *live_allocs);
SIM_EXPORT void simgpu_cuda_debug_reset_peak(void);

int simgpu_cuda_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_pages_bytes,
                           unsigned long long *live_allocs)
{
	return sim_debug_used(dev, pages_bytes, peak_pages_bytes, live_allocs);
}

void simgpu_cuda_debug_reset_peak(void)
{
	sim_debug_reset_peak();
}

/* MD2 / HMAC-MD2 and the integrity check's answer, for test_sim.c */
SIM_EXPORT void simgpu_md2(const void *data, size_t n, unsigned char out[16]);
SIM_EXPORT void simgpu_hmac_md2(const unsigned char *key, size_t keylen, const void *data, size_t n,
                                unsigned char out[16]);
SIM_EXPORT int simgpu_cuda_pci(int dev, int *domain, int *bus, int *device);
SIM_EXPORT int simgpu_cuda_vmm_refs(unsigned long long handle, unsigned long long *refs, unsigned long long *maps);

void simgpu_md2(const void *data, size_t n, unsigned char out[16])
{
	sim_md2(data, n, out);
}

void simgpu_hmac_md2(const unsigned char *key, size_t keylen, const void *data, size_t n, unsigned char out[16])
{
	sim_hmac_md2(key, keylen, data, n, out);
}

int simgpu_cuda_pci(int dev, int *domain, int *bus, int *device)
{
	if (!sim_device_valid(dev))
		return -1;
	sim_device_pci(dev, domain, bus, device);
	return 0;
}

int simgpu_cuda_vmm_refs(unsigned long long handle, unsigned long long *refs, unsigned long long *maps)
{
	uint64_t r, m;
	if (sim_vmm_refs(handle, &r, &m))
		return -1;
	if (refs)
		*refs = r;
	if (maps)
		*maps = m;
	return 0;
}

/* The footprint (tests/sim/README.md): a function's per-thread local memory
 * (what cuFuncGetAttribute(LOCAL_SIZE_BYTES) then answers, at most 512 KiB)
 * and whether it uses the device malloc heap (1) or printf (2); this
 * process's bytes on a device per sim_use (n of them, at most SIM_USE_N:
 * allocations' pages, context, modules, local memory past the context's,
 * heap, FIFO); the shared card's lock, taken and kept (a test then kills the
 * caller). */
SIM_EXPORT gg_CUresult simgpu_cuda_func_set_footprint(gg_CUfunction f, size_t local_bytes, unsigned int flags);
SIM_EXPORT int simgpu_cuda_debug_footprint(int dev, unsigned long long *out, int n);
SIM_EXPORT void simgpu_cuda_debug_card_hold(void);

gg_CUresult simgpu_cuda_func_set_footprint(gg_CUfunction f, size_t local_bytes, unsigned int flags)
{
	REQUIRE_INIT();
	struct kernel *k = obj_get(f, OBJ_KERNEL);
	if (!k)
		return GG_CUDA_ERROR_INVALID_HANDLE;
	if (local_bytes > 524288 || (flags & ~(SIMGPU_FUNC_USES_MALLOC | SIMGPU_FUNC_USES_PRINTF)))
		return GG_CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_fp_mu); /* launch reads them under it */
	k->attr[FUNC_ATTR_LOCAL_SIZE_BYTES] = (int)local_bytes;
	k->fpflags = flags;
	pthread_mutex_unlock(&g_fp_mu);
	return GG_CUDA_SUCCESS;
}

int simgpu_cuda_debug_footprint(int dev, unsigned long long *out, int n)
{
	uint64_t v[SIM_USE_N];
	if (!out || n < 0 || sim_footprint(dev, v))
		return -1;
	for (int i = 0; i < n && i < SIM_USE_N; i++)
		out[i] = v[i];
	return 0;
}

void simgpu_cuda_debug_card_hold(void)
{
	sim_card_debug_hold_lock();
}

/* A change of the calling thread's current context that no exported entry
 * point makes, so that no hook of an interposer sees it: what a vendor's
 * private table could do (the hooks' cached context must survive it, and
 * learn of it by asking the driver again). As cuCtxSetCurrent. */
SIM_EXPORT gg_CUresult simgpu_cuda_debug_set_current(gg_CUcontext ctx);

gg_CUresult simgpu_cuda_debug_set_current(gg_CUcontext ctx)
{
	return local_cuCtxSetCurrent(ctx);
}

/* A change of a device's current pool that no exported entry point makes,
 * as a private table could: the hooks' cached pool must learn of it by
 * asking the driver again. As cuDeviceSetMemPool. */
SIM_EXPORT gg_CUresult simgpu_cuda_debug_set_mem_pool(gg_CUdevice dev, gg_CUmemoryPool pool);

gg_CUresult simgpu_cuda_debug_set_mem_pool(gg_CUdevice dev, gg_CUmemoryPool pool)
{
	return local_cuDeviceSetMemPool(dev, pool);
}

#define GG_CU_FN(name, params) extern __typeof(name) local_##name __attribute__((alias(#name)));
#include "gpuguard/cuda_abi_funcs.h"
#undef GG_CU_FN
#define SIM_FN(name, params) extern __typeof(name) local_##name __attribute__((alias(#name)));
#include "sim_cuda_extra.h"
#undef SIM_FN
#undef GG_CU_FN_PTSZ
#undef GG_CU_FN_LEGACY
#undef GGT
