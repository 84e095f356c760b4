/*
 * Tombstone's deletion protocol (docs/design.md §2, §4, §5, §6b), bounded so that spin checks every
 * interleaving. One managed ledger (ML) owns the ledgers below; its znode has a version that
 * every compare-and-set (CAS) write increments.
 *
 *   ledger 0  listed, OPEN (an old cursor ledger: Pulsar deletes those without closing them);
 *             trimmed through the marker (PIP-186 phase 1, marker-writes)
 *   ledger 1  listed; trimmed by an unmodified broker (the list first, then a delete that may
 *             fail for good); the follower records the intent after the unlink
 *   ledger 2  another application's ledger: its custom metadata names no Pulsar owner (S2)
 *   ledger 3  a rollover ledger being created: it exists, is OPEN and is not listed yet; the
 *             broker's rollover CAS lists it (the window the OPEN rule must protect)
 *
 * Processes: the marker, the broker (a rollover, then a trim), the follower, a forger that
 * produces unsigned PDLIs onto the system topic, and two deleters, each running the
 * verifier's decision on one snapshot of the metadata and then acting on it.
 *
 * The system topic is a Shared subscription: any deleter takes any ready message, in any
 * order; a deleter crash returns its in-flight message for redelivery. RETRY republishes a
 * copy with one more try and then acknowledges the original; after MAXR tries it goes to the
 * dead-letter topic. Messages are kept as counts per (kind, tries): every message of a kind
 * names the same ledger, fence token and signer, so two of them are interchangeable.
 *
 * Variants (compile-time):
 *   default        Tombstone: a listed ledger below the PDLI's fence token is RETRY; a listed
 *                  ledger at or past it is acknowledged (a later trim sends a fresh PDLI); the
 *                  marker re-sends a fresh PDLI when its write lands after the first one was
 *                  settled (the retry window); an unlisted OPEN ledger is deleted only with a
 *                  proof that its owner listed and then unlinked it (a signed intent read from
 *                  the owner, fence reached), or when its id is below the owner's lowest
 *                  reference or older than the age window (neither holds for ledger 3).
 *   PIP186         PIP-186's rule: a listed ("still in use") ledger is acknowledged whatever
 *                  happens next; no fence token, no re-send. Expected: an L1 counterexample.
 *   UNPROVEN_OPEN  the OPEN rule without the proof: "not listed and fence reached" alone
 *                  counts as unlinked. Expected: an S1 counterexample (a forged PDLI with a
 *                  low fence token deletes the rollover ledger before the broker lists it).
 */

#define NL 4
#define MAXR 1        /* retries before the dead-letter topic */
#define MAXCRASH 1    /* deleter crashes in a run */

/* Message kinds: who sent it, hence its ledger, fence token and signature. */
#define KM 0          /* the marker's PDLI for ledger 0 */
#define KR 1          /* the marker's fresh PDLI after a late write */
#define KF 2          /* the follower's PDLI for ledger 1 */
#define KX2 3         /* forged: ledger 2, named as the ML's */
#define KX3 4         /* forged: ledger 3 with a fence token "already reached" */
#define NK 5

#define ACK 1
#define RETRY 2
#define DEAD 3
#define DELETE 4

byte ver = 1;          /* the ML znode version */
bool listed[NL];
bool exists[NL];       /* the ledger's metadata znode is present in BookKeeper */
bool ours[NL];         /* custom metadata names this ML */
bool open[NL];         /* BookKeeper state OPEN */
bool dlq[NL];          /* some PDLI for the ledger is in the dead-letter topic */
byte fence[NK];        /* the fence token each kind carries */
byte ready[NK * (MAXR + 1)];   /* messages ready for delivery, by kind and tries */
byte nready = 0;
byte ntaken = 0;
byte producers = 4;    /* marker, broker, follower, forger */
byte crashes = 0;
bool started = false;  /* the properties speak of the state after init */
bool taken_m = false;  /* a deleter holds the marker's first PDLI */

#define slot(k, t) ((k) * (MAXR + 1) + (t))
#define ledger_of(k) ((k) == KM || (k) == KR -> 0 : ((k) == KF -> 1 : ((k) == KX2 -> 2 : 3)))
#define signed_kind(k) ((k) == KM || (k) == KR || (k) == KF)

inline publish(k, t) {
  ready[slot(k, t)]++; nready++
}

proctype Marker() {
  byte v; bool ok;
  atomic {
    v = ver;                              /* 1. read the ML at version v: ledger 0 listed */
    fence[KM] = v + 1; publish(KM, 0)     /* 2-3. signed PDLI, fence v+1, receipt awaited */
  }
  atomic {                                /* 4. CAS at v: unlink only if nothing wrote since */
    if
    :: ver == v -> listed[0] = false; ver++; ok = true
    :: else -> ok = false                 /* conflict: nothing unlinked; the caller retries */
    fi
  }
#ifndef PIP186
  /* A write that lands after its PDLI was settled re-sends a fresh one (the retry window,
     shorter than the deleter's retry budget, makes "settled" and "late" the same thing). */
  atomic {
    if
    :: ok && ready[slot(KM, 0)] + ready[slot(KM, 1)] == 0 && !taken_m ->
       fence[KR] = ver; publish(KR, 0)
    :: else
    fi
  }
#endif
  producers--
}


proctype Broker() {
  atomic { assert(exists[3]); listed[3] = true; ver++ };  /* the rollover CAS; S1 */
  atomic { listed[1] = false; ver++; fence[KF] = ver };   /* the trim: the list first... */
  if
  :: exists[1] = false                                    /* ...then the delete, */
  :: skip                                                 /* which may fail for good */
  fi;
  producers--
}

proctype Follower() {
  atomic {
    (!listed[1]);                         /* the watch, or the re-read after a lost watch */
    publish(KF, 0)                        /* fence: the version that no longer lists it */
  }
  producers--
}

proctype Forger() {
  atomic { publish(KX2, 0); publish(KX3, 0) };
  producers--
}

proctype Deleter() {
  byte k, t, l, d;
  do
  :: atomic {
       nready > 0;                        /* Shared dispatch: any ready message, any order */
       if
       :: ready[slot(KM, 0)] > 0 -> k = KM; t = 0
       :: ready[slot(KM, 1)] > 0 -> k = KM; t = 1
       :: ready[slot(KR, 0)] > 0 -> k = KR; t = 0
       :: ready[slot(KR, 1)] > 0 -> k = KR; t = 1
       :: ready[slot(KF, 0)] > 0 -> k = KF; t = 0
       :: ready[slot(KF, 1)] > 0 -> k = KF; t = 1
       :: ready[slot(KX2, 0)] > 0 -> k = KX2; t = 0
       :: ready[slot(KX2, 1)] > 0 -> k = KX2; t = 1
       :: ready[slot(KX3, 0)] > 0 -> k = KX3; t = 0
       :: ready[slot(KX3, 1)] > 0 -> k = KX3; t = 1
       fi;
       ready[slot(k, t)]--; nready--; ntaken++;
       if :: k == KM -> taken_m = true :: else fi;
       /* The verifier's decision (docs/design.md §4), on one snapshot of the metadata. */
       l = ledger_of(k);
       if
       :: listed[l] ->
#ifdef PIP186
          d = ACK                                   /* "still in use" */
#else
          if
          :: ver < fence[k] -> d = RETRY            /* the marker's write may still land */
          :: else -> d = ACK                        /* still referenced after the fence */
          fi
#endif
       :: !listed[l] && !exists[l] -> d = ACK       /* proved gone */
       :: !listed[l] && exists[l] && !ours[l] -> d = DEAD   /* MISMATCH: dead-lettered */
       :: !listed[l] && exists[l] && ours[l] && !open[l] -> d = DELETE
       :: !listed[l] && exists[l] && ours[l] && open[l] ->
#ifdef UNPROVEN_OPEN
          if
          :: ver >= fence[k] -> d = DELETE
          :: else -> d = RETRY
          fi
#else
          if
          :: signed_kind(k) && ver >= fence[k] -> d = DELETE
          :: else -> d = RETRY                      /* may be in creation */
          fi
#endif
       fi
     };
     /* Acting on the verdict: the metadata may have changed since the snapshot. */
     atomic {
       if
       :: d == DELETE ->
          /* S1 and S2 at the moment of deletion: nothing listed, nothing not Pulsar's. */
          assert(!listed[l] && ours[l]);
          exists[l] = false
       :: else
       fi;
       if
       :: crashes < MAXCRASH ->                     /* crash before the settlement: */
          crashes++; ready[slot(k, t)]++; nready++  /* redelivered as it was */
       :: true ->
          if
          :: d == RETRY && t < MAXR -> publish(k, t + 1)   /* stored first, then the ack */
          :: d == RETRY && t >= MAXR -> dlq[l] = true
          :: d == DEAD -> dlq[l] = true
          :: else
          fi
       fi;
       ntaken--;
       if :: k == KM -> taken_m = false :: else fi;
       k = 0; t = 0; l = 0; d = 0
     }
  :: producers == 0 && nready == 0 && ntaken == 0 -> break
  od
}

init {
  atomic {
    listed[0] = true; listed[1] = true;
    exists[0] = true; exists[1] = true; exists[2] = true; exists[3] = true;
    ours[0] = true; ours[1] = true; ours[3] = true;
    open[0] = true; open[3] = true;
    started = true;
    run Marker(); run Broker(); run Follower(); run Forger();
    run Deleter(); run Deleter()
  }
}

/* S1: nothing referenced is ever deleted (a listed ledger's metadata always exists). */
ltl s1 { [] (!started || ((listed[0] -> exists[0]) && (listed[1] -> exists[1])
                          && (listed[3] -> exists[3]))) }
/* S2: what Pulsar did not create is never deleted. */
ltl s2 { [] (!started || exists[2]) }
/* L1: once faults stop, every unlinked ledger is gone or dead-lettered with a reason. */
ltl l1 { <> [] (started && (listed[0] || !exists[0] || dlq[0])
                && (listed[1] || !exists[1] || dlq[1])) }
/* L2: the system topic and the retries drain, and every process ends (nothing is retried
   forever): every run reaches a state with nothing ready, nothing in flight, no producer. */
ltl l2 { <> (started && producers == 0 && nready == 0 && ntaken == 0) }
