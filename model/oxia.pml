/*
 * The fence rule on Oxia's versions (docs/oxia.md, "The fence token"), bounded so that spin
 * checks every interleaving. model/tombstone.pml has ZooKeeper's versions: every write of the
 * owner makes it v + 1. On Oxia a write takes the next value of a counter its whole shard
 * shares, so the version a write produces is unpredictable: greater than every version the
 * key had, but by any amount, since other keys' writes advance the counter too. A key deleted
 * and created again gets a fresh, higher version id (ZooKeeper starts it at 0 again).
 *
 * PIP-454's migration copies each ZooKeeper znode into Oxia with its ZooKeeper version as the
 * version id (MigrationCoordinator.copy, OptionOverrideVersionId), and such a copy does not
 * advance the shard's counter (Oxia's db.go applyPut). So a copied key can hold a version above
 * the counter, and its first write after the migration can make its version go down. The init
 * step chooses either start: a key written on Oxia, or one copied by the migration.
 *
 * One managed ledger (ML) owns two ledgers:
 *   ledger 0  listed, OPEN (an old cursor ledger); trimmed through the marker (marker-writes)
 *   ledger 1  listed; trimmed by an unmodified broker, whose own delete may fail for good; the
 *             follower records the intent after the unlink
 * Processes: the marker; the broker (a rollover write, then the trim, or the deletion of the
 * whole ML and its creation again, or the trim and then that); the follower; one deleter,
 * running the verifier's decision on one snapshot and acting on it later (the race is between
 * the marker's write and that snapshot; the orders two deleters add on a Shared subscription
 * are tombstone.pml's). Each put of the ML skips 0 or 1 counter values that other keys took.
 * Faults: a deleter crash between verdict and settlement, a lost compare-and-set, a broker
 * delete that fails, retries and the dead-letter topic after MAXR tries. Messages are counts
 * per (kind, tries), as in tombstone.pml.
 *
 * Variants (compile-time):
 *   default   Tombstone's rule: a listed ledger whose owner's version is below the fence
 *             token is RETRY, at or above it SKIP IN_USE (acknowledged); the marker's token is
 *             v + 1 for a read at v, the follower's the version that no longer lists the
 *             ledger (0 for a deleted owner). Expected: S1, L1, L2 verified.
 *   PIP186    a listed ledger is acknowledged; no fence token, no re-send. Expected: an L1
 *             counterexample (the race is the same on Oxia).
 *   EQ_FENCE  the token compared for equality: RETRY only while the version is still the one
 *             the marker read (token - 1), as if "the version moved" proved that the marker's
 *             write can no longer land. True while every version is the counter's, false once
 *             a migrated key's version can come back. Expected: an L1 counterexample.
 */

#define NL 2
#define MAXR 1        /* retries before the dead-letter topic */
#define MAXCRASH 1    /* deleter crashes in a run */
#define COPIED 4      /* a migrated owner's version id: its ZooKeeper version, above the counter */

#define KM 0          /* the marker's PDLI for ledger 0 */
#define KR 1          /* the marker's fresh PDLI after a late write */
#define KF 2          /* the follower's PDLI for ledger 1 (trimmed, or its owner deleted) */
#define KD 3          /* the follower's PDLI for ledger 0 when the owner was deleted first */
#define NK 4

#define ACK 1
#define RETRY 2
#define DEAD 3
#define DELETE 4

byte ctr = 1;          /* the shard's version counter: each put takes ctr + 1 */
byte ver;              /* the ML's version id */
bool ml = true;        /* the ML exists (false between its deletion and its creation again) */
bool listed[NL];
bool exists[NL];       /* the ledger's metadata is present in BookKeeper */
bool open[NL];
bool dlq[NL];
bool gone0 = false;    /* the ML's deletion unlinked ledger 0 (the marker had not) */
bool broker_done = false;
byte fence[NK];
byte ready[NK * (MAXR + 1)];
byte nready = 0;
byte ntaken = 0;
byte producers = 3;    /* marker, broker, follower */
byte crashes = 0;
bool started = false;
bool taken_m = false;  /* a deleter holds the marker's first PDLI */

#define slot(k, t) ((k) * (MAXR + 1) + (t))
#define ledger_of(k) ((k) == KF -> 1 : 0)
/* The verifier's "fence reached": an absent owner has unlinked everything it listed. */
#define reached(k) (!ml || ver >= fence[k])

inline publish(k, t) {
  ready[slot(k, t)]++; nready++
}

/* A put of the ML takes the counter's next value, after any number (here 0 or 1) of other
   keys' puts took theirs: so its version is above what the key had, by any amount. */
inline put_ml() {
  if
  :: ctr++
  :: ctr = ctr + 2
  fi;
  ver = ctr
}

proctype Marker() {
  byte v; bool ok = false;
  if
  :: atomic {
       ml && listed[0];
       v = ver;                           /* 1. read the ML at version v: ledger 0 listed */
       fence[KM] = v + 1; publish(KM, 0)  /* 2-3. PDLI with fence v + 1, receipt awaited */
     };
     atomic {                             /* 4. CAS at v: the put's version comes from ctr */
       if
       :: ml && ver == v -> listed[0] = false; put_ml(); ok = true
       :: else                            /* conflict (or the ML is gone): nothing unlinked */
       fi
     };
#ifndef PIP186
     atomic {                             /* the late-write re-send, as in tombstone.pml */
       if
       :: ok && ready[slot(KM, 0)] + ready[slot(KM, 1)] == 0 && !taken_m ->
          fence[KR] = ver; publish(KR, 0)
       :: else
       fi
     }
#endif
  :: atomic { !(ml && listed[0]) -> skip }  /* nothing left to mark */
  fi;
  producers--
}

inline delete_and_create() {
  atomic {                                /* the ML deleted: everything it listed leaves */
    if :: listed[1] -> fence[KF] = 0 :: else fi;
    gone0 = listed[0];
    listed[0] = false; listed[1] = false; ml = false
  };
  atomic { ml = true; put_ml() }          /* created again: a fresh version id, no ledgers */
}

proctype Broker() {
  atomic { put_ml() };                    /* the rollover write: the marker's CAS may lose */
  if
  :: atomic { listed[1] = false; put_ml(); fence[KF] = ver }   /* the trim, list first */
  :: atomic { listed[1] = false; put_ml(); fence[KF] = ver }; delete_and_create()
  :: delete_and_create()
  fi;
  if
  :: exists[1] = false                    /* then its delete, which may fail for good */
  :: skip
  fi;
  broker_done = true;
  producers--
}

proctype Follower() {
  bool sent_f = false, sent_d = false;
  do
  :: atomic { !sent_f && !listed[1] -> publish(KF, 0); sent_f = true }
  :: atomic { !sent_d && gone0 -> publish(KD, 0); sent_d = true }
  :: broker_done && sent_f && (sent_d || !gone0) -> break
  od;
  producers--
}

proctype Deleter() {
  byte k, t, l, d;
  do
  :: atomic {
       nready > 0;
       if
       :: ready[slot(KM, 0)] > 0 -> k = KM; t = 0
       :: ready[slot(KM, 1)] > 0 -> k = KM; t = 1
       :: ready[slot(KR, 0)] > 0 -> k = KR; t = 0
       :: ready[slot(KR, 1)] > 0 -> k = KR; t = 1
       :: ready[slot(KF, 0)] > 0 -> k = KF; t = 0
       :: ready[slot(KF, 1)] > 0 -> k = KF; t = 1
       :: ready[slot(KD, 0)] > 0 -> k = KD; t = 0
       :: ready[slot(KD, 1)] > 0 -> k = KD; t = 1
       fi;
       ready[slot(k, t)]--; nready--; ntaken++;
       if :: k == KM -> taken_m = true :: else fi;
       l = ledger_of(k);
       if
       :: listed[l] ->
#if defined(PIP186)
          d = ACK
#elif defined(EQ_FENCE)
          if
          :: ver + 1 == fence[k] -> d = RETRY       /* "not moved since the marker's read" */
          :: else -> d = ACK
          fi
#else
          if
          :: ver < fence[k] -> d = RETRY            /* the unlinking write may still land */
          :: else -> d = ACK                        /* it never can: still referenced */
          fi
#endif
       :: !listed[l] && !exists[l] -> d = ACK       /* proved gone */
       :: !listed[l] && exists[l] && !open[l] -> d = DELETE
       :: !listed[l] && exists[l] && open[l] ->
          if
          :: reached(k) -> d = DELETE               /* a signed intent whose unlink is shown */
          :: else -> d = RETRY
          fi
       fi
     };
     atomic {
       if
       :: d == DELETE -> assert(!listed[l]); exists[l] = false   /* S1 at the delete */
       :: else
       fi;
       if
       :: crashes < MAXCRASH -> crashes++; ready[slot(k, t)]++; nready++
       :: true ->
          if
          :: d == RETRY && t < MAXR -> publish(k, t + 1)
          :: d == RETRY && t >= MAXR -> dlq[l] = true
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
    exists[0] = true; exists[1] = true;
    open[0] = true;
    if
    :: ver = COPIED                       /* the ML was copied by PIP-454's migration */
    :: ver = ctr                          /* the ML was written on Oxia */
    fi;
    started = true;
    run Marker(); run Broker(); run Follower();
    run Deleter()
  }
}

/* S1: nothing referenced is ever deleted. */
ltl s1 { [] (!started || ((listed[0] -> exists[0]) && (listed[1] -> exists[1]))) }
/* L1: every unlinked ledger ends gone or dead-lettered with a reason. */
ltl l1 { <> [] (started && (listed[0] || !exists[0] || dlq[0])
                && (listed[1] || !exists[1] || dlq[1])) }
/* L2: every run drains. */
ltl l2 { <> (started && producers == 0 && nready == 0 && ntaken == 0) }
