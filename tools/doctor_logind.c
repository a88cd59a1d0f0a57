/*
 * tools/doctor_logind.c - what systemd-logind's RemoveIPC= is on this host.
 *
 * logind reads its main file (the first of /etc, /run, /usr/local/lib and
 * /usr/lib/systemd/logind.conf that exists), then the drop-ins *.conf of
 * logind.conf.d in those same directories: a drop-in's name in an earlier
 * directory masks the same name in a later one, and the drop-ins are read in
 * the order of their names. The last assignment in the [Login] section wins;
 * with none, RemoveIPC is yes.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "doctor.h"

static const char *const conf_dirs[] = {"/etc/systemd", "/run/systemd", "/usr/local/lib/systemd",
                                        "/usr/lib/systemd"};
#define NDIRS   (sizeof conf_dirs / sizeof conf_dirs[0])
#define DROPINS 64

static int parse_bool(const char *v)
{
    static const char *const yes[] = {"1", "yes", "y", "true", "t", "on"};
    static const char *const no[] = {"0", "no", "n", "false", "f", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
        if (strcasecmp(v, no[i]) == 0)
            return 0;
    }
    return -1;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

/* Applies the RemoveIPC= assignments of file `path` (shown as `shown`) to *r. */
static void read_conf(const char *path, const char *shown, struct doctor_removeipc *r)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    int login = 0;
    for (unsigned no = 1; fgets(line, sizeof line, f); no++) {
        char *s = trim(line);
        if (*s == '[') {
            login = strcmp(s, "[Login]") == 0;
            continue;
        }
        if (!login || strncmp(s, "RemoveIPC", 9) != 0)
            continue;
        char *v = trim(s + 9);
        if (*v != '=')
            continue;
        v = trim(v + 1);
        int b = *v ? parse_bool(v) : 1; /* empty: back to the default */
        if (b < 0) {
            snprintf(r->bad, sizeof r->bad, "%s:%u: RemoveIPC=%.40s", shown, no, v);
            continue; /* logind ignores what it cannot parse */
        }
        r->value = b;
        snprintf(r->where, sizeof r->where, "%s:%u", shown, no);
    }
    fclose(f);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The drop-in names of every directory, each once, sorted: names[] owns them. */
static int dropin_names(const char *root, char **names)
{
    int n = 0;
    for (size_t d = 0; d < NDIRS; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s%s/logind.conf.d", root, conf_dirs[d]);
        DIR *dp = opendir(dir);
        if (!dp)
            continue;
        for (struct dirent *e; (e = readdir(dp)) && n < DROPINS;) {
            size_t len = strlen(e->d_name);
            if (len < 6 || strcmp(e->d_name + len - 5, ".conf") != 0)
                continue;
            int seen = 0;
            for (int i = 0; i < n && !seen; i++)
                seen = strcmp(names[i], e->d_name) == 0;
            if (!seen && (names[n] = strdup(e->d_name)))
                n++;
        }
        closedir(dp);
    }
    qsort(names, (size_t)n, sizeof *names, by_name);
    return n;
}

/* Reads conf_dirs[*]/rel under root, the first that exists only (it masks
 * the others). */
static void read_first(const char *root, const char *rel, struct doctor_removeipc *r)
{
    char path[4096];
    for (size_t d = 0; d < NDIRS; d++) {
        snprintf(path, sizeof path, "%s%s/%s", root, conf_dirs[d], rel);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        fclose(f);
        r->files++;
        read_conf(path, path + strlen(root), r);
        return;
    }
}

void doctor_removeipc(const char *root, struct doctor_removeipc *r)
{
    memset(r, 0, sizeof r[0]);
    r->value = 1;
    snprintf(r->where, sizeof r->where, "systemd's default");
    read_first(root, "logind.conf", r);
    char *names[DROPINS], rel[300];
    int n = dropin_names(root, names);
    for (int i = 0; i < n; i++) {
        snprintf(rel, sizeof rel, "logind.conf.d/%s", names[i]);
        read_first(root, rel, r);
        free(names[i]);
    }
}
