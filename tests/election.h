/*
 * tests/election.h - candidates and observers of one election in forked
 * processes, on a table of either kind, and the checks of what they
 * recorded (tests/helper_election.c).
 *
 * Each candidate logs its terms in memory shared with the test: the token,
 * and an interval in which it surely led: from just after its campaign
 * returned (the lease was acquired before) to the clock read just before
 * its last proclaim that the table accepted (the table judged the lease
 * valid, under its lock or in its transaction, no earlier than that read).
 * The checker needs no clock of the table's: two terms whose intervals
 * overlap, or a newer token whose interval starts before an older one's
 * ends, is two leaders at once.
 */
#ifndef SHL_TESTS_ELECTION_H
#define SHL_TESTS_ELECTION_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmlease.h"

#define EL_CANDS 16
#define EL_TERMS 4096
#define EL_SEEN  4096
#define EL_OBS   2

struct el_term {
    _Atomic uint64_t token;      /* stored last: 0 is a record its candidate did not finish */
    _Atomic uint64_t start, end; /* end 0: no proclaim after the campaign's accepted */
    int32_t cand;
    /* How the term ended, when its candidate saw it end otherwise than by
     * resigning (0: not recorded): */
    _Atomic int lost_rc;   /* the refused proclaim's code */
    _Atomic int check_rc;  /* shl_election_check() after it */
    _Atomic int reason;    /* shl_election_lost() after it */
    _Atomic int raw_rc;    /* shl_write() with the term's token, straight to the table */
    _Atomic uint64_t left; /* shl_election_token() after it */
};

struct el_seen {
    uint64_t token;
    int32_t cand;     /* from the id "c<n>"; -1 when it is not one */
    int32_t value_ok; /* the value read with it is the one its candidate proclaims */
};

struct el_shared {
    char table[256];   /* the table's name or etcd URL */
    char election[64]; /* the election's name */
    uint64_t ttl_ns;
    uint64_t work_ns;     /* between two proclaims of a term */
    uint64_t hold_min_ns; /* a term resigns after a random time in [min, max]; */
    uint64_t hold_max_ns; /* max 0: never (lead until lost, killed or stopped) */
    uint32_t timeout_ms;  /* etcd tables: each request's deadline (0: default) */
    _Atomic int stop;     /* candidates resign and leave, observers leave */
    _Atomic int keep;     /* a leader no longer resigns (its term lasts) */
    _Atomic pid_t pid[EL_CANDS];
    _Atomic uint64_t leading[EL_CANDS]; /* a candidate's current token, 0: none */
    _Atomic uint32_t campaign_errors;   /* campaign results other than OK/ETIMEDOUT */
    _Atomic int last_error;
    _Atomic uint32_t nterms;
    struct el_term terms[EL_TERMS];
    _Atomic int observe_rc; /* an observer's unexpected result, 0: none */
    _Atomic uint32_t nseen[EL_OBS];
    struct el_seen seen[EL_OBS][EL_SEEN];
};

/* A zeroed block shared with the processes forked after it. */
struct el_shared *el_shared_new(const char *table, const char *election);
void el_shared_free(struct el_shared *sh);

/* Forks candidate n ("c<n>"), which campaigns in a loop until sh->stop. */
pid_t el_candidate(struct el_shared *sh, int n);
/* Forks observer k (< EL_OBS), which records every leader it reports in
 * sh->seen[k]. */
pid_t el_observer(struct el_shared *sh, int k);

/* Candidate n from the id "c<n>", -1 for another id. */
int el_cand_of(const char *id);

/* Fails the test if two terms overlap, or are out of token order, or an
 * observer reported tokens out of order, a leader that its term's record
 * contradicts (another candidate, another value), or an unexpected error. Returns the number of
 * terms with an interval, and each observer's reports in seen[]. */
uint32_t el_check(struct el_shared *sh, uint32_t seen[EL_OBS]);

/* The last token observer k reported (0: none). */
uint64_t el_last_seen(struct el_shared *sh, int k);

/* Waits (up to timeout_ns) for a proclaimed leader with a token above
 * `after`; returns its token (and *cand), or 0 when none came. */
uint64_t el_wait_leader(shl_table *t, const char *election, uint64_t after, uint64_t timeout_ns,
                        int *cand);

/* Sets sh->stop, resumes and waits for candidates 0..ncand-1 and the
 * observer (when > 0). */
void el_stop_all(struct el_shared *sh, int ncand, pid_t observer);

/* kill -9 of the leader, candidate *cand with token *tok; waits up to
 * bound_ns for the next leader, which *cand and *tok become; fails the test
 * if none comes or leader() reports the dead token again. The time taken. */
uint64_t el_kill_leader(struct el_shared *sh, shl_table *t, int *cand, uint64_t *tok,
                        uint64_t bound_ns);

/* SIGSTOP of the leader c0 (token tok) until another leads (within
 * bound_ns) and after_ns more; then SIGCONT, and c0's record must show its
 * proclaim and a write with its token refused, the check lost, token 0. */
void el_stop_leader(struct el_shared *sh, shl_table *t, uint64_t tok, uint64_t bound_ns,
                    uint64_t after_ns);

/* Waits up to timeout_ns for observers 0..nobs-1 to report token tok. */
void el_expect_reached(struct el_shared *sh, int nobs, uint64_t tok, uint64_t timeout_ns);

/* A campaign of kills and pauses against ncand candidates and EL_OBS
 * observers: the pace of the blows, and what they did. */
struct el_stress {
    int ncand;
    unsigned seed;
    uint64_t gap_min_ns, gap_max_ns;   /* between two blows */
    uint64_t stop_min_ns, stop_max_ns; /* how long a candidate stays stopped */
    int force; /* the next blow: 0 random, EL_STOP_LEADER or EL_KILL_LEADER */
    pid_t obs[EL_OBS];
    unsigned kills, stops, leader_hits, obs_stops;
    uint64_t newest; /* the newest token the test's own leader() reads gave */
};

#define EL_STOP_LEADER 1 /* the leader, for stop_max_ns */
#define EL_KILL_LEADER 2

/* Forks the observers and candidates 0..st->ncand-1; logs the seed. */
void el_stress_start(struct el_shared *sh, struct el_stress *st);

/* One blow after a random gap: kill -9 (and a new candidate in its place)
 * or SIGSTOP/SIGCONT of a candidate, the leader half of the time, and now
 * and then a pause of an observer; or the blow st->force says (once).
 * Fails the test if leader() reports a token older than one it reported
 * before (a killed or stopped leader's again). */
void el_stress_blow(struct el_shared *sh, shl_table *t, struct el_stress *st);

/* Stops everyone, checks the records (el_check()) and how every lost term
 * ended (refused, or told inside the renewer's margin), logs the counts on
 * stderr. Returns the number of terms with an interval; *lost the lost
 * ones. */
uint32_t el_stress_end(struct el_shared *sh, struct el_stress *st, uint32_t *lost);

#endif
