/* LD_PRELOAD shim for Open MPI ranks under a CPU quota: sched_yield() becomes a short sleep.
 *
 * Why: Open MPI 4.1 has no blocking wait. A rank waiting for a message loops in opal_progress;
 * with mpi_yield_when_idle (on by itself when a node is oversubscribed) each idle pass calls
 * sched_yield(), which returns at once when nothing else wants the core. So a
 * waiting rank spins through its node's quota: a quarter-core "Pi" that waits for a panel burns
 * the CPU time it then lacks to multiply that panel, and the ranks sharing the desktop's cgroup
 * (the heterogeneous trick) take time from each other. Intel MPI's I_MPI_WAIT_MODE=1 and
 * MVAPICH2's MV2_USE_BLOCKING=1 make waiting ranks sleep for this reason; this shim gives Open
 * MPI the same behaviour: an idle progress pass sleeps PEERS_IDLE_SLEEP_US microseconds
 * (default 1000) instead. Passes that made progress never call sched_yield, so transfers in
 * flight run at full speed; the cost is up to that long a delay in noticing a new message. Each
 * wake-up costs CPU (timer, context switch, a poll over the rank's sockets): about 2% of a core
 * at 1000 us against about 12% at 50 us (an MPI_Recv waiting 2 s, this machine under load).
 *
 * Build: cc -O2 -shared -fPIC -o libidle_sleep.so idle_sleep.c
 * Use:   mpirun --mca mpi_yield_when_idle 1 -x LD_PRELOAD=/path/libidle_sleep.so ... */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>

static long sleep_ns = -1;

int sched_yield(void) {
  if (sleep_ns < 0) {
    const char* text = getenv("PEERS_IDLE_SLEEP_US");
    const long micros = text ? atol(text) : 1000;
    sleep_ns = (micros > 0 ? micros : 1) * 1000;
  }
  const struct timespec pause = {sleep_ns / 1000000000L, sleep_ns % 1000000000L};
  nanosleep(&pause, NULL);
  return 0;
}
