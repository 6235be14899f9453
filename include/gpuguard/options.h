/* gpuguard: every environment option, one row each, read by the library
 * (interpose/options.c: the loader, its messages, VERBOSE and the dump's
 * config records) and by the gpuguard command (`gpuguard run`'s flags and
 * help), so that adding an option is one row. Header-only, like region.h.
 *
 * A row: X(ID, field, TYPE, default, lo, hi, choices, bad, flag, syntax,
 * doc). The variable is GPUGUARD_<ID>; the library keeps its value in
 * gg_opt.<field>. TYPE names the one parser the value goes through
 * (options.c): BOOL 0|1; COUNT a quantity in [lo, hi]; DURATION
 * milliseconds in [lo, hi]; SIGNAL the dump signal syntax (signals.h); PATH
 * a string of lo to hi bytes; CHOICE the index of the value in choices
 * ('|'-separated); MODE an octal mode among choices; LIMIT the GPUGUARD_LIMIT
 * list (limit.h); ON_LIMIT fail or wait:<duration>; NAME a Kubernetes name
 * (lower-case letters, digits, '-', '.') of lo to hi bytes. A bad value is named on
 * stderr with the syntax, and then the default is used; where bad is given,
 * bad says what happens instead (a PATH is left empty). flag is the
 * metavariable of `gpuguard run --<id>`, or NULL for no flag. The default is
 * a string, what README.md's table shows and what the parser reads. */
#ifndef GPUGUARD_OPTIONS_H
#define GPUGUARD_OPTIONS_H

#include "gpuguard/parse.h"
#include "gpuguard/region.h"

#define GPUGUARD_OPTIONS(X)                                                                                            \
	X(LIMIT, limits, LIMIT, "", 0, 0, NULL, "refusing all device allocations until it is fixed", "Q",              \
	  "20Gi | 20G | 21474836480 | 90% | 0=20Gi,1=8Gi,*=4Gi",                                                       \
	  "per-device ceiling; unset = no ceiling (accounting only)")                                                  \
	X(VERBOSE, verbose, BOOL, "0", 0, 1, NULL, NULL, NULL, "0 | 1",                                                \
	  "print the effective configuration once, at the process's first GPU call")                                   \
	X(TABLE_SLOTS, table_slots, COUNT, "1Mi", 64, 1ull << 40, NULL, NULL, NULL,                                    \
	  "a count, quantity suffixes allowed (64 .. 1Ti)",                                                            \
	  "slots in the live-allocation table's first generation; it adds generations of twice the size as it "        \
	  "fills, so this only sets where it starts")                                                                  \
	X(CHARGE_MANAGED, charge_managed, BOOL, "1", 0, 1, NULL, NULL, NULL, "0 | 1",                                  \
	  "charge managed (unified) memory to the ceiling")                                                            \
	X(DUMP_DIR, dump_dir, PATH, ".", 1, 4096 - 128 - 1 /* room for a dump file name */, NULL, NULL, "D",           \
	  "a directory path", "where allocation dumps are written")                                                    \
	X(DUMP_SIGNAL, dump_signal, SIGNAL, "SIGUSR2", 0, 0, NULL, NULL, NULL,                                         \
	  "a signal name or number (SIGUSR2, SIGRTMIN+3); 0 = off; not one that crashes or stops the process",         \
	  "signal that asks for a dump, where the application does not handle it itself")                              \
	X(DUMP_MAX, dump_max, COUNT, "10", 0, 1000000, NULL, NULL, NULL, "a count; 0 = no dumps",                      \
	  "dumps written per process at most; later ones are counted as suppressed")                                   \
	X(DUMP_INTERVAL, dump_interval_ms, DURATION, "10s", 0, UINT64_MAX, NULL, NULL, NULL, GPUGUARD_DURATION_SYNTAX, \
	  "minimum time between two dumps; dumps asked for sooner are counted as suppressed")                          \
	X(DUMP_AT_EXIT, dump_at_exit, BOOL, "0", 0, 1, NULL, NULL, NULL, "0 | 1",                                      \
	  "write a dump at exit (a leak report), from processes that reached a GPU only")                              \
	X(HISTORY, history, COUNT, "65536", 0, 64ull << 20, NULL, NULL, NULL,                                          \
	  "a count, quantity suffixes allowed (0 .. 64Mi); 0 = off",                                                   \
	  "recent allocate/free/refusal events kept for dumps")                                                        \
	X(STACK_DEPTH, stack_depth, COUNT, "16", 0, GG_STACK_MAX_DEPTH, NULL, NULL, NULL, "0 .. 64; 0 = off",          \
	  "frames captured per governed allocation for dumps")                                                         \
	X(SCOPE, scope_process, CHOICE, "pod", 0, 0, "pod|process", NULL, "S", "pod | process",                        \
	  "pod: GPUGUARD_LIMIT is one budget for every process sharing the region file; process: each its own")        \
	X(SHARED, shared_path, PATH, GPUGUARD_REGION_DEFAULT_PATH, 1, 4095, NULL, NULL, "PATH",                        \
	  "a file path (never a symlink)",                                                                             \
	  "the pod region file (pod scope); every process of the pod must name the same one")                          \
	X(SHARED_MODE, shared_mode, MODE, "0600", 0, 0, "0600|0660|0666", NULL, NULL,                                  \
	  "an octal mode: 0600, 0660 or 0666",                                                                         \
	  "permissions the region file is created with; 0660 for containers running as different users in one "        \
	  "group")                                                                                                     \
	X(CONTEXT_RESERVE, context_reserve, COUNT, "0", 0, 1ull << 40, NULL, NULL, "Q", "a quantity: 300Mi, 0.5Gi, 0", \
	  "device memory charged per process per device for its CUDA context, which no allocation call shows")         \
	X(RUNTIME, runtime, BOOL, "1", 0, 1, NULL, NULL, NULL, "0 | 1",                                                \
	  "charge what the driver holds for the process beyond its allocations (NVML's per-process figure less "       \
	  "the books: contexts, modules, local memory) as the runtime category, under the same ceiling")               \
	X(RUNTIME_HEADROOM, runtime_headroom, COUNT, "32Mi", 0, 1ull << 40, NULL, NULL, NULL, "a quantity: 32Mi, 0",   \
	  "held inside the ceiling, once the driver shows a runtime, for growth between reconciles (lazy module "      \
	  "loads, a launch's local memory, the heap and FIFO's first use)")                                            \
	X(CGROUP, cgroup, PATH, "", 0, 4095, NULL, NULL, NULL,                                                         \
	  "a cgroup v2 path (/kubepods/pod1/ctr); empty = this process's own, from /proc/self/cgroup",                 \
	  "the cgroup whose driver-enforced device memory limit (MPS v3 memory partitioning) gpuguard reads and "      \
	  "keeps under; its parents' are read too")                                                                    \
	X(ON_LIMIT, wait_ms, ON_LIMIT, "fail", 0, 0, NULL, NULL, "L", "fail | wait:<duration> (wait:2s, wait:500ms)",  \
	  "past the ceiling: fail at once, or wait up to the duration for memory freed anywhere in the budget")        \
	X(TERMINATION_LOG, termination_log, PATH, "/dev/termination-log", 0, 4095, NULL,                               \
	  "writing no termination message", NULL, "a file path; empty = off",                                          \
	  "the first refusal appends one line here (Kubernetes' termination message) if the file exists and is "       \
	  "writable")                                                                                                  \
	X(POD_NAMESPACE, pod_namespace, NAME, "", 0, GPUGUARD_REGION_NAME - 1, NULL,                                   \
	  "leaving it out of the pod's metrics", NULL, "a Kubernetes namespace (downward API: metadata.namespace)",    \
	  "the pod's namespace, written into the pod region for the labels of its metrics")                            \
	X(POD_NAME, pod_name, NAME, "", 0, GPUGUARD_REGION_NAME - 1, NULL, "leaving it out of the pod's metrics",      \
	  NULL, "a pod name (downward API: metadata.name), at most 63 characters",                                     \
	  "the pod's name, written into the pod region for the labels of its metrics")                                 \
	X(CONTAINER_NAME, container_name, NAME, "", 0, GPUGUARD_REGION_NAME - 1, NULL,                                 \
	  "leaving it out of the pod's metrics", NULL, "a container name",                                             \
	  "this process's container, written into its slot of the pod region for the labels of its metrics")

/* Knobs for the test suites alone: read like the rows above, but not in
 * README.md, GPUGUARD_VERBOSE or dumps. */
#define GPUGUARD_TEST_OPTIONS(X)                                                                                  \
	X(TEST_UNWINDER, unwinder_fp, CHOICE, "libunwind", 0, 0, "libunwind|frame-pointer", NULL, NULL,           \
	  "libunwind | frame-pointer", "the stack unwinder, forced (libunwind is still used only when it loads)") \
	X(TEST_PYSTACK, pystack_off, CHOICE, "on", 0, 0, "on|off", NULL, NULL, "on | off",                        \
	  "Python frames in the stacks (off: native frames only, the benchmark's comparison)")

#endif
