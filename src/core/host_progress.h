/* Letting the host MPI progress while mcoll waits. An application may have
 * point-to-point traffic in flight when it enters a collective (a posted receive
 * whose sender is blocked in a rendezvous send); that traffic only moves while the
 * host MPI's progress engine runs, so every long mcoll wait calls
 * mcoll__host_progress now and then. */
#ifndef MCOLL_HOST_PROGRESS_H
#define MCOLL_HOST_PROGRESS_H

/* MPI_Init(_thread): creates the communicator the pokes use (collective over
 * MPI_COMM_WORLD, like MPI_Init itself). */
void mcoll__host_progress_init(void);

/* MPI_Finalize, before PMPI_Finalize: frees it; later pokes do nothing. */
void mcoll__host_progress_finalize(void);

/* Runs the host MPI's progress engine once (a PMPI_Iprobe that never matches:
 * Open MPI's and MPICH's iprobe drive their progress engine when nothing matches,
 * and cheaply). Call it only from the thread inside the MPI call (any thread
 * level allows that), and not in the first polls of a wait. */
void mcoll__host_progress(void);

/* mcoll's own work in flight (non-blocking collectives, task/): progressed from
 * every poke above that is made on a thread's own stack, and while it has some,
 * waits do not sleep on a futex (nothing would wake them for it). */
void mcoll__set_background(void (*progress)(void), int (*pending)(void));
int mcoll__background_pending(void);

#endif
