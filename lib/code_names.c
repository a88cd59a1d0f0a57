/*
 * lib/code_names.c - the names of the codes a lease's state and history are
 * reported in: operations (SHL_OP_*), counters (SHL_COUNTER_*) and states
 * (SHL_STATE_*); the return codes' names are error.c's.
 *
 * Kind-neutral: both kinds report in these codes, and the inspector, the
 * tool, check and repair name them from here (kind_shm/inspect.c asserts
 * that the segment's own codes are the public ones).
 */
#include "internal.h"

const char *shl_op_name(int op)
{
    static const char *const n[SHL_OP_SHARED + 1] = {"none",    "acquire", "takeover", "renew",
                                                     "release", "revoke",  "reclaim",  "recover",
                                                     "reject",  "write",   "shared"};
    if (op == SHL_OP_END)
        return "end";
    return op >= 0 && op <= SHL_OP_SHARED ? n[op] : "?";
}

const char *shl_counter_name(int c)
{
    static const char *const n[SHL_COUNTER_COUNT] = {
        "acquire", "renew", "release",     "expire",    "revoke",    "reclaim", "recover",
        "write",   "busy",  "rej_expired", "rej_stale", "rej_owner", "shared"};
    return c >= 0 && c < SHL_COUNTER_COUNT ? n[c] : "?";
}

const char *shl_state_name(int st)
{
    static const char *const n[] = {"FREE", "HELD", "EXPIRED", "REVOKED", "ORPHANED"};
    return st >= 0 && st <= SHL_STATE_ORPHANED ? n[st] : "?";
}
