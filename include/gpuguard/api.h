/* gpuguard: the calls that make an allocation, one row each. The library
 * (its hooks, books and dump writer) and the gpuguard command (loader,
 * report, analyzer) read the same rows, so an API's number, its name in a
 * dump and what kind of memory it hands out cannot drift apart. Header-only,
 * C and C++; gpuguard.h takes enum gpuguard_api from here. */
#ifndef GPUGUARD_API_H
#define GPUGUARD_API_H

#include <stdint.h>

/* X(id, value, name, runtime, kind):
 *   id       GPUGUARD_API_<id>
 *   value    its number, stable: dumps carry it ("api":N), so a row is never
 *            renumbered or reused; rows stay in value order, without gaps
 *   name     what dumps and reports call it (also stable: golden dumps)
 *   runtime  CUDA or HIP: whose cuMemGetInfo/hipMemGetInfo a dump asks
 *   kind     PTR (a device pointer), POOL (a block of a stream-ordered pool,
 *            charged through its pool's reserve), VMM (a physical handle),
 *            ARRAY or MIPMAP (an array handle, charged whole pages) */
#define GPUGUARD_APIS(X)                                                          \
	X(NONE, 0, "none", CUDA, PTR)                                             \
	X(CU_MEM_ALLOC, 1, "cuMemAlloc_v2", CUDA, PTR) /* cudaMalloc */           \
	X(CU_MEM_ALLOC_PITCH, 2, "cuMemAllocPitch_v2", CUDA, PTR)                 \
	X(CU_MEM_ALLOC_MANAGED, 3, "cuMemAllocManaged", CUDA, PTR)                \
	X(CU_MEM_ALLOC_ASYNC, 4, "cuMemAllocAsync", CUDA, POOL) /* and _ptsz */   \
	X(CU_MEM_ALLOC_FROM_POOL, 5, "cuMemAllocFromPoolAsync", CUDA, POOL)       \
	X(CU_MEM_CREATE, 6, "cuMemCreate", CUDA, VMM)                             \
	X(CU_ARRAY, 7, "cuArrayCreate", CUDA, ARRAY) /* and cuArray3DCreate_v2 */ \
	X(CU_MIPMAPPED_ARRAY, 8, "cuMipmappedArrayCreate", CUDA, MIPMAP)          \
	X(HIP_MALLOC, 9, "hipMalloc", HIP, PTR)                                   \
	X(HIP_EXT_MALLOC, 10, "hipExtMallocWithFlags", HIP, PTR)                  \
	X(HIP_MALLOC_MANAGED, 11, "hipMallocManaged", HIP, PTR)                   \
	X(HIP_MALLOC_PITCH, 12, "hipMallocPitch", HIP, PTR)                       \
	X(HIP_MALLOC_ASYNC, 13, "hipMallocAsync", HIP, POOL)                      \
	X(HIP_MALLOC_FROM_POOL, 14, "hipMallocFromPoolAsync", HIP, POOL)          \
	X(HIP_MEM_CREATE, 15, "hipMemCreate", HIP, VMM)

/* Which call made an allocation. */
enum gpuguard_api {
#define GPUGUARD_API_ENUM_(id, value, name, runtime, kind) GPUGUARD_API_##id = value,
	GPUGUARD_APIS(GPUGUARD_API_ENUM_)
#undef GPUGUARD_API_ENUM_
	    GPUGUARD_API_COUNT
};

/* The names indexed by value, for an array initializer. */
#define GPUGUARD_API_NAME_(id, value, name, runtime, kind) name,
#define GPUGUARD_API_NAMES GPUGUARD_APIS(GPUGUARD_API_NAME_)

/* Indexing by value needs the rows in value order: each row's value must be
 * its position, checked here at compile time. */
enum gpuguard_api_position_ {
#define GPUGUARD_API_POS_(id, value, name, runtime, kind) GPUGUARD_API_POS_##id,
	GPUGUARD_APIS(GPUGUARD_API_POS_)
#undef GPUGUARD_API_POS_
};
#ifdef __cplusplus
#define GPUGUARD_API_ASSERT_ static_assert
#else
#define GPUGUARD_API_ASSERT_ _Static_assert
#endif
#define GPUGUARD_API_CHECK_(id, value, name, runtime, kind) \
	GPUGUARD_API_ASSERT_(GPUGUARD_API_POS_##id == value, "api rows in value order");
GPUGUARD_APIS(GPUGUARD_API_CHECK_)
#undef GPUGUARD_API_CHECK_
#undef GPUGUARD_API_ASSERT_

enum gpuguard_api_runtime { GPUGUARD_RUNTIME_CUDA, GPUGUARD_RUNTIME_HIP };
enum gpuguard_api_kind {
	GPUGUARD_KIND_PTR,
	GPUGUARD_KIND_POOL,
	GPUGUARD_KIND_VMM,
	GPUGUARD_KIND_ARRAY,
	GPUGUARD_KIND_MIPMAP
};

/* The kind of api's memory; an unknown number (a newer dump's) is PTR. */
static inline enum gpuguard_api_kind gpuguard_api_kind(uint32_t api)
{
	switch (api) {
#define GPUGUARD_API_KIND_(id, value, name, runtime, kind) \
	case value:                                        \
		return GPUGUARD_KIND_##kind;
		GPUGUARD_APIS(GPUGUARD_API_KIND_)
#undef GPUGUARD_API_KIND_
	}
	return GPUGUARD_KIND_PTR;
}

/* The runtime api belongs to; an unknown number is CUDA. */
static inline enum gpuguard_api_runtime gpuguard_api_runtime(uint32_t api)
{
	switch (api) {
#define GPUGUARD_API_RUNTIME_(id, value, name, runtime, kind) \
	case value:                                           \
		return GPUGUARD_RUNTIME_##runtime;
		GPUGUARD_APIS(GPUGUARD_API_RUNTIME_)
#undef GPUGUARD_API_RUNTIME_
	}
	return GPUGUARD_RUNTIME_CUDA;
}

#endif
