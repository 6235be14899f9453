/* gpuguard: the static asserts tests/abi/cuda.c and hip.c build on. A
 * mismatch fails the compile, which is the test. */
#ifndef GPUGUARD_ABI_SAME_H
#define GPUGUARD_ABI_SAME_H

#include <stddef.h>

#define SAME_TYPE(ours, theirs) _Static_assert(__builtin_types_compatible_p(ours, theirs), #ours " is not " #theirs)
/* Our int stands for an enum: the same size and alignment is what the ABI needs. */
#define SAME_SCALAR(ours, theirs)                                                            \
	_Static_assert(sizeof(ours) == sizeof(theirs) && _Alignof(ours) == _Alignof(theirs), \
	               #ours " differs in size or alignment from " #theirs)
#define SAME_CONST(ours, theirs) _Static_assert((ours) == (theirs), #ours " != " #theirs)
#define SAME_STRUCT(ours, theirs) SAME_SCALAR(ours, theirs)
#define SAME_FIELD(ours, theirs, field)                                                \
	_Static_assert(offsetof(ours, field) == offsetof(theirs, field) &&             \
	                   sizeof(((ours *)0)->field) == sizeof(((theirs *)0)->field), \
	               #ours "." #field " differs in offset or size from " #theirs)

#endif
