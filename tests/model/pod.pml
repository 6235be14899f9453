/* gpuguard: the pod region's reservation protocol as a Promela model, checked
 * with spin by tests/scripts/model.sh. One device, N processes that reserve,
 * release, sweep dead slots, attach (a restart or a fork child) and can be
 * killed (SIGKILL) at every step, including in the middle of a sweep.
 *
 * The C code (interpose/ceiling.c, interpose/shared.c) names the same steps:
 *   attach   A1 lock the slot, A2 zero what a dead owner left, A3 set the
 *            slot's occupancy bit
 *   reserve  R1 claim += b, R2 sum claim then used of every occupied slot,
 *            R3 refuse (claim -= b) past the ceiling, else R4 used += b,
 *            R5 claim -= b
 *            with a refill (issue 24): R1 claims b + extra, R4b credit +=
 *            extra; past the ceiling R3a drops the extra, R3b takes every
 *            slot's credit back (an exchange each, ours too), R2 once more,
 *            and only then R3 refuses
 *   grant    from our credit (issue 24): F1 used += b, F2 credit -= b if it
 *            holds b (a CAS), else F3 used -= b and the slow path (R1...)
 *   release  L1 used -= b, after the driver freed the memory (never into
 *            the credit: -DCREDIT_FAST_RELEASE shows why)
 *   runtime  (interpose/footprint.c, set_charge) the runtime category:
 *            what the driver already holds for the process beyond its
 *            allocations. Charged as a reservation (R1-R5) followed by
 *            T2 rt += b, the slot's runtime word (region.h's runtime
 *            table); given back by U1 rt -= b, then U2 used -= b
 *   sweep    S1 try the slot's lock (held: its owner lives; never waited
 *            on), S2 claim = 0, S2b credit = 0, S3a rt = 0, S3b used = 0,
 *            S4 clear the occupancy bit, S5 unlock
 * The pod's `used` is the sum of `used` over the occupied slots, and its
 * runtime the sum of `rt` over them: every word belongs to one slot, so a
 * death leaves nothing the sweep cannot see.
 *
 * Properties (assertions; spin also reports any state where a process is
 * blocked outside an end label, so a sweep that could wait is an error):
 *   ceiling   the memory the driver really handed out never passes LIMIT
 *             (asserted at each grant, the only place it grows), and neither
 *             does the pod's used (asserted at R4, the only place it grows)
 *   exact     between operations a live process's slot holds exactly its own
 *             books and runtime (BOOKS_EXACT), and a swept slot holds
 *             nothing and is not occupied; so once the dead are swept, the
 *             pod's used (the sum over occupied slots) is exactly what the
 *             live processes hold
 *   runtime   a slot's runtime word never exceeds its used (T2 after R4,
 *             U1 before U2, S3a before S3b); and whenever every live
 *             process is between operations and every dead one is swept,
 *             the pod's runtime as readers see it (gpuguard top, metrics)
 *             is exactly the live processes' runtime charges (the
 *             rtchecker process), whatever step a process died at:
 *             between its runtime's grant and T2 included
 *   no false refusal
 *             when nothing in the books changed since a refuser took the
 *             credits back (calm), the pod's used plus every claim, the
 *             refused request's included, does pass LIMIT
 * R2 reads claim, credit, used: F1 raises used before F2 lowers the credit,
 * R4 raises used and R4b the credit before R5 lowers the claim, so a word a
 * request moves out of is always read before the word it moves into.
 *
 * tests/scripts/model.sh checks two processes exhaustively and three with a
 * supertrace (bitstate) search: three processes exhaustively take more than
 * 60 million states, past what make check can afford.
 *
 * -DOLD_PROTOCOL models the protocol this replaced (slot charged before a
 * pod-wide word, released after it; the sweep subtracts the slot): spin must
 * find the over-reclaim of issue 9 there. -DREAD_USED_FIRST and
 * -DCOMMIT_CLAIM_FIRST swap the two orders R2 and R4/R5 depend on: spin must
 * find a ceiling violation in each. -DOLD_RUNTIME models the runtime as
 * the pod-wide summed word it was (kept by deltas at T2 and U1, capped at
 * the pod's used after a sweep, which cannot know the dead slot's part):
 * spin must find a member killed with a runtime charge leaving it there
 * (the soak's 176 MiB of issue 22). -DCREDIT_GRANT_CAS_FIRST (F2 before
 * F1) and -DCREDIT_FAST_RELEASE (a release into the credit: credit += b,
 * then used -= b, which needs R2 to read used before the credit, the
 * opposite of what F1/F2 need) must pass the ceiling; -DNO_STEAL must
 * refuse falsely. */

#ifdef TWO
#define N 2 /* the processes */
#define THIRD(x) 0
#define THIRD_DO(x) skip
#else
#define N 3
#define THIRD(x) (x)
#define THIRD_DO(x) x
#endif
#ifndef LIMIT
#define LIMIT 2
#endif
/* the sizes a request can have */
#ifdef MIXED
#define SIZE(x) if :: x = 1 :: x = 2 fi
#else
#define SIZE(x) x = 1
#endif

byte used[N];  /* slot s's committed charge (region: proc->used[d]) */
byte claim[N]; /* slot s's reservations in flight (region: proc->claim[d]) */
bool occ[N];   /* occupancy bit (region: header occupied[]) */
byte lock[N];  /* the slot's OFD lock: 0 free, else holder + 1 */
byte rt[N];    /* slot s's runtime charge, part of used[s] (region: the runtime table) */
byte credit[N]; /* slot s's credit: reserved from the pod, not handed out (region: the credit table) */
byte pend[N];   /* ghost: a fast grant's b counted in used[s] before its F2 decided (F1..F2/F3) */
#ifdef OLD_PROTOCOL
byte pod; /* the old pod-wide word */
#endif
#ifdef OLD_RUNTIME
byte rtsum; /* the old pod-wide runtime word (region: device entry's runtime) */
#endif
bool alive[N];
/* ghosts: not in the region, only for the properties */
byte real[N]; /* bytes the driver gave the process in slot s */
byte held[N]; /* the process's own books: the one allocation it holds */
byte hrt[N];  /* the process's own runtime charge (footprint.c: charged) */
bool idle[N]; /* between operations */
/* calm[s]: nothing in the books (used, claim, credit, occupancy) changed
 * since process s stole the credits before its last try (R3c); every step
 * that changes them stirs (clears) every flag */
bool calm[N];
#define STIR calm[0] = false; calm[1] = false; THIRD_DO(calm[2] = false)
#define IDLE(v) idle[me] = v


inline die_now(s)
{
	/* the kernel's part of a SIGKILL: the driver frees the process's
	 * memory and every OFD lock it held (its own slot's, a sweep's) drops */
	alive[s] = false;
	real[s] = 0;
	held[s] = 0;
	hrt[s] = 0;
	idle[s] = false;
	byte k;
	for (k : 0 .. N - 1) {
		if
		:: lock[k] == s + 1 -> lock[k] = 0
		:: else -> skip
		fi
	}
	k = 0
}

/* Any process of any slot can be killed at any time. */
active proctype killer()
{
	byte s;
end:
	do
	:: atomic {
		select(s : 0 .. N - 1);
		alive[s] -> die_now(s);
		s = 0
	}
	od
}

#ifdef OLD_PROTOCOL
/* The old protocol kept a pod-wide word; it must equal what live processes
 * hold once they are between operations and the dead are swept. */
active proctype checker()
{
	byte s, live_held;
	bool quiet;
end:
	do
	:: d_step {
		live_held = 0;
		quiet = true;
		for (s : 0 .. N - 1) {
			quiet = quiet && ((alive[s] && idle[s]) || (!alive[s] && used[s] == 0));
			if
			:: alive[s] -> live_held = live_held + held[s] + hrt[s]
			:: else -> skip
			fi
		}
		s = 0;
		assert(!quiet || pod == live_held);
		live_held = 0;
		quiet = false
	}
	od
}
#endif

/* The pod's used: the sum over occupied slots (what readers compute) */
#define POD_USED ((occ[0] -> used[0] : 0) + (occ[1] -> used[1] : 0) + THIRD(occ[2] -> used[2] : 0))
/* Fast grants in flight that may yet fail (F1 before F3): a moment's
 * phantom in used, never memory the driver hands out */
#define POD_PEND ((occ[0] -> pend[0] : 0) + (occ[1] -> pend[1] : 0) + THIRD(occ[2] -> pend[2] : 0))
/* The pod's runtime as readers see it: the occupied slots' runtime words,
 * or the old summed word */
#ifdef OLD_RUNTIME
#define POD_RT rtsum
#else
#define POD_RT ((occ[0] -> rt[0] : 0) + (occ[1] -> rt[1] : 0) + THIRD(occ[2] -> rt[2] : 0))
#endif

/* The runtime property: a slot's runtime word never exceeds its used; and
 * whenever the live processes are between operations and the dead are
 * swept, the pod's runtime is exactly the live processes' own. */
active proctype rtchecker()
{
	byte s, live_rt;
	bool quiet;
end:
	do
	:: d_step {
		live_rt = 0;
		quiet = true;
		for (s : 0 .. N - 1) {
			assert(rt[s] <= used[s]);
			quiet = quiet && ((alive[s] && idle[s]) || (!alive[s] && !occ[s] && used[s] == 0 && rt[s] == 0));
			if
			:: alive[s] -> live_rt = live_rt + hrt[s]
			:: else -> skip
			fi
		}
		s = 0;
		assert(!quiet || POD_RT == live_rt);
		live_rt = 0;
		quiet = false
	}
	od
}

/* Between operations a live process's slot holds exactly its own books:
 * nobody else wrote it, nothing is left in flight. With the sweep's zeroing
 * of dead slots (asserted there), the pod's used is then the live
 * processes' holdings plus the unswept dead, exactly. */
#define BOOKS_EXACT assert(used[me] == held[me] + hrt[me] && claim[me] == 0 && rt[me] == hrt[me])

/* R2 for slot k: its claim, then its used, if the occupancy snapshot has it;
 * the sum saturates past LIMIT (only "over or not" matters) */
inline read_slot(k)
{
	if
	:: (o & (1 << k)) != 0 ->
#ifdef READ_USED_FIRST
		sum = (sum + used[k] > LIMIT -> LIMIT + 1 : sum + used[k]);
		sum = (sum + claim[k] > LIMIT -> LIMIT + 1 : sum + claim[k])
#else
		sum = (sum + claim[k] > LIMIT -> LIMIT + 1 : sum + claim[k]);
		sum = (sum + credit[k] > LIMIT -> LIMIT + 1 : sum + credit[k]);
		sum = (sum + used[k] > LIMIT -> LIMIT + 1 : sum + used[k])
#endif
	:: else -> skip
	fi
}

/* R3b on slot k: its credit taken back (an exchange). Our own watch
 * (calm[me], set at R3a) is not stirred by our own steps */
inline steal(k)
{
	atomic { ok = calm[me]; credit[k] = 0; STIR; calm[me] = ok; ok = false }
}

/* S1..S5 on slot k (not our own) */
inline sweep_slot(k)
{
	if
	:: k != me ->
		if
		:: atomic { lock[k] == 0 -> lock[k] = me + 1 } /* S1: F_OFD_SETLK */
#ifdef OLD_PROTOCOL
			if
			:: pod >= used[k] -> pod = pod - used[k]
			:: else -> pod = 0 /* saturating */
			fi;
			used[k] = 0;
#else
			atomic { claim[k] = 0; STIR };   /* S2 */
			atomic { credit[k] = 0; STIR };  /* S2b */
			rt[k] = 0;                       /* S3a */
			atomic { used[k] = 0; pend[k] = 0; STIR }; /* S3b */
			atomic { occ[k] = false; STIR }; /* S4 */
			assert(used[k] == 0 && claim[k] == 0 && credit[k] == 0 && rt[k] == 0 && !alive[k]);
#ifdef OLD_RUNTIME
			/* the old cap: the dead slot's part is not known */
			atomic { rtsum = (rtsum > POD_USED -> POD_USED : rtsum) };
#endif
#endif
			lock[k] = 0 /* S5 */
		:: else -> skip /* held: its owner lives */
		fi
	:: else -> skip
	fi
}

proctype proc(byte me)
{
	byte b, sum, o;
	byte extra; /* the refill: what R1 claims beyond b, for the credit */
	bool isrt;  /* this reservation is a runtime charge */
	bool ok;
	bool stolen; /* R3b done: the next refusal is final */
restart:
	/* A1: the slot's lock; a sweeper that holds it lets go in a few steps
	 * (or dies, and the kernel lets go for it) */
	atomic { lock[me] == 0 -> lock[me] = me + 1; alive[me] = true }
	{
		/* A2: what a dead owner left; the lock says nobody else writes */
		atomic { claim[me] = 0; STIR };
		atomic { credit[me] = 0; STIR };
		rt[me] = 0;
		atomic { used[me] = 0; pend[me] = 0; STIR };
#ifdef OLD_RUNTIME
		atomic { rtsum = (rtsum > POD_USED -> POD_USED : rtsum) }; /* A2 swept, as S3 */
#endif
		/* A3 */
		atomic { occ[me] = true; IDLE(true); STIR };
end_idle:
		do
		:: /* reserve b: an allocation, or the runtime's growth (the
		    * driver already holds it: no grant follows, only T2) */
			if
			:: atomic { held[me] == 0 -> SIZE(b); isrt = false }
			:: atomic { hrt[me] == 0 -> b = 1; isrt = true }
			fi;
#ifdef OLD_PROTOCOL
			atomic { IDLE(false); used[me] = used[me] + b };
			if
			:: atomic { pod + b <= LIMIT -> pod = pod + b }
			:: atomic { pod + b > LIMIT -> used[me] = used[me] - b; IDLE(true); b = 0; isrt = false };
				goto refused
			fi;
#else
			IDLE(false);
			/* The fast grant from our credit: F1 used += b, F2 credit -= b
			 * if it holds b (a CAS), else F3 used -= b and the slow path */
			if
			:: credit[me] != 0 ->
#ifdef CREDIT_GRANT_CAS_FIRST
				atomic {
					if
					:: credit[me] >= b -> credit[me] = credit[me] - b; ok = true
					:: else -> ok = false
					fi;
					STIR
				}; /* F2 first: b in neither word for a moment */
				if
				:: ok -> atomic { used[me] = used[me] + b; STIR }
				:: else -> skip
				fi;
#else
				atomic { used[me] = used[me] + b; pend[me] = b; STIR }; /* F1 */
				atomic {
					if
					:: credit[me] >= b -> credit[me] = credit[me] - b; ok = true; pend[me] = 0
					:: else -> ok = false
					fi;
					STIR
				}; /* F2 */
				if
				:: !ok -> atomic { used[me] = used[me] - b; pend[me] = 0; STIR } /* F3 */
				:: else -> skip
				fi;
#endif
				if
				:: ok -> atomic { ok = false }; goto granted
				:: else -> skip
				fi
			:: else -> skip
			fi;
			/* R1, with a refill (the policy's choice: any, when we
			 * hold no credit) */
			if
			:: extra = 0
			:: credit[me] == 0 && b + 1 <= LIMIT -> extra = 1
			fi;
			atomic { claim[me] = claim[me] + b + extra; STIR }; /* R1 */
retry:
			/* R2: the occupancy bits (one word), then each occupied slot */
			o = (occ[0] -> 1 : 0) | (occ[1] -> 2 : 0) | THIRD(occ[2] -> 4 : 0);
			read_slot(0);
			read_slot(1);
			THIRD_DO(read_slot(2));
			if
			:: sum > LIMIT && !stolen ->
				/* R3a: the refill goes; R3b: every slot's credit is
				 * taken back (an exchange each; an owner's F2 then
				 * fails), our own included; then R2 once more */
				atomic { claim[me] = claim[me] - extra; extra = 0; sum = 0; o = 0; STIR; calm[me] = true; stolen = true };
#ifndef NO_STEAL
				steal(0);
				steal(1);
				THIRD_DO(steal(2));
#endif
				goto retry
			:: sum > LIMIT && stolen -> /* R3: refused */
				/* no false refusal: if nothing changed since the
				 * credits were taken back, the pod's used and claims,
				 * this request's included, do pass the ceiling */
				assert(!calm[me] || POD_USED + claim[0] + claim[1] + THIRD(claim[2]) > LIMIT);
				atomic { claim[me] = claim[me] - b; calm[me] = false; stolen = false; sum = 0; o = 0; b = 0; isrt = false; STIR; BOOKS_EXACT };
				goto sweep
			:: else -> atomic { sum = 0; o = 0; calm[me] = false; stolen = false }
			fi;
#ifdef COMMIT_CLAIM_FIRST
			atomic { claim[me] = claim[me] - b - extra; STIR };
			atomic { used[me] = used[me] + b; credit[me] = credit[me] + extra; extra = 0; STIR };
#else
			atomic { used[me] = used[me] + b; assert(POD_USED - POD_PEND <= LIMIT); STIR }; /* R4 */
			atomic { credit[me] = credit[me] + extra; STIR };                     /* R4b: the refill */
			atomic { claim[me] = claim[me] - b - extra; extra = 0; STIR };        /* R5 */
#endif
#endif
granted:
			if
			:: isrt ->
				/* T2: the runtime word names the charge just taken */
				atomic {
#ifdef OLD_RUNTIME
					rtsum = rtsum + b;
#endif
					rt[me] = rt[me] + b;
					hrt[me] = b;
					b = 0;
					isrt = false;
					IDLE(true);
					BOOKS_EXACT
				};
				goto next
			:: else -> skip
			fi;
			/* the driver call the grant was for; the process books it */
			atomic {
				real[me] = b;
				held[me] = b;
				b = 0;
				IDLE(true);
				assert(real[0] + real[1] + THIRD(real[2]) <= LIMIT); /* the ceiling */
				BOOKS_EXACT
			};
			goto next;
refused:
sweep:
			/* a refusal sweeps every other slot, then the caller may retry */
			sweep_slot(0);
			sweep_slot(1);
			THIRD_DO(sweep_slot(2));
			atomic { IDLE(true); BOOKS_EXACT };
next:
			skip
		:: /* release: the driver frees first, then L1 */
			atomic { held[me] != 0 -> IDLE(false); real[me] = 0 };
#ifdef OLD_PROTOCOL
			pod = pod - held[me];
#endif
#ifdef CREDIT_FAST_RELEASE
			/* the release into our credit (credit += b, then used -= b):
			 * no read order of R2 sees both this and F1/F2 right */
			atomic { credit[me] = credit[me] + held[me]; STIR };
#endif
			atomic { used[me] = used[me] - held[me]; held[me] = 0; IDLE(true); STIR; BOOKS_EXACT } /* L1 */
		:: /* the runtime shrinks (a context destroyed): U1, then U2 */
			atomic {
				hrt[me] != 0 -> IDLE(false);
#ifdef OLD_RUNTIME
				rtsum = (rtsum > hrt[me] -> rtsum - hrt[me] : 0);
#endif
				rt[me] = rt[me] - hrt[me]
			};
#ifdef OLD_PROTOCOL
			pod = pod - hrt[me];
#endif
			atomic { used[me] = used[me] - hrt[me]; hrt[me] = 0; IDLE(true); STIR; BOOKS_EXACT } /* U2 */
		od
	} unless { !alive[me] };
	/* killed: locals die with the process; a restart (or a fork child)
	 * takes the slot again */
	atomic { b = 0; sum = 0; o = 0; isrt = false; extra = 0; ok = false; stolen = false; calm[me] = false };
	goto restart
}

init {
	atomic {
		run proc(0);
		run proc(1);
		THIRD_DO(run proc(2))
	}
}
