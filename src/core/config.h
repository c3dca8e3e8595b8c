/* Parameters: one table, read once from MCOLL_* environment variables. */
#ifndef MCOLL_CONFIG_H
#define MCOLL_CONFIG_H

#include <stdio.h>

/* X(field, kind, default, meaning); kind NUM accepts K/M/G suffixes. */
#define MCOLL_PARAMS(X)                                                                  \
  X(DISABLE, NUM, "0", "1: every call goes straight to the host MPI")                    \
  X(VERBOSE, NUM, "0", "1: at MPI_Finalize rank 0 prints calls per algorithm, fallbacks and what the adaptive choice decided; 2: every rank prints its adaptive choice too") \
  X(FALLBACK, STR, "silent", "on a fallback to the host MPI: silent | warn | error (abort)") \
  X(TOPO, STR, "", "fake hierarchy for tests: nodes=N,sockets=S,numa=M (per node/socket)") \
  X(SHM_CHUNK, NUM, "64K", "bytes per slot of the segment's pipeline ring")               \
  X(SHM_AREA, NUM, "4M", "bytes of each rank's own area in the node segment (128 slots for small calls)")          \
  X(SHM_PREFAULT, NUM, "64K", "bytes at the start of each ring slot (and the area pages small calls use) every rank maps at set-up, so first calls take no page faults; >= SHM_CHUNK: whole ring; 0 = none") \
  X(SHM_MAX, NUM, "1G", "bytes of node segments a process may have reserved at once; a communicator beyond uses the host MPI") \
  X(BCAST_TREE_MAX, NUM, "16K", "bcast: largest message sent down the level tree (when levels exist)") \
  X(BCAST_SLOT_MAX, NUM, "512", "bcast: up to this many bytes through one slot of the source's area (nodes without levels, a core per rank); 0 = never unless forced") \
  X(BCAST_K, NUM, "2", "bcast: at most k ranks copy one slot at a time")                  \
  X(BCAST_AHEAD, NUM, "1M", "bcast through the ring (a core per rank): bytes the source may be ahead of the readers within a call, written with plain stores; 0 = the whole ring") \
  X(BCAST_CMA_MIN, NUM, "8K", "bcast: single copy (CMA) from this many bytes on nodes of at most BCAST_CMA_RANKS ranks; 0 = never unless forced") \
  X(BCAST_CMA_MAX, NUM, "1M", "bcast: the ring again from this many bytes (its copies stay in cache); 0 = no limit") \
  X(BCAST_CMA_RANKS, NUM, "2", "bcast: single copy by default only on nodes of at most this many ranks")           \
  X(CMA, NUM, "1", "0: no single copy (CMA) at all, as on a node where it does not work (algorithms that need it are then refused)") \
  X(CMA_CHUNK, NUM, "256K", "bytes per single-copy read")                                 \
  X(ALLGATHER_CMA_MIN, NUM, "32K", "allgather(v): blocks of this many bytes move by single copy (CMA), smaller through the areas") \
  X(GATHER_CMA_MIN, NUM, "32K", "gather(v): blocks of this many bytes move by single copy (CMA), smaller through the areas")  \
  X(SCATTER_CMA_MIN, NUM, "64K", "scatter(v): blocks of this many bytes move by single copy (CMA), smaller through the areas") \
  X(PAIR_CMA_MIN, NUM, "8K", "allgather(v)/gather(v)/scatter(v) on nodes of 2 ranks: blocks from this many bytes move by single copy (CMA) where the collective's own *_CMA_MIN is larger; 0 = theirs") \
  X(AREA_STREAM_MIN, NUM, "8K", "allgather/gather/scatter: copies of this many bytes into an area use streaming stores; 0 = never") \
  X(INTER_PIECE, NUM, "256K", "bytes per pipelined piece of the inter-node phase")        \
  X(INTER_SAG_MIN, NUM, "64K", "inter-node bcast: scatter-allgather from this piece size, else binomial") \
  X(INTER_OVERLAP, NUM, "1", "bcast/allreduce over several nodes in pieces: the leader's inter-node step of piece i beside the node's steps of pieces i+1 and i-1 (0: one after the other)") \
  X(ALLTOALL_CMA_MIN, NUM, "32K", "alltoall(v,w): blocks from this many bytes move by single copy (CMA), smaller ones through the areas") \
  X(ALLTOALL_STREAM_MIN, NUM, "16K", "alltoall: write fragments this large into the areas with streaming stores; 0 = never") \
  X(ALLTOALL_TILE, NUM, "0", "alltoall tiled: bytes per tile; 0 = from the LLC: c*c*T <= LLC/2") \
  X(RED_FLAT_MAX, NUM, "1K", "reductions: every rank folds all inputs up to this many bytes, else HSRA") \
  X(RED_FLAT_MAX_LOWPAR, NUM, "32K", "reductions on nodes of 2 ranks or with more ranks than cores: flat up to this many bytes") \
  X(RED_RD_MAX, NUM, "32K", "inter-node reductions: recursive doubling/binomial up to this many bytes, else Rabenseifner") \
  X(RED_CMA_MIN, NUM, "8K", "reductions: single copy (CMA) from this many bytes on small nodes; 0 = never") \
  X(RED_CMA_MAX, NUM, "1M", "reduce/allreduce: HSRA instead of single copy (CMA) from this many bytes; 0 = no limit") \
  X(RED_SPLIT_MIN, NUM, "512K", "reduce by single copy: from this many bytes each rank folds a segment and writes it to the root; 0 = never") \
  X(RED_CMA_RANKS, NUM, "2", "reductions: single copy (CMA) only on nodes of at most this many ranks") \
  X(SPIN, NUM, "4000", "polls of a flag before yielding (when ranks <= cores)")           \
  X(SPIN_OVERSUBSCRIBED, NUM, "8", "polls of a flag before yielding when ranks > cores")  \
  X(CORES, NUM, "0", "cores assumed when deciding whether a node is oversubscribed; 0 = online CPUs") \
  X(YIELD_US, NUM, "20000", "microseconds of yielding before sleeping on a futex")        \
  X(YIELD_FUTILE_US, NUM, "20000", "MCOLL_YIELD_US where the node's ranks are oversubscribed and in different scheduler autogroups (MPICH's launcher starts each rank with setsid), where a yield may keep the core instead of handing it to the rank waited for: 50 sleeps on the futex soon, which wins where other jobs load the node and loses on a quiet one (docs/performance.md)") \
  X(YIELD_FUTILE_RUN_US, NUM, "0", "where MCOLL_YIELD_FUTILE_US applies: a wait also sleeps on the futex once its yields have kept the core this many microseconds in a row (no context switch of the thread) while more tasks are runnable on the machine than the node has ranks (/proc/loadavg, read at most once a millisecond): other jobs then hold the cores, and yielding on keeps the core from the rank waited for; 30 behaves about like MCOLL_YIELD_FUTILE_US=50 there; 0 = off (docs/performance.md)") \
  X(LIGHT_FLAGS, NUM, "1", "1: flags are published with plain release stores, and a rank about to sleep on one issues membarrier(GLOBAL_EXPEDITED) instead (where the kernel offers it to every rank of the node); 0: every flag store is a full barrier") \
  X(SPIN_US, NUM, "20000", "when ranks <= cores (and neither application threads at MPI_THREAD_MULTIPLE nor pending non-blocking calls): microseconds a wait keeps polling instead of yielding (host progress every 32 polls); a yield hands the core to any other runnable process, even at nice 19, for up to a scheduler tick (4 ms at HZ=250); 0 = yield after MCOLL_SPIN polls") \
  X(LIVENESS_MS, NUM, "500", "while waiting, check every this often that node peers are alive") \
  X(SHARE_CONTEXT, NUM, "1", "1: communicators with identical groups share one context, and those whose node holds the same processes in the same order one node channel (segment, sequences), when one thread makes MPI calls") \
  X(PROGRESS_THREAD, STR, "auto", "auto | 1 | 0: a thread that progresses non-blocking collectives while the application computes or is blocked in a call only the host MPI runs (MPI_Win_fence, MPI_Comm_split, ...); auto and 1 ask the host MPI for MPI_THREAD_MULTIPLE (the application is told the level it asked for); auto starts the thread when a non-blocking collective is first left pending, 1 at MPI_Init (and warns when not granted); 0: none, and no MPI_THREAD_MULTIPLE (pending calls then progress only inside MPI calls that mcoll wraps)") \
  X(NBC, NUM, "1", "1: MPI_I* collectives run as mcoll tasks on communicators whose ranks agree (docs/nonblocking.md); 0: the host MPI's") \
  X(PROGRESS_SLEEP_US, NUM, "250", "the progress thread's longest sleep between passes while tasks are pending (it doubles from 10 us while nothing starts or finishes): a transfer in flight is polled at least this often") \
  X(PROGRESS_SPIN_US, STR, "auto", "the progress thread's window of passes with a yield between them after a task starts or finishes, before it sleeps between passes (peers that answer within it cost no sleep); 0: it sleeps at once; auto: 200, or 0 where the ranks on the machine (test hosts included) outnumber its cores (a yield there does not give the core to the rank being waited for)") \
  X(PROGRESS_LATE_WAKE_US, NUM, "500", "where the ranks on the machine (test hosts included) outnumber its cores: a non-blocking call left pending does not wake the progress thread (the wake-up takes a core from a rank at once, mostly to poll a call that its caller's wait is about to drive); the idle thread looks for pending calls this often instead (microseconds), and after 8 looks that found none sleeps until a post wakes it; 0: a post wakes it") \
  X(WAIT_NAP_US, NUM, "50", "where the ranks on the machine (test hosts included) outnumber its cores: the longest sleep between polls of MPI_Wait/Test-family loops over pending non-blocking collectives, once 32 polls found nothing new (it doubles from 1 us), and of first_arrival bcast's waits between nodes (for the leaders' announcements, the root's data, its sends); 0: they only yield or poll (the rank being waited for may not get the core)") \
  X(PROGRESS_SOCKETS, NUM, "0", "1: between passes the progress thread sleeps in ppoll on the process's connected TCP sockets (the host MPI's, across nodes), so that data coming in wakes it at once instead of at the end of its timed sleep; 0: timed sleeps only (between test hosts on 2 cores each wake-up took a core from the computation: bench/records/net7/)") \
  X(PROGRESS_URGENT_NAP_US, NUM, "20", "while a caller sleeps until a task's data is in (T-NBC's faults and settles), the progress thread's sleep between passes, in microseconds; 0: a yield (the thread stays busy, and takes a core that another process may be computing on: between 2 test hosts on 2 cores T-NBC hid 33-34% with 0, 36-38% with 20, medians of 7 jobs per MPI)") \
  X(NBC_HANDOFF, NUM, "2", "2: an MPI_I* call on a communicator that spans several nodes is handed to the progress thread instead of running its first steps on the caller's thread (the host MPI's transport may push a whole message inside the call that posts it: MPICH's UCX over TCP writes at the wire's pace); 1: every MPI_I* call; 0: none (without a progress thread: none)") \
  X(NBC_HANDOFF_MIN, NUM, "256K", "MCOLL_NBC_HANDOFF=2: only calls that move at least this many bytes (the count times the type's size of the call's first buffer; alltoallv/w: always) are handed over; smaller ones post their messages on the caller's thread, which costs the progress thread a wake-up and its polls per call (between 1 Gbit/s test hosts at 64 KiB: the same overlap, its CPU 3-11% of a core instead of 7-16%)") \
  X(NBC_MEET, NUM, "64", "polls an MPI_I* call or persistent start on a one-node communicator waits for the other ranks of the node to enter the same call, when it has nothing in flight: if all come, every rank runs the call on its own stack as the blocking call, with no task; else all make tasks; 0: never") \
  X(TASK_WINDOW, NUM, "4", "MPI_I* calls of one communicator that may run side by side, 1-4, where each declares itself independent (task/task.h; 1: one after the other)") \
  X(TNBC, NUM, "0", "1: T-NBC, blocking bcast/alltoall/allgather/allreduce return early with the receive buffer's pages protected until their data is in (needs MCOLL_PROGRESS_THREAD=1 and MPI_THREAD_MULTIPLE; docs/tnbc.md)") \
  X(TNBC_CORES_SHARED, NUM, "0", "T-NBC where some machine's cores are fewer than the job's ranks on it (test hosts and containers on one kernel count together): 0 = T-NBC stands down for the whole job (its init exchange, page protection and progress-thread polls then take CPU from ranks that share every core; MCOLL_VERBOSE says so); 1 = it runs anyway") \
  X(TNBC_ADAPT, NUM, "0", "T-NBC: 0 = every eligible call returns early; N > 0 = per communicator, collective and size the first 2N eligible calls alternate T-NBC and the blocking call, each timed from its entry to the next such call's entry (the application's period: the call, the computation after it, the wait for its data), then one small allreduce keeps T-NBC only where the slowest rank's median period was shorter with it (where the transfer's CPU work leaves nothing to hide, the calls go blocking)") \
  X(TNBC_MIN, NUM, "64K", "T-NBC: only calls with at least this many bytes per block (alltoall, allgather) or in all (bcast, allreduce)") \
  X(TNBC_SENDS_LATER, NUM, "1", "T-NBC alltoall(v): 1 = the caller posts the receives and returns, the progress thread posts the sends (a host MPI may push a whole block inside MPI_Isend: MPICH's UCX over TCP at the wire's pace); 2 = the progress thread posts both (the caller protects and returns); 0 = the caller posts both") \
  X(TNBC_RETURN_FIRST, NUM, "1", "T-NBC: 1 = the progress thread, woken by an early-returning call, naps (20 us at a time) until the caller has returned, instead of running first on the caller's core (the scheduler puts it there, and its first pass pushes the sends); 0 = it runs at once") \
  X(TNBC_SENDS_FIRST, NUM, "64512", "T-NBC alltoall(v): the caller posts the first this many bytes of each send (whole TNBC_CHUNK chunks) right after the init exchange, before it protects the pages and hands the rest over: the wire starts as a blocking call's would, at the cost of one chunk's write per destination in the call (a host may write a send into its socket inside MPI_Isend); 0 = none. Under MPICH 0 unless set (its UCX over TCP writes a chunk at the wire's pace inside MPI_Isend)") \
  X(TNBC_CHUNK, NUM, "64512", "T-NBC alltoall(v): each block goes as messages of at most this many bytes, below the host's eager limit across nodes (Open MPI's TCP: 64 KiB with its header), so no rendezvous handshake waits for a progress pass while the application computes and the sender's kernel takes the whole block at once; 0 = one message per block. The same on every rank") \
  X(TNBC_PUBLISH_CHUNKS, NUM, "1", "T-NBC alltoall(v): 1 = each TNBC_CHUNK message of a block is written into the protected buffer and readable as it arrives (a program reading a block from its start follows the wire), 0 = a block once all of it is in") \
  X(TNBC_BLOCKS, NUM, "1", "T-NBC alltoall: 1 = point-to-point schedule publishing each source's block as it arrives; 0 = mcoll's alltoall engine, published when it ends") \
  X(ADAPT, NUM, "1", "1: blocking calls whose size class repeats on a communicator within one node time the algorithms within reach in turn and keep the fastest (the slowest rank's time decides; docs/algorithms.md); 0: the rules alone") \
  X(ADAPT_MIN, NUM, "1K", "adaptive choice: size classes whose smallest size is below this many bytes keep the rules' choice, no round (below 1 KiB a call takes well under a microsecond, and a round's calls cost more than the 2% that a better choice there could win back over a program's first thousand calls; bench/records/osu-day6/); 0 = every class") \
  X(ADAPT_WARMUP, NUM, "160", "adaptive choice: calls of a size class before its first round of timed calls (past the first pass over the 128 area slots, which is faster than later ones)") \
  X(ADAPT_SAMPLES, NUM, "5", "adaptive choice: timed calls per candidate in a round (1-15; the median counts)") \
  X(ADAPT_LONG, NUM, "16K", "adaptive choice: size classes from this many bytes up (their smallest size) take ADAPT_LONG_WARMUP and ADAPT_LONG_SAMPLES instead: a call there is long, so fewer calls cover the noise, and programs make fewer calls (OSU: 110 per size above 8 KiB); 0 = none") \
  X(ADAPT_LONG_WARMUP, NUM, "2", "adaptive choice: calls of a long size class (ADAPT_LONG) before its first round") \
  X(ADAPT_LONG_SAMPLES, NUM, "3", "adaptive choice: timed calls per candidate in a round of a long size class (1-15)") \
  X(ADAPT_RECHECK, NUM, "2000", "adaptive choice: calls of a size class after a decision before the next round, doubling after each round up to 64 times; 0 = never again") \
  X(ADAPT_MARGIN, NUM, "5", "adaptive choice: percent by which another algorithm must beat the rules' choice to replace it") \
  X(RULES, STR, "", "a rules file (JSON) that chooses the algorithms instead of the built-in rules (mcollrun --info shows the rules in force)") \
  X(TNBC_TRACE, STR, "", "T-NBC: record the first-touch order of received blocks per call site into <file>.<world rank> at exit (calls then complete before they return)") \
  X(TNBC_ORDER, STR, "", "T-NBC alltoall(v): send and receive blocks in the order of a trace file (<file>.<world rank>, else <file>), one rank of a node at a time") \
  X(TEST_ADAPT_SKEW_US, NUM, "0", "for tests only: each rank adds this many microseconds times ((rank + candidate) mod candidates) to its timed calls, so that each rank alone would choose another algorithm") \
  X(TEST_ADAPT_SKEW_ALIKE, NUM, "0", "for tests only: 1: every rank adds MCOLL_TEST_ADAPT_SKEW_US times ((candidate + 1) mod candidates) instead, so that all choose the last candidate, not the rules' choice") \
  X(TEST_FINISH_DELAY_US, NUM, "0", "for tests only: microseconds the engine sleeps between the end of each non-blocking call and the completion of its request (widens that race window; 0 = none)") \
  X(CHANNEL_POOL, NUM, "4", "node channels (segments) kept mapped after their last communicator is freed, for the next communicator over the same processes")

/* Each parameter's index (MCOLL_PARAM_<name>), for the rules' parameter overrides and
 * for asking whether the user set one. */
enum mcoll_param {
#define MCOLL_PARAM_ENUM(name, kind, def, help) MCOLL_PARAM_##name,
  MCOLL_PARAMS(MCOLL_PARAM_ENUM)
#undef MCOLL_PARAM_ENUM
  MCOLL_NPARAMS
};

typedef long mcoll__param_NUM;
typedef const char *mcoll__param_STR;

struct mcoll_config {
#define MCOLL_FIELD(name, kind, def, help) mcoll__param_##kind name;
  MCOLL_PARAMS(MCOLL_FIELD)
#undef MCOLL_FIELD
  int fallback_policy; /* enum mcoll_fallback_policy */
  /* 1 where the user set the parameter (MCOLL_<name> in the environment, or
   * mcoll_set_param): such a parameter wins over the rules (coll/rules.h). */
  unsigned char user_set[MCOLL_NPARAMS];
  /* Advances whenever a parameter changes after loading (mcoll_set_param): choices
   * made once per communicator (comm/context.h, choice) are made again. From 1. */
  unsigned epoch;
};

enum mcoll_fallback_policy { MCOLL_FALLBACK_SILENT, MCOLL_FALLBACK_WARN, MCOLL_FALLBACK_ERROR };

extern struct mcoll_config mcoll__cfg;

/* The thread level the application asked for, when mcoll asked the host MPI for more
 * (MCOLL_PROGRESS_THREAD); -1: the host's own answer holds. */
extern int mcoll__app_thread_level;
/* The level the application may rely on: the one above, or the host's. */
int mcoll__thread_level(void);

/* Reads the environment; idempotent and cheap after the first call. */
void mcoll__config_load(void);

/* MCOLL_PARAM_<name> of a parameter's name (without MCOLL_), or -1. */
int mcoll__param_index(const char *name);
const char *mcoll__param_name(int param);
/* A NUM parameter's value by index. */
long mcoll__cfg_param(enum mcoll_param param);

/* Whether the user set any of the n parameters: then the choice that reads them is
 * the threshold code, not the rules. */
int mcoll__params_user_set(const enum mcoll_param *params, int n);

/* Parses "123", "64K", "16M", "1G"; returns -1 on junk. */
long mcoll__parse_size(const char *text);

#endif
