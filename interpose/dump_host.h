/* gpuguard: the host probes (dump_host.c): host memory and the cgroup, for
 * the dump's host record and the pod's obituaries. */
#ifndef GG_DUMP_HOST_H
#define GG_DUMP_HOST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "shared.h"

/* Host memory now (struct gg_host_sample: shared.h, whose obituaries take
 * it too). The cgroup is found from /proc/self/cgroup, or is the directory
 * GPUGUARD_TEST_CGROUP_DIR names (a test-only knob: fixture files instead
 * of the real cgroup). */
void gg_dump_host_sample(struct gg_host_sample *h);
/* Reads GPUGUARD_TEST_CGROUP_DIR; called on application threads only (at
 * arming and at exit), never by the writer. */
void gg_dump_read_test_knobs(void);

#endif
