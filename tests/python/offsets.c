/* gpuguard test: the header comparison of issue 27. Compiled once per
 * installed CPython with -DPy_BUILD_CORE against that version's internal
 * headers: prints the offsets those headers give and compares them with the
 * library's row for that minor version (interpose/pystack_layout.h). On 3.13
 * it also reads the _Py_DebugOffsets the linked interpreter publishes and
 * compares both. Exit 0 = all agree; 1 = a difference, printed. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>
#endif
#if PY_MINOR_VERSION >= 13
#include <internal/pycore_runtime.h>
#endif
#if PY_MINOR_VERSION <= 10
#include <frameobject.h>
#endif

#include "../../interpose/pystack_layout.h"

static int bad;

static void cmp(const char *what, unsigned ours, unsigned theirs)
{
	printf("%-22s ours %-6u headers %-6u %s\n", what, ours, theirs, ours == theirs ? "ok" : "DIFFERENT");
	if (ours != theirs)
		bad = 1;
}

#define NONE GG_PY_NONE

int main(void)
{
	const struct gg_py_layout *L = NULL;
	for (size_t i = 0; i < GG_PY_LAYOUTS; i++)
		if (gg_py_layouts[i].minor == PY_MINOR_VERSION)
			L = &gg_py_layouts[i];
	printf("CPython %s headers\n", PY_VERSION);
	if (!L) {
		printf("no row for 3.%d in pystack_layout.h\n", PY_MINOR_VERSION);
		return 1;
	}
#if PY_MINOR_VERSION <= 10
	cmp("ts_frame", L->ts_frame, offsetof(PyThreadState, frame));
	cmp("cframe_current", L->cframe_current, NONE);
	cmp("fr_back", L->fr_back, offsetof(PyFrameObject, f_back));
	cmp("fr_code", L->fr_code, offsetof(PyFrameObject, f_code));
	cmp("fr_lasti", L->fr_lasti, offsetof(PyFrameObject, f_lasti));
	cmp("fr_owner", L->fr_owner, NONE);
	cmp("fr_is_entry", L->fr_is_entry, NONE);
#if PY_MINOR_VERSION == 9
	cmp("co_linetable", L->co_linetable, offsetof(PyCodeObject, co_lnotab));
#else
	cmp("co_linetable", L->co_linetable, offsetof(PyCodeObject, co_linetable));
#endif
	cmp("co_code", L->co_code, NONE);
	cmp("co_firsttraceable", L->co_firsttraceable, NONE);
	cmp("co_version", L->co_version, NONE);
#else
#if PY_MINOR_VERSION <= 12
	cmp("ts_frame", L->ts_frame, offsetof(PyThreadState, cframe));
	cmp("cframe_current", L->cframe_current, offsetof(_PyCFrame, current_frame));
	cmp("fr_code", L->fr_code, offsetof(_PyInterpreterFrame, f_code));
	cmp("fr_lasti", L->fr_lasti, offsetof(_PyInterpreterFrame, prev_instr));
#else
	cmp("ts_frame", L->ts_frame, offsetof(PyThreadState, current_frame));
	cmp("cframe_current", L->cframe_current, NONE);
	cmp("fr_code", L->fr_code, offsetof(_PyInterpreterFrame, f_executable));
	cmp("fr_lasti", L->fr_lasti, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
	cmp("fr_back", L->fr_back, offsetof(_PyInterpreterFrame, previous));
	cmp("fr_owner", L->fr_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_MINOR_VERSION == 11
	cmp("fr_is_entry", L->fr_is_entry, offsetof(_PyInterpreterFrame, is_entry));
#else
	cmp("fr_is_entry", L->fr_is_entry, NONE);
#endif
	cmp("co_linetable", L->co_linetable, offsetof(PyCodeObject, co_linetable));
	cmp("co_code", L->co_code, offsetof(PyCodeObject, co_code_adaptive));
	cmp("co_firsttraceable", L->co_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable));
	cmp("FRAME_OWNED_BY_GENERATOR", 1, FRAME_OWNED_BY_GENERATOR);
#if PY_MINOR_VERSION >= 12
	cmp("co_version", L->co_version, offsetof(PyCodeObject, co_version));
	cmp("sizeof co_version", 4, sizeof(((PyCodeObject *)0)->co_version));
#else
	cmp("co_version", L->co_version, NONE);
#endif
#if PY_MINOR_VERSION >= 12
	cmp("FRAME_OWNED_BY_CSTACK", 3, FRAME_OWNED_BY_CSTACK);
#endif
#endif
	cmp("co_filename", L->co_filename, offsetof(PyCodeObject, co_filename));
	cmp("co_name", L->co_name, offsetof(PyCodeObject, co_name));
	cmp("co_firstlineno", L->co_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	cmp("sizeof co_firstlineno", 4, sizeof(((PyCodeObject *)0)->co_firstlineno));
	cmp("bytes_size", L->bytes_size, offsetof(PyVarObject, ob_size));
	cmp("bytes_sval", L->bytes_sval, offsetof(PyBytesObject, ob_sval));
	cmp("ob_type", 8, offsetof(PyObject, ob_type));
	cmp("str_length", L->str_length, offsetof(PyASCIIObject, length));
	cmp("str_state", L->str_state, offsetof(PyASCIIObject, state));
	cmp("str_ascii_size", L->str_ascii_size, sizeof(PyASCIIObject));
	cmp("str_utf8_length", L->str_utf8_length, offsetof(PyCompactUnicodeObject, utf8_length));
	cmp("str_utf8", L->str_utf8, offsetof(PyCompactUnicodeObject, utf8));
	cmp("str_compact_size", L->str_compact_size, sizeof(PyCompactUnicodeObject));
	{
		/* The state bits the reader decodes: kind at bit 2 (3 bits),
		 * compact at bit 5, ascii at bit 6. */
		PyASCIIObject o;
		memset(&o, 0, sizeof o);
		o.state.kind = 4;
		o.state.compact = 1;
		o.state.ascii = 1;
		uint32_t raw;
		memcpy(&raw, (char *)&o + offsetof(PyASCIIObject, state), 4);
		cmp("state bits", (4u << 2) | (1u << 5) | (1u << 6), raw);
	}
#if PY_MINOR_VERSION >= 13
	const struct gg_py_debug_layout *D = NULL;
	for (size_t i = 0; i < GG_PY_DEBUG_LAYOUTS; i++)
		if (gg_py_debug_layouts[i].minor == PY_MINOR_VERSION)
			D = &gg_py_debug_layouts[i];
	if (!D) {
		printf("no debug-offsets row for 3.%d\n", PY_MINOR_VERSION);
		return 1;
	}
#define DO(f) offsetof(_PyRuntimeState, debug_offsets) + offsetof(_Py_DebugOffsets, f)
	cmp("dbg version", D->version, DO(version));
	cmp("dbg free_threaded", D->free_threaded, DO(free_threaded));
	cmp("dbg ts.current_frame", D->ts_current_frame, DO(thread_state.current_frame));
	cmp("dbg fr.previous", D->fr_previous, DO(interpreter_frame.previous));
	cmp("dbg fr.executable", D->fr_executable, DO(interpreter_frame.executable));
	cmp("dbg fr.instr_ptr", D->fr_instr_ptr, DO(interpreter_frame.instr_ptr));
	cmp("dbg fr.owner", D->fr_owner, DO(interpreter_frame.owner));
	cmp("dbg co.filename", D->co_filename, DO(code_object.filename));
	cmp("dbg co.name", D->co_name, DO(code_object.name));
	cmp("dbg co.linetable", D->co_linetable, DO(code_object.linetable));
	cmp("dbg co.firstlineno", D->co_firstlineno, DO(code_object.firstlineno));
	cmp("dbg co.code_adaptive", D->co_code_adaptive, DO(code_object.co_code_adaptive));
	/* What the running interpreter publishes, against the row. */
	const _Py_DebugOffsets *pub = &_PyRuntime.debug_offsets;
	cmp("published cookie", 1, memcmp(pub->cookie, "xdebugpy", 8) == 0);
	cmp("published minor", PY_MINOR_VERSION, (unsigned)((pub->version >> 16) & 0xff));
	cmp("published free_threaded", 0, (unsigned)pub->free_threaded);
	cmp("published ts.current_frame", L->ts_frame, (unsigned)pub->thread_state.current_frame);
	cmp("published fr.previous", L->fr_back, (unsigned)pub->interpreter_frame.previous);
	cmp("published fr.executable", L->fr_code, (unsigned)pub->interpreter_frame.executable);
	cmp("published fr.instr_ptr", L->fr_lasti, (unsigned)pub->interpreter_frame.instr_ptr);
	cmp("published fr.owner", L->fr_owner, (unsigned)pub->interpreter_frame.owner);
	cmp("published co.filename", L->co_filename, (unsigned)pub->code_object.filename);
	cmp("published co.name", L->co_name, (unsigned)pub->code_object.name);
	cmp("published co.linetable", L->co_linetable, (unsigned)pub->code_object.linetable);
	cmp("published co.firstlineno", L->co_firstlineno, (unsigned)pub->code_object.firstlineno);
	cmp("published co.code_adaptive", L->co_code, (unsigned)pub->code_object.co_code_adaptive);
#endif
	printf("%s\n", bad ? "DIFFERENT" : "all agree");
	return bad;
}
