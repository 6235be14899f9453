/* gpuguard: following the link map (linkmap.c). */
#ifndef GG_LINKMAP_H
#define GG_LINKMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* Binds the governed imports of objects loaded since the last call (a
 * RTLD_DEEPBIND plugin's) to our wrappers. Cheap when nothing was loaded;
 * does nothing before our constructor ran (while a sanitizer runtime still
 * initialises). */
void gg_linkmap_follow(void);

#endif
