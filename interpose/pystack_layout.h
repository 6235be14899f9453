/* gpuguard: where CPython keeps a thread's frames, per minor version (issue
 * 27). One row per supported minor version, taken from that version's own
 * internal headers (Py_BUILD_CORE); tests/python/offsets.c compiles the same
 * offsetof()s against each installed version and compares them with these
 * rows, and on 3.13 also with the _Py_DebugOffsets the interpreter publishes
 * (which the reader prefers there, after checking its cookie and version).
 * A version added later is a row here and a run of that test. Header-only,
 * with no Python types: the library never includes Python's headers. */
#ifndef GG_PYSTACK_LAYOUT_H
#define GG_PYSTACK_LAYOUT_H

#include <stdint.h>

#define GG_PY_NONE 0xffff /* no such field in this version */

struct gg_py_layout {
	uint16_t minor; /* 3.minor */
	/* PyThreadState: the current frame (3.9/3.10 frame object, 3.13
	 * interpreter frame), or the cframe (3.11/3.12) whose current_frame
	 * is it. */
	uint16_t ts_frame;
	uint16_t cframe_current; /* _PyCFrame.current_frame, 3.11/3.12 */
	/* The frame (PyFrameObject on 3.9/3.10, _PyInterpreterFrame after). */
	uint16_t fr_back;     /* f_back / previous */
	uint16_t fr_code;     /* f_code / f_executable (3.13) */
	uint16_t fr_lasti;    /* int f_lasti (3.9 bytes, 3.10 code units); prev_instr / instr_ptr */
	uint16_t fr_owner;    /* char owner, 3.11+ */
	uint16_t fr_is_entry; /* bool is_entry, 3.11 only */
	/* PyCodeObject */
	uint16_t co_filename, co_name, co_firstlineno;
	uint16_t co_linetable;      /* co_lnotab (3.9), co_linetable (3.10+) */
	uint16_t co_code;           /* co_code_adaptive, 3.11+: the instructions */
	uint16_t co_firsttraceable; /* int _co_firsttraceable, 3.11+ */
	/* uint32_t co_version, 3.12+: a counter the interpreter hands each new
	 * code object (0 once spent), so (address, version) names one object
	 * even where a freed one's address is reused. */
	uint16_t co_version;
	/* PyBytesObject */
	uint16_t bytes_size, bytes_sval;
	/* PyASCIIObject / PyCompactUnicodeObject */
	uint16_t str_length, str_state, str_ascii_size, str_utf8_length, str_utf8, str_compact_size;
};

/* x86-64 and aarch64 (LP64): the same layout on both. */
static const struct gg_py_layout gg_py_layouts[] = {
    /* clang-format off */
	/* minor ts  cf    back code lasti owner entry  file name first table code trace  ver  bsz bval  len st  asz u8l u8  csz */
	{ 9,  24, GG_PY_NONE, 24, 32, 104, GG_PY_NONE, GG_PY_NONE, 104, 112, 40, 120, GG_PY_NONE, GG_PY_NONE, GG_PY_NONE, 16, 32, 16, 32, 48, 48, 56, 72 },
	{ 10, 24, GG_PY_NONE, 24, 32, 96, GG_PY_NONE, GG_PY_NONE, 104, 112, 40, 120, GG_PY_NONE, GG_PY_NONE, GG_PY_NONE, 16, 32, 16, 32, 48, 48, 56, 72 },
	{ 11, 56, 8,  48, 32, 56, 69, 68, 112, 120, 72, 136, 184, 168, GG_PY_NONE, 16, 32, 16, 32, 48, 48, 56, 72 },
	{ 12, 56, 0,  8,  0,  56, 70, GG_PY_NONE, 112, 120, 68, 136, 192, 176, 92, 16, 32, 16, 32, 40, 40, 48, 56 },
	{ 13, 72, GG_PY_NONE, 8, 0, 56, 70, GG_PY_NONE, 112, 120, 68, 136, 200, 184, 92, 16, 32, 16, 32, 40, 40, 48, 56 },
    /* clang-format on */
};
#define GG_PY_LAYOUTS (sizeof gg_py_layouts / sizeof gg_py_layouts[0])

/* 3.13's _Py_DebugOffsets: where in it each offset we read sits (its own
 * layout is fixed only within a minor version, so this too is per minor).
 * Byte positions from the start of _PyRuntime. */
struct gg_py_debug_layout {
	uint16_t minor;
	uint16_t version, free_threaded;
	uint16_t ts_current_frame;
	uint16_t fr_previous, fr_executable, fr_instr_ptr, fr_owner;
	uint16_t co_filename, co_name, co_linetable, co_firstlineno, co_code_adaptive;
};
static const struct gg_py_debug_layout gg_py_debug_layouts[] = {
    /* clang-format off */
	/* minor ver ft  ts.cur  fr.prev exec instr owner  co.file name table first code */
	{ 13, 8, 16, 184, 232, 240, 248, 264, 280, 288, 304, 312, 344 },
    /* clang-format on */
};
#define GG_PY_DEBUG_LAYOUTS (sizeof gg_py_debug_layouts / sizeof gg_py_debug_layouts[0])

#endif
