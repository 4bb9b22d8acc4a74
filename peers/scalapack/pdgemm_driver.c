/* ScaLAPACK peer of `tessera multiply`: C = A x B (n x n, double) with pdgemm on a p x q BLACS
 * grid, even 2D block-cyclic distribution with square NB x NB blocks. Run under mpirun with
 * p * q ranks (rank 0 plays the coordinator's part as well as holding its share of the grid) or
 * p * q + 1 (rank 0 is only the coordinator).
 *
 * Rank 0 generates A and B exactly as `tessera multiply --n N --seed S` does (std::mt19937_64,
 * A from seed S, B from seed S + 1, uniform in [-1, 1) from the top 53 bits, row-major fill
 * order), scatters them with pdgemr2d (ScaLAPACK's own redistribution routine) from a 1 x 1 grid
 * to the p x q grid, runs pdgemm, gathers C back the same way and checks it with Freivalds'
 * test using the bound of Tessera's verifier (balance/multiply/src/verify.cpp). A wrong product makes
 * the run fail (exit 3), so a timing is only ever printed for a verified product.
 *
 * Timed on rank 0 with MPI_Wtime:
 *   end_to_end_s  from the first byte of the scatter until C is complete on rank 0 (like
 *                 Tessera's makespan: input generation and the check are outside);
 *   pdgemm_s      barrier, pdgemm, barrier: the multiply alone on distributed data.
 * Prints one line: "RESULT n=.. p=.. q=.. nb=.. scatter_s=.. pdgemm_s=.. gather_s=..
 * end_to_end_s=.. verified=yes|no check=..", then one line per rank in rank order:
 * "RANK rank=.. gflop=.. cpu_scatter_s=.. cpu_pdgemm_s=.. cpu_gather_s=.. own_pdgemm_s=..
 * cpu_total_s=..": its share of the 2 n^3 flops, the CPU time it used (getrusage, user + system)
 * in each timed phase, and how long pdgemm kept it before the closing barrier.
 * Ranks need not be one per node: scripts/peers.sh may start several inside one node's cgroup
 * (the heterogeneous trick: a faster node holds more blocks of the even block-cyclic split).
 * With P x Q + 1 ranks, rank 0 is a coordinator apart from the grid (as Tessera's coordinator,
 * it can then run outside every node's cgroup): it holds A, B and C whole and takes no block.
 *
 * Usage: pdgemm_driver N P Q NB [--seed S] [--corrupt]   (under mpirun -np P*Q or P*Q+1)
 *   --corrupt  adds 1e-3 to one entry of the gathered C before the check (proves the check fails
 *              a wrong product; the run must then exit 3).
 * Exit: 0 verified, 2 bad arguments, 3 verification failed, 4 out of memory. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* BLACS C interface and ScaLAPACK (Fortran symbols); Debian ships no header for them. */
void Cblacs_pinfo(int* mypnum, int* nprocs);
void Cblacs_get(int context, int what, int* value);
void Cblacs_gridinit(int* context, const char* order, int nprow, int npcol);
void Cblacs_gridmap(int* context, int* usermap, int ldumap, int nprow, int npcol);
void Cblacs_gridinfo(int context, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int context);
void Cblacs_exit(int not_done);
void Cpdgemr2d(int m, int n, double* a, int ia, int ja, int* desca, double* b, int ib, int jb, int* descb,
               int context);
int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb, const int* irsrc,
               const int* icsrc, const int* context, const int* lld, int* info);
void pdgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* b, const int* ib,
             const int* jb, const int* descb, const double* beta, double* c, const int* ic, const int* jc,
             const int* descc);

/* std::mt19937_64 (Matsumoto & Nishimura's 64-bit Mersenne Twister, as the C++ standard fixes it),
 * so that the inputs are bit for bit the ones Tessera multiplies. */
enum { kMtN = 312, kMtM = 156 };
typedef struct {
  uint64_t state[kMtN];
  int index;
} Mt64;

static void mt64_seed(Mt64* mt, uint64_t seed) {
  mt->state[0] = seed;
  for (int i = 1; i < kMtN; ++i) {
    mt->state[i] = 6364136223846793005ULL * (mt->state[i - 1] ^ (mt->state[i - 1] >> 62)) + (uint64_t)i;
  }
  mt->index = kMtN;
}

static uint64_t mt64_next(Mt64* mt) {
  static const uint64_t kUpper = 0xFFFFFFFF80000000ULL, kLower = 0x7FFFFFFFULL;
  if (mt->index >= kMtN) {
    for (int i = 0; i < kMtN; ++i) {
      const uint64_t x = (mt->state[i] & kUpper) | (mt->state[(i + 1) % kMtN] & kLower);
      uint64_t next = x >> 1;
      if (x & 1ULL) next ^= 0xB5026F5AA96619E9ULL;
      mt->state[i] = mt->state[(i + kMtM) % kMtN] ^ next;
    }
    mt->index = 0;
  }
  uint64_t x = mt->state[mt->index++];
  x ^= (x >> 29) & 0x5555555555555555ULL;
  x ^= (x << 17) & 0x71D67FFFEDA60000ULL;
  x ^= (x << 37) & 0xFFF7EEE000000000ULL;
  x ^= x >> 43;
  return x;
}

static double uniform_pm1(Mt64* mt) { return 2.0 * ((double)(mt64_next(mt) >> 11) * 0x1.0p-53) - 1.0; }

/* Tessera's random_matrix fills row-major; ScaLAPACK wants column-major (leading dimension n). */
static void fill_like_tessera(double* column_major, int n, uint64_t seed) {
  Mt64 mt;
  mt64_seed(&mt, seed);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) column_major[(size_t)j * (size_t)n + (size_t)i] = uniform_pm1(&mt);
  }
}

/* y = M x for a column-major n x n matrix. */
static void matvec(const double* m, int n, const double* x, double* y) {
  memset(y, 0, sizeof(double) * (size_t)n);
  for (int j = 0; j < n; ++j) {
    const double xj = x[j];
    const double* column = m + (size_t)j * (size_t)n;
    for (int i = 0; i < n; ++i) y[i] += column[i] * xj;
  }
}

static void matvec_abs(const double* m, int n, const double* x, double* y) {
  memset(y, 0, sizeof(double) * (size_t)n);
  for (int j = 0; j < n; ++j) {
    const double xj = fabs(x[j]);
    const double* column = m + (size_t)j * (size_t)n;
    for (int i = 0; i < n; ++i) y[i] += fabs(column[i]) * xj;
  }
}

/* Freivalds' test, 2 rounds: Cx against A(Bx) per row, within 4 (k + n + 2) u (|A|(|B||x|))_i,
 * the bound Tessera's verifier uses. Returns the worst |Cx - A(Bx)| / bound (<= 1 passes). */
static double freivalds_worst_ratio(const double* a, const double* b, const double* c, int n, uint64_t seed) {
  double* x = calloc((size_t)n, sizeof(double));
  double* bx = malloc(sizeof(double) * (size_t)n);
  double* abx = malloc(sizeof(double) * (size_t)n);
  double* cx = malloc(sizeof(double) * (size_t)n);
  double* bound = malloc(sizeof(double) * (size_t)n);
  double worst = INFINITY;
  if (x && bx && abx && cx && bound) {
    const double factor = 4.0 * (double)(2 * n + 2) * (0x1.0p-53);
    Mt64 mt;
    mt64_seed(&mt, seed ^ 0x9e3779b97f4a7c15ULL);
    worst = 0.0;
    for (int round = 0; round < 2; ++round) {
      for (int j = 0; j < n; ++j) x[j] = uniform_pm1(&mt);
      matvec(b, n, x, bx);
      matvec(a, n, bx, abx);
      matvec(c, n, x, cx);
      matvec_abs(b, n, x, bx);
      matvec_abs(a, n, bx, bound);
      for (int i = 0; i < n; ++i) {
        const double difference = fabs(cx[i] - abx[i]);
        const double ratio = !isfinite(cx[i]) ? INFINITY : difference == 0.0 ? 0.0 : difference / (factor * bound[i]);
        if (!(ratio <= worst)) worst = ratio;
      }
    }
  }
  free(x);
  free(bx);
  free(abx);
  free(cx);
  free(bound);
  return worst;
}

/* CPU seconds (user + system, every thread) this process has used so far: a rank that waits for a
 * message by polling spends its node's quota here as surely as one that multiplies. */
static double process_cpu_s(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + 1e-6 * (double)usage.ru_utime.tv_usec + (double)usage.ru_stime.tv_sec +
         1e-6 * (double)usage.ru_stime.tv_usec;
}

static int usage(const char* program) {
  fprintf(stderr, "usage: %s N P Q NB [--seed S] [--corrupt]\n", program);
  return 2;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  Cblacs_pinfo(&rank, &ranks);
  if (argc < 5) {
    if (rank == 0) usage(argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int n = atoi(argv[1]), p = atoi(argv[2]), q = atoi(argv[3]), nb = atoi(argv[4]);
  uint64_t seed = 1;
  int corrupt = 0;
  for (int i = 5; i < argc; ++i) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--corrupt") == 0) {
      corrupt = 1;
    } else {
      if (rank == 0) usage(argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  /* P x Q ranks: rank 0 is in the grid and also the coordinator. P x Q + 1 ranks: rank 0 is only
   * the coordinator (holds A, B and C whole, takes no part of the product), ranks 1.. form the grid. */
  const int coordinator_apart = p * q + 1 == ranks;
  if (n < 1 || p < 1 || q < 1 || nb < 1 || (p * q != ranks && !coordinator_apart)) {
    if (rank == 0) fprintf(stderr, "pdgemm_driver: need N, P, Q, NB >= 1 and P x Q = %d or %d ranks\n", ranks, ranks - 1);
    MPI_Finalize();
    return 2;
  }

  int every_process = 0, grid = 0, root_grid = 0;
  Cblacs_get(-1, 0, &every_process);
  Cblacs_gridinit(&every_process, "Row", 1, ranks); /* the union of both grids, for pdgemr2d */
  Cblacs_get(-1, 0, &grid);
  if (coordinator_apart) {
    int* map = malloc(sizeof(int) * (size_t)(p * q));
    for (int i = 0; i < p; ++i) {
      for (int j = 0; j < q; ++j) map[i + j * p] = 1 + i * q + j; /* row-major, as "Row" would */
    }
    Cblacs_gridmap(&grid, map, p, p, q);
    free(map);
  } else {
    Cblacs_gridinit(&grid, "Row", p, q);
  }
  Cblacs_get(-1, 0, &root_grid);
  Cblacs_gridinit(&root_grid, "Row", 1, 1); /* rank 0 alone: where A, B and C live whole */
  int rows = 0, cols = 0, my_row = -1, my_col = -1;
  const int in_grid = !coordinator_apart || rank > 0;
  if (in_grid) Cblacs_gridinfo(grid, &rows, &cols, &my_row, &my_col);

  const int zero = 0, one = 1;
  int info = 0;
  const int local_rows = in_grid ? numroc_(&n, &nb, &my_row, &zero, &p) : 0;
  const int local_cols = in_grid ? numroc_(&n, &nb, &my_col, &zero, &q) : 0;
  const int local_ld = local_rows > 1 ? local_rows : 1;
  int desc_a[9], desc_b[9], desc_c[9], desc_whole[9];
  if (in_grid) {
    descinit_(desc_a, &n, &n, &nb, &nb, &zero, &zero, &grid, &local_ld, &info);
    descinit_(desc_b, &n, &n, &nb, &nb, &zero, &zero, &grid, &local_ld, &info);
    descinit_(desc_c, &n, &n, &nb, &nb, &zero, &zero, &grid, &local_ld, &info);
  } else {
    desc_a[1] = desc_b[1] = desc_c[1] = -1; /* not a member of the p x q grid */
  }
  const size_t local_count = (size_t)local_rows * (size_t)local_cols;
  double* local_a = malloc(sizeof(double) * (local_count ? local_count : 1));
  double* local_b = malloc(sizeof(double) * (local_count ? local_count : 1));
  double* local_c = malloc(sizeof(double) * (local_count ? local_count : 1));

  double *whole_a = NULL, *whole_b = NULL, *whole_c = NULL;
  const size_t whole_count = (size_t)n * (size_t)n;
  int allocation_ok = local_a && local_b && local_c;
  if (rank == 0) {
    /* One block covering the matrix on the 1 x 1 grid. */
    descinit_(desc_whole, &n, &n, &n, &n, &zero, &zero, &root_grid, &n, &info);
    whole_a = malloc(sizeof(double) * whole_count);
    whole_b = malloc(sizeof(double) * whole_count);
    whole_c = malloc(sizeof(double) * whole_count);
    allocation_ok = allocation_ok && whole_a && whole_b && whole_c;
    if (allocation_ok) {
      fill_like_tessera(whole_a, n, seed);
      fill_like_tessera(whole_b, n, seed + 1);
    }
  } else {
    desc_whole[1] = -1; /* not a member of the root grid */
  }
  int all_ok = 0;
  MPI_Allreduce(&allocation_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0) fprintf(stderr, "pdgemm_driver: out of memory for n = %d\n", n);
    MPI_Finalize();
    return 4;
  }

  MPI_Barrier(MPI_COMM_WORLD);
  const double cpu_start = process_cpu_s();
  const double start = MPI_Wtime();
  Cpdgemr2d(n, n, whole_a, 1, 1, desc_whole, local_a, 1, 1, desc_a, every_process);
  Cpdgemr2d(n, n, whole_b, 1, 1, desc_whole, local_b, 1, 1, desc_b, every_process);
  MPI_Barrier(MPI_COMM_WORLD);
  const double scattered = MPI_Wtime();
  const double cpu_scattered = process_cpu_s();
  const double alpha = 1.0, beta = 0.0;
  if (in_grid) {
    pdgemm_("N", "N", &n, &n, &n, &alpha, local_a, &one, &one, desc_a, local_b, &one, &one, desc_b, &beta, local_c,
            &one, &one, desc_c);
  }
  const double own_pdgemm_end = MPI_Wtime(); /* this rank's part done; the barrier after waits for the slowest */
  MPI_Barrier(MPI_COMM_WORLD);
  const double multiplied = MPI_Wtime();
  const double cpu_multiplied = process_cpu_s();
  Cpdgemr2d(n, n, local_c, 1, 1, desc_c, whole_c, 1, 1, desc_whole, every_process);
  const double gathered = MPI_Wtime(); /* rank 0 holds C once its part of the redistribution returns */
  const double cpu_gathered = process_cpu_s();

  /* Where each rank's time went, for the study's record: its share of the product, its CPU time
   * in each phase and how long pdgemm kept it before the closing barrier. */
  const double mine[6] = {2.0 * (double)local_rows * (double)local_cols * (double)n * 1e-9,
                          cpu_scattered - cpu_start,
                          cpu_multiplied - cpu_scattered,
                          cpu_gathered - cpu_multiplied,
                          own_pdgemm_end - scattered,
                          cpu_gathered - cpu_start};
  double* every_rank = rank == 0 ? malloc(sizeof mine * (size_t)ranks) : NULL;
  MPI_Gather(mine, 6, MPI_DOUBLE, every_rank, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  int exit_code = 0;
  if (rank == 0) {
    if (corrupt) whole_c[(size_t)(n / 2) * (size_t)n + (size_t)(n / 3)] += 1e-3;
    const double worst = freivalds_worst_ratio(whole_a, whole_b, whole_c, n, seed);
    const int verified = worst <= 1.0;
    printf("RESULT n=%d p=%d q=%d nb=%d scatter_s=%.6f pdgemm_s=%.6f gather_s=%.6f end_to_end_s=%.6f verified=%s "
           "check=freivalds-2-rounds worst_ratio=%.3g\n",
           n, p, q, nb, scattered - start, multiplied - scattered, gathered - multiplied, gathered - start,
           verified ? "yes" : "no", worst);
    for (int r = 0; r < ranks && every_rank; ++r) {
      const double* v = every_rank + 6 * r;
      printf("RANK rank=%d gflop=%.3f cpu_scatter_s=%.3f cpu_pdgemm_s=%.3f cpu_gather_s=%.3f own_pdgemm_s=%.3f "
             "cpu_total_s=%.3f\n",
             r, v[0], v[1], v[2], v[3], v[4], v[5]);
    }
    free(every_rank);
    fflush(stdout);
    if (!verified) {
      fprintf(stderr, "pdgemm_driver: C fails Freivalds' test (worst ratio %.3g > 1)\n", worst);
      exit_code = 3;
    }
  }
  MPI_Bcast(&exit_code, 1, MPI_INT, 0, MPI_COMM_WORLD);

  free(local_a);
  free(local_b);
  free(local_c);
  free(whole_a);
  free(whole_b);
  free(whole_c);
  if (rank == 0) Cblacs_gridexit(root_grid);
  if (in_grid) Cblacs_gridexit(grid);
  Cblacs_gridexit(every_process);
  Cblacs_exit(1); /* 1: MPI is still ours to finalize */
  MPI_Finalize();
  return exit_code;
}
