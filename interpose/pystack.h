/* gpuguard: Python frames in captured stacks (pystack.c). */
#ifndef GG_PYSTACK_H
#define GG_PYSTACK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* A stack word with this bit is a Python frame (a code-object id and a
 * line), not a return address: no user-space address has it. */
#define GG_PY_FRAME_BIT (1ull << 63)
/* 1 while captures should look for Python frames (relaxed; a hint). */
extern _Atomic int gg_py_live;
/* The calling thread's Python frames spliced into its native frames fr[0,n)
 * (innermost first, room for cap): returns the new count. */
int gg_pystack_splice(uintptr_t *fr, int n, int cap);
/* The link map grew: look for an interpreter again if none was found. */
void gg_pystack_recheck(void);
/* w's file, function and line if w is a Python frame (1), else 0. */
int gg_pystack_frame(uintptr_t w, const char **file, const char **func, uint32_t *line);
/* The line of byte offset addr in a 3.minor line table (0 = none). */
int gg_pystack_addr2line(int minor, const unsigned char *table, size_t n, int first, int addr);

#endif
