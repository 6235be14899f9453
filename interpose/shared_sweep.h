/* gpuguard: pod scope's reclaim and sweep (shared_sweep.c). */
#ifndef GG_SHARED_SWEEP_H
#define GG_SHARED_SWEEP_H

#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "shared_file.h"

/* Returns the charges of pod processes that died to their devices (at most
 * every 10 ms; before a refusal and while waiting). */
void gg_shared_reclaim(void);
/* Memory info's rate-limited sweep of dead members (at most every 250 ms). */
void gg_shared_probe(void);
/* gg_shared_reclaim's rate limit (gg_now_ms); a fork child clears it. */
extern _Atomic uint64_t gg_shared_last_reclaim_ms;
/* After each change of our charge in the pod (a pod budget's `changed`)
 * and each sweep: notices a region written afresh, refreshes our obituary. */
void gg_shared_pod_changed(void);
/* Sweep steps S2-S4 on slot s, whose lock the caller holds (S1): its owner
 * died (died != 0; its obituary goes through fd when fd >= 0) or is us,
 * exiting. */
void gg_shared_reclaim_slot(unsigned s, int died, int fd);
/* With fd (not our main descriptor): reclaims every slot whose owner is
 * gone. Returns how many slots are held by live processes. */
unsigned gg_shared_sweep(int fd);

#endif
