/*
 * shm/crashpoint.h - crash points: where a test makes a process die.
 *
 * Compiled into the test build only (SHL_TESTING), absent from the installed
 * library. A test arms one by number (SHL_CRASHPOINT=id[:hits] in the
 * environment) and the process raises SIGKILL on itself on its hits-th pass
 * there, dying exactly as a killed process would: inside a critical section,
 * with its robust mutexes held, its intents half applied. With
 * SHL_CRASHPOINT=id:hits:stop it raises SIGSTOP instead: a process
 * descheduled there for as long as the test wants, ended by SIGCONT.
 *
 * Numbers: 1..99 are lib's lease operations (enum shl__crash in
 * lib/kind_shm/crashpoint.h), 100..109 shm's own (below), 110..119 lib's token floor
 * (lib/kind_shm/crashpoint.h). A number, once given, keeps its meaning: tests and
 * scripts arm them by value.
 */
#ifndef SHL_SHM_CRASHPOINT_H
#define SHL_SHM_CRASHPOINT_H

/* A creator with its segment initialised but not yet published under the
 * table's name, and one with its unnamed file made but not yet sized or
 * initialised. */
#define SHL__CP_SHM_CREATE  100
#define SHL__CP_SHM_CREATED 101

#ifdef SHL_TESTING
/* Dies here when `id` is the armed crash point and its hits are used up. */
void shl__crashpoint(int id);
/* Forgets the armed crash point so that SHL_CRASHPOINT is read again (a
 * forked child inherits its parent's reading). */
void shl__crashpoint_reset(void);
#define SHL__CRASH(id) shl__crashpoint(id)
#else
#define SHL__CRASH(id) ((void)0)
#endif

#endif
