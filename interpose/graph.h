/* gpuguard: graph memory: allocation nodes (graph.c). */
#ifndef GG_GRAPH_H
#define GG_GRAPH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

/* The graph gained allocation nodes of `bytes` on dev (cuGraphAddMemAllocNode,
 * or a cuMemAllocAsync captured into it). */
void gg_graph_add_bytes(const void *graph, int dev, uint64_t bytes);
/* va was handed out for a graph allocation; and whether one was. */
void gg_graph_va_add(uint64_t va);
int gg_graph_va_known(uint64_t va);
/* exec was instantiated from graph: it inherits graph's bytes. */
void gg_graph_instantiated(const void *exec, const void *graph);
void gg_graph_forget(const void *key, int exec);
/* An executable graph's allocation-node bytes and device; -1 if unknown. */
int gg_graph_exec_bytes(const void *exec, int *dev, uint64_t *bytes);
/* Brings dev's graph-memory charge to the driver's reserve `reserved`;
 * `credit` bytes the caller reserved for this growth are folded in. */
void gg_graph_settle(int dev, uint64_t reserved, uint64_t credit);
void gg_graph_reset(void);

#endif
