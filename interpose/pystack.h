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
/* The stack id of native stack id native with the calling thread's Python
 * frames spliced in (room for cap frames); native when it runs no Python.
 * stack.c, a layer up, hands down how to read an id's frames and intern. */
uint32_t gg_pystack_stack(uint32_t native, int cap, int (*frames)(uint32_t, const uintptr_t **),
                          uint32_t (*intern)(const uintptr_t *, int));
/* The link map grew: look for an interpreter again if none was found. */
void gg_pystack_recheck(void);
/* w's file, function and line if w is a Python frame (1), else 0. */
int gg_pystack_frame(uintptr_t w, const char **file, const char **func, uint32_t *line);
/* The line of byte offset addr in a 3.minor line table (0 = none). */
int gg_pystack_addr2line(int minor, const unsigned char *table, size_t n, int first, int addr);

#endif
