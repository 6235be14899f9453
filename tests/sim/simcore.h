/* gpuguard simulated GPU: the device-memory model shared by the fake libcuda
 * and the fake libamdhip64 (the fake libnvidia-ml uses its devices and UUIDs
 * only). Each library links its own copy, so everything here is hidden; the
 * API layers translate SIM_E* into CUresult / hipError_t. Addresses are fake
 * (never backed by memory) and encode their device. */
#ifndef GPUGUARD_SIMCORE_H
#define GPUGUARD_SIMCORE_H

#include <stdint.h>

#pragma GCC visibility push(hidden)

#define SIM_PAGE 0x200000ull      /* 2 MiB: GPU page and VMM granularity */
#define SIM_SMALL_MAX 0x100000ull /* <= 1 MiB is packed into shared pages */
#define SIM_SMALL_ALIGN 512ull
#define SIM_MAX_DEVICES 16
/* The CUDA and HIP libraries each compile this core; SIM_LIB_ID (0 CUDA,
 * 1 HIP, set by the Makefile) keeps their addresses and handles apart, as
 * two real drivers' would be, so a process using both never sees one value
 * from each. */
#ifndef SIM_LIB_ID
#define SIM_LIB_ID 0
#endif
#define SIM_DEV_BASE (SIM_LIB_ID ? 0x500000000000ull : 0x7f0000000000ull) /* device d: BASE + d * STRIDE */
#define SIM_DEV_STRIDE 0x10000000000ull                                   /* 1 TiB, also the largest SIMGPU_MEMORY */
/* The CUDA range lies between AddressSanitizer's heap ([0x600000000000,
 * 0x640000000000) on x86-64) and ThreadSanitizer's ([0x7b0000000000,
 * 0x7c0000000000)), so a host buffer from malloc under either is never taken
 * for a reserved device address (NCCL's host-to-device copies were). */
#define SIM_VA_BASE (SIM_LIB_ID ? 0x400000000000ull : 0x640000000000ull) /* address-reserve range */
#define SIM_VA_END (SIM_LIB_ID ? 0x500000000000ull : 0x7b0000000000ull)

enum sim_status {
	SIM_OK = 0,
	SIM_EINVAL,    /* bad argument / unknown pointer */
	SIM_ENOMEM,    /* no (contiguous) pages left */
	SIM_EDEVICE,   /* bad device ordinal */
	SIM_EHANDLE,   /* unknown handle */
	SIM_ENOTFOUND, /* pointer not inside any allocation */
	SIM_ENODEV,    /* SIMGPU_DEVICES=0 */
};

enum sim_kind {
	SIM_KIND_LINEAR = 1, /* cuMemAlloc / hipMalloc / pitch */
	SIM_KIND_MANAGED = 2,
	SIM_KIND_ARRAY = 3,
	SIM_KIND_MIPMAP = 4,
	SIM_KIND_POOL = 5, /* a block of a stream-ordered pool */
};
#define SIM_KMASK(k) (1u << (k))
#define SIM_KMASK_FREEABLE (SIM_KMASK(SIM_KIND_LINEAR) | SIM_KMASK(SIM_KIND_MANAGED) | SIM_KMASK(SIM_KIND_POOL))

/* pool attributes: the CUmemPool_attribute / hipMemPoolAttr values (equal) */
#define SIM_POOL_ATTR_RELEASE_THRESHOLD 4
#define SIM_POOL_ATTR_RESERVED_CURRENT 5
#define SIM_POOL_ATTR_RESERVED_HIGH 6
#define SIM_POOL_ATTR_USED_CURRENT 7
#define SIM_POOL_ATTR_USED_HIGH 8

/* Environment (SIMGPU_DEVICES, SIMGPU_MEMORY, SIMGPU_UUID_SEED,
 * SIMGPU_SAME_CARDS) is read once, on first use. */
void sim_init(void);
int sim_device_count(void);
int sim_device_valid(int dev);
uint64_t sim_device_total(int dev);
uint64_t sim_device_free(int dev);
int sim_parse_quantity(const char *s, uint64_t *out); /* 0 on success */
/* A fixed random-looking (version 4) UUID for (SIM_LIB_ID, dev), varied by
 * SIMGPU_UUID_SEED: the CUDA library and the NVML one (both ID 0) agree.
 * SIMGPU_SAME_CARDS=1 gives the HIP library the same UUIDs (one card seen
 * through both runtimes, as HIP on an NVIDIA card); by default its devices
 * are other cards. */
void sim_device_uuid(int dev, uint8_t out[16]);
void sim_device_pci(int dev, int *domain, int *bus, int *device);

/* Contexts. Every allocation, pool and VMM handle carries the id of the
 * context it was made in; the plain functions use the primary context (0).
 * sim_free_context frees all of a context's memory, as cuDevicePrimaryCtxReset,
 * cuCtxDestroy and hipDeviceReset do; with keep_pools (CUDA's primary
 * reset), stream-ordered pools and their blocks stay (simcore.c). */
#define SIM_CTX_PRIMARY 0u
int sim_free_context(int dev, uint32_t ctx, int keep_pools);
int sim_alloc_ctx(int dev, uint32_t ctx, uint64_t size, int kind, int whole_pages, uint64_t *addr);
int sim_pool_create_ctx(int dev, uint32_t ctx, uint64_t *pool);
int sim_pool_alloc_ctx(uint64_t pool, uint32_t ctx, uint64_t size, uint64_t *addr);
int sim_vmm_create_ctx(int dev, uint32_t ctx, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle);

/* Linear memory. whole_pages forces page granularity even for small sizes
 * (arrays). sim_free checks that the allocation's kind is in kind_mask. */
int sim_alloc(int dev, uint64_t size, int kind, int whole_pages, uint64_t *addr);
int sim_free(uint64_t addr, unsigned kind_mask);
int sim_addr_range(uint64_t addr, uint64_t *base, uint64_t *size);
/* the same, and the allocation's sim_kind (any out-pointer may be NULL) */
int sim_addr_kind(uint64_t addr, uint64_t *base, uint64_t *size, int *kind);
int sim_addr_device(uint64_t addr); /* -1 if not a device address */
/* the pool a live pool block was allocated from (its handle even after the
 * pool's destroy, until its last block is freed); 0 for any other address */
uint64_t sim_addr_pool(uint64_t addr);

/* Stream-ordered pools; handles encode the device and are validated. */
uint64_t sim_pool_default(int dev);
uint64_t sim_pool_current(int dev);
int sim_pool_set_current(int dev, uint64_t pool);
int sim_pool_create(int dev, uint64_t *pool);
int sim_pool_destroy(uint64_t pool);
int sim_pool_device(uint64_t pool); /* -1 if invalid */
int sim_pool_alloc(uint64_t pool, uint64_t size, uint64_t *addr);
int sim_pool_trim(uint64_t pool, uint64_t keep);
int sim_pool_get_attr(uint64_t pool, int attr, uint64_t *value);
int sim_pool_set_attr(uint64_t pool, int attr, uint64_t value);
void sim_device_sync(int dev); /* releases each pool's reserve above its threshold */

/* Virtual memory management. The prop blob is stored and returned verbatim. */
#define SIM_PROP_MAX 96
int sim_vmm_create(int dev, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle);
/* The same for host memory (no device page used). */
int sim_vmm_create_host(uint32_t ctx, uint64_t size, const void *prop, unsigned prop_len, uint64_t *handle);
/* create gives one reference, sim_vmm_retain (the handle mapped at addr) adds
 * one, each release drops one; pages go at refs == 0 and mapped nowhere. */
int sim_vmm_release(uint64_t handle);
int sim_vmm_retain(uint64_t addr, uint64_t *handle);
int sim_vmm_refs(uint64_t handle, uint64_t *refs,
                 uint64_t *maps); /* The footprint a process has on a device beyond its allocations, as the
                                   * driver keeps it (tests/sim/README.md, "The shared card"): SIM_USE_MEMORY is
                                   * the pages of allocations (pages_take), the others are charged by the API
                                   * layer. A charge fails with SIM_ENOMEM when the card cannot hold it. */
enum sim_use {
	SIM_USE_MEMORY = 0, /* allocations: pages in use x 2 MiB */
	SIM_USE_CONTEXT,    /* per context: SIMGPU_CONTEXT */
	SIM_USE_MODULE,     /* module and library images */
	SIM_USE_LOCAL,      /* local memory grown past the context's own */
	SIM_USE_HEAP,       /* device malloc heap */
	SIM_USE_FIFO,       /* printf FIFO */
	SIM_USE_N
};
int sim_charge(int dev, int use, uint64_t bytes);
void sim_uncharge(int dev, int use, uint64_t bytes);
/* this process's bytes on dev per use (out[SIM_USE_N]); -1 for a bad device */
int sim_footprint(int dev, uint64_t out[SIM_USE_N]);

/* The card shared by processes (simcard.c), set up by sim_init when
 * SIMGPU_SHARED names one. */
int sim_card_shared(void); /* 1 when this library's cards are shared */
int sim_card_open(const char *name, int *ndev, uint64_t *total, uint64_t *uuid_seed);
int sim_card_take(int dev, int use, uint64_t bytes); /* SIM_OK or SIM_ENOMEM */
void sim_card_give(int dev, int use, uint64_t bytes);
/* the whole card: what all live processes use (reserve excluded), and the
 * reserve (SIMGPU_NVML_RESERVED of the process that made the card) */
uint64_t sim_card_used(int dev);
uint64_t sim_card_reserved(int dev);
struct sim_card_proc {
	uint32_t nvml_pid; /* as NVML reports it: the host's, plus SIMGPU_NVML_PID_OFFSET */
	uint64_t use[SIM_USE_N];
};
/* live processes with a footprint on dev; returns how many there are and
 * fills at most max of them */
int sim_card_procs(int dev, struct sim_card_proc *out, int max);
/* The cgroup at path (its sysfs directory, "/sys/fs/cgroup/..."): its
 * limits on every device (0 = none) and what it and the cgroups below it
 * use on dev. 0, or -1 when no process on the card was ever in it or below. */
int sim_card_dmem(int dev, const char *path, uint64_t *soft, uint64_t *hard, uint64_t *used);
/* test introspection: take the card's lock and keep it (the caller is then
 * killed, to show a dead holder does not wedge the card) */
void sim_card_debug_hold_lock(void);
/* this process as NVML names it: its pid in the namespace /proc belongs to
 * (NSpid's first field), plus SIMGPU_NVML_PID_OFFSET */
uint32_t sim_nvml_pid_self(void);

/* test introspection */
int sim_vmm_prop(uint64_t handle, void *prop, unsigned prop_len);
int sim_va_reserve(uint64_t size, uint64_t align, uint64_t *addr);
int sim_va_free(uint64_t addr, uint64_t size);
int sim_va_map(uint64_t addr, uint64_t size, uint64_t offset, uint64_t handle);
int sim_va_unmap(uint64_t addr, uint64_t size);
int sim_va_mapped(uint64_t addr, uint64_t size); /* SIM_OK if fully mapped */
/* the VMM mapping containing addr (cuMemGetAddressRange), SIM_ENOTFOUND if none */
int sim_va_range(uint64_t addr, uint64_t *base, uint64_t *size, int *dev);

/* Opaque registered handles (streams); value 0 is never issued. */
uint64_t sim_handle_new(int dev);
int sim_handle_device(uint64_t h); /* -1 if unknown */
int sim_handle_delete(uint64_t h);
/* the same, naming an object of the API layer (its first field says its kind) */
uint64_t sim_handle_new_obj(int dev, void *obj);
void *sim_handle_obj(uint64_t h); /* NULL if unknown */

/* Pinned host memory: real malloc'd memory, registered so frees are checked. */
void *sim_host_alloc(uint64_t size);
int sim_host_free(void *p);
int sim_host_known(const void *p); /* inside a live pinned block */

/* test introspection */
int sim_debug_used(int dev, unsigned long long *pages_bytes, unsigned long long *peak_bytes,
                   unsigned long long *live_allocs);
void sim_debug_reset_peak(void);

#pragma GCC visibility pop

#endif
