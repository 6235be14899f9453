/* gpuguard: the allocation dump format, shared by the library (writer) and
 * `gpuguard report` (reader). JSON Lines: one JSON object per line, each with
 * a "t" field naming the record type, in the order listed below. jq and
 * Python read it as is. The reader rejects a newer format version with a
 * clear message and keeps reading older ones. The record types and their
 * keys are listed once, for the writer, the reader and the tests, in
 * schema.h.
 *
 * Format version 1. Numbers are JSON integers (bytes, ms, ids) unless noted;
 * addresses and handles are hex strings without 0x ("7f0000200000") so that
 * 64-bit values survive readers that parse numbers as doubles.
 *
 *  1 {"t":"header","format":1,"lib":"0.1.0","time":"2026-12-02T10:30:00Z",
 *     "unix_ms":N,"start_unix_ms":N,"host":"...","pid":N,
 *     "cmdline":["python3","serve.py"],"trigger":"ceiling",
 *     "unwinder":"libunwind"|"frame-pointer"|"none","stack_depth":N,
 *     "history_capacity":N}
 *     trigger: one of GPUGUARD_DUMP_TRIGGERS below.
 *  2 {"t":"config","name":"GPUGUARD_LIMIT","value":"4Gi","source":"environment"}
 *     one record per option.
 *  3 {"t":"device","dev":0,"limit":N|null,"used":N,"peak":N,"pool_reserved":N,
 *     "live_bytes":N,"allocs":N,"frees":N,"untracked_frees":N,
 *     "refused_ceiling":N,"refused_config":N,"refused_driver":N,
 *     "pool_overshoot":N,"driver_free":N|null,"driver_total":N|null,
 *     "scope":"pod"|"process","process_used":N}
 *     one per device that has any activity; limit null = no ceiling;
 *     driver_* null when the driver could not be asked. In pod scope limit,
 *     used and peak are the pod's (all its processes) and process_used is
 *     this process's part; readers treat a missing scope as "process" and a
 *     missing process_used as used (dumps written before pod scope).
 *     Since 0.2 also "wait_ms":N after process_used: how long this
 *     process's requests on dev slept for memory (GPUGUARD_ON_LIMIT=wait),
 *     in all; readers treat it as absent in older dumps.
 *     Since 0.3 (issue 22) also "runtime":N,"runtime_driver":N|null after
 *     wait_ms: the part of process_used that is the runtime category (what
 *     the driver holds for this process beyond its allocation calls:
 *     context, modules, local memory; headroom and cuCtxSetLimit's
 *     pre-charges included), and the driver's own per-process figure
 *     (NVML's used memory for this process) it was last reconciled
 *     against, null when never read. Readers treat both as absent in older
 *     dumps. Where the driver enforces a limit itself (MPS v3 memory
 *     partitioning: a cgroup's dmem.max, issue 22) also
 *     "driver_limit":N,"driver_limit_used":N,"own_limit":N|null after
 *     runtime_driver: the binding cgroup's hard limit, what all its
 *     processes used at the last reading, and the ceiling gpuguard has of
 *     its own (null: none); limit is then the smaller of own_limit and the
 *     room the cgroup leaves. Absent where no such limit was found.
 *  3b {"t":"pod","slot":N,"pid":N,"comm":"...","self":0|1,"alive":0|1,
 *     "dev":N,"used":N}
 *     pod scope only: one per process of the pod (this one included,
 *     self 1) holding memory on device dev of this process; pid is in
 *     that process's own PID namespace; alive 0 = it died and its charge
 *     is not yet reclaimed.
 *  3c {"t":"death","n":N,"pid":N,"comm":"...","start_ms":N,"last_ms":N,
 *     "found_ms":N,"gpu_entry":N,"gpu_used":N,"gpu_limit":N|null,
 *     "refused":N,"refused_age_ms":N|null,"cgroup_version":2|1|0,
 *     "working_set":N,"working_set_known":0|1,"host_limit":N|null}
 *     pod scope only, oldest first: the pod's recent deaths without exit
 *     (the region's deaths ring), as each process last recorded itself
 *     (at last_ms, Unix ms; found dead at found_ms). gpu_* on the region
 *     entry where it held the largest share of the ceiling (null = none);
 *     refused_age_ms: its last refusal before last_ms; working_set is the
 *     cgroup's usage less inactive_file (usage alone when
 *     working_set_known is 0). Readers skip unknown records, so older
 *     readers ignore it.
 *  4 {"t":"request","api":"cuMemAlloc_v2","size":N,"dev":0,"tid":N,"stack":N,
 *     "outcome":"refused_ceiling"|"driver_oom"}
 *     only in dumps triggered by a failure: the request that failed.
 *  5 {"t":"host","rss":N,"cgroup_version":2|1|0,"cgroup_limit":N|null,
 *     "cgroup_usage":N|null,"cgroup_oom_kill":N|null,"pinned_bytes":N,
 *     "pinned_allocs":N}
 *     pinned_*: live page-locked host memory from cuMemHostAlloc,
 *     cuMemAllocHost_v2 and hipHostMalloc (never charged to the GPU).
 *     Since 0.2 also "cgroup_inactive_file":N|null after cgroup_oom_kill
 *     (v2 memory.stat
 *     inactive_file, v1 total_inactive_file): the working set the kubelet
 *     counts is cgroup_usage minus it. Readers treat it as absent in older
 *     dumps.
 *  5c {"t":"meminfo","n":N,"of":N,"ms":N,"dev":N,"free":N,"total":N,"used":N}
 *     memory-info queries (cuMemGetInfo, hipMemGetInfo) as answered, the
 *     ceiling applied: the first 8 and the last 8 of "of" in all, n is the
 *     query's index, ms since the process started, used this process's live
 *     bytes on dev when it asked. How a server sized itself. Since 0.2 a
 *     query through NVML (nvmlDeviceGetMemoryInfo[_v2]) is one too, with
 *     "via":"nvml" after used and dev NVML's index; readers treat a
 *     missing via as the runtime's own query (cuMemGetInfo, hipMemGetInfo).
 *  5d {"t":"peak","dev":N,"bytes":N,"ms":N,"live":N}
 *     this process's highest live bytes on dev (requested sizes, as the
 *     history events count them) and when; live = the same count now.
 *     What was live at that moment is rebuilt from the live allocations and
 *     the history when the peak lies inside it.
 *  5e {"t":"peak_site","dev":N,"st":N,"bytes":N,"at":N,"ms":N}
 *     since 0.2, after the peak record of dev: the library's own snapshot
 *     of what was live at the peak, by stack (st, 0 = none), the largest
 *     16. at = the live bytes when it was taken (within 1%, at least
 *     1 MiB, of the peak), ms its time. Taken by the thread whose
 *     allocation raised the peak while others ran, so a blend of nearby
 *     moments; it outlives the history (older dumps lack it).
 *  5b {"t":"vmm","base":"7f0000000000","size":N,"mapped":N,"holes":N,
 *     "largest_hole":N}
 *     one per live virtual-address reservation (cuMemAddressReserve,
 *     hipMemAddressReserve): reserved bytes, bytes mapped in it now, the
 *     number of unmapped runs lying between mapped parts (2 MiB granules; the
 *     head before the first and the tail after the last mapped granule do not
 *     count) and the largest such run in bytes.
 *  6 {"t":"a","p":"7f0000200000","s":N,"d":0,"api":1,"age":N,"tid":N,"st":N}
 *     one per live allocation: address/handle, requested size, device, api
 *     (enum gpuguard_api), age in ms, thread, stack id (0 = none).
 *  7 {"t":"stack","id":N,"frames":[{"m":"libtorch_cuda.so","o":"1a2b3c",
 *     "s":"c10::cuda::CUDACachingAllocator::malloc"},...]}
 *     one per stack id referenced above: module basename, offset in it (hex),
 *     symbol when dladdr knows it (else absent). Innermost frame first.
 *     Since 0.2 a Python frame (issue 27, docs/python.md) is
 *     {"m":"serve.py","o":"d4","s":"grow_kv_cache","py":"/app/serve.py",
 *     "l":212}: m the file's basename, o the line in hex, s the function,
 *     py the file as the code object names it, l the line (0 = unknown);
 *     readers that know py show "serve.py:212 in grow_kv_cache", older
 *     ones still read m, o and s.
 *  8 {"t":"h","ms":N,"op":"a"|"f"|"r","p":"...","s":N,"d":0,"api":N,"st":N}
 *     the last GPUGUARD_HISTORY events, oldest first: allocation, free, or
 *     refusal; ms since the process started.
 *  9 {"t":"end","records":N,"suppressed":N,"write_errors":N,"signal_refused":N,
 *     "history_dropped":N,"log_dropped":N}
 *     the trailer; its absence means the writer died mid-file. records
 *     counts every line before it. signal_refused: allocations refused so
 *     far because a signal handler made them while its thread was inside
 *     a hook; history_dropped: history events overwritten before this dump
 *     could read them; log_dropped: log lines over the rate limit (these
 *     three absent in older dumps).
 */
#ifndef GPUGUARD_DUMP_H
#define GPUGUARD_DUMP_H

#define GPUGUARD_DUMP_FORMAT 1

/* What made the library write a dump. */
#define GPUGUARD_DUMP_TRIGGERS "ceiling", "driver_oom", "signal", "exit"

/* The "api" names (GPUGUARD_API_NAMES) are gpuguard/api.h's rows. */
#include "api.h"

#endif
