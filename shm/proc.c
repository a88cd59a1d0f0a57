/*
 * shm/proc.c - process identity from /proc.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "segment.h"

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    int e = errno;
    close(fd);
    errno = e;
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

int shl__proc_start(int32_t pid, uint64_t *start, char *state)
{
    char path[64], buf[1024];
    if (pid <= 0)
        return SHM_EINVAL;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) < 0)
        return errno == ENOENT || errno == ESRCH ? SHM_ENOENT : SHM_ESYS;
    /* The command name (field 2) may hold spaces and parentheses: fields are
     * counted from the last ')'. starttime is field 22, the 20th after it. */
    char *p = strrchr(buf, ')');
    if (!p)
        return SHM_ESYS;
    p++;
    if (state)
        *state = p[0] == ' ' ? p[1] : '?';
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return SHM_ESYS;
    }
    unsigned long long v;
    if (sscanf(p, " %llu", &v) != 1)
        return SHM_ESYS;
    *start = v;
    return 0;
}

uint64_t shl__boot_id(void)
{
    char buf[128];
    if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) < 0)
        return 0;
    uint64_t h = UINT64_C(1469598103934665603);
    for (const char *c = buf; *c && *c != '\n'; c++)
        h = (h ^ (unsigned char)*c) * UINT64_C(1099511628211);
    return h ? h : 1;
}

int shl__ident_self(struct shl__ident *id)
{
    id->pid = (int32_t)getpid();
    id->boot_id = shl__boot_id();
    if (shl__proc_start(id->pid, &id->start, NULL) != 0) {
        id->start = 0;
        return SHM_ESYS;
    }
    return id->boot_id ? 0 : SHM_ESYS;
}

int shl__ident_alive(const struct shl__ident *id)
{
    if (id->pid <= 0 || id->start == 0 || id->boot_id == 0)
        return SHL__UNKNOWN;
    uint64_t boot = shl__boot_id();
    if (boot == 0)
        return SHL__UNKNOWN;
    if (boot != id->boot_id)
        return SHL__DEAD;
    uint64_t start;
    char state;
    int rc = shl__proc_start(id->pid, &start, &state);
    if (rc == SHM_ENOENT)
        return SHL__DEAD;
    if (rc != 0)
        return SHL__UNKNOWN;
    /* A zombie (Z) or a process being torn down (X) runs no more code. */
    if (start != id->start || state == 'Z' || state == 'X')
        return SHL__DEAD;
    return SHL__ALIVE;
}
