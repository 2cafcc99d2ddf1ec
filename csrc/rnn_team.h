/* rnn_team.h — one parallel region over a whole recurrent time loop
 * (csrc/rnn_team.c), with a cheap barrier between steps.
 *
 * The work is `steps` phases of `parts` parts each. Part p of phase s runs
 * only after every part of phase s-1 finished (their writes visible), and
 * exactly once. A thread of the pool owns a fixed set of parts (so each
 * part's slice of the packed weight stays in that core's cache) and runs
 * them phase after phase; a thread that waits too long for a part nobody
 * took yet runs it itself, so the loop completes whatever number of pool
 * threads actually join (one alone runs everything), and a thread the OS
 * descheduled does not hold the others up for long.
 */
#ifndef AMPY_RNN_TEAM_H
#define AMPY_RNN_TEAM_H

#include <stdint.h>

#include "ampy/status.h"

#define RNN_TEAM_MAX 64

/* Runs part `part` of phase `step` with the scratch of slot `slot` (slots
 * are < parts, and one slot is used by one thread at a time). */
typedef ampy_status (*rnn_part_fn)(void *ctx, int64_t step, int part, int slot);

/* Runs the phases on up to `parts` pool threads (parts <= RNN_TEAM_MAX).
 * Returns the first failing part's status (the rest of the loop is skipped
 * then), else AMPY_OK. */
ampy_status ampy_rnn_team_run(int64_t steps, int parts, rnn_part_fn fn, void *ctx);

#endif /* AMPY_RNN_TEAM_H */
