/* gpuguard: unit tests for handles.c, the VMM physical-memory lifetime, with
 * no driver: the test plays the hooks. A handle is refunded exactly once,
 * when its last reference and its last mapping are gone; an imported one is
 * never charged nor an untracked free; a refused call changes nothing.
 * handles.c is not in the list this test links (the Makefile's
 * UNIT_CORE_test_handles), so it is compiled in. */
#define GG_OPTIONS_WRITER /* these tests set options (options.h) */
#include "../harness.h"
#include "handles.c"

#include "ceiling.h"
#include "options.h"

#define MI (1024ull * 1024ull)

static uint64_t used0(void)
{
	return atomic_load(&gg_devices[0].used);
}

static void setup(void)
{
	memset(&gg_opt.limits, 0, sizeof(gg_opt.limits));
	gg_opt.limit_bad = 0;
	gg_opt.scope_process = 1;
	gg_ceiling_configure();
	gg_ceiling_reset();
	gg_handle_reset();
	atomic_store(&gg_devices[0].limit, GG_UNLIMITED);
	if (!gg_table)
		gg_table = gg_table_create(4096);
	gg_table_clear_unlocked(gg_table);
}

/* What the cuMemCreate hook does on success. */
static void create(uint64_t h, uint64_t size)
{
	CHECK_EQ_INT(gg_account_begin(0, size), 0);
	gg_account_commit(0, GG_NS_VMM, h, size, GPUGUARD_API_CU_MEM_CREATE, size);
	gg_handle_created(h, GG_HANDLE_CHARGED);
}

static void release(uint64_t h, int ok)
{
	struct gg_vmm_op op;
	CHECK_EQ_INT(gg_handle_release_begin(h, &op), 1);
	gg_handle_release_end(&op, ok);
}

static void unmap(uint64_t va, uint64_t size, int ok)
{
	struct gg_vmm_op op;
	gg_handle_unmap_begin(va, size, &op);
	gg_handle_unmap_end(&op, ok);
}

TEST(release_of_a_mapped_handle_waits_for_the_unmap)
{
	setup();
	create(0x1000, 64 * MI);
	gg_handle_mapped(0x7000000000, 64 * MI, 0x1000);
	release(0x1000, 1);
	CHECK_EQ_U64(used0(), 64 * MI);
	CHECK_EQ_U64(gg_table_live(gg_table), 1);
	unmap(0x7000000000, 64 * MI, 1);
	CHECK_EQ_U64(used0(), 0);
	CHECK_EQ_U64(gg_table_live(gg_table), 0);
	uint32_t r, m;
	CHECK_EQ_INT(gg_handle_state(0x1000, &r, &m), 0);
}

TEST(refused_calls_change_nothing)
{
	setup();
	create(0x2000, 32 * MI);
	gg_handle_mapped(0x7000000000, 32 * MI, 0x2000);
	release(0x2000, 0); /* the driver refused: the reference stays */
	uint32_t r = 0, m = 0;
	CHECK_EQ_INT(gg_handle_state(0x2000, &r, &m), 1);
	CHECK_EQ_U64(r, 1);
	unmap(0x7000000000, 32 * MI, 0); /* refused: the mapping stays */
	CHECK_EQ_INT(gg_handle_state(0x2000, &r, &m), 1);
	CHECK_EQ_U64(m, 1);
	release(0x2000, 1);
	CHECK_EQ_U64(used0(), 32 * MI);
	/* the last one refused: the record is put back, still charged */
	struct gg_vmm_op op;
	gg_handle_unmap_begin(0x7000000000, 32 * MI, &op);
	CHECK_EQ_U64(gg_table_live(gg_table), 0); /* out before the driver call */
	gg_handle_unmap_end(&op, 0);
	CHECK_EQ_U64(gg_table_live(gg_table), 1);
	CHECK_EQ_U64(used0(), 32 * MI);
	unmap(0x7000000000, 32 * MI, 1);
	CHECK_EQ_U64(used0(), 0);
}

TEST(retained_and_imported_references)
{
	setup();
	create(0x3000, 16 * MI);
	gg_handle_retained(0x3000);
	/* an import of our own export: the same memory, one more reference */
	gg_handle_created(0x3000, GG_HANDLE_IMPORTED);
	release(0x3000, 1);
	release(0x3000, 1);
	CHECK_EQ_U64(used0(), 16 * MI);
	release(0x3000, 1);
	CHECK_EQ_U64(used0(), 0);
	/* another process's memory: known, never charged, never refunded */
	gg_handle_created(0x4000, GG_HANDLE_IMPORTED);
	gg_handle_mapped(0x7100000000, 8 * MI, 0x4000);
	release(0x4000, 1);
	unmap(0x7100000000, 8 * MI, 1);
	CHECK_EQ_U64(used0(), 0);
	uint32_t r, m;
	CHECK_EQ_INT(gg_handle_state(0x4000, &r, &m), 0);
	/* a handle nobody told us of is the caller's fallback */
	struct gg_vmm_op op;
	CHECK_EQ_INT(gg_handle_release_begin(0x5000, &op), 0);
}

TEST(one_unmap_over_many_mappings)
{
	setup();
	enum { N = 40 }; /* more than the operation's inline items */
	for (uint64_t i = 0; i < N; i++) {
		create(0x10000 + i, 2 * MI);
		gg_handle_mapped(0x7200000000 + i * 2 * MI, 2 * MI, 0x10000 + i);
		release(0x10000 + i, 1);
	}
	CHECK_EQ_U64(used0(), N * 2 * MI);
	unmap(0x7200000000, N * 2 * MI, 1);
	CHECK_EQ_U64(used0(), 0);
	CHECK_EQ_U64(gg_table_live(gg_table), 0);
	CHECK_EQ_U64(mcount, 0);
	CHECK_EQ_U64(hcount, 0);
}

TEST(forget_drops_the_handle_and_its_mappings)
{
	setup();
	create(0x6000, 4 * MI);
	gg_handle_mapped(0x7300000000, 2 * MI, 0x6000);
	gg_handle_mapped(0x7400000000, 2 * MI, 0x6000);
	gg_handle_forget(0x6000);
	CHECK_EQ_U64(mcount, 0);
	CHECK_EQ_U64(hcount, 0);
	/* the record is the caller's (ctx.c settles it); an unmap finds nothing */
	unmap(0x7300000000, 2 * MI, 1);
	CHECK_EQ_U64(gg_table_live(gg_table), 1);
}

int main(void)
{
	RUN(release_of_a_mapped_handle_waits_for_the_unmap);
	RUN(refused_calls_change_nothing);
	RUN(retained_and_imported_references);
	RUN(one_unmap_over_many_mappings);
	RUN(forget_drops_the_handle_and_its_mappings);
	return harness_done();
}
