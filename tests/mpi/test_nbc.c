/* test_nbc: the non-blocking (MPI_I*) and persistent (MPI_<Coll>_init + MPI_Start)
 * forms of every collective, checked against test_coll's point-to-point reference
 * (this file includes test_coll.c: one reference, its cases, buffers and checks).
 *
 * Scenarios, the first three in both forms (--mode i|persistent|both):
 *   single    every collective on every communicator, one request at a time,
 *             completed by a completion call drawn per rank;
 *   group     k = 1..max outstanding calls on 1-3 communicators (world, dup,
 *             evenodd, reversed), started in the same order on every rank, with
 *             blocking collectives (checked) between the starts and point-to-point
 *             ring traffic (checked) in the same request array, completed in a
 *             rank-dependent order with Wait / Test loops / Waitall / Waitany /
 *             Waitsome / Testall / Testany / Testsome;
 *   disorder  one call on each of 2-3 communicators, started in a different order
 *             on each rank (legal for non-blocking collectives), then Waitall;
 *   free      MPI_Request_free on an active MPI_Ibcast / MPI_Iallreduce (erroneous,
 *             both host MPIs reject it): rejected, the requests still complete;
 *             accepted, allreduce rounds until the buffers hold the results.
 * Persistent requests are started --starts times with new buffer contents before
 * each start, and freed (inactive) with MPI_Request_free at the end.
 * Statuses: MPI_ERROR of a collective's status is MPI_SUCCESS or left as it was,
 * MPI_Test_cancelled is false; the ring's receives carry source, tag and count.
 *
 * usage: test_nbc [--mode i|persistent|both] [--iters N] [--groups N] [--disorder N]
 *                 [--free-active N] [--starts N] [--max-outstanding K] [--colls a,b]
 *                 [--comms a,b] [--max-bytes N[K|M]] [--large PERCENT] [--seed S] [--verbose]
 *                 [--keep-host-bugs]   (also the cases the host MPI gets wrong, see main)
 */
#define TEST_COLL_NO_MAIN
#define PROGRAM_NAME "test_nbc"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* test_coll's main-only helpers */
#include "test_coll.c"
#pragma GCC diagnostic pop

enum { TAG_RING = 7100, STATUS_PRESET = 0x5EED, MAX_SLOTS = 16, FREE_POLLS = 20000 };
#define LOOP_LIMIT_NS ((int64_t)180 * 1000000000) /* inside mpijob's 240 s */

enum nb_form { FORM_I, FORM_PERSISTENT };
static const char *const form_names[] = {"nonblocking", "persistent"};

static struct {
    bool forms[2];
    int iters, groups, disorder, free_active, starts, max_outstanding;
    bool keep_host_bugs;
} nbo;
static bool no_persistent[N_COLLS]; /* host MPI bugs of the persistent forms */

static void nb_fail(const char *ctx, const char *fmt, ...)
{
    stats.errors++;
    if (stats.reports++ >= MAX_REPORTS) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, PROGRAM_NAME ": FAIL %s rank %d (seed %" PRIu64 "): %s\n", ctx, world_rank, opt.seed, msg);
    fflush(stderr);
}

/* ---- starting a case ------------------------------------------------------------------ */

static void before_start(struct coll_case *c)
{
    if (c->skew_us) sleep_us(c->skew_us);
    if (c->coll == C_BARRIER) {
        if (c->barrier_sleep_us[0]) sleep_us(c->barrier_sleep_us[0]);
        c->t_in[0] = now_ns();
    }
}

static void post_case(struct coll_case *c, MPI_Request *req)
{
    MPI_Comm comm = c->tc->comm;
    MPI_Op op = red_ops[c->op];
    before_start(c);
    switch (c->coll) {
    case C_BARRIER: MPI_Ibarrier(comm, req); break;
    case C_BCAST: MPI_Ibcast(c->rarg, c->rcount, c->rtype, c->root, comm, req); break;
    case C_GATHER: MPI_Igather(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm, req); break;
    case C_GATHERV:
        MPI_Igatherv(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, c->root, comm, req);
        break;
    case C_SCATTER: MPI_Iscatter(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm, req); break;
    case C_SCATTERV:
        MPI_Iscatterv(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm, req);
        break;
    case C_ALLGATHER: MPI_Iallgather(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm, req); break;
    case C_ALLGATHERV:
        MPI_Iallgatherv(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm, req);
        break;
    case C_ALLTOALL: MPI_Ialltoall(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm, req); break;
    case C_ALLTOALLV:
        MPI_Ialltoallv(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm, req);
        break;
    case C_ALLTOALLW:
        MPI_Ialltoallw(c->sarg, c->scounts, c->sdispls, c->stypes, c->rarg, c->rcounts, c->rdispls, c->rtypes, comm,
                       req);
        break;
    case C_REDUCE: MPI_Ireduce(c->sarg, c->rarg, c->rcount, c->rtype, op, c->root, comm, req); break;
    case C_ALLREDUCE: MPI_Iallreduce(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, req); break;
    case C_REDUCE_SCATTER: MPI_Ireduce_scatter(c->sarg, c->rarg, c->rcounts, c->rtype, op, comm, req); break;
    case C_REDUCE_SCATTER_BLOCK: MPI_Ireduce_scatter_block(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, req); break;
    case C_SCAN: MPI_Iscan(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, req); break;
    case C_EXSCAN: MPI_Iexscan(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, req); break;
    default: *req = MPI_REQUEST_NULL; break;
    }
}

#if MPI_VERSION >= 4
#define HAVE_PERSISTENT 1
static void init_case(struct coll_case *c, MPI_Request *req)
{
    MPI_Comm comm = c->tc->comm;
    MPI_Op op = red_ops[c->op];
    MPI_Info info = MPI_INFO_NULL;
    switch (c->coll) {
    case C_BARRIER: MPI_Barrier_init(comm, info, req); break;
    case C_BCAST: MPI_Bcast_init(c->rarg, c->rcount, c->rtype, c->root, comm, info, req); break;
    case C_GATHER:
        MPI_Gather_init(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm, info, req);
        break;
    case C_GATHERV:
        MPI_Gatherv_init(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, c->root, comm, info,
                         req);
        break;
    case C_SCATTER:
        MPI_Scatter_init(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm, info, req);
        break;
    case C_SCATTERV:
        MPI_Scatterv_init(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcount, c->rtype, c->root, comm,
                          info, req);
        break;
    case C_ALLGATHER:
        MPI_Allgather_init(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm, info, req);
        break;
    case C_ALLGATHERV:
        MPI_Allgatherv_init(c->sarg, c->scount, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm, info, req);
        break;
    case C_ALLTOALL:
        MPI_Alltoall_init(c->sarg, c->scount, c->stype, c->rarg, c->rcount, c->rtype, comm, info, req);
        break;
    case C_ALLTOALLV:
        MPI_Alltoallv_init(c->sarg, c->scounts, c->sdispls, c->stype, c->rarg, c->rcounts, c->rdispls, c->rtype, comm,
                           info, req);
        break;
    case C_ALLTOALLW:
        MPI_Alltoallw_init(c->sarg, c->scounts, c->sdispls, c->stypes, c->rarg, c->rcounts, c->rdispls, c->rtypes,
                           comm, info, req);
        break;
    case C_REDUCE: MPI_Reduce_init(c->sarg, c->rarg, c->rcount, c->rtype, op, c->root, comm, info, req); break;
    case C_ALLREDUCE: MPI_Allreduce_init(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, info, req); break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter_init(c->sarg, c->rarg, c->rcounts, c->rtype, op, comm, info, req);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block_init(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, info, req);
        break;
    case C_SCAN: MPI_Scan_init(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, info, req); break;
    case C_EXSCAN: MPI_Exscan_init(c->sarg, c->rarg, c->rcount, c->rtype, op, comm, info, req); break;
    default: *req = MPI_REQUEST_NULL; break;
    }
}
#else
#define HAVE_PERSISTENT 0
static void init_case(struct coll_case *c, MPI_Request *req)
{
    (void)c;
    *req = MPI_REQUEST_NULL;
}
#endif

/* ---- new inputs for the next start of a persistent request ---------------------------- */

static void buf_reset(struct buf *b)
{
    if (b->alloc) memset(b->alloc, SENTINEL, buf_len(b));
}

static void buf_resnap(struct buf *b)
{
    free(b->orig);
    b->orig = NULL;
    buf_snapshot(b);
}

static void gen_reduction(const struct coll_case *c, struct buf *b, size_t nelem, struct rng *local)
{
    size_t sz = red_types[c->red].size;
    for (size_t k = 0; k < nelem; k++) red_gen(c->red, c->op, local, buf_base(b) + k * sz);
}

/* The same layout as make_case made, new data in every input, the outputs back to
 * the sentinel; the snapshots the reference reads are taken again. */
static void refill_case(struct coll_case *c, struct rng *local)
{
    int n = c->n, me = c->rank;
    switch (c->coll) {
    case C_BARRIER: return;
    case C_BCAST:
        buf_reset(&c->rbuf);
        if (me == c->root) part_fill(&c->rbuf, &c->rparts[0], local);
        buf_resnap(&c->rbuf);
        return;
    case C_GATHER:
    case C_GATHERV:
    case C_ALLGATHER:
    case C_ALLGATHERV: {
        bool receives = c->coll == C_ALLGATHER || c->coll == C_ALLGATHERV || me == c->root;
        if (receives) {
            buf_reset(&c->rbuf);
            if (c->sarg == MPI_IN_PLACE) part_fill(&c->rbuf, &c->rparts[me], local);
            buf_resnap(&c->rbuf);
        }
        if (c->sarg != MPI_IN_PLACE) {
            part_fill(&c->sbuf, &c->sparts[0], local);
            buf_resnap(&c->sbuf);
        }
        return;
    }
    case C_SCATTER:
    case C_SCATTERV:
        if (me == c->root) {
            for (int k = 0; k < n; k++) part_fill(&c->sbuf, &c->sparts[k], local);
            buf_resnap(&c->sbuf);
        }
        if (c->rarg != MPI_IN_PLACE) {
            buf_reset(&c->rbuf);
            buf_resnap(&c->rbuf);
        }
        return;
    case C_ALLTOALL:
    case C_ALLTOALLV:
    case C_ALLTOALLW:
        buf_reset(&c->rbuf);
        if (c->inplace)
            for (int j = 0; j < n; j++) part_fill(&c->rbuf, &c->rparts[j], local);
        buf_resnap(&c->rbuf);
        if (!c->inplace) {
            for (int j = 0; j < n; j++) part_fill(&c->sbuf, &c->sparts[j], local);
            buf_resnap(&c->sbuf);
        }
        return;
    default: {
        size_t in_count = reduction_input_count(c);
        bool receives = c->coll != C_REDUCE || me == c->root;
        if (receives) {
            buf_reset(&c->rbuf);
            if (c->sarg == MPI_IN_PLACE) gen_reduction(c, &c->rbuf, in_count, local);
            buf_resnap(&c->rbuf);
        }
        if (c->sarg != MPI_IN_PLACE) {
            gen_reduction(c, &c->sbuf, in_count, local);
            buf_resnap(&c->sbuf);
        }
        return;
    }
    }
}

/* ---- request slots: collectives and ring traffic ------------------------------------- */

enum slot_kind { SK_COLL, SK_SEND, SK_RECV };

struct slot {
    enum slot_kind kind;
    struct coll_case *c; /* SK_COLL */
    MPI_Request req;
    bool done;
    /* SK_SEND / SK_RECV */
    int peer, tag, bytes;
    unsigned char *data;
};

/* Point-to-point traffic around a ring of comm, both directions, each message's
 * bytes a function of (seed, group, sender, direction): checked at completion. */
struct ring {
    MPI_Comm comm;
    int rank, size, bytes;
    long group;
};

static unsigned char ring_byte(const struct ring *r, int sender, int dir, int i)
{
    uint64_t h = (opt.seed * 31 + (uint64_t)r->group) * 0x9E3779B97F4A7C15ull + (uint64_t)sender * 977 + (uint64_t)dir;
    return (unsigned char)((h >> 17) + (uint64_t)i * 131 + ((uint64_t)i >> 8));
}

static int ring_post(struct ring *r, struct slot *slots)
{
    int right = (r->rank + 1) % r->size, left = (r->rank - 1 + r->size) % r->size;
    for (int dir = 0; dir < 2; dir++) {
        struct slot *rs = &slots[2 * dir], *ss = &slots[2 * dir + 1];
        int to = dir ? left : right, from = dir ? right : left;
        *rs = (struct slot){.kind = SK_RECV, .peer = from, .tag = TAG_RING + dir, .bytes = r->bytes};
        *ss = (struct slot){.kind = SK_SEND, .peer = to, .tag = TAG_RING + dir, .bytes = r->bytes};
        rs->data = xmalloc((size_t)r->bytes + GUARD);
        memset(rs->data, SENTINEL, (size_t)r->bytes + GUARD);
        ss->data = xmalloc((size_t)r->bytes);
        for (int i = 0; i < r->bytes; i++) ss->data[i] = ring_byte(r, r->rank, dir, i);
        /* receive a little more than is sent: the count must say how much came */
        MPI_Irecv(rs->data, r->bytes + GUARD, MPI_BYTE, from, rs->tag, r->comm, &rs->req);
        MPI_Isend(ss->data, r->bytes, MPI_BYTE, to, ss->tag, r->comm, &ss->req);
    }
    return 4;
}

static void ring_check(const struct ring *r, struct slot *s, const char *ctx)
{
    stats.checks++;
    if (s->kind != SK_RECV) return;
    int dir = s->tag - TAG_RING;
    for (int i = 0; i < r->bytes + GUARD; i++) {
        unsigned char want = i < r->bytes ? ring_byte(r, s->peer, dir, i) : SENTINEL;
        if (s->data[i] != want) {
            nb_fail(ctx, "ring message from rank %d (dir %d, %d bytes): byte %d is 0x%02x, not 0x%02x", s->peer, dir,
                    r->bytes, i, s->data[i], want);
            return;
        }
    }
}

static void slots_free(struct slot *slots, int n)
{
    for (int k = 0; k < n; k++)
        if (slots[k].kind != SK_COLL) free(slots[k].data);
}

/* ---- completion ----------------------------------------------------------------------- */

enum method { M_WAIT, M_TEST, M_WAITALL, M_WAITANY, M_WAITSOME, M_TESTALL, M_TESTANY, M_TESTSOME, N_METHODS };
static const char *const method_names[N_METHODS] = {"Wait", "Test-loop", "Waitall", "Waitany",
                                                    "Waitsome", "Testall", "Testany", "Testsome"};
static uint64_t method_uses[N_METHODS];

static void status_preset(MPI_Status *st)
{
    st->MPI_ERROR = STATUS_PRESET;
    st->MPI_SOURCE = -STATUS_PRESET;
    st->MPI_TAG = -STATUS_PRESET;
}

/* One completion observed: the status is checked, barriers stamped. */
static void slot_done(struct slot *s, const MPI_Status *st, const char *how, const char *ctx)
{
    if (s->done) {
        nb_fail(ctx, "%s reported a %s request completed twice", how, s->kind == SK_COLL ? "collective" : "p2p");
        return;
    }
    s->done = true;
    if (s->kind == SK_COLL && s->c->coll == C_BARRIER) s->c->t_out[0] = now_ns();
    stats.checks++;
    int cancelled = 1;
    MPI_Test_cancelled(st, &cancelled);
    if (cancelled) nb_fail(ctx, "%s: MPI_Test_cancelled true on a completed request", how);
    if (st->MPI_ERROR != MPI_SUCCESS && st->MPI_ERROR != STATUS_PRESET)
        nb_fail(ctx, "%s: status MPI_ERROR %d (neither MPI_SUCCESS nor left as it was)", how, st->MPI_ERROR);
    if (s->kind == SK_RECV) {
        int count = -1;
        MPI_Get_count(st, MPI_BYTE, &count);
        if (st->MPI_SOURCE != s->peer || st->MPI_TAG != s->tag || count != s->bytes)
            nb_fail(ctx, "%s: receive status source %d tag %d count %d, expected %d %d %d", how, st->MPI_SOURCE,
                    st->MPI_TAG, count, s->peer, s->tag, s->bytes);
    }
}

static void check_deadline(int64_t start, const char *how, const char *ctx)
{
    if (now_ns() - start > LOOP_LIMIT_NS) {
        nb_fail(ctx, "%s loop: requests not complete after %d s", how, (int)(LOOP_LIMIT_NS / 1000000000));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* The error handler of MPI_COMM_WORLD, MPI_COMM_SELF and the slots' communicators. */
static void set_errhandlers(struct slot *slots, int n, MPI_Errhandler eh)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
    for (int k = 0; k < n; k++)
        if (slots[k].kind == SK_COLL) MPI_Comm_set_errhandler(slots[k].c->tc->comm, eh);
}

/* Completes every slot with one method; the slots go into the request array in a
 * rank-dependent order. persistent: completed requests stay (inactive), not NULL. */
static void complete_slots(struct slot *slots, int n, enum method m, bool persistent, struct rng *local,
                           const char *ctx)
{
    MPI_Request reqs[MAX_SLOTS];
    MPI_Status sts[MAX_SLOTS];
    int order[MAX_SLOTS], idx[MAX_SLOTS];
    const char *how = method_names[m];
    method_uses[m]++;
    for (int k = 0; k < n; k++) order[k] = k;
    for (int k = n - 1; k > 0; k--) {
        int j = (int)rng_below(local, (uint64_t)k + 1), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    for (int k = 0; k < n; k++) {
        reqs[k] = slots[order[k]].req;
        status_preset(&sts[k]);
    }
    int64_t start = now_ns();
    int left = n;
    /* MPICH 4.0 reports an inactive persistent collective request as completed again
     * in MPI_Waitany/Testany/Waitsome/Testsome (the standard: ignored, MPI_UNDEFINED
     * once all are inactive): there each completed entry of the array becomes
     * MPI_REQUEST_NULL, the request kept in its slot. */
    bool null_done = persistent && host == HOST_MPICH;
    switch (m) {
    case M_WAIT:
        for (int k = 0; k < n; k++) {
            MPI_Wait(&reqs[k], &sts[k]);
            slot_done(&slots[order[k]], &sts[k], how, ctx);
        }
        break;
    case M_TEST:
        while (left > 0) {
            for (int k = 0; k < n; k++) {
                if (slots[order[k]].done) continue;
                int flag = 0;
                MPI_Test(&reqs[k], &flag, &sts[k]);
                if (flag) {
                    slot_done(&slots[order[k]], &sts[k], how, ctx);
                    left--;
                }
            }
            check_deadline(start, how, ctx);
        }
        break;
    case M_WAITALL:
    case M_TESTALL: {
        int rc = MPI_SUCCESS, flag = 0;
        if (m == M_WAITALL) {
            rc = MPI_Waitall(n, reqs, sts);
        } else {
            bool quirk = persistent && host == HOST_MPICH;
            if (quirk) set_errhandlers(slots, n, MPI_ERRORS_RETURN);
            while (!flag && rc == MPI_SUCCESS) {
                rc = MPI_Testall(n, reqs, &flag, sts);
                check_deadline(start, how, ctx);
            }
            if (quirk) set_errhandlers(slots, n, MPI_ERRORS_ARE_FATAL);
            if (!flag) nb_fail(ctx, "%s returned %d without completing", how, rc);
        }
        /* MPICH 4.0's MPI_Testall returns MPI_ERR_IN_STATUS once a persistent
         * collective request completes, every status saying MPI_SUCCESS. */
        bool in_status_quirk = persistent && host == HOST_MPICH && m == M_TESTALL && rc == MPI_ERR_IN_STATUS;
        if (rc != MPI_SUCCESS && !in_status_quirk) nb_fail(ctx, "%s returned %d", how, rc);
        for (int k = 0; k < n; k++) {
            if (in_status_quirk && sts[k].MPI_ERROR != MPI_SUCCESS)
                nb_fail(ctx, "%s returned MPI_ERR_IN_STATUS, status %d says %d", how, k, sts[k].MPI_ERROR);
            slot_done(&slots[order[k]], &sts[k], how, ctx);
        }
        break;
    }
    case M_WAITANY:
    case M_TESTANY:
        for (;;) {
            int index = -1, flag = 1;
            MPI_Status st;
            status_preset(&st);
            if (m == M_WAITANY)
                MPI_Waitany(n, reqs, &index, &st);
            else
                MPI_Testany(n, reqs, &index, &flag, &st);
            if (flag && index == MPI_UNDEFINED) break;
            if (!flag) {
                check_deadline(start, how, ctx);
                continue;
            }
            if (index < 0 || index >= n) {
                nb_fail(ctx, "%s returned index %d of %d", how, index, n);
                break;
            }
            slot_done(&slots[order[index]], &st, how, ctx);
            if (null_done && reqs[index] != MPI_REQUEST_NULL) {
                slots[order[index]].req = reqs[index];
                reqs[index] = MPI_REQUEST_NULL;
            }
            left--;
            if (left < 0) break;
        }
        break;
    case M_WAITSOME:
    case M_TESTSOME:
        for (;;) {
            int outcount = -1;
            for (int k = 0; k < n; k++) status_preset(&sts[k]);
            if (m == M_WAITSOME)
                MPI_Waitsome(n, reqs, &outcount, idx, sts);
            else
                MPI_Testsome(n, reqs, &outcount, idx, sts);
            if (outcount == MPI_UNDEFINED) break;
            if (outcount < 0 || outcount > n) {
                nb_fail(ctx, "%s returned outcount %d of %d", how, outcount, n);
                break;
            }
            if (outcount == 0) check_deadline(start, how, ctx);
            for (int k = 0; k < outcount; k++) {
                if (idx[k] < 0 || idx[k] >= n) {
                    nb_fail(ctx, "%s returned index %d of %d", how, idx[k], n);
                    left = -1;
                    break;
                }
                slot_done(&slots[order[idx[k]]], &sts[k], how, ctx);
                if (null_done && reqs[idx[k]] != MPI_REQUEST_NULL) {
                    slots[order[idx[k]]].req = reqs[idx[k]];
                    reqs[idx[k]] = MPI_REQUEST_NULL;
                }
                left--;
            }
            if (left < 0) break;
        }
        break;
    default: break;
    }
    for (int k = 0; k < n; k++) {
        struct slot *s = &slots[order[k]];
        if (!s->done) nb_fail(ctx, "%s never reported a %s request complete", how, s->kind == SK_COLL ? "collective" : "p2p");
        bool keep = persistent && s->kind == SK_COLL;
        if (keep && reqs[k] == MPI_REQUEST_NULL && s->req != MPI_REQUEST_NULL && null_done &&
            (m == M_WAITANY || m == M_TESTANY || m == M_WAITSOME || m == M_TESTSOME))
            continue; /* nulled above (null_done), s->req holds it */
        if (keep && reqs[k] == MPI_REQUEST_NULL)
            nb_fail(ctx, "%s set a persistent collective request to MPI_REQUEST_NULL", how);
        if (!keep && reqs[k] != MPI_REQUEST_NULL)
            nb_fail(ctx, "%s left a completed request not MPI_REQUEST_NULL", how);
        s->req = reqs[k];
    }
}

/* MPICH 4.0's MPI_Testall is wrong once a persistent collective request is in the
 * array: MPI_ERR_IN_STATUS when one completes, the others' statuses MPI_ERR_PENDING,
 * flag false, and MPI_Start fails on them afterwards. Testany/Testsome loops (which
 * see every completion) stand in for it there unless --keep-host-bugs. */
static enum method pick_method_for(struct rng *local, bool persistent)
{
    enum method m = (enum method)rng_below(local, N_METHODS);
    if (m == M_TESTALL && persistent && host == HOST_MPICH && !nbo.keep_host_bugs)
        m = rng_chance(local, 50) ? M_TESTANY : M_TESTSOME;
    return m;
}

/* ---- cases ------------------------------------------------------------------------------ */

static struct coll_case *nb_make_case(long id, enum coll_id coll, const struct test_comm *tc, bool small)
{
    struct coll_case *c = make_case(id, coll, tc, (int)id, small);
    if (c->coll == C_BARRIER) c->nbarriers = 1; /* one entry/exit pair per start */
    return c;
}

static void ctx_of(char *out, size_t len, const char *scenario, enum nb_form form, long id, int round)
{
    snprintf(out, len, "%s/%s #%ld start %d", scenario, form_names[form], id, round);
}

static struct rng local_rng(long id, int round, uint64_t what)
{
    struct rng r;
    rng_seed(&r, opt.seed ^ what, (uint64_t)id * 64 + (uint64_t)round, 0x7E57000u + (uint64_t)world_rank);
    return r;
}

static struct rng shared_rng(long id, uint64_t what)
{
    struct rng r;
    rng_seed(&r, opt.seed ^ what, (uint64_t)id, 0x5AED);
    return r;
}

static int nstarts(enum nb_form form) { return form == FORM_PERSISTENT ? nbo.starts : 1; }

/* Starts the slots' collectives; persistent ones were made by init_case. */
static void start_coll(struct slot *s, enum nb_form form)
{
    if (form == FORM_I) {
        post_case(s->c, &s->req);
    } else {
        before_start(s->c);
        MPI_Start(&s->req);
    }
}

static void free_persistent(struct slot *slots, int n, const char *ctx)
{
    for (int k = 0; k < n; k++) {
        if (slots[k].kind != SK_COLL || slots[k].req == MPI_REQUEST_NULL) continue;
        MPI_Request_free(&slots[k].req);
        if (slots[k].req != MPI_REQUEST_NULL) nb_fail(ctx, "MPI_Request_free left the request not MPI_REQUEST_NULL");
    }
}

/* single: every collective on every selected communicator, one call at a time. */
static void run_single(long *id, struct test_comm *comms, enum nb_form form)
{
    for (int k = 0; k < N_COMM_KINDS; k++) {
        if (!opt.comms[k]) continue;
        for (int coll = 0; coll < N_COLLS; coll++) {
            if (!opt.colls[coll] || (form == FORM_PERSISTENT && no_persistent[coll])) continue;
            for (int it = 0; it < nbo.iters; it++) {
                long cid = (*id)++;
                struct coll_case *c = nb_make_case(cid, (enum coll_id)coll, &comms[k], false);
                struct slot s = {.kind = SK_COLL, .c = c, .req = MPI_REQUEST_NULL};
                if (c->skip) {
                    free_case(c);
                    continue;
                }
                if (form == FORM_PERSISTENT) init_case(c, &s.req);
                for (int round = 0; round < nstarts(form); round++) {
                    char ctx[128];
                    ctx_of(ctx, sizeof ctx, "single", form, cid, round);
                    struct rng local = local_rng(cid, round, 0x51);
                    if (round > 0) refill_case(c, &local);
                    s.done = false;
                    start_coll(&s, form);
                    complete_slots(&s, 1, pick_method_for(&local, form == FORM_PERSISTENT), form == FORM_PERSISTENT, &local, ctx);
                    verify_case(c);
                }
                if (form == FORM_PERSISTENT) free_persistent(&s, 1, "single");
                free_case(c);
            }
        }
    }
}

static int selected(enum coll_id *out, enum nb_form form)
{
    int n = 0;
    for (int k = 0; k < N_COLLS; k++)
        if (opt.colls[k] && !(form == FORM_PERSISTENT && no_persistent[k])) out[n++] = (enum coll_id)k;
    return n;
}

/* The communicators a group may use: world, dup, evenodd, reversed (as selected). */
static int group_comms(struct test_comm *comms, struct test_comm **out)
{
    static const enum comm_kind kinds[] = {CK_WORLD, CK_DUP, CK_EVENODD, CK_REVERSED};
    int n = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (opt.comms[kinds[k]]) out[n++] = &comms[kinds[k]];
    if (n == 0) out[n++] = &comms[CK_WORLD];
    return n;
}

/* group: k outstanding calls on 1-3 communicators, blocking collectives between the
 * starts, ring traffic in the same array, completion in a rank-dependent order. */
static void run_group(long *id, struct test_comm *comms, enum nb_form form, long g)
{
    enum coll_id colls[N_COLLS];
    int ncolls = selected(colls, form);
    struct test_comm *pool[4];
    int npool = group_comms(comms, pool);
    struct rng shared = shared_rng(g, 0x6B);
    int k = 1 + (int)rng_below(&shared, (uint64_t)nbo.max_outstanding);
    int ncomms = 1 + (int)rng_below(&shared, 3);
    if (ncomms > npool) ncomms = npool;
    struct test_comm *use[3];
    for (int j = 0; j < ncomms; j++) { /* distinct communicators */
        int pick;
        bool dup;
        do {
            pick = (int)rng_below(&shared, (uint64_t)npool);
            dup = false;
            for (int q = 0; q < j; q++) dup |= use[q] == pool[pick];
        } while (dup);
        use[j] = pool[pick];
    }
    static const int ring_sizes[] = {0, 1, 13, 4097, 70001};
    struct ring ring = {.comm = use[rng_below(&shared, (uint64_t)ncomms)]->comm, .group = g,
                        .bytes = ring_sizes[rng_below(&shared, 5)]};
    MPI_Comm_rank(ring.comm, &ring.rank);
    MPI_Comm_size(ring.comm, &ring.size);
    bool with_ring = rng_chance(&shared, 75);
    int ring_at = (int)rng_below(&shared, (uint64_t)k + 1); /* posted before call ring_at */

    struct slot slots[MAX_SLOTS];
    int nslots = 0;
    long first = *id;
    for (int j = 0; j < k; j++) {
        long cid = (*id)++;
        const struct test_comm *tc = use[rng_below(&shared, (uint64_t)ncomms)];
        struct coll_case *c = nb_make_case(cid, colls[rng_below(&shared, (uint64_t)ncolls)], tc,
                                           !rng_chance(&shared, 10));
        slots[nslots++] = (struct slot){.kind = SK_COLL, .c = c, .req = MPI_REQUEST_NULL};
        if (form == FORM_PERSISTENT && !c->skip) init_case(c, &slots[nslots - 1].req);
    }
    for (int round = 0; round < nstarts(form); round++) {
        char ctx[128];
        ctx_of(ctx, sizeof ctx, "group", form, first, round);
        struct rng local = local_rng(first, round, 0x62);
        struct rng rshared = shared_rng(g * 16 + round, 0x63);
        int n = k;
        for (int j = 0; j < k; j++) {
            slots[j].done = false;
            if (round > 0) refill_case(slots[j].c, &local);
        }
        for (int j = 0; j <= k; j++) {
            if (with_ring && j == ring_at) n += ring_post(&ring, &slots[n]);
            if (j == k) break;
            if (!slots[j].c->skip) start_coll(&slots[j], form);
            /* a blocking collective (checked) on one of the group's communicators */
            if (ncolls > 0 && rng_chance(&rshared, 30)) {
                const struct test_comm *tc = use[rng_below(&rshared, (uint64_t)ncomms)];
                long bid = (*id)++;
                struct coll_case *b = make_case(bid, colls[rng_below(&rshared, (uint64_t)ncolls)], tc, (int)bid, true);
                run_case(b);
                verify_case(b);
                free_case(b);
            }
        }
        /* skipped cases (host MPI bugs on one rank) hold MPI_REQUEST_NULL: done at once */
        struct slot *act[MAX_SLOTS];
        struct slot packed[MAX_SLOTS];
        int nact = 0;
        for (int j = 0; j < n; j++) {
            if (slots[j].kind == SK_COLL && slots[j].c->skip) continue;
            act[nact] = &slots[j];
            packed[nact++] = slots[j];
        }
        complete_slots(packed, nact, pick_method_for(&local, form == FORM_PERSISTENT), form == FORM_PERSISTENT, &local, ctx);
        for (int j = 0; j < nact; j++) *act[j] = packed[j];
        for (int j = k; j < n; j++) ring_check(&ring, &slots[j], ctx);
        slots_free(slots + k, n - k);
        for (int j = 0; j < k; j++) verify_case(slots[j].c);
    }
    if (form == FORM_PERSISTENT) free_persistent(slots, k, "group");
    for (int j = 0; j < k; j++) free_case(slots[j].c);
}

/* disorder: one call on each of 2-3 communicators, started in a rank-dependent order. */
static void run_disorder(long *id, struct test_comm *comms, enum nb_form form, long g)
{
    enum coll_id colls[N_COLLS];
    int ncolls = selected(colls, form);
    struct test_comm *pool[4];
    int npool = group_comms(comms, pool);
    if (npool < 2 || ncolls == 0) return;
    struct rng shared = shared_rng(g, 0xD1);
    int k = 2 + (int)rng_below(&shared, 2);
    if (k > npool) k = npool;
    /* the first k of a shuffled pool */
    for (int j = npool - 1; j > 0; j--) {
        int q = (int)rng_below(&shared, (uint64_t)j + 1);
        struct test_comm *t = pool[j];
        pool[j] = pool[q];
        pool[q] = t;
    }
    struct slot slots[4];
    long first = *id;
    for (int j = 0; j < k; j++) {
        long cid = (*id)++;
        struct coll_case *c = nb_make_case(cid, colls[rng_below(&shared, (uint64_t)ncolls)], pool[j],
                                           !rng_chance(&shared, 10));
        slots[j] = (struct slot){.kind = SK_COLL, .c = c, .req = MPI_REQUEST_NULL};
        if (form == FORM_PERSISTENT && !c->skip) init_case(c, &slots[j].req);
    }
    for (int round = 0; round < nstarts(form); round++) {
        char ctx[128];
        ctx_of(ctx, sizeof ctx, "disorder", form, first, round);
        struct rng local = local_rng(first, round, 0xD2);
        int order[4] = {0, 1, 2, 3};
        /* rank-dependent: even ranks reverse, the others shuffle */
        if (world_rank % 2 == 0) {
            for (int j = 0; j < k / 2; j++) {
                int t = order[j];
                order[j] = order[k - 1 - j];
                order[k - 1 - j] = t;
            }
        } else {
            for (int j = k - 1; j > 0; j--) {
                int q = (int)rng_below(&local, (uint64_t)j + 1), t = order[j];
                order[j] = order[q];
                order[q] = t;
            }
        }
        for (int j = 0; j < k; j++) {
            slots[j].done = false;
            if (round > 0) refill_case(slots[j].c, &local);
        }
        if (form == FORM_PERSISTENT && rng_chance(&local, 50)) { /* MPI_Startall, in this rank's order */
            MPI_Request reqs[4];
            int m = 0;
            for (int j = 0; j < k; j++) {
                struct slot *s = &slots[order[j]];
                if (s->c->skip) continue;
                before_start(s->c);
                reqs[m++] = s->req;
            }
            MPI_Startall(m, reqs);
            for (int j = 0, q = 0; j < k; j++)
                if (!slots[order[j]].c->skip) slots[order[j]].req = reqs[q++];
        } else {
            for (int j = 0; j < k; j++)
                if (!slots[order[j]].c->skip) start_coll(&slots[order[j]], form);
        }
        struct slot packed[4];
        int map[4], m = 0;
        for (int j = 0; j < k; j++)
            if (!slots[j].c->skip) {
                map[m] = j;
                packed[m++] = slots[j];
            }
        complete_slots(packed, m, M_WAITALL, form == FORM_PERSISTENT, &local, ctx);
        for (int j = 0; j < m; j++) slots[map[j]] = packed[j];
        for (int j = 0; j < k; j++) verify_case(slots[j].c);
    }
    if (form == FORM_PERSISTENT) free_persistent(slots, k, "disorder");
    for (int j = 0; j < k; j++) free_case(slots[j].c);
}

/* free: MPI_Request_free on active MPI_Ibcast / MPI_Iallreduce requests. MPI-3.1
 * 5.12 makes this erroneous for non-blocking collectives: Open MPI 4.1 and MPICH 4.0
 * both reject it with an error (Open MPI: MPI_ERR_REQUEST). With MPI_ERRORS_RETURN
 * rejecting and accepting are both fine, but consistently: a rejected request is still
 * there and completes by MPI_Wait; a freed one is NULL, and allreduce rounds (a
 * barrier each) follow until every rank sees the results. Buffers of freed requests
 * are never freed (nothing says when MPI is done with them). */
static int free_outcome[2]; /* rank 0: accepted, rejected */

static void run_free_active(struct test_comm *comm, long g)
{
    enum { N = 1000 };
    int n = comm->size, me = comm->rank, root = (int)(g % n);
    int *bc = xmalloc(N * sizeof *bc), *in = xmalloc(N * sizeof *in), *out = xmalloc(N * sizeof *out);
    for (int i = 0; i < N; i++) {
        bc[i] = me == root ? (int)(g * 7919 + i) : -1;
        in[i] = (me + 1) * (i + 1) + (int)g;
        out[i] = -1;
    }
    char ctx[96];
    snprintf(ctx, sizeof ctx, "free-active #%ld on %s", g, comm->name);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(comm->comm, MPI_ERRORS_RETURN);
    MPI_Request r[2];
    MPI_Ibcast(bc, N, MPI_INT, root, comm->comm, &r[0]);
    MPI_Iallreduce(in, out, N, MPI_INT, MPI_SUM, comm->comm, &r[1]);
    bool freed = true;
    for (int k = 0; k < 2; k++) {
        MPI_Request before = r[k];
        int rc = MPI_Request_free(&r[k]);
        stats.checks++;
        if (rc == MPI_SUCCESS) {
            if (r[k] != MPI_REQUEST_NULL) nb_fail(ctx, "MPI_Request_free succeeded but left the request not NULL");
            free_outcome[0]++;
        } else {
            if (r[k] != before) nb_fail(ctx, "MPI_Request_free failed (%d) and changed the request", rc);
            freed = false;
            free_outcome[1]++;
        }
    }
    if (!freed) { /* rejected: the requests are still ours to complete */
        MPI_Status st[2];
        status_preset(&st[0]);
        status_preset(&st[1]);
        int rc = MPI_Waitall(2, r, st);
        if (rc != MPI_SUCCESS) nb_fail(ctx, "MPI_Waitall after a rejected MPI_Request_free returned %d", rc);
    }
    MPI_Comm_set_errhandler(comm->comm, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int all = 0, polls = 0;
    for (; polls < FREE_POLLS && !all; polls++) {
        int ok = 1;
        for (int i = 0; i < N && ok; i++)
            ok = bc[i] == (int)(g * 7919 + i) && out[i] == n * (n + 1) / 2 * (i + 1) + n * (int)g;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        if (!all && polls > 10) sleep_us(200);
    }
    stats.checks += 2 * N;
    for (int i = 0; i < N; i++) {
        int want = n * (n + 1) / 2 * (i + 1) + n * (int)g;
        if (bc[i] != (int)(g * 7919 + i) || out[i] != want) {
            nb_fail(ctx, "after %d allreduce rounds element %d: bcast %d (want %d) allreduce %d (want %d)", polls, i,
                    bc[i], (int)(g * 7919 + i), out[i], want);
            break;
        }
    }
    if (in[0] != (me + 1) + (int)g) nb_fail(ctx, "the allreduce's input changed");
    if (!freed) {
        free(bc);
        free(in);
        free(out);
    }
}

/* ---- main ------------------------------------------------------------------------------- */

static void nbc_usage(const char *why)
{
    if (world_rank == 0)
        fprintf(stderr,
                PROGRAM_NAME ": %s\nusage: test_nbc [--mode i|persistent|both] [--iters N] [--groups N] "
                "[--disorder N] [--free-active N] [--starts N] [--max-outstanding K] [--colls a,b] [--comms a,b] "
                "[--max-bytes N[K|M]] [--large PERCENT] [--seed S] [--keep-host-bugs] [--verbose]\n",
                why);
    MPI_Finalize();
    exit(2);
}

static void nbc_options(int argc, char **argv)
{
    opt = (struct options){.seed = 1, .iters = 1, .max_bytes = MIB, .large_percent = 4, .count_api_percent = 0};
    for (int k = 0; k < N_COLLS; k++) opt.colls[k] = true;
    for (int k = 0; k < N_COMM_KINDS; k++) opt.comms[k] = true;
    nbo.forms[FORM_I] = nbo.forms[FORM_PERSISTENT] = true;
    nbo.iters = 1;
    nbo.groups = 30;
    nbo.disorder = 10;
    nbo.free_active = 2;
    nbo.starts = 3;
    nbo.max_outstanding = 4;
    for (int k = 1; k < argc; k++) {
        const char *a = argv[k], *v = k + 1 < argc ? argv[k + 1] : NULL;
        if (!strcmp(a, "--verbose") || !strcmp(a, "--keep-host-bugs")) {
            if (a[2] == 'v') opt.verbose = true;
            else nbo.keep_host_bugs = true;
            continue;
        }
        if (!v) nbc_usage("missing value");
        k++;
        if (!strcmp(a, "--mode")) {
            nbo.forms[FORM_I] = !strcmp(v, "i") || !strcmp(v, "both");
            nbo.forms[FORM_PERSISTENT] = !strcmp(v, "persistent") || !strcmp(v, "both");
            if (!nbo.forms[FORM_I] && !nbo.forms[FORM_PERSISTENT]) nbc_usage("unknown mode");
        } else if (!strcmp(a, "--iters")) nbo.iters = atoi(v);
        else if (!strcmp(a, "--groups")) nbo.groups = atoi(v);
        else if (!strcmp(a, "--disorder")) nbo.disorder = atoi(v);
        else if (!strcmp(a, "--free-active")) nbo.free_active = atoi(v);
        else if (!strcmp(a, "--starts")) nbo.starts = atoi(v);
        else if (!strcmp(a, "--max-outstanding")) nbo.max_outstanding = atoi(v);
        else if (!strcmp(a, "--colls")) parse_names(v, coll_names, N_COLLS, opt.colls);
        else if (!strcmp(a, "--comms")) parse_names(v, comm_kind_names, N_COMM_KINDS, opt.comms);
        else if (!strcmp(a, "--max-bytes")) opt.max_bytes = parse_bytes(v);
        else if (!strcmp(a, "--large")) opt.large_percent = atoi(v);
        else if (!strcmp(a, "--seed")) opt.seed = strtoull(v, NULL, 0);
        else nbc_usage("unknown option");
    }
    if (opt.max_bytes < 64) opt.max_bytes = 64;
    if (nbo.max_outstanding < 1) nbo.max_outstanding = 1;
    if (nbo.max_outstanding > 4) nbo.max_outstanding = 4;
    if (nbo.starts < 1) nbo.starts = 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    nbc_options(argc, argv);
    make_types_and_ops();
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int version_len;
    MPI_Get_library_version(version, &version_len);
    host = strstr(version, "Open MPI") ? HOST_OPEN_MPI : strstr(version, "MPICH") ? HOST_MPICH : HOST_OTHER;
    /* Open MPI 4.1's libnbc returns at once from MPI_Ialltoallv/w in place on a rank
     * whose receive counts are all zero, while the others start a schedule: their
     * tags on the communicator drift apart and the next non-blocking collective on it
     * hangs (seen natively at 2 ranks; the blocking forms pass the same cases). */
    if (host == HOST_OPEN_MPI) no_inplace[C_ALLTOALLV] = no_inplace[C_ALLTOALLW] = true;
    /* MPICH 4.0 in place: MPI_Ialltoallw with mixed types fails an assertion in yaksa
     * (typerep_yaksa_pack.c:285), MPI_Ialltoallv truncates ("32 bytes received but
     * buffer size is 16"). Its persistent MPI_Gather_init / MPI_Allgather_init /
     * MPI_Scatter_init make the local copy of a rank's own block once, at init, not
     * at each start: new data is not copied on later starts (and gather's root never
     * gets its own block). --keep-host-bugs runs them anyway. */
    if (host == HOST_MPICH && !nbo.keep_host_bugs) {
        no_inplace[C_ALLTOALLV] = no_inplace[C_ALLTOALLW] = true;
        no_persistent[C_GATHER] = no_persistent[C_ALLGATHER] = no_persistent[C_SCATTER] = true;
    }
    if (host == HOST_OPEN_MPI && nbo.keep_host_bugs) no_inplace[C_ALLTOALLV] = no_inplace[C_ALLTOALLW] = false;
    if (!HAVE_PERSISTENT && nbo.forms[FORM_PERSISTENT]) {
        nbo.forms[FORM_PERSISTENT] = false;
        if (world_rank == 0)
            printf(PROGRAM_NAME ": persistent collectives skipped: mpi.h is MPI %d.%d (MPI_<Coll>_init needs MPI 4)\n",
                   MPI_VERSION, MPI_SUBVERSION);
    }

    struct test_comm comms[N_COMM_KINDS];
    for (int k = 0; k < N_COMM_KINDS; k++) make_comm(&comms[k], (enum comm_kind)k);

    long id = 0, ngroups = 0;
    int64_t t0 = now_ns();
    for (int f = 0; f < 2; f++) {
        if (!nbo.forms[f]) continue;
        enum nb_form form = (enum nb_form)f;
        run_single(&id, comms, form);
        for (long g = 0; g < nbo.groups; g++, ngroups++) run_group(&id, comms, form, ngroups);
        for (long g = 0; g < nbo.disorder; g++, ngroups++) run_disorder(&id, comms, form, ngroups);
    }
    for (long g = 0; g < nbo.free_active; g++)
        run_free_active(&comms[g % 2 ? CK_REVERSED : CK_DUP], g);
    if (world_rank == 0) {
        printf(PROGRAM_NAME ": forms:%s%s, %.1f s; completions by", nbo.forms[FORM_I] ? " nonblocking" : "",
               nbo.forms[FORM_PERSISTENT] ? " persistent" : "", (double)(now_ns() - t0) / 1e9);
        for (int m = 0; m < N_METHODS; m++) printf(" %s=%" PRIu64, method_names[m], method_uses[m]);
        printf(" (rank 0); MPI_Request_free on an active collective: accepted %d, rejected %d\n", free_outcome[0],
               free_outcome[1]);
    }

    for (int k = 0; k < N_COMM_KINDS; k++) free_comm(&comms[k]);
    free_types_and_ops();
    int failed = finish(id);
    MPI_Finalize();
    return failed ? 1 : 0;
}
