/*
 * tools/doctor.h - what shmlease doctor reads from the host's configuration.
 */
#ifndef SHL_TOOLS_DOCTOR_H
#define SHL_TOOLS_DOCTOR_H

/* systemd-logind's RemoveIPC= as configured under `root` ("" for the host). */
struct doctor_removeipc {
    int value;       /* 1: yes (also the default), 0: no */
    int files;       /* configuration files read */
    char where[600]; /* "FILE:LINE" of the assignment that wins, or "systemd's default" */
    char bad[700];   /* the last assignment logind ignores as unparsable ("" if none) */
};

void doctor_removeipc(const char *root, struct doctor_removeipc *r);

#endif
