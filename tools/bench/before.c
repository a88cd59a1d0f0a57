/*
 * tools/bench/before.c - this run against an earlier one (--before CSV):
 * are the bound and by-name rows no slower than they were?
 *
 * The machine's speed moves between runs (other work, where the vCPUs
 * land), and moves the floor with every row, so each row is judged by its
 * ratio to its own run's lease-op floor: now (row / floor) over before (row
 * / floor). Raw medians are shown next to it. A row is slower when that
 * ratio is above 1.05: smaller differences are within what two runs on the
 * same build differ by.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

#define SLOWER 1.05

struct before_row {
    char group[32], name[64];
    double median;
};

/* One line of results.csv: group,"row",ns_op,ns,rounds,min,median,max,
 * skipped. 0 when it is an ns_op row with a median. */
static int parse(const char *line, struct before_row *b)
{
    const char *q1 = strchr(line, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
    if (!q1 || !q2 || q1 == line || (size_t)(q1 - line - 1) >= sizeof b->group ||
        (size_t)(q2 - q1 - 1) >= sizeof b->name)
        return -1;
    memcpy(b->group, line, (size_t)(q1 - line - 1));
    b->group[q1 - line - 1] = '\0';
    memcpy(b->name, q1 + 1, (size_t)(q2 - q1 - 1));
    b->name[q2 - q1 - 1] = '\0';
    double min, med;
    int rounds;
    if (sscanf(q2 + 1, ",ns_op,ns,%d,%lf,%lf,", &rounds, &min, &med) != 3)
        return -1;
    b->median = med;
    return 0;
}

static const struct before_row *find(const struct before_row *v, int n, const char *group,
                                     const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].group, group) == 0 && strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

static int judged(const char *group)
{
    return strcmp(group, "bound") == 0 || strcmp(group, "shmlease") == 0 ||
           strcmp(group, "names") == 0;
}

int report_before(const struct report *rep, const char *csv)
{
    FILE *f = fopen(csv, "r");
    if (!f) {
        fprintf(stderr, "bench: cannot read %s\n", csv);
        return 1;
    }
    static struct before_row v[BENCH_MAX_ROWS * 2];
    int n = 0;
    char line[512];
    while (n < (int)(sizeof v / sizeof v[0]) && fgets(line, sizeof line, f))
        if (parse(line, &v[n]) == 0)
            n++;
    fclose(f);
    const struct before_row *bf = find(v, n, "floor", "lease-op floor");
    double nf = report_median(rep, "floor", "lease-op floor");
    if (!bf || bf->median <= 0 || nf <= 0) {
        printf("\nagainst %s: no lease-op floor in one of the runs\n", csv);
        return 0;
    }
    printf("\nagainst %s (medians, ns; judged by each row's ratio to its run's floor:\n"
           "  floor %.1f before, %.1f now; slower: above %.2f)\n",
           csv, bf->median, nf, SLOWER);
    int slower = 0, compared = 0;
    for (int i = 0; i < rep->nrows; i++) {
        const struct bench_row *r = &rep->rows[i];
        const struct before_row *b = find(v, n, r->group, r->name);
        double now = report_median(rep, r->group, r->name);
        if (!judged(r->group) || !b || b->median <= 0 || now <= 0)
            continue;
        double rel = (now / nf) / (b->median / bf->median);
        compared++;
        slower += rel > SLOWER;
        printf("  %-9s %-40s %8.1f %8.1f  %5.2f  %s\n", r->group, r->name, b->median, now, rel,
               rel > SLOWER ? "SLOWER" : "ok");
    }
    printf("  %d of %d bound and by-name rows slower than before\n", slower, compared);
    return 0;
}
