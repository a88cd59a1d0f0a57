/*
 * lib/kind_shm/crashpoint.h - the library's crash points, by number (see
 * shm/crashpoint.h for how a test arms one). Numbers never change meaning.
 */
#ifndef SHL_LIB_CRASHPOINT_H
#define SHL_LIB_CRASHPOINT_H

#include <assert.h>

#include "../../shm/crashpoint.h"

/* Lease operations: 1..99. */
enum shl__crash {
    SHL__CP_ACQ_INTENT = 1, /* intent written, not armed (also revoke, reclaim) */
    SHL__CP_ACQ_ARMED,      /* intent armed, cur untouched */
    SHL__CP_ACQ_APPLY,      /* cur half written */
    SHL__CP_ACQ_APPLIED,    /* cur written, intent still armed */
    SHL__CP_RENEW,          /* inside the seq bracket, before the store */
    SHL__CP_RENEW_STORED,   /* expiry stored, seq odd */
    SHL__CP_RELEASE,
    SHL__CP_RELEASE_STORED,
    SHL__CP_WRITE_COPY,        /* spare buffer half copied */
    SHL__CP_WRITE_COPIED,      /* spare buffer full, not committed */
    SHL__CP_WRITE_COMMITTED,   /* vcur stored, seq odd */
    SHL__CP_GUARD,             /* inside shl_guard, after the callback */
    SHL__CP_ADD_NAME,          /* name written, not armed */
    SHL__CP_ADD_ARMED,         /* add intent armed, bucket not stored */
    SHL__CP_ADD_PUBLISHED,     /* bucket stored, nslots not */
    SHL__CP_RECOVER,           /* inside slot recovery, half done */
    SHL__CP_REJECT,            /* recording a rejection */
    SHL__CP_REVOKE_ARMED,      /* revoke intent armed, cur untouched */
    SHL__CP_REVOKE_APPLY,      /* cur half written */
    SHL__CP_REVOKE_APPLIED,    /* cur written, intent still armed */
    SHL__CP_RECLAIM_ARMED,     /* reclaim intent armed, cur untouched */
    SHL__CP_RECLAIM_APPLY,     /* cur half written */
    SHL__CP_RECLAIM_SEEN,      /* reclaim delay: death first seen, recorded */
    SHL__CP_RECOVER_BEGIN,     /* recovery started, seq odd, nothing applied */
    SHL__CP_RECOVER_DONE,      /* recovery applied, intent still armed */
    SHL__CP_REPAIR_INDEX,      /* index mend armed, nothing changed yet (table lock held) */
    SHL__CP_REPAIR_MUTEX,      /* repair: broken slot rolled forward, mutex not reinitialised */
    SHL__CP_INDEX_INSERTED,    /* index mend: a missing name's bucket filled */
    SHL__CP_INDEX_RETIRING,    /* index mend: a twin's retire intent written, not armed */
    SHL__CP_INDEX_RETIRED,     /* index mend: a twin retired, index not yet updated */
    SHL__CP_INDEX_DEAD,        /* index mend: a stray bucket marked dead */
    SHL__CP_INDEX_MENDED,      /* index mend: all done, still armed */
    SHL__CP_SH_INTENT,         /* shared acquire: intent written, not armed */
    SHL__CP_SH_ARMED,          /* shared acquire: intent armed, nothing applied */
    SHL__CP_SH_APPLY,          /* shared acquire: its record half written */
    SHL__CP_SH_APPLIED,        /* shared acquire: applied, intent still armed */
    SHL__CP_SH_RELEASE,        /* shared release: inside the seq bracket, before the store */
    SHL__CP_SH_RELEASE_STORED, /* shared release: mask stored, seq odd */
    SHL__CP_SH_GUARD,          /* inside shl_guard_shared, after the callback */
    SHL__CP_WAKE,              /* freed and unlocked, a wake-up owed (waiters), not made */
    SHL__CP_POOL_TAKEN,        /* a pool group's owner set, the slot's ref not yet */
    SHL__CP_POOL_PUT,          /* a slot's ref to a group cleared, its owner not yet */
    SHL__CP_VALUE_HOME,        /* a spare taken back: its value copied home, vcur not moved */
    SHL__CP_COUNT
};
static_assert(SHL__CP_COUNT <= SHL__CP_SHM_CREATE, "lease crash points stay below shm's");

/* An acquire refused (the lease held by another), the slot still locked: a
 * non-holder inside the critical section while the holder waits for it
 * (`shmlease stress` stops workers here: tools/stress_section.c). */
#define SHL__CP_BUSY 90
static_assert(SHL__CP_COUNT <= SHL__CP_BUSY, "the numbered lease crash points stay below 90");

/* floor.c: the new epoch is in the temporary file, not yet renamed;
 * renamed, directory not yet synced. */
#define SHL__CP_FLOOR_TMP     110
#define SHL__CP_FLOOR_RENAMED 111

#endif
