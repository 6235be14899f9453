/* The table's record packed field by field, the form big-endian builds
 * take (table.c, write_payload), forced on this machine: every field must
 * round-trip through it as through the little-endian word copy. */
#define GG_TABLE_FIELDWISE 1
#include "test_table.c"
