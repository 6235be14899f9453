/* gpuguard: unit tests for ceiling.c (reserve, release, force, charge sizes,
 * memory-info virtualisation, percent limits) and the refusal bracket in
 * account.c, plus threads racing for the last bytes under a ceiling. */
#define GG_OPTIONS_WRITER /* these tests set options (options.h) */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "../harness.h"
#include "account.h"
#include "base.h"
#include "ceiling.h"
#include "options.h"
#include "table.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 1
#else
#define SLOW 0
#endif

#define KI 1024ull
#define MI (1024ull * KI)
#define GI (1024ull * MI)

static uint64_t used(int dev)
{
	return atomic_load(&gg_devices[dev].used);
}

static uint64_t refused(int dev, enum gpuguard_refusal why)
{
	return atomic_load(&gg_devices[dev].refused[why]);
}

/* Fresh books with a byte limit on dev (GG_UNLIMITED for none). */
static void setup(int dev, uint64_t limit)
{
	memset(&gg_opt.limits, 0, sizeof(gg_opt.limits));
	gg_opt.limit_bad = 0;
	gg_opt.limit_set = limit != GG_UNLIMITED;
	gg_opt.scope_process = 1; /* these books are this process's own; pod scope: test_shared */
	gg_ceiling_configure();
	gg_ceiling_reset();
	atomic_store(&gg_devices[dev].limit, limit);
}

TEST(reserve_up_to_exact_limit)
{
	setup(0, GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI / 2), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI / 2 - 1), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), 0); /* exactly at the limit */
	CHECK_EQ_U64(used(0), GI);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1); /* one byte more */
	CHECK_EQ_U64(used(0), GI);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 1);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CONFIG), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 0), 0); /* nothing always fits */
	gg_ceiling_release(0, 1);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 2), -1);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 2);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), 0);
	/* Other devices keep their own books. */
	CHECK_EQ_U64(used(1), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(1, 100 * GI), 0);
	CHECK_EQ_U64(refused(1, GPUGUARD_REFUSED_CEILING), 0);
	/* A zero limit refuses any byte. */
	setup(2, 0);
	CHECK_EQ_INT(gg_ceiling_reserve(2, 1), -1);
	CHECK_EQ_U64(used(2), 0);
	gg_ceiling_reset();
}

TEST(release_saturates_at_zero)
{
	setup(0, GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 100), 0);
	gg_ceiling_release(0, 1000);
	CHECK_EQ_U64(used(0), 0);
	gg_ceiling_release(0, 1);
	CHECK_EQ_U64(used(0), 0);
	gg_ceiling_release(0, UINT64_MAX);
	CHECK_EQ_U64(used(0), 0);
	/* Still a working ceiling afterwards, not a wrapped ~16 EiB. */
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1);
	gg_ceiling_release(0, GI);
	CHECK_EQ_U64(used(0), 0);
}

/* Issue 24: a release is one fetch-and-subtract, and one that passes zero
 * repairs the word after (ceiling.c, sub_own). A release that finds the
 * word already below zero (another's repair still pending, made here by
 * hand) takes nothing, so that word and pending repairs never sum below
 * zero: the old compare-and-swap would take 3 from the wrapped word here
 * and leave it 3 below zero once the repair lands. */
TEST(release_during_a_pending_repair_takes_nothing)
{
	setup(0, GI);
	atomic_store(&gg_devices[0].used, (uint64_t)-5); /* 5 over-released, its repair of 5 pending */
	gg_ceiling_release(0, 3);
	CHECK_EQ_U64(used(0), (uint64_t)-5);
	atomic_fetch_add(&gg_devices[0].used, 5); /* the pending repair lands */
	CHECK_EQ_U64(used(0), 0);
	/* A release of more than is held, from a word at or above zero. */
	CHECK_EQ_INT(gg_ceiling_reserve(0, 7), 0);
	gg_ceiling_release(0, 10);
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI), 0); /* a working ceiling, not a wrapped one */
	gg_ceiling_release(0, GI);
	gg_ceiling_reset();
}

/* Threads that each release twice what they reserved, racing: the word
 * passes zero again and again, with repairs pending on other threads; at
 * rest it must read at or above zero (and, here, hold no more than what
 * the last grants took: at most T reservations). */
struct over_release {
	int iters;
};
static void *over_release_main(void *arg)
{
	struct over_release *o = arg;
	for (int i = 0; i < o->iters; i++) {
		if (gg_ceiling_reserve(0, 4096) == 0)
			gg_ceiling_release(0, 8192);
	}
	return NULL;
}

TEST(racing_over_releases_never_wrap)
{
	enum { T = 4 };
	setup(0, GI);
	pthread_t th[T];
	struct over_release o[T];
	for (int i = 0; i < T; i++) {
		o[i] = (struct over_release){.iters = SLOW ? 20000 : 500000};
		pthread_create(&th[i], NULL, over_release_main, &o[i]);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	CHECK(used(0) <= (uint64_t)T * 4096);
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI - used(0)), 0); /* the ceiling still works to the byte */
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1);
	gg_ceiling_reset();
}

TEST(overflow_refused)
{
	setup(0, GG_UNLIMITED);
	CHECK_EQ_INT(gg_ceiling_reserve(0, UINT64_MAX - 10), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 11), -1); /* would wrap */
	CHECK_EQ_U64(used(0), UINT64_MAX - 10);
	CHECK_EQ_INT(gg_ceiling_reserve(0, UINT64_MAX), -1);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 2);
	gg_ceiling_release(0, UINT64_MAX - 10);
	CHECK_EQ_U64(used(0), 0);
	setup(0, 10 * GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 5), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, UINT64_MAX), -1);
	CHECK_EQ_INT(gg_ceiling_reserve(0, UINT64_MAX - 4), -1);
	CHECK_EQ_U64(used(0), 5);
	gg_ceiling_reset();
}

TEST(peak_and_force)
{
	setup(0, 100);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 10), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 20), 0);
	gg_ceiling_release(0, 25);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 3), 0);
	CHECK_EQ_U64(used(0), 8);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 30);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 93), -1); /* a refusal does not move the peak */
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 30);
	gg_ceiling_force(0, 150); /* no ceiling check: the pool already grew */
	CHECK_EQ_U64(used(0), 158);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 158);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 1), -1);
	gg_ceiling_release(0, 158);
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 158);
	gg_ceiling_reset();
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 0);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 0);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].limit), 100); /* reset keeps limits */
}

TEST(percent_limits_resolve)
{
	setup(0, GG_UNLIMITED);
	gg_opt.limit_set = 1;
	gg_opt.limits.dev[2] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 9000};
	gg_opt.limits.dev[3] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 1250};
	gg_opt.limits.dev[4] = (struct gpuguard_limit){GPUGUARD_LIMIT_BYTES, 5 * GI};
	gg_ceiling_configure();
	CHECK(gg_ceiling_unresolved(2));
	CHECK(gg_ceiling_unresolved(3));
	CHECK(!gg_ceiling_unresolved(4));
	CHECK(!gg_ceiling_unresolved(0));
	CHECK_EQ_U64(atomic_load(&gg_devices[0].limit), GG_UNLIMITED);

	/* Unresolved: memory info is the physical one. */
	uint64_t fr = 0, tot = 0;
	gg_ceiling_meminfo(2, 70 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(tot, 80 * GI);
	CHECK_EQ_U64(fr, 70 * GI);

	gg_ceiling_resolve(2, 80 * GI);
	gg_ceiling_resolve(3, 80 * GI);
	gg_ceiling_resolve(4, 80 * GI); /* bytes: untouched */
	CHECK(!gg_ceiling_unresolved(2));
	CHECK_EQ_U64(atomic_load(&gg_devices[2].limit), 72 * GI);
	CHECK_EQ_U64(atomic_load(&gg_devices[3].limit), 10 * GI);
	CHECK_EQ_U64(atomic_load(&gg_devices[4].limit), 5 * GI);
	gg_ceiling_resolve(2, 40 * GI); /* once resolved, it stays */
	CHECK_EQ_U64(atomic_load(&gg_devices[2].limit), 72 * GI);
	CHECK_EQ_INT(gg_ceiling_reserve(2, 72 * GI), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(2, 1), -1);

	/* 100 % of an odd size, and a tiny percentage, round down to bytes. */
	gg_opt.limits.dev[5] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 10000};
	gg_opt.limits.dev[6] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 1};
	gg_ceiling_configure();
	gg_ceiling_resolve(5, 81 * GI + 7);
	gg_ceiling_resolve(6, 10001);
	CHECK_EQ_U64(atomic_load(&gg_devices[5].limit), 81 * GI + 7);
	CHECK_EQ_U64(atomic_load(&gg_devices[6].limit), 1);
	/* Huge physical sizes do not overflow the multiplication. */
	gg_opt.limits.dev[7] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 5000};
	gg_ceiling_configure();
	gg_ceiling_resolve(7, UINT64_MAX - 1);
	CHECK_EQ_U64(atomic_load(&gg_devices[7].limit), (UINT64_MAX - 1) / 2);
	setup(0, GG_UNLIMITED);
}

/* Issue 24: a pod region's budget is pod scope's own (adopted through the
 * ceiling), never written into the options, and the ceiling turns its
 * percentages into bytes as it does GPUGUARD_LIMIT's. */
TEST(adopted_pod_limits_leave_the_options_alone)
{
	setup(0, GG_UNLIMITED);
	gg_opt.limit_set = 1;
	gg_opt.limits.dev[1] = (struct gpuguard_limit){GPUGUARD_LIMIT_BYTES, 4 * GI};
	gg_opt.limits.dev[2] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 2500};
	gg_ceiling_configure();
	CHECK_EQ_U64(atomic_load(&gg_devices[1].limit), 4 * GI);
	CHECK_EQ_U64(gg_ceiling_limit_for(2, 80 * GI), 20 * GI);
	CHECK_EQ_U64(gg_ceiling_limit_for(2, 0), GG_LIMIT_UNRESOLVED); /* the card's size not known yet */
	CHECK_EQ_U64(gg_ceiling_limit_for(3, 80 * GI), GG_UNLIMITED);
	struct gpuguard_limits before = gg_opt.limits;
	struct gpuguard_limits pod;
	memset(&pod, 0, sizeof pod);
	pod.dev[1] = (struct gpuguard_limit){GPUGUARD_LIMIT_PERCENT, 5000};
	pod.dev[2] = (struct gpuguard_limit){GPUGUARD_LIMIT_BYTES, 3 * GI};
	gg_ceiling_adopt_limits(&pod);
	/* the options are as the environment gave them */
	CHECK(memcmp(&before, &gg_opt.limits, sizeof before) == 0);
	/* the books follow the pod's budget */
	CHECK(gg_ceiling_unresolved(1));
	CHECK_EQ_U64(atomic_load(&gg_devices[2].limit), 3 * GI);
	CHECK_EQ_U64(gg_ceiling_limit_for(1, 80 * GI), 40 * GI);
	gg_ceiling_resolve(1, 80 * GI);
	CHECK_EQ_U64(atomic_load(&gg_devices[1].limit), 40 * GI);
	gg_ceiling_resolve(2, 80 * GI); /* bytes: untouched */
	CHECK_EQ_U64(atomic_load(&gg_devices[2].limit), 3 * GI);
	gg_ceiling_adopt_limits(NULL); /* the options' own again */
	CHECK_EQ_U64(atomic_load(&gg_devices[1].limit), 4 * GI);
	CHECK(gg_ceiling_unresolved(2));
	setup(0, GG_UNLIMITED);
}

TEST(bad_limit_refuses_as_config)
{
	setup(0, GG_UNLIMITED);
	gg_opt.limit_set = 1;
	gg_opt.limit_bad = 1;
	gg_ceiling_configure();
	CHECK_EQ_U64(atomic_load(&gg_devices[9].limit), 0);
	CHECK_EQ_INT(gg_ceiling_reserve(9, 1), -1);
	CHECK_EQ_U64(refused(9, GPUGUARD_REFUSED_CONFIG), 1);
	CHECK_EQ_U64(refused(9, GPUGUARD_REFUSED_CEILING), 0);
	/* Through the allocation bracket too, and counted once. */
	CHECK_EQ_INT(gg_account_begin(9, 4096), -1);
	CHECK_EQ_U64(refused(9, GPUGUARD_REFUSED_CONFIG), 2);
	CHECK_EQ_U64(refused(9, GPUGUARD_REFUSED_CEILING), 0);
	CHECK_EQ_U64(used(9), 0);
	gg_opt.limit_bad = 0;
	setup(0, GG_UNLIMITED);
}

TEST(charge_size_rules)
{
	const enum gpuguard_api plain[] = {GPUGUARD_API_CU_MEM_ALLOC, GPUGUARD_API_CU_MEM_ALLOC_PITCH,
	                                   GPUGUARD_API_CU_MEM_ALLOC_MANAGED, GPUGUARD_API_HIP_MALLOC,
	                                   GPUGUARD_API_HIP_EXT_MALLOC};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		enum gpuguard_api a = plain[i];
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 0), 0);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 1), 512);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 512), 512);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 513), 1024);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 1000), 1024);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, MI - 1), MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, MI), MI); /* <= 1 MiB: packed */
		/* a page's share: two 700 KiB blocks to a page, three of 600 KiB
		 * (issue 25, item 4: 700 KiB was charged 700 KiB) */
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 700 * 1024), MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 600 * 1024), (2 * MI + 2) / 3);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 4096), 4096);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 64 * 1024), 64 * 1024);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 5000), (2 * MI + 408) / 409); /* 409 of 5,120 to a page */
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 4608), (2 * MI + 454) / 455);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, MI + 1), 2 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 2 * MI), 2 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 2 * MI + 1), 4 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 3 * MI), 4 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(a, 20 * GI + 1), 20 * GI + 2 * MI);
	}
	/* arrays take whole pages of their own, however small (issue 10, 11) */
	const enum gpuguard_api arrays[] = {GPUGUARD_API_CU_ARRAY, GPUGUARD_API_CU_MIPMAPPED_ARRAY};
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		CHECK_EQ_U64(gg_ceiling_charge_size(arrays[i], 0), 2 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(arrays[i], 256), 2 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(arrays[i], MI), 2 * MI);
		CHECK_EQ_U64(gg_ceiling_charge_size(arrays[i], 2 * MI + 1), 4 * MI);
	}
	CHECK_EQ_U64(gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_CREATE, 3 * MI + 5), 3 * MI + 5);
	CHECK_EQ_U64(gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_CREATE, 1), 1);
	CHECK_EQ_U64(gg_ceiling_charge_size(GPUGUARD_API_HIP_MEM_CREATE, 2 * MI + 1), 2 * MI + 1);
	/* A charge is never less than the request: near 2^64 the rounding must
	 * not wrap to a tiny charge that every ceiling lets through. */
	const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - MI, UINT64_MAX - 2 * MI + 2};
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++)
		CHECK(gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_ALLOC, huge[i]) >= huge[i]);
	setup(0, 20 * GI);
	CHECK_EQ_INT(gg_account_begin(0, gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_ALLOC, UINT64_MAX - 5)), -1);
	CHECK_EQ_U64(used(0), 0);
	setup(0, GG_UNLIMITED);
}

/* The charge rule as it stood before its power-of-two shortcut (issue 24):
 * the page's share worked out by two divisions for every small size. */
static uint64_t charge_by_division(uint32_t api, uint64_t size)
{
	switch (gpuguard_api_kind(api)) {
	case GPUGUARD_KIND_VMM:
		return size;
	case GPUGUARD_KIND_ARRAY:
	case GPUGUARD_KIND_MIPMAP:
		return gpuguard_round_up(size ? size : 1, GPUGUARD_PAGE);
	default:
		if (size > GPUGUARD_SMALL_MAX)
			return gpuguard_round_up(size, GPUGUARD_PAGE);
		if (size == 0)
			return 0;
		return (GPUGUARD_PAGE + GPUGUARD_PAGE / gpuguard_round_up(size, GPUGUARD_SMALL_ALIGN) - 1) /
		       (GPUGUARD_PAGE / gpuguard_round_up(size, GPUGUARD_SMALL_ALIGN));
	}
}

/* The rule's fast answer for powers of two is the division's, for every
 * api and every size from 0 to past 2 MiB, and near 2^64: what the
 * library charges, the refund gives back and the command reports cannot
 * have moved. */
TEST(charge_size_matches_the_division)
{
	uint64_t bad = 0;
	for (uint32_t api = 0; api < GPUGUARD_API_COUNT; api++) {
		for (uint64_t size = 0; size <= 2 * MI + 4096; size++)
			if (gg_ceiling_charge_size((enum gpuguard_api)api, size) != charge_by_division(api, size) &&
			    bad++ == 0)
				CHECK_EQ_U64(gg_ceiling_charge_size((enum gpuguard_api)api, size),
				             charge_by_division(api, size));
		for (uint64_t size = UINT64_MAX - 4 * MI; size != 0; size += size < UINT64_MAX - 4096 ? 4093 : 1)
			if (gg_ceiling_charge_size((enum gpuguard_api)api, size) != charge_by_division(api, size) &&
			    bad++ == 0)
				CHECK_EQ_U64(gg_ceiling_charge_size((enum gpuguard_api)api, size),
				             charge_by_division(api, size));
	}
	CHECK_EQ_U64(bad, 0);
}

TEST(meminfo_virtualised)
{
	uint64_t fr, tot;
	setup(0, 20 * GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 5 * GI), 0);
	gg_ceiling_meminfo(0, 70 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(tot, 20 * GI);
	CHECK_EQ_U64(fr, 15 * GI);
	gg_ceiling_meminfo(0, 3 * GI, 80 * GI, &fr, &tot); /* others use the card */
	CHECK_EQ_U64(tot, 20 * GI);
	CHECK_EQ_U64(fr, 3 * GI);
	/* free moves at once with our own allocations */
	CHECK_EQ_INT(gg_ceiling_reserve(0, GI), 0);
	gg_ceiling_meminfo(0, 70 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(fr, 14 * GI);
	/* Over the ceiling (pool growth forced in): free is 0, not negative. */
	gg_ceiling_force(0, 30 * GI);
	gg_ceiling_meminfo(0, 40 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(fr, 0);
	CHECK_EQ_U64(tot, 20 * GI);
	/* Exactly at the ceiling. */
	setup(0, 20 * GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 20 * GI), 0);
	gg_ceiling_meminfo(0, 40 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(fr, 0);
	/* A ceiling above the card: the card's figures. */
	setup(0, 100 * GI);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 5 * GI), 0);
	gg_ceiling_meminfo(0, 70 * GI, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(tot, 80 * GI);
	CHECK_EQ_U64(fr, 70 * GI);
	/* No ceiling: physical passes straight through, whatever we use. */
	setup(0, GG_UNLIMITED);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 50 * GI), 0);
	gg_ceiling_meminfo(0, 12345, 80 * GI, &fr, &tot);
	CHECK_EQ_U64(tot, 80 * GI);
	CHECK_EQ_U64(fr, 12345);
	setup(0, GG_UNLIMITED);
}

/* The allocation bracket (account.c): refusal, rollback, commit and free. */
TEST(account_bracket)
{
	setup(0, 10 * MI);
	CHECK_EQ_INT(gg_account_begin(0, 8 * MI), 0);
	CHECK_EQ_INT(gg_account_begin(0, 4 * MI), -1);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 1); /* one refusal, counted once */
	CHECK_EQ_U64(used(0), 8 * MI);
	gg_account_rollback(0, 8 * MI, 1); /* the driver said out-of-memory */
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_DRIVER), 1);

	/* commit records, forget + freed(ok) refunds exactly the charge. */
	CHECK(gg_table != NULL);
	uint64_t size = 3 * MI + 17, charge = gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_ALLOC, size);
	CHECK_EQ_INT(gg_account_begin(0, charge), 0);
	gg_account_commit(0, GG_NS_PTR, 0x7f0000200000ull, size, GPUGUARD_API_CU_MEM_ALLOC, charge);
	CHECK_EQ_U64(used(0), 4 * MI);
	struct gpuguard_device_stats st;
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.live_bytes, size);
	CHECK_EQ_U64(st.allocs, 1);
	struct gg_record rec;
	CHECK_EQ_INT(gg_account_forget(GG_NS_PTR, 0x7f0000200000ull, &rec), 1);
	CHECK_EQ_U64(rec.size, size);
	CHECK(rec.flags & GG_REC_CHARGED);
	gg_account_freed(&rec, 0); /* the driver refused the free: record back, books unchanged */
	CHECK_EQ_U64(used(0), 4 * MI);
	/* live_bytes is the history's live word (issue 24), which the forget
	 * lowered: the refused free's put-back must raise it again. */
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.live_bytes, size);
	CHECK_EQ_U64(st.frees, 0);
	CHECK_EQ_INT(gg_account_forget(GG_NS_PTR, 0x7f0000200000ull, &rec), 1);
	gg_account_freed(&rec, 1);
	CHECK_EQ_U64(used(0), 0);
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.live_bytes, 0);
	CHECK_EQ_U64(st.frees, 1);
	CHECK_EQ_INT(gg_account_forget(GG_NS_PTR, 0x7f0000200000ull, &rec), 0);
	gg_account_untracked(0);
	gg_account_untracked(-1); /* out of range: ignored, not a crash */
	gg_account_untracked(GG_MAX_DEVICES);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].untracked_frees), 1);
	setup(0, GG_UNLIMITED);
}

/* The same bracket through the inline forms the hooks run (account.h,
 * issue 24): the first try and the refusal, and a free's common case
 * beside the cases it must hand to gg_account_freed (the driver kept the
 * memory; a record never charged). */
TEST(account_bracket_inline)
{
	setup(0, 10 * MI);
	CHECK_EQ_INT(gg_account_begin_inline(0, 8 * MI), 0);
	CHECK_EQ_INT(gg_account_begin_inline(0, 4 * MI), -1);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), 1);
	CHECK_EQ_U64(used(0), 8 * MI);
	gg_account_rollback(0, 8 * MI, 0);
	CHECK_EQ_U64(used(0), 0);

	uint64_t size = 4096, charge = gg_ceiling_charge_size(GPUGUARD_API_CU_MEM_ALLOC, size);
	CHECK_EQ_INT(gg_account_begin_inline(0, charge), 0);
	gg_account_commit(0, GG_NS_PTR, 0x7f0000400000ull, size, GPUGUARD_API_CU_MEM_ALLOC, charge);
	gg_account_commit(0, GG_NS_PTR, 0x7f0000600000ull, size, GPUGUARD_API_CU_MEM_ALLOC_MANAGED, 0);
	CHECK_EQ_U64(used(0), charge);
	struct gg_record rec;
	struct gpuguard_device_stats st;
	gg_ceiling_read(0, &st);
	uint64_t live = st.live_bytes;
	CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, 0x7f0000400000ull, &rec), 1);
	/* Its flags as the table kept them: the common end tests them in one
	 * (gg_account_freed_fast), and marks the event said only on its way
	 * to gg_account_freed. */
	CHECK((rec.flags & GG_REC_CHARGED) && !(rec.flags & GG_REC_FREE_SAID));
	gg_account_freed_inline(&rec, 0); /* the driver refused: record back, books unchanged */
	CHECK_EQ_U64(used(0), charge);
	/* The free's event, said by forget, is answered by the put-back's
	 * allocation event, and no second free event. */
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.live_bytes, live);
	CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, 0x7f0000400000ull, &rec), 1);
	gg_account_freed_inline(&rec, 1);
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, 0x7f0000400000ull, &rec), 0);
	/* Recorded, never charged: its free refunds nothing. */
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, 0x7f0000600000ull, &rec), 1);
	CHECK(!(rec.flags & GG_REC_CHARGED));
	CHECK_EQ_INT(gg_account_begin_inline(0, MI), 0);
	gg_account_freed_inline(&rec, 1);
	CHECK_EQ_U64(used(0), MI);
	gg_account_rollback(0, MI, 0);
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.live_bytes, 0);
	CHECK_EQ_U64(st.frees, 2);
	setup(0, GG_UNLIMITED);
}

/* A free finds its record wherever the table keeps it: in the newest
 * generation (the hooks' inline remove), in an older one after the table
 * grew, or not at all (a second free), through the inline forget the free
 * hooks run; what the fast remove misses is gg_account_forget_slow's
 * (issue 24: one call for the rest of a miss). Each record found refunds
 * its charge. */
TEST(account_forget_finds_older_generations)
{
	setup(0, GG_UNLIMITED);
	struct gg_table *saved = gg_table;
	gg_table = gg_table_create_capped(64, 1 << 12); /* 64 slots first: 300 records make it grow */
	CHECK(gg_table != NULL);
	enum { N = 300 };
	for (int i = 0; i < N; i++) {
		CHECK_EQ_INT(gg_account_begin(0, 4096), 0);
		gg_account_commit(0, GG_NS_PTR, 0x7f2000000000ull + (uint64_t)i * 2 * MI, 4096,
		                  GPUGUARD_API_CU_MEM_ALLOC, 4096);
	}
	CHECK(gg_table_generations(gg_table) > 1);
	CHECK_EQ_U64(used(0), (uint64_t)N * 4096);
	struct gg_record rec;
	for (int i = 0; i < N; i++) {
		uint64_t raw = 0x7f2000000000ull + (uint64_t)i * 2 * MI;
		CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, raw, &rec), 1);
		CHECK_EQ_U64(rec.size, 4096);
		gg_account_freed_inline(&rec, 1);
		CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, raw, &rec), 0);
	}
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(gg_table_live(gg_table), 0);
	gg_table_destroy(gg_table);
	gg_table = saved;
	setup(0, GG_UNLIMITED);
}

/* A free refunds exactly what its allocation was charged, for every size
 * class and kind, through both free paths: the record says when its charge
 * is its size (GG_REC_CHARGE_IS_SIZE, issue 24), and the rule is worked out
 * again when it is not. Each block is freed with the others still live, so
 * a refund of the size where the charge differs (700 KiB: 1 MiB charged)
 * leaves `used` off by the difference. */
TEST(account_free_refunds_the_charge)
{
	static const uint64_t sizes[] = {1,  511,    512,    4096,        4608,   700 * 1024,
	                                 MI, MI + 1, 2 * MI, 3 * MI + 17, 4 * MI, 2 * MI - 512};
	static const enum gpuguard_api apis[] = {GPUGUARD_API_CU_MEM_ALLOC, GPUGUARD_API_CU_ARRAY,
	                                         GPUGUARD_API_CU_MEM_CREATE};
	enum { N = sizeof(sizes) / sizeof(sizes[0]), A = sizeof(apis) / sizeof(apis[0]) };
	setup(0, GG_UNLIMITED);
	uint64_t total = 0, flagged = 0, live0 = gg_history_live(0);
	for (int a = 0; a < A; a++)
		for (int i = 0; i < N; i++) {
			uint64_t c = gg_ceiling_charge_size(apis[a], sizes[i]);
			CHECK_EQ_INT(gg_account_begin(0, c), 0);
			gg_account_commit(0, GG_NS_PTR, 0x7f1000000000ull + (uint64_t)(a * N + i) * 4 * MI, sizes[i],
			                  apis[a], c);
			total += c;
		}
	CHECK_EQ_U64(used(0), total);
	for (int a = 0; a < A; a++)
		for (int i = 0; i < N; i++) {
			uint64_t c = gg_ceiling_charge_size(apis[a], sizes[i]);
			struct gg_record rec;
			uint64_t raw = 0x7f1000000000ull + (uint64_t)(a * N + i) * 4 * MI;
			/* The hooks' forget and freed, inline; or the calls
			 * handles.c makes, whose forget marks the event said. */
			if (i % 2)
				CHECK_EQ_INT(gg_account_forget_inline(GG_NS_PTR, raw, &rec), 1);
			else
				CHECK_EQ_INT(gg_account_forget(GG_NS_PTR, raw, &rec), 1);
			CHECK(rec.flags & GG_REC_CHARGED);
			CHECK_EQ_INT(!!(rec.flags & GG_REC_CHARGE_IS_SIZE), c == sizes[i]);
			flagged += c == sizes[i];
			if (i % 2)
				gg_account_freed_inline(&rec, 1);
			else
				gg_account_freed(&rec, 1);
			total -= c;
			CHECK_EQ_U64(used(0), total);
		}
	CHECK(flagged > 0 && flagged < (uint64_t)(N * A)); /* both forms were freed */
	/* One free event each, however freed. */
	CHECK_EQ_U64(gg_history_live(0), live0);
	setup(0, GG_UNLIMITED);
}

/* Issue 24: a thread is counted among those that could free at its first
 * grant by the footprint's tick (footprint.h), not by a check of its own
 * on every allocation. A waiter alone in the process sees nobody to free
 * until a thread whose first call is a granted allocation (of any charge,
 * 0 included) shows up; then it sees one. */
struct first_grant {
	uint64_t charge;
	int rc, counted;
};
static void *first_grant_main(void *arg)
{
	struct first_grant *f = arg;
	f->rc = gg_account_begin_inline(0, f->charge);
	f->counted = gg_thread_counted;
	return NULL;
}

TEST(a_threads_first_grant_counts_it)
{
	static const uint64_t charges[] = {4096, 0};
	for (unsigned i = 0; i < sizeof charges / sizeof charges[0]; i++) {
		setup(0, GI); /* counts only this thread, if it was */
		gg_ceiling_note_thread();
		struct gg_budget *b = gg_ceiling_budget(0);
		gg_ceiling_wait_enter(b);
		CHECK(gg_ceiling_nobody_frees(b)); /* this thread alone, and asleep */
		struct first_grant f = {.charge = charges[i]};
		pthread_t th;
		pthread_create(&th, NULL, first_grant_main, &f);
		pthread_join(th, NULL);
		CHECK_EQ_INT(f.rc, 0);
		CHECK(f.counted);
		CHECK(!gg_ceiling_nobody_frees(b)); /* the new thread may free */
		gg_ceiling_wait_leave(b);
		gg_account_rollback(0, charges[i], 0);
		CHECK_EQ_U64(used(0), 0);
	}
	setup(0, GG_UNLIMITED);
}

/* The statistics' counts land on the stripe of the calling thread's id
 * (gg_self.stripe_off, issue 24), one per thread, and the reader's sums
 * see every one: threads counted from many ids add up. */
#define STRIPE_THREADS 24
#define STRIPE_COUNTS 1000
static void *stripe_counter_main(void *arg)
{
	(void)arg;
	gg_gettid(); /* the id, and with it the stripe */
	for (int i = 0; i < STRIPE_COUNTS; i++) {
		gg_ceiling_count_alloc(1, 4096);
		if (i % 2)
			gg_ceiling_count_free(1, 4096);
	}
	return NULL;
}

TEST(stripe_counts_land_on_the_threads_stripe)
{
	setup(1, GI);
	unsigned me = gg_gettid() % GG_STRIPES;
	gg_ceiling_count_alloc(1, 4096);
	gg_ceiling_count_free(1, 4096);
	gg_ceiling_count_free(1, 4096);
	for (unsigned i = 0; i < GG_STRIPES; i++) {
		CHECK_EQ_U64((uint64_t)atomic_load(&gg_devices[1].stripe[i].allocs), i == me ? 1 : 0);
		CHECK_EQ_U64((uint64_t)atomic_load(&gg_devices[1].stripe[i].frees), i == me ? 2 : 0);
	}
	pthread_t th[STRIPE_THREADS];
	for (int i = 0; i < STRIPE_THREADS; i++)
		pthread_create(&th[i], NULL, stripe_counter_main, NULL);
	for (int i = 0; i < STRIPE_THREADS; i++)
		pthread_join(th[i], NULL);
	struct gpuguard_device_stats st;
	gg_ceiling_read(1, &st);
	CHECK_EQ_U64(st.allocs, 1 + STRIPE_THREADS * STRIPE_COUNTS);
	CHECK_EQ_U64(st.frees, 2 + STRIPE_THREADS * STRIPE_COUNTS / 2);
	setup(1, GG_UNLIMITED);
}

/* A commit that finds no room for its record (no table here) warns and
 * still counts the allocation and its history event: the warning is said
 * at the failed insert (issue 24), and the rest of the commit runs. */
TEST(a_commit_with_no_room_still_counts)
{
	setup(0, GG_UNLIMITED);
	struct gg_table *t = gg_table;
	gg_table = NULL;
	int64_t live0 = (int64_t)gg_history_live(0);
	gg_account_commit(0, GG_NS_PTR, 0x7f0000400000ull, 4096, GPUGUARD_API_CU_MEM_ALLOC, 0);
	gg_table = t;
	struct gpuguard_device_stats st;
	gg_ceiling_read(0, &st);
	CHECK_EQ_U64(st.allocs, 1);
	CHECK_EQ_U64((uint64_t)((int64_t)gg_history_live(0) - live0), 4096);
	/* its bytes off the history's live word again, for the tests after */
	gg_history_event(GG_HIST_FREE, 0, GPUGUARD_API_CU_MEM_ALLOC, 0x7f0000400000ull, 4096, 0, GG_HIST_NOW);
	CHECK_EQ_U64((uint64_t)gg_history_live(0), (uint64_t)live0);
}

/* ---- concurrency ---- */

#define RACE_LIMIT (64 * MI)

struct racer {
	int id;
	uint64_t ops, ok, refusedn, released;
};

static _Atomic int race_stop;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(r->id + 1), held[16];
	int n = 0;
	for (uint64_t op = 0; op < r->ops; op++) {
		if (n == 16 || (n > 0 && (rnd(&seed) & 1))) {
			int i = (int)(rnd(&seed) % (uint64_t)n);
			gg_ceiling_release(0, held[i]);
			r->released++;
			held[i] = held[--n];
		} else {
			/* 1 B .. 8 MiB: 16 threads x up to 16 holds can far exceed 64 MiB */
			uint64_t b = 1 + rnd(&seed) % (8 * MI);
			if (gg_ceiling_reserve(0, b) == 0) {
				held[n++] = b;
				r->ok++;
			} else {
				r->refusedn++;
			}
		}
	}
	while (n > 0) {
		gg_ceiling_release(0, held[--n]);
		r->released++;
	}
	return NULL;
}

static void *monitor_main(void *arg)
{
	uint64_t *over = arg, samples = 0;
	do { /* at least once, even if the racers are done before we start */
		uint64_t fr, tot;
		if (used(0) > RACE_LIMIT)
			(*over)++;
		gg_ceiling_meminfo(0, UINT64_MAX, UINT64_MAX, &fr, &tot);
		if (tot != RACE_LIMIT || fr > RACE_LIMIT)
			(*over)++;
		samples++;
	} while (!atomic_load(&race_stop));
	return (void *)(uintptr_t)samples;
}

TEST(threads_race_for_the_last_bytes)
{
	enum { T = 12 };
	setup(0, RACE_LIMIT);
	pthread_t th[T], mon;
	struct racer r[T];
	uint64_t over = 0;
	atomic_store(&race_stop, 0);
	pthread_create(&mon, NULL, monitor_main, &over);
	for (int i = 0; i < T; i++) {
		r[i] = (struct racer){.id = i, .ops = SLOW ? 20000 : 300000};
		pthread_create(&th[i], NULL, racer_main, &r[i]);
	}
	uint64_t ok = 0, ref = 0, rel = 0;
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		ok += r[i].ok, ref += r[i].refusedn, rel += r[i].released;
	}
	atomic_store(&race_stop, 1);
	void *samples;
	pthread_join(mon, &samples);
	CHECK_EQ_U64(over, 0);
	CHECK((uintptr_t)samples > 0);
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(ok, rel);
	CHECK(ok > 0);
	CHECK(ref > 0); /* the limit really was contended */
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), ref);
	CHECK(atomic_load(&gg_devices[0].peak) <= RACE_LIMIT);
	CHECK(atomic_load(&gg_devices[0].peak) > RACE_LIMIT / 2);
	setup(0, GG_UNLIMITED);
}

/* Two threads released within nanoseconds of each other (spinning on a
 * round number) both ask for the last `chunk` bytes: exactly one gets them. */
struct duel {
	_Atomic uint64_t round;
	_Atomic int ready, done;
	int won[2];
};

struct duelist {
	struct duel *d;
	int id;
	uint64_t rounds;
};

#define DUEL_CHUNK (2 * MI)

static void *duelist_main(void *arg)
{
	struct duelist *me = arg;
	struct duel *d = me->d;
	for (uint64_t n = 1; n <= me->rounds; n++) {
		atomic_fetch_add(&d->ready, 1);
		for (int spins = 0; atomic_load(&d->round) != n; spins++)
			if (spins > 1000)
				sched_yield();
		d->won[me->id] = gg_ceiling_reserve(0, DUEL_CHUNK) == 0;
		atomic_fetch_add(&d->done, 1);
	}
	return NULL;
}

TEST(two_threads_duel_for_the_last_bytes)
{
	uint64_t rounds = SLOW ? 10000 : 100000;
	setup(0, 10 * DUEL_CHUNK);
	CHECK_EQ_INT(gg_ceiling_reserve(0, 9 * DUEL_CHUNK), 0); /* room for one more chunk */
	struct duel d = {0};
	struct duelist ds[2] = {{&d, 0, rounds}, {&d, 1, rounds}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, duelist_main, &ds[i]);
	uint64_t bad = 0;
	for (uint64_t n = 1; n <= rounds; n++) {
		while (atomic_load(&d.ready) < (int)(2 * n))
			sched_yield();
		atomic_store(&d.done, 0);
		atomic_store(&d.round, n);
		while (atomic_load(&d.done) < 2)
			sched_yield();
		if (d.won[0] + d.won[1] != 1 || used(0) != 10 * DUEL_CHUNK)
			bad++;
		gg_ceiling_release(0, used(0) - 9 * DUEL_CHUNK);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), rounds);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), 10 * DUEL_CHUNK);
	setup(0, GG_UNLIMITED);
}

/* Threads in a tight loop take and give back the only chunk that fits: the
 * holder must always find `used` equal to exactly one chunk. */
struct tight {
	uint64_t iters, wins, overs;
};

static void *tight_main(void *arg)
{
	struct tight *t = arg;
	for (uint64_t i = 0; i < t->iters; i++) {
		if (gg_ceiling_reserve(0, DUEL_CHUNK) != 0)
			continue;
		t->wins++;
		if (used(0) != DUEL_CHUNK)
			t->overs++;
		gg_ceiling_release(0, DUEL_CHUNK);
	}
	return NULL;
}

TEST(tight_loop_one_holder_at_a_time)
{
	enum { T = 4 };
	setup(0, DUEL_CHUNK);
	pthread_t th[T];
	struct tight t[T];
	for (int i = 0; i < T; i++) {
		t[i] = (struct tight){.iters = SLOW ? 100000 : 2000000};
		pthread_create(&th[i], NULL, tight_main, &t[i]);
	}
	uint64_t wins = 0, overs = 0, tries = 0;
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		wins += t[i].wins, overs += t[i].overs, tries += t[i].iters;
	}
	CHECK_EQ_U64(overs, 0);
	CHECK(wins > 0);
	CHECK_EQ_U64(used(0), 0);
	CHECK_EQ_U64(refused(0, GPUGUARD_REFUSED_CEILING), tries - wins);
	CHECK_EQ_U64(atomic_load(&gg_devices[0].peak), DUEL_CHUNK);
	setup(0, GG_UNLIMITED);
}

int main(void)
{
	RUN(reserve_up_to_exact_limit);
	RUN(release_saturates_at_zero);
	RUN(release_during_a_pending_repair_takes_nothing);
	RUN(racing_over_releases_never_wrap);
	RUN(overflow_refused);
	RUN(peak_and_force);
	RUN(percent_limits_resolve);
	RUN(adopted_pod_limits_leave_the_options_alone);
	RUN(bad_limit_refuses_as_config);
	RUN(charge_size_rules);
	RUN(charge_size_matches_the_division);
	RUN(meminfo_virtualised);
	RUN(account_bracket);
	RUN(account_bracket_inline);
	RUN(account_forget_finds_older_generations);
	RUN(account_free_refunds_the_charge);
	RUN(a_threads_first_grant_counts_it);
	RUN(stripe_counts_land_on_the_threads_stripe);
	RUN(a_commit_with_no_room_still_counts);
	RUN(threads_race_for_the_last_bytes);
	RUN(two_threads_duel_for_the_last_bytes);
	RUN(tight_loop_one_holder_at_a_time);
	return harness_done();
}
