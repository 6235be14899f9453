/* gpuguard: pod scope's region file (shared_file.c): this process's
 * attachment, the locks, opening the file. */
#ifndef GG_SHARED_FILE_H
#define GG_SHARED_FILE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "gpuguard/region.h"

/* This process's attachment (shared_attach.c makes it, once; a fork child
 * drops it). */
enum { ATTACH_NONE, ATTACH_BUSY, ATTACH_OK, ATTACH_FAILED };
/* ATTACH_*: released once attached (or lost: shared_guard.c), so readers
 * that acquire ATTACH_OK see gg_shared_reg and gg_shared_me */
extern _Atomic int gg_shared_attach_state;
extern int gg_shared_fd;                          /* holds our slot's lock for as long as we live */
extern void *gg_shared_reg;                       /* the mapping, GPUGUARD_REGION_SIZE bytes */
extern struct gpuguard_region_proc *gg_shared_me; /* our slot */
extern unsigned gg_shared_slot;
extern _Atomic int gg_shared_detached; /* left the region at exit */

/* Tries an OFD lock (type F_WRLCK or F_UNLCK) on one byte. 0 = done. */
int gg_shared_lock_byte(int fd, uint64_t off, short type);
/* The setup lock (byte 0), tried for at most 2 s. */
int gg_shared_lock_setup(int fd);
/* Says once that the region cannot be used, why, and what we do instead. */
void gg_shared_refuse(const char *why, int err);
/* Opens (creating it with our mode when absent) and vets the file. */
int gg_shared_open_region(void);
/* A second descriptor on our file (see shared_file.c), or -1. */
int gg_shared_open_again(void);
/* Says once when the path no longer names the file we attached to. */
void gg_shared_check_path(void);

/* ---- slots --------------------------------------------------------------- */

static inline struct gpuguard_region_device *gg_shared_entry(unsigned i)
{
	return gpuguard_region_dev(gg_shared_reg, i);
}

static inline _Atomic uint64_t *gg_shared_occupied_word(unsigned s)
{
	return &((struct gpuguard_region_header *)gg_shared_reg)->occupied[s / 64];
}

#endif
