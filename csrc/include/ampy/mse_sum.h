/* mse_sum.h — the summation order of mse_loss's mean and sum on the CPU.
 *
 * The element losses (doubles) are added in AMPY_MSE_LANES running sums,
 * element i into sum i % AMPY_MSE_LANES in index order, and the sums are then
 * added pairwise (0+1, 2+3, ..., then the pairs of pairs). Every CPU kernel
 * of the loss (the general one of nn_misc.c, the float32 one of fused.c, in
 * C or AVX-512) adds in this order, so they give the same bits; the lanes let
 * the AVX-512 loop run at memory speed instead of one dependent double add
 * per element. The error stays that of a float64 sum (n * 2^-53 relative). */
#ifndef AMPY_MSE_SUM_H
#define AMPY_MSE_SUM_H

#include <stdint.h>

#define AMPY_MSE_LANES 16

/* the pairwise total of the lanes' running sums */
double ampy_mse_lanes_total(const double *acc);

/* sum over i < n of (double)(f * f), f = x[i] - y[i] in float, in the order
 * above */
double ampy_mse_sum_f32(int64_t n, const float *x, const float *y);

#endif
