/* The progress thread (MCOLL_PROGRESS_THREAD): resumes pending tasks while the
 * application computes, so that a non-blocking collective moves between its post
 * and its wait -- and while the application is blocked in a call that only the host
 * MPI runs (MPI_Win_fence, MPI_Comm_split, ...), where the peers' waits may depend
 * on this rank's part (MPI's progress rule). mcoll cannot run its tasks from inside
 * such a call, and only some have a non-blocking form to poll instead, so by default
 * the thread is started the first time a task is left pending (on_demand). It sleeps on a condition variable while nothing is pending (no CPU),
 * is woken when a task is left pending by its start (where the machine's ranks
 * outnumber its cores it looks now and then instead), and between passes over pending
 * tasks yields the CPU, then sleeps with a growing bound; it naps while an application
 * thread's wait drives the tasks itself. Needs the host MPI at MPI_THREAD_MULTIPLE: tasks call it. */
#ifndef MCOLL_PROGRESS_THREAD_H
#define MCOLL_PROGRESS_THREAD_H

#include <stdio.h>

/* After MPI_Init, when the host granted MPI_THREAD_MULTIPLE; 0 if it runs. */
int mcoll__progress_thread_start(void);
/* The same, but deferred to the first task left pending (task.h's waker). */
void mcoll__progress_thread_on_demand(void);
/* Before MPI_Finalize: stops and joins it (no-op when not running). */
void mcoll__progress_thread_stop(void);
/* Whether it runs. */
int mcoll__progress_thread_running(void);
/* For the MCOLL_VERBOSE report, after the stop: its CPU time against the time it was
 * awake with tasks pending (nothing if it never ran). */
void mcoll__progress_thread_report(FILE *out);

#endif
