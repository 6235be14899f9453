/* gpuguard: unit tests for the VMM bookkeeping (vmm.c): what is reserved and
 * mapped, the holes and largest hole a dump reports, and calls a hook can
 * pass on that must change nothing (unknown addresses, sizes of 0, ranges
 * past a reservation's end). */
#include "../harness.h"
#include "base.h"
#include "vmm.h"

#define G GG_PAGE /* one granule */
#define MAX_SEEN 8

struct seen {
	struct gg_vmm_info v[MAX_SEEN];
	int n;
};

static void collect(const struct gg_vmm_info *v, void *arg)
{
	struct seen *s = arg;
	if (s->n < MAX_SEEN)
		s->v[s->n] = *v;
	s->n++;
}

static struct seen snapshot(void)
{
	struct seen s = {.n = 0};
	gg_vmm_foreach(collect, &s);
	return s;
}

/* The one reservation at base, or NULL. */
static const struct gg_vmm_info *find(const struct seen *s, uint64_t base)
{
	for (int i = 0; i < s->n && i < MAX_SEEN; i++)
		if (s->v[i].base == base)
			return &s->v[i];
	return NULL;
}

TEST(map_and_unmap_are_counted_with_their_holes)
{
	gg_vmm_reset();
	uint64_t b = 0x7f0000000000ull;
	gg_vmm_reserved(b, 10 * G);
	struct seen s = snapshot();
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_U64(s.v[0].base, b);
	CHECK_EQ_U64(s.v[0].size, 10 * G);
	CHECK_EQ_U64(s.v[0].mapped, 0);
	CHECK_EQ_U64(s.v[0].holes, 0);
	CHECK_EQ_U64(s.v[0].largest_hole, 0);
	/* granules 0, 2-3 and 7 mapped: holes are 1 and 4-6; 8-9 trail */
	gg_vmm_mapped(b, G, 1);
	gg_vmm_mapped(b + 2 * G, 2 * G, 1);
	gg_vmm_mapped(b + 7 * G, G, 1);
	s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, 4 * G);
	CHECK_EQ_U64(s.v[0].holes, 2);
	CHECK_EQ_U64(s.v[0].largest_hole, 3 * G);
	/* unmapping 2-3 joins the holes into one, 1-6 */
	gg_vmm_mapped(b + 2 * G, 2 * G, 0);
	s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, 2 * G);
	CHECK_EQ_U64(s.v[0].holes, 1);
	CHECK_EQ_U64(s.v[0].largest_hole, 6 * G);
	/* and unmapping 0 leaves no mapped part before it: no hole */
	gg_vmm_mapped(b, G, 0);
	s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, G);
	CHECK_EQ_U64(s.v[0].holes, 0);
	CHECK_EQ_U64(s.v[0].largest_hole, 0);
	gg_vmm_freed(b);
	CHECK_EQ_INT(snapshot().n, 0);
}

TEST(unmapped_runs_at_either_end_are_not_holes)
{
	gg_vmm_reset();
	uint64_t b = 0x7f0000000000ull;
	gg_vmm_reserved(b, 6 * G);
	gg_vmm_mapped(b + 2 * G, G, 1);
	gg_vmm_mapped(b + 4 * G, G, 1);
	struct seen s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, 2 * G);
	CHECK_EQ_U64(s.v[0].holes, 1); /* granule 3 only: 0-1 lead, 5 trails */
	CHECK_EQ_U64(s.v[0].largest_hole, G);
	gg_vmm_freed(b);
}

TEST(each_map_lands_in_the_reservation_that_holds_it)
{
	gg_vmm_reset();
	uint64_t a = 0x7f0000000000ull, b = 0x7f1000000000ull;
	gg_vmm_reserved(a, 4 * G);
	gg_vmm_reserved(b, 4 * G);
	gg_vmm_mapped(b + 3 * G, G, 1);
	gg_vmm_mapped(a, G, 1);
	gg_vmm_mapped(a + 3 * G, G, 1);
	struct seen s = snapshot();
	CHECK_EQ_INT(s.n, 2);
	const struct gg_vmm_info *va = find(&s, a), *vb = find(&s, b);
	CHECK(va && vb);
	if (!va || !vb)
		return;
	CHECK_EQ_U64(va->mapped, 2 * G);
	CHECK_EQ_U64(va->holes, 1);
	CHECK_EQ_U64(va->largest_hole, 2 * G);
	CHECK_EQ_U64(vb->mapped, G);
	CHECK_EQ_U64(vb->holes, 0);
	/* freeing one keeps the other whole */
	gg_vmm_freed(a);
	s = snapshot();
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_U64(s.v[0].base, b);
	CHECK_EQ_U64(s.v[0].mapped, G);
	gg_vmm_freed(b);
}

TEST(bogus_calls_change_nothing)
{
	gg_vmm_reset();
	uint64_t b = 0x7f0000000000ull;
	gg_vmm_reserved(b, 0); /* nothing reserved: not tracked */
	CHECK_EQ_INT(snapshot().n, 0);
	gg_vmm_reserved(b, 4 * G);
	gg_vmm_mapped(b - G, G, 1);     /* before it */
	gg_vmm_mapped(b + 4 * G, G, 1); /* just past its end */
	gg_vmm_mapped(0x1000, G, 1);    /* in no reservation */
	gg_vmm_mapped(b + G, 0, 1);     /* nothing */
	gg_vmm_mapped(0x1000, G, 0);    /* unmap in no reservation */
	gg_vmm_freed(b + G);            /* not a base */
	gg_vmm_freed(0x1000);           /* never reserved */
	struct seen s = snapshot();
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_U64(s.v[0].size, 4 * G);
	CHECK_EQ_U64(s.v[0].mapped, 0);
	CHECK_EQ_U64(s.v[0].holes, 0);
	/* a map running past the end counts only what lies inside */
	gg_vmm_mapped(b + 3 * G, 5 * G, 1);
	s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, G);
	/* an unmap of more than is mapped leaves 0, not a wrapped count */
	gg_vmm_mapped(b, 4 * G, 0);
	s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, 0);
	CHECK_EQ_U64(s.v[0].holes, 0);
	gg_vmm_freed(b);
	gg_vmm_freed(b); /* twice: the second finds nothing */
	CHECK_EQ_INT(snapshot().n, 0);
}

/* Maps smaller than a granule count in bytes, but the granule they touch is
 * mapped for the holes (the loader's rule: holes in granules, mapped in
 * bytes). */
TEST(part_granules_count_bytes_and_mark_the_granule)
{
	gg_vmm_reset();
	uint64_t b = 0x7f0000000000ull;
	gg_vmm_reserved(b, 3 * G);
	gg_vmm_mapped(b, G / 2, 1);
	gg_vmm_mapped(b + 2 * G + G / 4, G / 4, 1);
	struct seen s = snapshot();
	CHECK_EQ_U64(s.v[0].mapped, G / 2 + G / 4);
	CHECK_EQ_U64(s.v[0].holes, 1);
	CHECK_EQ_U64(s.v[0].largest_hole, G);
	gg_vmm_freed(b);
}

int main(void)
{
	RUN(map_and_unmap_are_counted_with_their_holes);
	RUN(unmapped_runs_at_either_end_are_not_holes);
	RUN(each_map_lands_in_the_reservation_that_holds_it);
	RUN(bogus_calls_change_nothing);
	RUN(part_granules_count_bytes_and_mark_the_granule);
	return harness_done();
}
