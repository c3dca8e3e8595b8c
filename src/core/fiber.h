/* Fibers: stackful coroutines on one thread. A collective's algorithm is written as
 * straight-line code with waits; run on a fiber, each wait that would block yields
 * back to whoever resumed the fiber (task/task.c), so the same code serves the
 * blocking call (run on the caller's own stack, where waits spin/yield/sleep) and
 * the non-blocking one (run on a fiber, driven by the progress engine).
 *
 * Why fibers and not state machines: every engine, with its waits inside loops, would
 * become a hand-written state machine (MPICH keeps a second copy of its shm
 * collectives for that); a fiber keeps one copy. A switch is 6 saved registers and a
 * stack pointer (cheap next to any wait: tests/unit/test_fiber.c); a fiber's stack is
 * mapped once and reused from a pool, touched only as deep as the call goes. */
#ifndef MCOLL_FIBER_H
#define MCOLL_FIBER_H

#include <stddef.h>

struct mcoll_fiber;
typedef void (*mcoll_fiber_fn)(void *arg);

/* A fiber that will run fn(arg) when first resumed; NULL when out of memory. */
struct mcoll_fiber *mcoll__fiber_new(mcoll_fiber_fn fn, void *arg);

/* Runs f on this thread until it yields or fn returns; 1 when fn has returned (the
 * fiber may then be freed or given new work with mcoll__fiber_reset). From a thread's
 * own stack or from another fiber (f's yields come back to its resumer); a fiber that
 * is running already (f itself, or one of its resumers) is not resumed. */
int mcoll__fiber_resume(struct mcoll_fiber *f);

/* Inside a fiber: back to the resumer; returns when resumed again. */
void mcoll__fiber_yield(void);

/* A companion: a second fiber that the code running here (on the thread's own stack
 * or on a fiber) drives while it waits: hier/hier.c runs a call's inter-node steps
 * on one beside its intra-node steps. NULL: none. */
void mcoll__fiber_set_companion(struct mcoll_fiber *f);
/* From waits: resumes the companion of the code running here once; 1 while it has
 * one that has not finished (then waits must not sleep: nothing would wake them). */
int mcoll__fiber_pump(void);
/* The fiber running on this thread, or NULL on the thread's own stack. */
struct mcoll_fiber *mcoll__fiber_self(void);

/* A finished (or never started) fiber runs fn(arg) on its next resume. */
void mcoll__fiber_reset(struct mcoll_fiber *f, mcoll_fiber_fn fn, void *arg);

/* Scratch memory of the code running here (this fiber, or the thread's own stack),
 * of at least `bytes`, kept for its next use; contents are not kept. Never per thread
 * alone: an algorithm that holds scratch across a wait may yield, and another task
 * on this thread then runs the same algorithm. Each kind is a separate buffer, so
 * one call may hold two. Aborts the job when memory runs out. */
enum mcoll_scratch_kind { MCOLL_SCRATCH_PLAN, MCOLL_SCRATCH_DATA, MCOLL_SCRATCH_KINDS };
void *mcoll__scratch(enum mcoll_scratch_kind kind, size_t bytes);

/* Frees a fiber that is not running (its stack goes back to the pool). */
void mcoll__fiber_free(struct mcoll_fiber *f);

#endif
