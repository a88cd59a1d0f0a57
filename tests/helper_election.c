/*
 * tests/helper_election.c - forked candidates and observers of one
 * election, and the checks of their records (tests/election.h).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "election.h"

struct el_shared *el_shared_new(const char *table, const char *election)
{
    struct el_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert(sh != MAP_FAILED);
    snprintf(sh->table, sizeof sh->table, "%s", table);
    snprintf(sh->election, sizeof sh->election, "%s", election);
    return sh;
}

void el_shared_free(struct el_shared *sh)
{
    munmap(sh, sizeof *sh);
}

int el_cand_of(const char *id)
{
    int n, end = 0;
    if (sscanf(id, "c%d%n", &n, &end) != 1 || id[end] != '\0' || n < 0 || n >= EL_CANDS)
        return -1;
    return n;
}

/* Opens the test's table in a child, again until it opens or the test stops. */
static shl_table *el_open(struct el_shared *sh)
{
    shl_options o;
    shl_options_init(&o);
    o.flags = 0;
    o.timeout_ms = sh->timeout_ms;
    int etcd = strncmp(sh->table, "etcd", 4) == 0;
    shl_table *t = NULL;
    while (!atomic_load(&sh->stop) && shl_open(sh->table, etcd ? &o : NULL, &t) != SHL_OK)
        t_sleep_ns(50 * MS);
    return t;
}

static uint64_t el_hold(struct el_shared *sh, unsigned *seed)
{
    if (!sh->hold_max_ns)
        return 0;
    uint64_t span = sh->hold_max_ns - sh->hold_min_ns;
    return sh->hold_min_ns + (span ? (uint64_t)rand_r(seed) % span : 0);
}

/* The term's end other than by resigning: what the handle and the table say. */
static void el_lost(struct el_shared *sh, shl_table *t, shl_election *e, struct el_term *r,
                    const char *id, uint64_t tok, int rc)
{
    atomic_store(&r->check_rc, shl_election_check(e));
    atomic_store(&r->reason, shl_election_lost(e));
    atomic_store(&r->left, shl_election_token(e));
    /* The term's own value again: the observers' check of values holds. */
    atomic_store(&r->raw_rc, shl_write(t, sh->election, id, tok, id, strlen(id)));
    atomic_store(&r->lost_rc, rc);
}

/* One term, from the campaign's return to its end. */
static void el_term(struct el_shared *sh, shl_table *t, shl_election *e, int n, uint64_t tok,
                    unsigned *seed)
{
    char id[16];
    snprintf(id, sizeof id, "c%d", n);
    uint32_t i = atomic_fetch_add(&sh->nterms, 1);
    struct el_term spare, *r = i < EL_TERMS ? &sh->terms[i] : &spare;
    atomic_store(&r->start, t_now());
    r->cand = n;
    atomic_store(&r->token, tok);
    atomic_store(&sh->leading[n], tok);
    uint64_t hold = el_hold(sh, seed), until = t_now() + hold;
    while (!atomic_load(&sh->stop)) {
        t_sleep_ns(sh->work_ns);
        uint64_t before = t_now();
        int rc = shl_election_proclaim(e, id, strlen(id));
        if (rc != SHL_OK) {
            el_lost(sh, t, e, r, id, tok, rc);
            break;
        }
        atomic_store(&r->end, before);
        if (hold && t_now() >= until && !atomic_load(&sh->keep)) {
            /* Stopped inside the proclaim (taken before the stop), the
             * term may be lost by now: that is a lost term, not a resign. */
            rc = shl_election_check(e);
            if (rc != SHL_OK)
                el_lost(sh, t, e, r, id, tok, rc);
            break;
        }
    }
    atomic_store(&sh->leading[n], 0);
    int rc = shl_election_resign(e); /* SHL_ELOST after a loss: nothing held */
    t_any(rc);
}

static int el_candidate_main(void *arg)
{
    struct el_shared *sh = ((void **)arg)[0];
    int n = (int)(intptr_t)((void **)arg)[1];
    unsigned seed = (unsigned)getpid() ^ (unsigned)t_now();
    char id[16];
    snprintf(id, sizeof id, "c%d", n);
    shl_table *t = el_open(sh);
    shl_election *e = NULL;
    if (!t || shl_election_open(t, sh->election, id, &e) != SHL_OK)
        return 1;
    while (!atomic_load(&sh->stop)) {
        uint64_t tok = 0;
        int rc = shl_election_campaign(e, sh->ttl_ns, 200 * MS, id, strlen(id), NULL, &tok);
        if (rc == SHL_OK) {
            el_term(sh, t, e, n, tok, &seed);
        } else if (rc != SHL_ETIMEDOUT) {
            atomic_fetch_add(&sh->campaign_errors, 1);
            atomic_store(&sh->last_error, rc);
            t_sleep_ns(20 * MS);
        }
    }
    shl_election_close(e);
    shl_close(t);
    return 0;
}

pid_t el_candidate(struct el_shared *sh, int n)
{
    void *arg[2] = {sh, (void *)(intptr_t)n};
    pid_t pid = t_fork(el_candidate_main, arg);
    atomic_store(&sh->pid[n], pid);
    return pid;
}

static int el_observer_main(void *arg)
{
    struct el_shared *sh = ((void **)arg)[0];
    int k = (int)(intptr_t)((void **)arg)[1];
    shl_table *t = el_open(sh);
    if (!t)
        return 1;
    uint64_t after = 0;
    while (!atomic_load(&sh->stop)) {
        shl_leader l;
        char value[64];
        int rc = shl_election_observe(t, sh->election, after, 100 * MS, &l, value, sizeof value);
        if (rc == SHL_ETIMEDOUT || rc == SHL_EUNAVAIL)
            continue; /* EUNAVAIL: an etcd member went; the next look fails over */
        if (rc != SHL_OK) {
            atomic_store(&sh->observe_rc, rc);
            t_sleep_ns(20 * MS);
            continue;
        }
        uint32_t i = atomic_load(&sh->nseen[k]);
        if (i < EL_SEEN) {
            int ok = l.value_len == strlen(l.id) && memcmp(value, l.id, l.value_len) == 0;
            sh->seen[k][i] = (struct el_seen){l.token, el_cand_of(l.id), ok};
            atomic_store(&sh->nseen[k], i + 1);
        }
        after = l.token;
    }
    shl_close(t);
    return 0;
}

pid_t el_observer(struct el_shared *sh, int k)
{
    void *arg[2] = {sh, (void *)(intptr_t)k};
    return t_fork(el_observer_main, arg);
}

uint64_t el_last_seen(struct el_shared *sh, int k)
{
    uint32_t n = atomic_load(&sh->nseen[k]);
    return n ? sh->seen[k][n - 1].token : 0;
}

static int by_token(const void *a, const void *b)
{
    const struct el_term *x = *(struct el_term *const *)a, *y = *(struct el_term *const *)b;
    uint64_t tx = atomic_load(&x->token), ty = atomic_load(&y->token);
    return tx < ty ? -1 : tx > ty;
}

/* The record of the term with token tok, or NULL. */
static const struct el_term *el_find(struct el_term **v, uint32_t n, uint64_t tok)
{
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&v[i]->token) == tok)
            return v[i];
    return NULL;
}

uint32_t el_check(struct el_shared *sh, uint32_t seen[EL_OBS])
{
    uint32_t n = atomic_load(&sh->nterms), k = 0, intervals = 0;
    cr_assert_leq(n, EL_TERMS, "more terms than the record holds");
    struct el_term **v = calloc(n + 1, sizeof *v);
    cr_assert(v);
    for (uint32_t i = 0; i < n; i++)
        if (atomic_load(&sh->terms[i].token))
            v[k++] = &sh->terms[i];
    qsort(v, k, sizeof *v, by_token);
    uint64_t last_end = 0, last_tok = 0;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t tok = atomic_load(&v[i]->token), start = atomic_load(&v[i]->start);
        uint64_t end = atomic_load(&v[i]->end);
        cr_assert_neq(tok, last_tok, "token %llu was given to two terms", (unsigned long long)tok);
        if (end) {
            cr_assert_gt(start, last_end,
                         "term %llu of c%d began %lld ns before the end of term %llu: two leaders",
                         (unsigned long long)tok, v[i]->cand, (long long)(last_end - start),
                         (unsigned long long)last_tok);
            last_end = end;
            intervals++;
        }
        last_tok = tok;
    }
    for (int o = 0; o < EL_OBS; o++) {
        uint32_t ns = atomic_load(&sh->nseen[o]);
        for (uint32_t i = 0; i < ns; i++) {
            const struct el_seen *s = &sh->seen[o][i];
            if (i > 0)
                cr_assert_gt(s->token, sh->seen[o][i - 1].token,
                             "observer %d reported token %llu after %llu", o,
                             (unsigned long long)s->token,
                             (unsigned long long)sh->seen[o][i - 1].token);
            cr_assert_geq(s->cand, 0, "an observer reported a leader that is no candidate");
            cr_assert(s->value_ok, "an observer read a value that c%d did not proclaim", s->cand);
            const struct el_term *r = el_find(v, k, s->token);
            if (r)
                cr_assert_eq(r->cand, s->cand, "token %llu was c%d's, observer %d said c%d",
                             (unsigned long long)s->token, r->cand, o, s->cand);
        }
        seen[o] = ns;
    }
    free(v);
    cr_expect_eq(atomic_load(&sh->observe_rc), 0, "an observer got %s",
                 shl_errname(atomic_load(&sh->observe_rc)));
    return intervals;
}

uint64_t el_wait_leader(shl_table *t, const char *election, uint64_t after, uint64_t timeout_ns,
                        int *cand)
{
    uint64_t end = t_now() + timeout_ns;
    do {
        shl_leader l;
        if (shl_election_leader(t, election, &l, NULL, 0) == SHL_OK && l.token > after &&
            l.proclaimed && l.state == SHL_STATE_HELD) {
            *cand = el_cand_of(l.id);
            return l.token;
        }
        t_sleep_ns(MS);
    } while (t_now() < end);
    return 0;
}

void el_stop_all(struct el_shared *sh, int ncand, pid_t observer)
{
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < ncand; i++) {
        pid_t p = atomic_load(&sh->pid[i]);
        if (p > 0) {
            kill(p, SIGCONT);
            t_wait(p);
        }
    }
    if (observer > 0)
        t_wait(observer);
}

uint64_t el_kill_leader(struct el_shared *sh, shl_table *t, int *cand, uint64_t *tok,
                        uint64_t bound_ns)
{
    cr_assert_geq(*cand, 0);
    pid_t victim = atomic_load(&sh->pid[*cand]);
    uint64_t dead = *tok, at = t_now();
    cr_assert_eq(kill(victim, SIGKILL), 0);
    cr_assert_eq(t_wait(victim), 128 + SIGKILL);
    atomic_store(&sh->pid[*cand], 0);
    int next = -1;
    *tok = el_wait_leader(t, sh->election, dead, bound_ns, &next);
    uint64_t took = t_now() - at;
    cr_assert(*tok, "no new leader within %.1f s of the kill", bound_ns / 1e9);
    cr_log_info("kill -9 of c%d (token %llu): c%d leads (token %llu) after %.1f ms", *cand,
                (unsigned long long)dead, next, (unsigned long long)*tok, took / 1e6);
    cr_expect_neq(next, *cand);
    /* The dead token is never seen again (the observers' order covers them). */
    for (int i = 0; i < 20; i++) {
        shl_leader l;
        if (shl_election_leader(t, sh->election, &l, NULL, 0) == SHL_OK)
            cr_assert_neq(l.token, dead, "leader() reported the dead leader again");
        t_sleep_ns(5 * MS);
    }
    *cand = next;
    return took;
}

void el_stop_leader(struct el_shared *sh, shl_table *t, uint64_t tok, uint64_t bound_ns,
                    uint64_t after_ns)
{
    pid_t p0 = atomic_load(&sh->pid[0]);
    cr_assert_eq(kill(p0, SIGSTOP), 0);
    cr_assert_eq(t_wait_stopped(p0), 0);
    uint64_t at = t_now();
    int next = -1;
    uint64_t tok2 = el_wait_leader(t, sh->election, tok, bound_ns, &next);
    cr_assert(tok2, "nobody took over the stopped leader's term");
    cr_log_info("c0 stopped: c%d leads after %.1f ms (ttl %.1f s)", next, (t_now() - at) / 1e6,
                sh->ttl_ns / 1e9);
    cr_expect_neq(next, 0);
    t_sleep_ns(after_ns);
    cr_assert_eq(kill(p0, SIGCONT), 0);

    struct el_term *r = NULL;
    for (uint32_t i = 0; i < atomic_load(&sh->nterms) && i < EL_TERMS; i++)
        if (atomic_load(&sh->terms[i].token) == tok)
            r = &sh->terms[i];
    cr_assert(r, "c0's term was recorded");
    uint64_t until = t_now() + 10 * SEC;
    while (!atomic_load(&r->lost_rc) && t_now() < until)
        t_sleep_ns(5 * MS);
    cr_expect_eq(atomic_load(&r->lost_rc), SHL_ELOST, "the resumed leader's proclaim: %s",
                 shl_errname(atomic_load(&r->lost_rc)));
    cr_expect_eq(atomic_load(&r->raw_rc), SHL_ELOST, "the table refuses its token: %s",
                 shl_errname(atomic_load(&r->raw_rc)));
    cr_expect_eq(atomic_load(&r->check_rc), SHL_ELOST);
    cr_expect_neq(atomic_load(&r->reason), 0, "shl_election_lost() gives the reason");
    cr_expect_eq(atomic_load(&r->left), 0, "shl_election_token() is 0 after the loss");
}

void el_expect_reached(struct el_shared *sh, int nobs, uint64_t tok, uint64_t timeout_ns)
{
    uint64_t until = t_now() + timeout_ns;
    for (int k = 0; k < nobs; k++) {
        while (el_last_seen(sh, k) < tok && t_now() < until)
            t_sleep_ns(5 * MS);
        cr_expect_eq(el_last_seen(sh, k), tok, "observer %d reached the current leader", k);
    }
}

void el_stress_start(struct el_shared *sh, struct el_stress *st)
{
    cr_log_info("the test's choices: seed %u", st->seed);
    for (int k = 0; k < EL_OBS; k++)
        st->obs[k] = el_observer(sh, k);
    for (int i = 0; i < st->ncand; i++)
        el_candidate(sh, i);
}

static uint64_t el_between(unsigned *seed, uint64_t lo, uint64_t hi)
{
    return lo + (hi > lo ? (uint64_t)rand_r(seed) % (hi - lo) : 0);
}

/* The leader by leader(), live: a killed leader's term lasts on the table
 * until its ttl ends, but its process is gone. Waits up to timeout_ns;
 * 0 when there is none. Checks that leader() never goes back in tokens. */
static uint64_t el_live_leader(struct el_shared *sh, shl_table *t, struct el_stress *st,
                               uint64_t timeout_ns, int *lc)
{
    uint64_t until = t_now() + timeout_ns;
    do {
        uint64_t tok = el_wait_leader(t, sh->election, 0, 0, lc);
        if (tok) {
            cr_assert_geq(tok, st->newest, "leader() reported token %llu after %llu",
                          (unsigned long long)tok, (unsigned long long)st->newest);
            st->newest = tok;
            if (*lc >= 0 && atomic_load(&sh->leading[*lc]) == tok)
                return tok;
        }
        if (timeout_ns)
            t_sleep_ns(5 * MS);
    } while (t_now() < until);
    *lc = -1;
    return 0;
}

void el_stress_blow(struct el_shared *sh, shl_table *t, struct el_stress *st)
{
    t_sleep_ns(el_between(&st->seed, st->gap_min_ns, st->gap_max_ns));
    int c = rand_r(&st->seed) % st->ncand, lc = -1;
    /* A forced blow waits for a leader (through a whole ttl and more). */
    uint64_t tok = el_live_leader(sh, t, st, st->force ? 2 * sh->ttl_ns : 0, &lc);
    int force = st->force, kill9 = force ? force == EL_KILL_LEADER : rand_r(&st->seed) % 3 == 0;
    st->force = 0;
    if ((force || rand_r(&st->seed) % 2) && tok && lc >= 0) {
        c = lc;
        st->leader_hits++;
    }
    pid_t p = atomic_load(&sh->pid[c]);
    if (kill9) {
        kill(p, SIGKILL);
        t_wait(p);
        atomic_store(&sh->leading[c], 0); /* its term, if any, lasts until the ttl */
        el_candidate(sh, c);
        st->kills++;
    } else {
        kill(p, SIGSTOP);
        t_sleep_ns(force ? st->stop_max_ns
                         : el_between(&st->seed, st->stop_min_ns, st->stop_max_ns));
        kill(p, SIGCONT);
        st->stops++;
    }
    if (rand_r(&st->seed) % 10 == 0) {
        pid_t o = st->obs[rand_r(&st->seed) % EL_OBS];
        kill(o, SIGSTOP);
        t_sleep_ns(el_between(&st->seed, st->stop_min_ns, st->stop_max_ns));
        kill(o, SIGCONT);
        st->obs_stops++;
    }
}

uint32_t el_stress_end(struct el_shared *sh, struct el_stress *st, uint32_t *lost)
{
    el_stop_all(sh, st->ncand, st->obs[0]);
    for (int k = 1; k < EL_OBS; k++)
        t_wait(st->obs[k]);
    uint32_t seen[EL_OBS], n = el_check(sh, seen), early = 0, unavailable = 0;
    *lost = 0;
    for (uint32_t i = 0; i < atomic_load(&sh->nterms) && i < EL_TERMS; i++) {
        /* lost_rc is stored last: a term that has it has the rest too. */
        const struct el_term *r = &sh->terms[i];
        int rc = atomic_load(&r->lost_rc), raw = atomic_load(&r->raw_rc);
        if (!rc)
            continue;
        /* On etcd, a proclaim sent to a member that is down (the test kills
         * one) may get no answer: SHL_EUNAVAIL, which ends the term without
         * telling whether it was lost. Its window ended at the last
         * accepted proclaim, so the overlap check above still judged it. */
        if (rc == SHL_EUNAVAIL && strncmp(sh->table, "etcd", 4) == 0) {
            unavailable++;
            continue;
        }
        (*lost)++;
        cr_expect_eq(rc, SHL_ELOST, "a term ended by %s", shl_errname(rc));
        /* The renewer declares the loss a margin before the expiry: a
         * leader resumed inside that margin is told it lost while the table
         * would still take its write. Only then. */
        if (raw == SHL_OK)
            early++;
        /* The write that proves the loss, sent to a member that is down,
         * may get no answer either: nothing to judge of it then. */
        int etcd = strncmp(sh->table, "etcd", 4) == 0;
        cr_expect(raw == SHL_ELOST || (raw == SHL_EUNAVAIL && etcd) ||
                      (raw == SHL_OK && atomic_load(&r->reason) == SHL_LOSS_DEADLINE),
                  "a term lost by %d, its write: %s", atomic_load(&r->reason), shl_errname(raw));
        cr_expect_eq(atomic_load(&r->check_rc), SHL_ELOST);
        cr_expect_eq(atomic_load(&r->left), 0);
    }
    cr_log_info("%u kills, %u stops (%u of the leader), %u observer stops; %u terms, %u lost (%u "
                "inside the renewer's margin), %u ended unavailable; observers %u, %u; %u campaign "
                "errors (last %s)",
                st->kills, st->stops, st->leader_hits, st->obs_stops, n, *lost, early, unavailable,
                seen[0], seen[1], atomic_load(&sh->campaign_errors),
                shl_errname(atomic_load(&sh->last_error)));
    return n;
}
