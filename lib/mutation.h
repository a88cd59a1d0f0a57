/*
 * lib/mutation.h - deliberate bugs, for the stress campaign's self-test.
 *
 * `make stress-selftest` proves that `shmlease stress` fails on a library
 * that is broken in a way that matters: the test build (SHL_TESTING) can be
 * broken on purpose, one mutation at a time, chosen at run time by name with
 * SHL_MUTATION=<name> in the environment (read once per process). The
 * installed library has none of this: SHL__MUTANT() is the constant 0 there,
 * and the compiler drops every mutated branch.
 *
 * The list is the one place that names them; tools/stress_selftest.sh reads
 * the names from it. Each is a realistic slip in one enforcement point.
 * Those named "etcd-..." break an etcd table's enforcement (lib/etcd_*.c):
 * the self-test runs them on an etcd campaign, the others on a segment.
 */
#ifndef SHL_LIB_MUTATION_H
#define SHL_LIB_MUTATION_H

#define SHL__MUTATIONS(X)                                                                          \
    X(NO_TOKEN, "no-token", "validity never compares the token (owner and expiry only)")           \
    X(EARLY_TAKEOVER, "early-takeover", "an acquire takes a lease 40 ms before its expiry")        \
    X(EXPIRED_WRITE, "expired-write", "an expired holder may write while its token is current")    \
    X(RECOVER_LOWER, "recover-lower", "recovery after a death lowers the token by one")            \
    X(IN_PLACE, "in-place", "a value is written in place, without the double buffer")              \
    X(RELEASE_REUSE, "release-reuse", "release gives the token back: the next acquire reuses it")  \
    X(RENEW_ANY, "renew-any", "renew extends the lease for whoever asks")                          \
    X(REPAIR_LOWER, "repair-lower", "repair sets a token to its value's token, even lower")        \
    X(SHARED_IGNORED, "shared-ignored", "an exclusive acquire does not see valid shared holders")  \
    X(CLOCK_BEFORE_LOCK, "clock-before-lock",                                                      \
      "acquire, renew and the guarded calls read the clock before taking the slot lock")           \
    X(SHARED_OVER_WRITER, "shared-over-writer",                                                    \
      "a shared acquire does not see a valid exclusive holder (and leaves it valid)")              \
    X(WAKE_LOST, "wake-lost", "waiters are not woken by release and sleep until the expiry")       \
    X(REMOVED_IGNORED, "removed-ignored",                                                          \
      "lease operations do not look at the removed mark (renewers, waits and checks still do)")    \
    X(POOL_LEAK, "pool-leak",                                                                      \
      "a reader group given back is left owned by its lease: the reader pool leaks")               \
    X(VALUE_HOME_STALE, "value-home-stale",                                                        \
      "a spare value buffer taken back commits the lease's own buffer without its value")          \
    X(ETCD_BLIND_WRITE, "etcd-blind-write", "etcd: a write's txn does not compare the holder")     \
    X(ETCD_TOKEN_GUESS, "etcd-token-guess", "etcd: acquire trusts its cached token, uncompared")   \
    X(ETCD_SHARED_IGNORED, "etcd-shared-ignored",                                                  \
      "etcd: an exclusive acquire's txn does not compare the shared holders")                      \
    X(ETCD_RENEW_BLIND, "etcd-renew-blind",                                                        \
      "etcd: a same-ttl renew keeps the etcd lease alive without proving the holder record")       \
    X(ETCD_TTL_RENEW_BLIND, "etcd-ttl-renew-blind",                                                \
      "etcd: a ttl-changing renew's txn moves the holder record without its compare")              \
    X(ETCD_TOKEN_MISSING_OK, "etcd-token-missing-ok",                                              \
      "etcd: a missing token record is taken as never used, beside a value that carries one")      \
    X(ETCD_INCARNATION_IGNORED, "etcd-incarnation-ignored",                                        \
      "etcd: the txns that put keys do not compare the table's incarnation (meta's create rev)")

enum shl__mutation {
#define SHL__MUT_ENUM(id, name, what) SHL__MUT_##id,
    SHL__MUTATIONS(SHL__MUT_ENUM)
#undef SHL__MUT_ENUM
        SHL__MUT_COUNT
};

#ifdef SHL_TESTING
/* True when mutation m is the one SHL_MUTATION names. An unknown name is a
 * broken test harness: the process says so and aborts. */
int shl__mutant(enum shl__mutation m);
#define SHL__MUTANT(m) shl__mutant(SHL__MUT_##m)
#else
#define SHL__MUTANT(m) 0
#endif

#endif
