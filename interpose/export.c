/* gpuguard: cudart's private driver tables (cuGetExportTable, REAL-CUDA.md
 * §2-3). cudart retains its primary context through slot 2 of the "cudart
 * interface" table, past our cuDevicePrimaryCtxRetain hook; we hand it a copy
 * whose slot 2 goes through the same context books. The integrity check hashes
 * that table's address, so the check table is copied too, with a slot 1 that
 * answers for our copies; both are handed out only after our answer matched
 * the driver's own for its own tables, else both tables stay the driver's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "export.h"
#include "base.h"
#include "ceiling.h"
#include "ctx.h"
#include "footprint.h"
#include "gpuguard/cuda_abi.h"
#include "init.h"
#include "log.h"
#include "options.h"
#include "resolve.h"
#include "shape.h"
#include "veneer.h"

#define LIBCUDA "libcuda.so.1"

/* cuDeviceGetAttribute's prototype: gpuguard/cuda_abi_footprint.h. */

static const uint8_t CUDART_IFACE[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                         0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
static const uint8_t INTEGRITY[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                      0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
static const uint8_t HMAC_KEY[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                     0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
#define ATTR_PCI_BUS 33
#define ATTR_PCI_DEVICE 34
#define ATTR_PCI_DOMAIN 50

void *_Atomic gg_real_cuGetExportTable; /* also the dlsym and cuGetProcAddress slot (hook_cuda.c) */
DECLARE_REAL(cuDeviceGetAttribute)
DECLARE_REAL(cuDriverGetVersion)
DECLARE_REAL(cuDeviceGetCount)
DECLARE_REAL(cuDeviceGetUuid)
DECLARE_REAL(cuDeviceGetUuid_v2)
#define GG_VENEER_LIB LIBCUDA /* HELPER's (veneer.h) */

/* ---- MD2 (RFC 1319) and HMAC (RFC 2104), for the integrity answer ------- */

/* RFC 1319's substitution table, a permutation of 0..255 from the digits of pi. */
static const uint8_t S[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20,
};

struct md2 {
	uint8_t state[48], sum[16], block[16];
	size_t fill;
};

static void md2_compress(struct md2 *m, const uint8_t in[16])
{
	uint8_t last = m->sum[15];
	for (int i = 0; i < 16; i++)
		last = m->sum[i] ^= S[in[i] ^ last];
	for (int i = 0; i < 16; i++) {
		m->state[16 + i] = in[i];
		m->state[32 + i] = (uint8_t)(in[i] ^ m->state[i]);
	}
	uint8_t t = 0;
	for (int round = 0; round < 18; round++) {
		for (int i = 0; i < 48; i++)
			t = m->state[i] ^= S[t];
		t = (uint8_t)(t + round);
	}
}

static void md2_add(struct md2 *m, const void *data, size_t n)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < n; i++) {
		m->block[m->fill++] = p[i];
		if (m->fill == 16) {
			md2_compress(m, m->block);
			m->fill = 0;
		}
	}
}

static void md2_end(struct md2 *m, uint8_t out[16])
{
	/* Pad with k bytes of value k (1..16), then hash the checksum; the
	 * checksum's own block must not update it, so copy it first. */
	uint8_t k = (uint8_t)(16 - m->fill), pad[16], sum[16];
	memset(pad, k, sizeof(pad));
	md2_add(m, pad, k);
	memcpy(sum, m->sum, 16);
	md2_compress(m, sum);
	memcpy(out, m->state, 16);
}

static void hmac_md2(const void *msg, size_t n, uint8_t out[16])
{
	/* MD2's block is 16 bytes, so the key (16 bytes) is used as it is. */
	uint8_t pad[16], inner[16];
	struct md2 m;
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < 16; i++)
		pad[i] = HMAC_KEY[i] ^ 0x36;
	md2_add(&m, pad, 16);
	md2_add(&m, msg, n);
	md2_end(&m, inner);
	memset(&m, 0, sizeof(m));
	for (int i = 0; i < 16; i++)
		pad[i] = HMAC_KEY[i] ^ 0x5c;
	md2_add(&m, pad, 16);
	md2_add(&m, inner, 16);
	md2_end(&m, out);
}

/* ---- the tables ---------------------------------------------------------- */

#define MAX_SLOTS 32
typedef gg_CUresult (*retain_fn)(gg_CUcontext *out, gg_CUdevice dev);
typedef gg_CUresult (*check_fn)(uint32_t version, uint64_t unix_seconds, uint64_t out[2]);

static const void *real_iface, *real_check_table;
static retain_fn real_retain;
static check_fn real_check;
static void *iface_copy[MAX_SLOTS], *check_copy[MAX_SLOTS];
/* 0 undecided, 1 hand out our copies, -1 hand out the driver's own. */
static _Atomic int verdict;
static pthread_mutex_t decide_lock = PTHREAD_MUTEX_INITIALIZER;
static int uuid_v2 = -1; /* which cuDeviceGetUuid the driver hashes: 1 _v2, 0 legacy */

static gg_CUresult our_retain(gg_CUcontext *out, gg_CUdevice dev)
{
	if (gg_in_hook || dev < 0 || dev >= GG_MAX_DEVICES)
		return real_retain(out, dev);
	/* What the cuDevicePrimaryCtxRetain hook does: the card's processes
	 * before (footprint.c's PID diff), then bind the device (its context
	 * reserve is charged once), know the context as primary, and read
	 * what the driver holds for us now. */
	GG_ENTER(GG_RT_CUDA);
	gg_footprint_ctx_before(dev);
	gg_CUresult rc = real_retain(out, dev);
	if (rc == GG_CUDA_SUCCESS) {
		gg_ceiling_budget(dev);
		if (out)
			gg_ctx_id(*out, dev, 1);
		gg_footprint_reconcile(dev, GG_FP_AFTER_CTX);
	}
	GG_LEAVE();
	return rc;
}

/* The integrity message (REAL-CUDA.md §3) for the given tables and slot,
 * into buf; its length, or 0 if a query failed. */
static size_t message(uint8_t *buf, size_t cap, uint32_t version, uint64_t secs, const void *iface,
                      const void *check_table, const void *slot, int v2)
{
	gg_pfn_cuDriverGetVersion ver = HELPER(cuDriverGetVersion);
	gg_pfn_cuDeviceGetCount count = HELPER(cuDeviceGetCount);
	gg_pfn_cuDeviceGetAttribute attr = HELPER(cuDeviceGetAttribute);
	gg_pfn_cuDeviceGetUuid uuid1 = HELPER(cuDeviceGetUuid);
	gg_pfn_cuDeviceGetUuid_v2 uuid2 = HELPER(cuDeviceGetUuid_v2);
	int drv = 0, n = 0;
	if (!ver || !count || !attr || !(v2 ? (void *)uuid2 : (void *)uuid1) || ver(&drv) != GG_CUDA_SUCCESS ||
	    count(&n) != GG_CUDA_SUCCESS || n < 0 || 48 + (size_t)n * 28 > cap)
		return 0;
	struct {
		uint32_t drv, version, pid, tid;
		const void *iface, *check_table, *slot;
		uint64_t secs;
	} head = {(uint32_t)drv, version, (uint32_t)getpid(), (uint32_t)pthread_self(), iface, check_table, slot, secs};
	_Static_assert(sizeof(head) == 48, "the message head is 48 bytes on x86-64");
	memcpy(buf, &head, 48);
	size_t len = 48;
	for (int d = 0; d < n; d++) {
		gg_CUuuid u;
		int32_t pci[3];
		if ((v2 ? uuid2(&u, d) : uuid1(&u, d)) != GG_CUDA_SUCCESS ||
		    attr(&pci[0], ATTR_PCI_DOMAIN, d) != GG_CUDA_SUCCESS ||
		    attr(&pci[1], ATTR_PCI_BUS, d) != GG_CUDA_SUCCESS ||
		    attr(&pci[2], ATTR_PCI_DEVICE, d) != GG_CUDA_SUCCESS)
			return 0;
		memcpy(buf + len, u.bytes, 16);
		memcpy(buf + len + 16, pci, 12);
		len += 28;
	}
	return len;
}

static int answer(uint32_t version, uint64_t secs, const void *iface, const void *check_table, const void *slot, int v2,
                  uint64_t out[2])
{
	uint8_t buf[48 + 28 * 64];
	size_t len = message(buf, sizeof(buf), version, secs, iface, check_table, slot, v2);
	if (!len)
		return -1;
	uint8_t mac[16];
	hmac_md2(buf, len, mac);
	memcpy(out, mac, 16);
	return 0;
}

static gg_CUresult our_check(uint32_t version, uint64_t secs, uint64_t out[2])
{
	/* The fixed answers (version % 10 of 0 and 1) name no table: the
	 * driver's own. The hashed one must name the tables cudart holds. */
	if (version % 10 == 0 || version % 10 == 1 || !out)
		return real_check(version, secs, out);
	int was = gg_hook_active;
	gg_hook_active = 1; /* our queries below are the driver's business only */
	int rc = answer(version, secs, iface_copy, check_copy, (const void *)our_check, uuid_v2, out);
	gg_hook_active = was;
	return rc == 0 ? GG_CUDA_SUCCESS : real_check(version, secs, out);
}

/* Copies a table whose slot 0 is its size in bytes. 0, or -1 if it does
 * not fit or does not look like one. */
static int copy_table(void **dst, const void *src, size_t need_slots)
{
	size_t bytes = *(const size_t *)src;
	if (bytes % sizeof(void *) || bytes < need_slots * sizeof(void *) || bytes > sizeof(void *) * MAX_SLOTS)
		return -1;
	memcpy(dst, src, bytes);
	return 0;
}

/* Decides once, on the thread that first asks for the cudart table, whether
 * our copies can stand in for the driver's (see the file comment). */
static void decide(const void *iface)
{
	pthread_mutex_lock(&decide_lock);
	if (atomic_load_explicit(&verdict, memory_order_relaxed) != 0)
		goto out;
	int v = -1;
	gg_pfn_cuGetExportTable get = (gg_pfn_cuGetExportTable)atomic_load(&gg_real_cuGetExportTable);
	gg_CUuuid id;
	memcpy(id.bytes, INTEGRITY, 16);
	const void *ct = NULL;
	if (get && get(&ct, &id) == GG_CUDA_SUCCESS && ct && copy_table(iface_copy, iface, 3) == 0 &&
	    copy_table(check_copy, ct, 2) == 0 && iface_copy[2] && check_copy[1]) {
		real_iface = iface;
		real_check_table = ct;
		real_retain = (retain_fn)iface_copy[2];
		real_check = (check_fn)check_copy[1];
		/* Our answer for the driver's own tables must be the driver's. */
		uint64_t secs = (uint64_t)time(NULL), want[2] = {0, 0}, got[2];
		if (real_check(13002, secs, want) == GG_CUDA_SUCCESS)
			for (int v2 = 1; v2 >= 0 && v < 0; v2--)
				if (answer(13002, secs, iface, ct, (const void *)real_check, v2, got) == 0 &&
				    memcmp(got, want, 16) == 0) {
					uuid_v2 = v2;
					v = 1;
				}
		if (v == 1) {
			iface_copy[2] = (void *)our_retain;
			check_copy[1] = (void *)our_check;
		}
	}
	if (v != 1 && gg_opt.verbose)
		gg_log(GG_LOG_INFO, "cudart's context table left as the driver's (integrity answer not matched)");
	/* release: publishes the copies and real pointers to the hook's
	 * acquire load. */
	atomic_store_explicit(&verdict, v, memory_order_release);
out:
	pthread_mutex_unlock(&decide_lock);
}

GG_EXPORT gg_CUresult cuGetExportTable(const void **ppExportTable, const gg_CUuuid *pExportTableId)
{
	gg_pfn_cuGetExportTable real = (gg_pfn_cuGetExportTable)gg_real_load(
	    &gg_real_cuGetExportTable, "cuGetExportTable", (void *)cuGetExportTable, LIBCUDA);
	if (!real)
		return GG_CUDA_ERROR_NOT_INITIALIZED;
	gg_CUresult rc = real(ppExportTable, pExportTableId);
	if (rc != GG_CUDA_SUCCESS || gg_in_hook || !ppExportTable || !*ppExportTable || !pExportTableId)
		return rc;
	int iface = memcmp(pExportTableId->bytes, CUDART_IFACE, 16) == 0;
	int check = memcmp(pExportTableId->bytes, INTEGRITY, 16) == 0;
	if (!iface && !check)
		return rc; /* every other table is the driver's, untouched */
	GG_ENTER(GG_RT_CUDA);
	/* acquire: pairs with the release in decide(). */
	int v = atomic_load_explicit(&verdict, memory_order_acquire);
	if (v == 0 && iface) {
		decide(*ppExportTable);
		v = atomic_load_explicit(&verdict, memory_order_acquire);
	} else if (v == 0) {
		/* The check table went out as the driver's before any decision:
		 * the cudart table must then stay the driver's too. relaxed:
		 * nothing is published with -1. */
		int zero = 0;
		atomic_compare_exchange_strong_explicit(&verdict, &zero, -1, memory_order_relaxed,
		                                        memory_order_relaxed);
		v = -1;
	}
	/* Only ever both copies or neither: the check hashes both addresses. */
	if (v == 1 && iface && *ppExportTable == real_iface)
		*ppExportTable = iface_copy;
	else if (v == 1 && check && *ppExportTable == real_check_table)
		*ppExportTable = check_copy;
	GG_LEAVE();
	return rc;
}
