/* gpuguard: cudart's private tables (export.c). */
#ifndef GG_EXPORT_H
#define GG_EXPORT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The real cuGetExportTable, for the dlsym and cuGetProcAddress tables. */
extern void *_Atomic gg_real_cuGetExportTable;

#endif
