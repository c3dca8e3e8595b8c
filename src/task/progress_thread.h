/* The optional progress thread (MCOLL_PROGRESS_THREAD): resumes pending tasks while
 * the application computes, so that a non-blocking collective moves between its post
 * and its wait. It sleeps on a condition variable while nothing is pending (no CPU),
 * is woken when a task is left pending by its start, and between passes over pending
 * tasks yields the CPU, then sleeps briefly (this machine's cores are shared with the
 * ranks). Needs the host MPI at MPI_THREAD_MULTIPLE: tasks call it. */
#ifndef MCOLL_PROGRESS_THREAD_H
#define MCOLL_PROGRESS_THREAD_H

/* After MPI_Init, when the host granted MPI_THREAD_MULTIPLE; 0 if it runs. */
int mcoll__progress_thread_start(void);
/* Before MPI_Finalize: stops and joins it (no-op when not running). */
void mcoll__progress_thread_stop(void);
/* Whether it runs. */
int mcoll__progress_thread_running(void);

#endif
