! test_fortran: every blocking collective called from Fortran, checked against a
! reference made with point-to-point messages (every rank's input sent to every
! rank, the expected result computed from it). Built three times by
! tests/py/test_fortran.py: -DBIND_F08 (use mpi_f08), -DBIND_MPIFH (include 'mpif.h'),
! neither (use mpi). Prints "test_fortran: N checks, E errors".
#if defined(BIND_F08)
#define HANDLE(kind) type(kind)
#else
#define HANDLE(kind) integer
#endif
program test_fortran
#if defined(BIND_F08)
  use mpi_f08
#elif !defined(BIND_MPIFH)
  use mpi
#endif
  implicit none
#if defined(BIND_MPIFH)
  include 'mpif.h'
#endif
  integer, parameter :: nsizes = 4
  integer :: sizes(nsizes) = (/ 1, 7, 1000, 70001 /)
  integer :: ierr, rank, nprocs, s, n, root, r, i, k
  integer(8) :: checks, errors, totals(2), sums(2)
  integer, allocatable :: mine(:), table(:, :), out(:), big(:), counts(:), displs(:), want(:)
  double precision, allocatable :: dmine(:), dout(:)
  HANDLE(MPI_Comm) :: comm
  HANDLE(MPI_Datatype), allocatable :: types(:)

  call MPI_Init(ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, comm, ierr)
  call MPI_Comm_rank(comm, rank, ierr)
  call MPI_Comm_size(comm, nprocs, ierr)
  checks = 0
  errors = 0
  allocate(counts(0:nprocs - 1), displs(0:nprocs - 1), types(0:2 * nprocs - 1))

  do s = 1, nsizes
    n = sizes(s)
    allocate(mine(n), table(n, 0:nprocs - 1), out(n), big(n * nprocs), want(n * nprocs))
    allocate(dmine(n), dout(n))
    do i = 1, n
      mine(i) = input(rank, i, s)
    end do
    call reference(mine, table)

    call MPI_Barrier(comm, ierr)
    call expect(ierr == MPI_SUCCESS, 'barrier')

    do root = 0, nprocs - 1
      out = -1
      if (rank == root) out = mine
      call MPI_Bcast(out, n, MPI_INTEGER, root, comm, ierr)
      call expect(all_equal(out, table(:, root)), 'bcast')

      out = -1
      call MPI_Reduce(mine, out, n, MPI_INTEGER, MPI_SUM, root, comm, ierr)
      if (rank == root) call expect(all_equal(out, sum(table, dim=2)), 'reduce')

      big = -1
      call MPI_Gather(mine, n, MPI_INTEGER, big, n, MPI_INTEGER, root, comm, ierr)
      if (rank == root) call expect(all_equal(big, reshape(table, (/ n * nprocs /))), 'gather')

      do r = 0, nprocs - 1
        counts(r) = min(n, mod(r + s, 3) * (n / 3 + 1))
        displs(r) = r * n
      end do
      big = -1
      call MPI_Gatherv(mine, counts(rank), MPI_INTEGER, big, counts, displs, MPI_INTEGER, root, &
                       comm, ierr)
      if (rank == root) then
        do r = 0, nprocs - 1
          call expect(all_equal(big(r * n + 1:r * n + counts(r)), table(1:counts(r), r)), 'gatherv')
        end do
      end if

      ! scatter: root's row block r goes to rank r (root's input repeated with offsets)
      do r = 0, nprocs - 1
        big(r * n + 1:(r + 1) * n) = table(:, root) + r
      end do
      out = -1
      call MPI_Scatter(big, n, MPI_INTEGER, out, n, MPI_INTEGER, root, comm, ierr)
      call expect(all_equal(out, table(:, root) + rank), 'scatter')
      out = -1
      call MPI_Scatterv(big, counts, displs, MPI_INTEGER, out, counts(rank), MPI_INTEGER, root, &
                        comm, ierr)
      call expect(all_equal(out(1:counts(rank)), table(1:counts(rank), root) + rank), 'scatterv')
    end do

    call MPI_Allreduce(mine, out, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call expect(all_equal(out, sum(table, dim=2)), 'allreduce')
    out = mine
    call MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_INTEGER, MPI_MAX, comm, ierr)
    call expect(all_equal(out, maxval(table, dim=2)), 'allreduce in place')
    dmine = dble(mine) * 0.5d0
    call MPI_Allreduce(dmine, dout, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    call expect(all(dout == dble(sum(table, dim=2)) * 0.5d0), 'allreduce double')

    call MPI_Allgather(mine, n, MPI_INTEGER, big, n, MPI_INTEGER, comm, ierr)
    call expect(all_equal(big, reshape(table, (/ n * nprocs /))), 'allgather')
    big = -1
    big(rank * n + 1:(rank + 1) * n) = mine
    call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, big, n, MPI_INTEGER, comm, ierr)
    call expect(all_equal(big, reshape(table, (/ n * nprocs /))), 'allgather in place')
    big = -1
    call MPI_Allgatherv(mine, counts(rank), MPI_INTEGER, big, counts, displs, MPI_INTEGER, comm, ierr)
    do r = 0, nprocs - 1
      call expect(all_equal(big(r * n + 1:r * n + counts(r)), table(1:counts(r), r)), 'allgatherv')
    end do

    ! alltoall: block r of rank q is q's input + r; rank p receives block p of every q
    do r = 0, nprocs - 1
      want(r * n + 1:(r + 1) * n) = table(:, r) + rank
      big(r * n + 1:(r + 1) * n) = mine + r
    end do
    out = 0
    block
      integer, allocatable :: recv(:)
      allocate(recv(n * nprocs))
      recv = -1
      call MPI_Alltoall(big, n, MPI_INTEGER, recv, n, MPI_INTEGER, comm, ierr)
      call expect(all_equal(recv, want), 'alltoall')
      recv = -1
      call MPI_Alltoallv(big, counts * 0 + n, displs, MPI_INTEGER, recv, counts * 0 + n, displs, &
                         MPI_INTEGER, comm, ierr)
      call expect(all_equal(recv, want), 'alltoallv')
      do r = 0, nprocs - 1
        types(r) = MPI_INTEGER
        types(nprocs + r) = MPI_INTEGER
      end do
      recv = -1
      call MPI_Alltoallw(big, counts * 0 + n, displs * 4, types(0:nprocs - 1), recv, &
                         counts * 0 + n, displs * 4, types(nprocs:), comm, ierr)
      call expect(all_equal(recv, want), 'alltoallw')
      deallocate(recv)
    end block

    ! reduce_scatter_block: every rank contributes big (n per rank); rank p gets block p summed
    do r = 0, nprocs - 1
      big(r * n + 1:(r + 1) * n) = mine + r
    end do
    out = -1
    call MPI_Reduce_scatter_block(big, out, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call expect(all_equal(out, sum(table, dim=2) + nprocs * rank), 'reduce_scatter_block')
    counts = n
    out = -1
    call MPI_Reduce_scatter(big, out, counts, MPI_INTEGER, MPI_SUM, comm, ierr)
    call expect(all_equal(out, sum(table, dim=2) + nprocs * rank), 'reduce_scatter')

    call MPI_Scan(mine, out, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    call expect(all_equal(out, sum(table(:, 0:rank), dim=2)), 'scan')
    out = -7
    call MPI_Exscan(mine, out, n, MPI_INTEGER, MPI_SUM, comm, ierr)
    if (rank > 0) call expect(all_equal(out, sum(table(:, 0:rank - 1), dim=2)), 'exscan')

    deallocate(mine, table, out, big, want, dmine, dout)
  end do

  totals(1) = checks
  totals(2) = errors
  call MPI_Reduce(totals, sums, 2, MPI_INTEGER8, MPI_SUM, 0, comm, ierr)
  if (rank == 0) print '(a, i0, a, i0, a)', 'test_fortran: ', sums(1), ' checks, ', sums(2), ' errors'
  call MPI_Comm_free(comm, ierr)
  call MPI_Finalize(ierr)

contains

  integer function input(who, i, s)
    integer, intent(in) :: who, i, s
    input = mod(who * 7919 + i * 31 + s * 13, 100003) - 50000
  end function

  ! every rank's input, by point-to-point messages only
  subroutine reference(mine, table)
    integer, intent(in) :: mine(:)
    integer, intent(out) :: table(:, 0:)
    integer :: peer
    table(:, rank) = mine
    do peer = 0, nprocs - 1
      if (peer == rank) cycle
      call MPI_Sendrecv(mine, size(mine), MPI_INTEGER, peer, 99, table(:, peer), size(mine), &
                        MPI_INTEGER, peer, 99, comm, MPI_STATUS_IGNORE, ierr)
    end do
  end subroutine

  logical function all_equal(a, b)
    integer, intent(in) :: a(:), b(:)
    all_equal = size(a) == size(b)
    if (all_equal) all_equal = all(a == b)
  end function

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    checks = checks + 1
    if (.not. ok .or. ierr /= MPI_SUCCESS) then
      errors = errors + 1
      if (errors < 10) print '(a, i0, a, a, a, i0)', 'test_fortran: rank ', rank, ': ', what, &
                                                   ' wrong at size ', n
    end if
  end subroutine
end program
