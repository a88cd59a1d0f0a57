/*
 * tests/test_kind.c - etcd table names, parsed strictly whatever the build:
 * a malformed one is SHL_EINVAL; a well-formed one reaches the etcd kind
 * (SHL_ENOTSUP in a build without etcd support, SHL_EUNAVAIL when nothing
 * listens there).
 */
#include <criterion/criterion.h>

#include "common.h"

static const char *bad[] = {
    "etcd://",           "etcd:///t",        "etcd://h/t",     "etcd://h:/t",    "etcd://:1/t",
    "etcd://h:0/t",      "etcd://h:65536/t", "etcd://h:01/t",  "etcd://h:1",     "etcd://h:1/",
    "etcd://h:1//t",     "etcd://h:1/t/",    "etcd://h:1/.t",  "etcd://h:1/t u", "etcd://h:1,/t",
    "etcd://h:1,,h:2/t", "etcd://-h:1/t",    "etcd://h_h:1/t", "etcd://[]:1/t",  "etcd://[::1:1/t",
    "etcd://h:1x/t",     "etcds://h:1/t?x",  "etcdx://h:1/t",
};

Test(kind, malformed_etcd_names_are_einval)
{
    shl_options o;
    shl_options_init(&o);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        shl_table *t = (shl_table *)1;
        cr_assert_eq(shl_open(bad[i], &o, &t), SHL_EINVAL, "%s", bad[i]);
        cr_assert_null(t);
        cr_assert_eq(shl_unlink(bad[i]), SHL_EINVAL, "%s", bad[i]);
    }
}

Test(kind, well_formed_names_reach_the_etcd_kind)
{
    t_guard(30);
    const char *good[] = {"etcd://127.0.0.1:1/t", "etcds://localhost:1,127.0.0.1:2/a/b.c-d_e",
                          "etcd://[::1]:1/t"};
    shl_options o;
    shl_options_init(&o);
    o.timeout_ms = 200;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        shl_table *t = NULL;
        int rc = shl_open(good[i], &o, &t);
#if SHL_HAVE_ETCD
        cr_assert_eq(rc, SHL_EUNAVAIL, "%s: %s", good[i], shl_errname(rc));
#else
        cr_assert_eq(rc, SHL_ENOTSUP, "%s: %s", good[i], shl_errname(rc));
#endif
        cr_assert_null(t);
    }
}

Test(kind, new_codes_have_names_and_messages)
{
    cr_assert_str_eq(shl_errname(SHL_ENOTSUP), "SHL_ENOTSUP");
    cr_assert_str_eq(shl_errname(SHL_EUNAVAIL), "SHL_EUNAVAIL");
    cr_assert_str_eq(shl_strerror(SHL_EUNAVAIL),
                     "the cluster did not answer in time; a change may have happened");
    shl_options o;
    shl_options_init(&o);
    cr_assert_eq(o.timeout_ms, 5000);
    cr_assert_null(o.cacert);
}
